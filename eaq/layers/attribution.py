"""Attribution: an ordinary whole-model window's energy split by each component's device time.

The profiler perturbs what it watches (range bookkeeping on the host, a flush at the
end), so it never runs inside an energy window: a separate pass of the same model on
the same batch is profiled, each component's roots wrapped in ``record_function`` ranges
by hooks, and its time shares are applied to the window's energy. On a GPU a range's
time is the device time of the kernels launched inside it; on a CPU, the time of the ops
run inside it, each op once (its own time, not also its caller's), as a GPU's kernels: the
host's work between ops (Python, the hooks opening the ranges, the profiler's bookkeeping)
is in neither. Work outside every component (residual adds, activations between modules,
the pooling) keeps its share as ``OUTSIDE``, so the split always sums to the window's energy.

The profiler still slows a CPU's ops (it times each one), and the more so the shorter they
are: on a CPU the profiled pass's host time is kept (``PassTimes.host_s``) so that the run can
say how much slower than the window's pass it ran (eaq.layers.energy).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.autograd import DeviceType
from torch.autograd.profiler import record_function
from torch.autograd.profiler_util import FunctionEvent
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from eaq.errors import DeviceError
from eaq.layers.components import Component, around_roots
from eaq.measure.roofline import flop_counter

OUTSIDE = "(outside components)"
_PREFIX = "eaq.component::"
_WHOLE = "eaq.whole_pass"


@dataclass(frozen=True)
class PassTimes:
    """Seconds per forward pass, on the same clock: each component's, each block's own ops' (eaq.layers.components.find_blocks;
    its range less the ranges of its components inside it), and the whole pass's; and the whole pass's host time, the
    profiler's slowing included (on a GPU, the host's launches too)."""

    components: dict[str, float]
    whole_s: float
    host_s: float
    blocks: dict[str, float] = field(default_factory=dict)

    @property
    def captured(self) -> float:
        """Share of the pass's time inside components (1 - the glue's share)."""
        return sum(self.components.values()) / self.whole_s if self.whole_s > 0 else float("nan")


def _ops_us(event: FunctionEvent) -> float:
    """Microseconds of the ops run inside a host range, each once: the outermost ops' times (an op's time holds its
    callees': aten::linear's holds aten::addmm's), through eaq's ranges nested in it."""
    return sum(_ops_us(child) if child.name.startswith(_PREFIX) else child.cpu_time_total for child in event.cpu_children)


def _range_seconds(event: FunctionEvent, device: torch.device) -> float:
    us = event.device_time_total if device.type == "cuda" else _ops_us(event)
    return us / 1e6


def _ranges_inside(event: FunctionEvent) -> Iterator[FunctionEvent]:
    """eaq's component and block ranges directly inside ``event``: through ops, not through another of eaq's ranges."""
    for child in event.cpu_children:
        if child.name.startswith(_PREFIX):
            yield child
        else:
            yield from _ranges_inside(child)


@contextmanager
def _each_root_call_in(
    model: nn.Module, components: list[Component], opening: Callable[[Component], AbstractContextManager],
    closed: Callable[[Component, AbstractContextManager], None] = lambda *_: None,
) -> Iterator[None]:
    """Every call of every root runs inside the context ``opening(component)`` gives, exited when the call returns and
    then handed to ``closed``. A root whose forward raises never reaches its forward hook: whatever is still open when
    the block ends, by an error or not, is exited then, innermost first, so that no FLOP counter is left on torch's
    dispatch stack (counting every later op of the process) and no profiler range is left open."""
    opened: dict[str, list[AbstractContextManager]] = {}  # per root: ranges opened on one module close innermost first
    order: list[AbstractContextManager] = []  # all that are open, in the order they opened

    def enter(component: Component, root: str, *_: object) -> None:
        context = opening(component)
        context.__enter__()
        opened.setdefault(root, []).append(context)
        order.append(context)

    def leave(component: Component, root: str) -> None:
        context = opened[root].pop()
        order.remove(context)
        context.__exit__(None, None, None)
        closed(component, context)

    try:
        with around_roots(model, components, enter, leave):
            yield
    finally:
        for context in reversed(order):
            context.__exit__(None, None, None)


def profile_times(
    model: nn.Module, components: list[Component], forward: Callable[[], object], device: torch.device, passes: int = 3,
    blocks: list[Component] | None = None,
) -> PassTimes:
    """Profile ``passes`` forward passes (after one unprofiled, and on a CPU after the profiler's warm-up pass) with a
    range per component and per block; mean per pass. Each range counts its own time: less that of the ranges inside it
    (a block's, its components'), so no time counts twice."""
    forward()
    # On a CPU one profiled pass runs first and is not counted: a range's time is host time there, and the first pass
    # of every profiler session runs the profiler's own set-up with its ops (bert-tiny-random at 2x8 tokens, one
    # thread: 1.7-2.7 ms against 0.9-1.1 ms for each pass after it, in every session); a GPU's kernel times hold none.
    warmup = 0 if device.type == "cuda" else 1
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    # The blocks are hooked first, so that their ranges open first and hold their components'.
    ranges = _each_root_call_in(model, [*(blocks or []), *components], lambda c: record_function(_PREFIX + c.name))
    with profile(activities=activities) as prof, ranges:
        for _ in range(warmup + passes):
            with record_function(_WHOLE):
                forward()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    seconds: dict[str, float] = {c.name: 0.0 for c in [*components, *(blocks or [])]}
    # Only the host-side ranges: on a GPU the profiler also mirrors each range on the device
    # timeline (a span, idle gaps included), which must not count twice.
    wholes = sorted((e for e in prof.events() if e.device_type == DeviceType.CPU and e.name == _WHOLE),
                    key=lambda e: e.time_range.start)[warmup:]
    pending = [inner for whole in wholes for inner in _ranges_inside(whole)]
    while pending:
        event = pending.pop()
        inside = list(_ranges_inside(event))
        own = _range_seconds(event, device) - sum(_range_seconds(e, device) for e in inside)
        seconds[event.name.removeprefix(_PREFIX)] += own
        pending += inside
    whole = sum(_range_seconds(e, device) for e in wholes)
    if whole <= 0:
        # Found here, before any window: attribution could not split the energy the run goes on to measure.
        raise DeviceError(
            f"the profiler recorded no {'kernel' if device.type == 'cuda' else 'CPU'} time for the whole pass on {device}, "
            "so attribution cannot split a window's energy by component. On a GPU torch.profiler needs CUPTI to see "
            "kernels: check that torch.profiler.profile(activities=[ProfilerActivity.CUDA]) lists kernels of a matmul here."
        )
    per_pass = {name: s / passes for name, s in seconds.items()}
    host_s = sum(e.time_range.elapsed_us() for e in wholes) / 1e6
    return PassTimes({c.name: per_pass[c.name] for c in components}, whole / passes, host_s / passes,
                     {b.name: per_pass[b.name] for b in blocks or []})


def component_flops(model: nn.Module, components: list[Component], forward: Callable[[], object]) -> dict[str, int]:
    """FLOPs each component runs in one pass of ``forward`` (torch's FLOP counter, per root call)."""
    counts = {c.name: 0 for c in components}

    def closed(component: Component, mode: FlopCounterMode) -> None:
        counts[component.name] += mode.get_total_flops()

    with torch.inference_mode(), _each_root_call_in(model, components, lambda _: flop_counter(), closed):
        forward()
    return counts


def split(energy_j: float, seconds: dict[str, float], total_s: float | None = None) -> dict[str, float]:
    """``energy_j`` in proportion to ``seconds``; with ``total_s``, what ``seconds`` leave out
    goes to ``OUTSIDE`` (so the parts sum to ``energy_j``), else the parts share it all."""
    whole = total_s if total_s is not None else sum(seconds.values())
    if whole <= 0:
        raise ValueError("cannot split energy by time: the times sum to zero")
    parts = {name: energy_j * s / whole for name, s in seconds.items()}
    if total_s is not None:
        parts[OUTSIDE] = energy_j - sum(parts.values())
    return parts


__all__ = ["OUTSIDE", "PassTimes", "component_flops", "profile_times", "split"]
