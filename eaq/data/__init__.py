"""Evaluation data: read texts, tokenize to fixed shapes, stage batches on the device."""

from eaq.data.batches import Batches, make_batches, make_synthetic
from eaq.data.texts import load_texts

__all__ = ["Batches", "load_texts", "make_batches", "make_synthetic"]
