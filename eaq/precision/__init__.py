"""Precisions: look one up by name, check it can run on the device, apply it for real."""

from __future__ import annotations

from collections.abc import Callable

import torch

from eaq.errors import UnsupportedPrecisionError
from eaq.precision.base import Precision
from eaq.precision.mixed import MIXED, mixed, runnable_formats
from eaq.precision.native import amp_bf16, amp_fp16, bf16, fp16, fp32, tf32
from eaq.precision.proof import decode_bytes_counted, proof, stored_bytes_read
from eaq.precision.torchao_quant import fp8, int4_weight_only, int8, int8_weight_only

# Each factory builds the precision for one device (the base dtype of a quantized model
# differs between CPU and GPU); building one imports nothing heavy.
PRECISIONS: dict[str, Callable[[torch.device], Precision]] = {
    "fp32": fp32,
    "tf32": tf32,
    "fp16": fp16,
    "bf16": bf16,
    "amp_fp16": amp_fp16,
    "amp_bf16": amp_bf16,
    "int8": int8,
    "int8_weight_only": int8_weight_only,
    "fp8": fp8,
    "int4_weight_only": int4_weight_only,
}
# Every precision a run can name: the uniform ones, and ``mixed``, built from its plan file.
NAMES: tuple[str, ...] = (*PRECISIONS, MIXED)


def runnable(device: torch.device) -> list[str]:
    """The precisions that run for real on ``device``."""
    return [name for name, make in PRECISIONS.items() if make(device).requirements.unmet(name, device) is None]


def get_precision(name: str, device: torch.device, plan: str | None = None) -> Precision:
    """The precision object, after checking it runs for real on ``device`` (never a stand-in).

    ``plan``: the plan file of ``precision=mixed`` (which layers run which format); the
    uniform precisions take none, which is why ``mixed`` is not in ``PRECISIONS``.
    """
    return require_runnable(build_precision(name, device, plan), device)


def build_precision(name: str, device: torch.device, plan: str | None = None) -> Precision:
    """The precision object, its plan read, before ``require_runnable`` checks it on ``device``: a run records what it
    was asked to run (a plan's file and hash) before it is refused."""
    if name == MIXED:
        return mixed(device, plan)
    if name in PRECISIONS:
        return PRECISIONS[name](device)
    raise UnsupportedPrecisionError(f"precision {name!r} does not exist; valid: {', '.join(NAMES)}.")


def require_runnable(precision: Precision, device: torch.device) -> Precision:
    """``precision``, refused where it cannot run for real on ``device``: in one sentence naming what can."""
    reason = precision.requirements.unmet(precision.name, device)
    if reason:
        # A plan's layers take its layer formats alone: the uniform list named amp_bf16, which a plan refuses.
        here = (f"a plan's layers can take {', '.join(runnable_formats(device))} on {device}" if precision.name == MIXED
                else f"on {device} these run for real: {', '.join(runnable(device))}")
        raise UnsupportedPrecisionError(f"{reason}; {here}.")
    return precision


__all__ = ["NAMES", "PRECISIONS", "Precision", "build_precision", "get_precision", "proof", "require_runnable", "runnable",
           "stored_bytes_read", "decode_bytes_counted"]
