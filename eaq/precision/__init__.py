"""Precisions: look one up by name, check it can run on the device, apply it for real."""

from __future__ import annotations

from collections.abc import Callable

import torch

from eaq.errors import UnsupportedPrecisionError
from eaq.precision.base import Precision
from eaq.precision.native import bf16, fp16, fp32
from eaq.precision.proof import proof
from eaq.precision.torchao_quant import Int8Dynamic

PRECISIONS: dict[str, Callable[[], Precision]] = {"fp32": fp32, "fp16": fp16, "bf16": bf16, "int8": Int8Dynamic}


def get_precision(name: str, device: torch.device) -> Precision:
    """The precision object, after checking it runs for real on ``device`` (never a stand-in)."""
    if name not in PRECISIONS:
        raise UnsupportedPrecisionError(f"precision {name!r} does not exist; valid: {', '.join(PRECISIONS)}.")
    precision = PRECISIONS[name]()
    reason = precision.supports(device)
    if reason:
        raise UnsupportedPrecisionError(reason)
    return precision


__all__ = ["PRECISIONS", "Precision", "get_precision", "proof"]
