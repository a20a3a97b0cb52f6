"""Evaluation data: read texts, tokenize to fixed shapes, stage batches on the device."""

from eaq.data.batches import Batches, make_batches, make_stream, make_synthetic
from eaq.data.texts import Examples, examples_digest, load_examples

__all__ = ["Batches", "Examples", "examples_digest", "load_examples", "make_batches", "make_stream", "make_synthetic"]
