"""Precisions: look one up by name, check it can run on the device, apply it for real."""

from __future__ import annotations

import torch

from eaq.errors import UnsupportedPrecisionError
from eaq.precision.base import Precision
from eaq.precision.native import Fp32
from eaq.precision.proof import proof
from eaq.precision.torchao_quant import Int8Dynamic

PRECISIONS: dict[str, type] = {"fp32": Fp32, "int8": Int8Dynamic}


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
