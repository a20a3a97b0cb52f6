"""Proof from the profiler that a precision ran the kernels it names, layer for layer.

Storage bytes show what is stored; this shows what executed. One forward pass is
profiled (outside the measurement window) and its op and kernel names are counted.
The run fails unless every quantized layer shows the format's GEMM and, for a format
whose math is quantized (int8, fp8), no more float GEMMs ran than there are layers left
in the base dtype: torchao falls back to a float matmul on shapes cuBLAS refuses (or to
an integer matmul on the host) without saying so.

Host<->device copies beyond those the fp32 model's own forward makes are recorded, not
failed: the format did run, and the copies are a real cost of its implementation
(torchao 0.18's eager int8 path on CUDA makes 48 per layer, see docs/results).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from eaq.device import synchronize
from eaq.errors import EaqError
from eaq.precision.base import Precision
from eaq.precision.proof import linear_coverage

FLOAT_GEMMS = ("aten::mm", "aten::addmm")
HOST_COPIES = ("Memcpy DtoH", "Memcpy HtoD")


class KernelCheckError(EaqError):
    """The profiler saw a quantized layer run something other than its format's kernel."""


@dataclass(frozen=True)
class KernelCheck:
    quantized_layers: int
    unquantized_layers: int
    lowp_gemms: int
    float_gemms: int
    host_copies: int
    baseline_copies: int
    failures: list[str] = field(default_factory=list)

    checked: bool = True

    @property
    def summary(self) -> str:
        """The tag ``eaq.kernel_check`` of a run that passed."""
        verdict = "passed" if self.checked else "no low-precision GEMM to look for"
        if self.host_copies > self.baseline_copies:
            return f"{verdict}, with {self.host_copies} host<->device copies per forward where the fp32 model makes {self.baseline_copies}"
        return verdict

    def metrics(self) -> dict[str, float]:
        return {
            "kernel_lowp_gemms": self.lowp_gemms,
            "kernel_float_gemms": self.float_gemms,
            "kernel_host_copies": self.host_copies,
        }


def _count(names: Counter[str], patterns: tuple[str, ...]) -> int:
    return sum(n for name, n in names.items() if any(p in name for p in patterns))


def evaluate(precision: Precision, model: nn.Module, ops: Counter[str], kernels: Counter[str], baseline_copies: int = 0) -> KernelCheck:
    """Judge one forward pass's op names (host side) and kernel names (device side).

    ``baseline_copies``: host<->device copies the model's fp32 forward makes by itself.
    """
    quantized, linears = linear_coverage(model)
    # An op (aten::_int_mm) or a kernel named after it (a Triton template under torch.compile).
    lowp = max(_count(ops, precision.kernels), _count(kernels, precision.kernels)) if precision.kernels else 0
    floats = sum(ops[name] for name in FLOAT_GEMMS)
    copies = _count(kernels, HOST_COPIES)
    failures = []
    if precision.kernels and lowp < quantized:
        failures.append(f"{quantized} quantized layers but {lowp} {'/'.join(precision.kernels)} GEMMs per forward")
    if precision.quantized_math and floats > linears - quantized:
        failures.append(f"{floats} float GEMMs per forward for {linears - quantized} unquantized layers (a float fallback)")
    checked = bool(precision.kernels) or precision.quantized_math
    return KernelCheck(quantized, linears - quantized, lowp, floats, copies, baseline_copies, failures, checked)


def _profile(forward: Callable[[], object], device: torch.device) -> tuple[Counter[str], Counter[str]]:
    """(Host-side op names, device-side kernel names) of one ``forward()``, with counts."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    synchronize(device)
    with profile(activities=activities) as prof:
        forward()
        synchronize(device)
    ops: Counter[str] = Counter()
    kernels: Counter[str] = Counter()
    for event in prof.events():
        (kernels if event.device_type == DeviceType.CUDA else ops)[event.name] += 1
    return ops, kernels


def host_copies(forward: Callable[[], object], device: torch.device) -> int:
    """Host<->device copies in one ``forward()``: run on the fp32 model, the baseline of the check."""
    return _count(_profile(forward, device)[1], HOST_COPIES)


def check_kernels(
    precision: Precision, model: nn.Module, forward: Callable[[], object], device: torch.device, baseline_copies: int = 0
) -> KernelCheck:
    """Profile ``forward()`` once and judge it; raise KernelCheckError on a failure."""
    ops, kernels = _profile(forward, device)
    result = evaluate(precision, model, ops, kernels, baseline_copies)
    if result.failures:
        raise KernelCheckError(
            f"precision={precision.name} did not run as named ({'; '.join(result.failures)}): torchao fell back "
            f"for this model or shape; try compile=true, a larger batch_size or seq_len, or another precision."
        )
    return result
