"""Proof from the profiler that a precision ran the kernels it is named for.

Storage bytes show what is stored; this shows what executed. One forward pass is
profiled (outside the measurement window), and its op names, kernel names and GEMM
operand dtypes are counted. The run fails unless:
- the format's GEMM ran at least once for every quantized layer;
- for a format whose math is quantized (int8, fp8), no more float GEMMs ran than there
  are layers left in the base dtype, in all and of each Linear shape (a quantized layer's
  float GEMM is not hidden by a float layer of another shape whose GEMM the pass did not
  show). torchao falls back to a float matmul on shapes cuBLAS refuses (or to an integer
  matmul on the host) without saying so;
- every float GEMM ran in the precision's float dtype (bf16 for bf16 and amp_bf16, the
  base dtype for the layers a quantized format left alone). An autocast that did not
  engage would leave fp32 GEMMs. TF32 does not show here: its GEMMs take fp32 operands.

Float GEMMs count only where they have the shape of one of the model's Linear layers
(input features x output features), the layers a precision changes. A model's own float
matmuls elsewhere are not a layer's: Llama's rotary embedding multiplies its frequencies
by the positions in fp32 on purpose, a batched matmul in eager that Inductor turns into
an ``mm`` (which failed a compiled int8 decode step's check on the H100,
docs/results/2026-11-26-h100-int8-decode). A float GEMM of another shape is not judged,
e.g. one a compiler fused from several layers.

Every count is per call, not per layer: how many times each Linear runs in one pass is counted
on the model's eager pass with forward hooks (``linear_calls``; the compiled pass cannot take
hooks without compiling again). A layer the pass never runs expects no GEMM (a correct int8 run
failed on it), a layer shared and run twice expects two (its second GEMM hid another layer's
miss). Without counts every layer counts once.

Host<->device copies beyond those the fp32 model's own forward makes are recorded, not
failed: the format did run, and the copies are a real cost of its implementation
(torchao 0.18's eager int8 path on CUDA made 48 per layer until eaq routed around its
``__repr__`` probe: eaq.precision.torchao_quant, docs/results/2026-11-24-h100-int8).
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
from eaq.precision.proof import is_quantized, linear_coverage

FLOAT_GEMMS = ("aten::mm", "aten::addmm")
HOST_COPIES = ("Memcpy DtoH", "Memcpy HtoD")
# How the profiler names the dtypes of a GEMM's operands.
PROFILER_DTYPES = {torch.float32: "float", torch.float16: "c10::Half", torch.bfloat16: "c10::BFloat16"}


class KernelCheckError(EaqError):
    """The profiler saw a layer run something other than the format it is named for."""


@dataclass(frozen=True)
class Profile:
    """What one profiled forward pass ran, with counts."""

    ops: Counter[str]  # host-side op names
    kernels: Counter[str]  # device-side kernel names (CUDA only)
    # (operand dtype ("mixed: ..." if they differ), (K, N) or None if not recorded) of each float GEMM:
    # counted per shape so that only those shaped like a Linear layer are judged (linear_float_gemms).
    float_gemms: Counter[tuple[str, tuple[int, int] | None]]


@dataclass(frozen=True)
class KernelCheck:
    quantized_layers: int
    unquantized_layers: int
    lowp_gemms: int
    float_gemms: int
    host_copies: int
    baseline_copies: int
    failures: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        """The tag ``eaq.kernel_check`` of a run that passed."""
        if self.host_copies > self.baseline_copies:
            return f"passed, with {self.host_copies} host<->device copies per forward where the fp32 model makes {self.baseline_copies}"
        return "passed"

    def metrics(self) -> dict[str, float]:
        return {
            "kernel_lowp_gemms": self.lowp_gemms,
            "kernel_float_gemms": self.float_gemms,
            "kernel_host_copies": self.host_copies,
        }


def _count(names: Counter[str], patterns: tuple[str, ...]) -> int:
    return sum(n for name, n in names.items() if any(p in name for p in patterns))


def lowp_gemms(seen: Profile, patterns: tuple[str, ...]) -> int:
    """GEMMs of a format: an op (aten::_int_mm) or a kernel named after it (a Triton template under torch.compile)."""
    return max(_count(seen.ops, patterns), _count(seen.kernels, patterns))


# Calls per forward of each Linear layer, by module name (``linear_calls``); None: each layer once.
Calls = dict[str, int] | None


def linear_calls(model: nn.Module, forward: Callable[[], object]) -> dict[str, int]:
    """How many times each Linear layer of ``model`` runs in one ``forward()``, counted by forward hooks.

    ``forward`` must run ``model`` eagerly (hooks do not fire inside a compiled graph already built).
    """
    calls: Counter[str] = Counter()
    layers = {name: m for name, m in model.named_modules() if isinstance(m, nn.Linear)}
    handles = [m.register_forward_hook(lambda *_, name=name: calls.update((name,))) for name, m in layers.items()]
    try:
        forward()
    finally:
        for handle in handles:
            handle.remove()
    return {name: calls[name] for name in layers}


def runs(calls: Calls, name: str) -> int:
    """How many GEMMs layer ``name`` owes one pass: its calls, or one where they were not counted."""
    return 1 if calls is None else calls.get(name, 0)


def linear_float_gemms(model: nn.Module, seen: Profile) -> Counter[str]:
    """{operand dtype: count} of the float GEMMs shaped like one of ``model``'s Linear layers, or of no recorded shape."""
    shapes = {(m.in_features, m.out_features) for m in model.modules() if isinstance(m, nn.Linear)}
    found: Counter[str] = Counter()
    for (dtype, shape), n in seen.float_gemms.items():
        if shape is None or shape in shapes:
            found[dtype] += n
    return found


def fallbacks_by_shape(model: nn.Module, seen: Profile,
                       in_float: Callable[[str, nn.Linear], bool] = lambda name, layer: not is_quantized(layer),
                       calls: Calls = None) -> list[str]:
    """Each Linear shape with more float GEMMs per forward than calls of layers of that shape computing in float.

    ``in_float(name, layer)``: whether that layer's matmul is a float GEMM (by default: its weight is not
    quantized; a mixed plan's weight-only layers compute in float too)."""
    layers = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    left: Counter[tuple[int, int]] = Counter()
    for n, m in layers:
        if in_float(n, m):
            left[(m.in_features, m.out_features)] += runs(calls, n)
    shapes = {(m.in_features, m.out_features) for _, m in layers}
    ran: Counter[tuple[int, int]] = Counter()
    for (_, shape), n in seen.float_gemms.items():
        if shape in shapes:
            ran[shape] += n
    owed = "layers" if calls is None else "calls of layers"
    return [f"{n} float GEMMs of shape {k}x{o} per forward for {left[(k, o)]} {owed} of that shape computing in float "
            "(a float fallback)" for (k, o), n in sorted(ran.items()) if n > left[(k, o)]]


def copies(seen: Profile) -> int:
    """Host<->device copies the profiled pass made."""
    return _count(seen.kernels, HOST_COPIES)


def evaluate(precision: Precision, model: nn.Module, seen: Profile, baseline_copies: int = 0, calls: Calls = None) -> KernelCheck:
    """Judge one profiled forward pass.

    ``baseline_copies``: host<->device copies the model's fp32 forward makes by itself; ``calls``: how many times
    each Linear ran in the pass (``linear_calls``), None for once each.
    """
    quantized, linears = linear_coverage(model)
    layers = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    owed = sum(runs(calls, name) for name, m in layers if is_quantized(m))
    float_owed = sum(runs(calls, name) for name, m in layers if not is_quantized(m))
    lowp = lowp_gemms(seen, precision.kernels) if precision.kernels else 0
    float_gemms = linear_float_gemms(model, seen)
    floats = sum(float_gemms.values())
    failures = []
    if precision.kernels and lowp < owed:
        failures.append(f"{quantized} quantized layers{times_run(owed, calls)} but {lowp} {'/'.join(precision.kernels)} GEMMs per forward")
    if precision.quantized_math and floats > float_owed:
        failures.append(f"{floats} float GEMMs per forward for {linears - quantized} unquantized layers{times_run(float_owed, calls)} "
                        "(a float fallback)")
    elif precision.quantized_math:  # the count holds in all: and shape by shape?
        failures += fallbacks_by_shape(model, seen, calls=calls)
    expected = PROFILER_DTYPES[precision.float_gemm_dtype]
    for dtype, n in sorted(float_gemms.items()):
        if dtype != expected:
            failures.append(f"{n} float GEMMs ran in {dtype} where {precision.name} computes in {expected}")
    return KernelCheck(quantized, linears - quantized, lowp, floats, copies(seen), baseline_copies, failures)


def times_run(owed: int, calls: Calls) -> str:
    """How many calls the layers made, where they were counted."""
    return "" if calls is None else f" ({owed} calls)"


def _profile(forward: Callable[[], object], device: torch.device) -> Profile:
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    synchronize(device)
    with profile(activities=activities, record_shapes=True) as prof:  # record_shapes: operand dtypes too
        forward()
        synchronize(device)
    seen = Profile(Counter(), Counter(), Counter())
    # The raw Kineto events: their dtypes() exist on every torch we support, while the
    # summarised FunctionEvent carries input dtypes only on newer ones (not torch 2.11).
    for event in prof.profiler.kineto_results.events():
        name = event.name()
        if event.device_type() == DeviceType.CUDA:
            seen.kernels[name] += 1
            continue
        seen.ops[name] += 1
        if name in FLOAT_GEMMS:
            dtypes = sorted({d for d in event.dtypes() if d and d != "Scalar"})
            # mm(a, b[, out]) and addmm(bias, a, b): a is M x K, b is K x N (None where the profiler
            # recorded no such shapes: then judged, as a Linear's would be).
            first = 1 if name == "aten::addmm" else 0
            operands = event.shapes()[first:first + 2]
            shape = (operands[0][-1], operands[1][-1]) if [len(s) for s in operands] == [2, 2] else None
            seen.float_gemms[dtypes[0] if len(dtypes) == 1 else f"mixed: {', '.join(dtypes)}", shape] += 1
    return seen


def host_copies(forward: Callable[[], object], device: torch.device) -> int:
    """Host<->device copies in one ``forward()``: run on the fp32 model, the baseline of the check."""
    return copies(_profile(forward, device))


def check_kernels(
    precision: Precision, model: nn.Module, forward: Callable[[], object], device: torch.device, baseline_copies: int = 0,
    calls: Calls = None,
) -> KernelCheck:
    """Profile ``forward()`` once and judge it; raise KernelCheckError on a failure.

    ``calls``: each Linear's calls in that pass (``linear_calls`` on its eager twin), None for once each.
    A precision made of several formats (mixed) judges the profile itself, per format.
    """
    judge = getattr(precision, "judge", None)
    seen = _profile(forward, device)
    result = judge(model, seen, baseline_copies, calls) if judge else evaluate(precision, model, seen, baseline_copies, calls)
    if result.failures:
        raise KernelCheckError(
            f"precision={precision.name} did not run as named ({'; '.join(result.failures)}); "
            f"for a torchao format, try compile=true or another precision."
        )
    return result
