"""Attribution: an ordinary whole-model window's energy split by each component's device time.

The profiler perturbs what it watches (range bookkeeping on the host, a flush at the
end), so it never runs inside an energy window: a separate pass of the same model on
the same batch is profiled, each component's roots wrapped in ``record_function`` ranges
by hooks, and its time shares are applied to the window's energy. On a GPU a range's
time is the device time of the kernels launched inside it; on a CPU, the range's CPU
time. Work outside every component (residual adds, activations between modules, the
pooling) keeps its share as ``OUTSIDE``, so the split always sums to the window's energy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.autograd import DeviceType
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from eaq.errors import DeviceError
from eaq.layers.components import Component, around_roots

OUTSIDE = "(outside components)"
_PREFIX = "eaq.component::"
_WHOLE = "eaq.whole_pass"


@dataclass(frozen=True)
class PassTimes:
    """Seconds per forward pass: each component's, each block's (eaq.layers.components.find_blocks;
    a block's time includes its components'), and the whole pass's (on the same clock)."""

    components: dict[str, float]
    whole_s: float
    blocks: dict[str, float] = field(default_factory=dict)

    @property
    def captured(self) -> float:
        """Share of the pass's time inside components (1 - the glue's share)."""
        return sum(self.components.values()) / self.whole_s if self.whole_s > 0 else float("nan")


def _range_seconds(event: object, device: torch.device) -> float:
    us = event.device_time_total if device.type == "cuda" else event.cpu_time_total  # type: ignore[attr-defined]
    return us / 1e6


def profile_times(
    model: nn.Module, components: list[Component], forward: Callable[[], object], device: torch.device, passes: int = 3,
    blocks: list[Component] | None = None,
) -> PassTimes:
    """Profile ``passes`` forward passes (after one unprofiled) with a range per component and per
    block (a block's range holds its components': its time includes theirs); mean per pass."""
    forward()
    open_ranges: dict[str, record_function] = {}

    def enter(component: Component, root: str, *_: object) -> None:
        open_ranges[root] = record_function(_PREFIX + component.name)
        open_ranges[root].__enter__()

    def leave(_: Component, root: str) -> None:
        open_ranges.pop(root).__exit__(None, None, None)

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with around_roots(model, [*components, *(blocks or [])], enter, leave), profile(activities=activities) as prof:
        for _ in range(passes):
            with record_function(_WHOLE):
                forward()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    seconds: dict[str, float] = {c.name: 0.0 for c in [*components, *(blocks or [])]}
    whole = 0.0
    # Only the host-side ranges: on a GPU the profiler also mirrors each range on the device
    # timeline (a span, idle gaps included), which must not count twice.
    for event in (e for e in prof.events() if e.device_type == DeviceType.CPU):
        if event.name == _WHOLE:
            whole += _range_seconds(event, device)
        elif event.name.startswith(_PREFIX):
            seconds[event.name.removeprefix(_PREFIX)] += _range_seconds(event, device)
    if whole <= 0:
        # Found here, before any window: attribution could not split the energy the run goes on to measure.
        raise DeviceError(
            f"the profiler recorded no {'kernel' if device.type == 'cuda' else 'CPU'} time for the whole pass on {device}, "
            "so attribution cannot split a window's energy by component. On a GPU torch.profiler needs CUPTI to see "
            "kernels: check that torch.profiler.profile(activities=[ProfilerActivity.CUDA]) lists kernels of a matmul here."
        )
    per_pass = {name: s / passes for name, s in seconds.items()}
    return PassTimes({c.name: per_pass[c.name] for c in components}, whole / passes,
                     {b.name: per_pass[b.name] for b in blocks or []})


def component_flops(model: nn.Module, components: list[Component], forward: Callable[[], object]) -> dict[str, int]:
    """FLOPs each component runs in one pass of ``forward`` (torch's FLOP counter, per root call)."""
    counts = {c.name: 0 for c in components}
    active: dict[str, FlopCounterMode] = {}

    def enter(_: Component, root: str, *__: object) -> None:
        active[root] = FlopCounterMode(display=False)
        active[root].__enter__()

    def leave(component: Component, root: str) -> None:
        mode = active.pop(root)
        mode.__exit__(None, None, None)
        counts[component.name] += mode.get_total_flops()

    with torch.inference_mode(), around_roots(model, components, enter, leave):
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
