"""Energy per component by both methods, from one sampler session.

Order: capture the components' inputs and profile their in-situ times (no sampler
reads: both perturb nothing measured); then, with the sampler running, the idle
baseline (the benchmark's, reused while it stands: eaq.measure.idle), a warm-up (with a
sensor, until latency and power settle, as the benchmark's), the whole-model window
(attribution's energy), and one replay window per component type. Every window's energy is read from the trace after the sampler stops. Energy
figures are per forward pass, total and net of the idle baseline (its power times the
time per pass); where no sensor exists they are None, never 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from eaq.layers.attribution import OUTSIDE, PassTimes, profile_times, split
from eaq.layers.components import Component
from eaq.layers.replay import capture, metered, replay_by_type
from eaq.measure.energy import PRIMARY_CHANNELS, WindowEnergy, energy_metrics, window_energy
from eaq.measure.idle import ReusePolicy, idle_baseline
from eaq.measure.samplers import Sampler, measures_energy
from eaq.measure.validity import check
from eaq.measure.warmup import warm_up
from eaq.measure.window import WindowResult

# Sampler margin before the first and after the last window (as the benchmark's).
TRACE_MARGIN_S = 0.3


@dataclass(frozen=True)
class Settings:
    iters: int  # passes in the whole-model window, at least
    min_window_s: float  # seconds of the whole-model window, at least
    idle_s: float  # idle baseline; 0 for none
    warmup_iters: int
    replay_iters: int  # passes per replay window, at least
    replay_min_s: float  # seconds per replay window, at least (the sensor needs seconds to see a component)
    profile_passes: int = 3
    warmup_max_s: float = 10.0  # settling stops after this long, settled or not
    warmup_rule: str = "trend"  # how settled is judged (eaq.measure.warmup.RULES)
    # Where the device's idle baseline is kept and when it still stands, shared with the
    # benchmark's runs (eaq.measure.idle); None: measure one, keep nothing.
    idle_store: tuple[Path, ReusePolicy] | None = None


@dataclass
class ComponentEnergy:
    """Per component (by name): in-situ time, and energy per pass by each method (J, or None)."""

    times: PassTimes
    whole_s_per_pass: float
    # The whole-model window's joules per pass, total and net of idle (None: not measured).
    whole_j: float | None = None
    whole_net_j: float | None = None
    # Seconds per pass of each component replayed alone (the split within its type).
    replay_alone_s: dict[str, float] = field(default_factory=dict)
    replay_j: dict[str, float | None] = field(default_factory=dict)
    replay_net_j: dict[str, float | None] = field(default_factory=dict)
    attribution_j: dict[str, float | None] = field(default_factory=dict)
    attribution_net_j: dict[str, float | None] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)


def _per_pass(energy: WindowEnergy, result: WindowResult, idle_w: float | None) -> tuple[float | None, float | None]:
    """(Total, net of idle) joules per pass of a window; None where not measured."""
    if energy.energy_j is None:
        return None, None
    net = energy.energy_j - idle_w * result.duration_s if idle_w is not None else None
    return energy.energy_j / result.iterations, net / result.iterations if net is not None else None


def _split_or_none(joules: float | None, seconds: dict[str, float], total_s: float | None = None) -> dict[str, float | None]:
    return split(joules, seconds, total_s) if joules is not None else dict.fromkeys(seconds)


def _ratio(parts: dict[str, float | None], whole: float | None) -> float | None:
    values = [v for k, v in parts.items() if k != OUTSIDE]
    if whole is None or not values or any(v is None for v in values):
        return None
    return sum(values) / whole  # type: ignore[arg-type]


def _mean_power(sampler: Sampler, t0: float, t1: float) -> float | None:
    trace = sampler.trace  # drains the polling process once, outside any window
    channel = next((ch for ch in PRIMARY_CHANNELS if ch in trace.channels), None)
    return trace.stats_w(channel, t0, t1).get("mean") if channel else None


def measure_components(
    model: nn.Module,
    components: list[Component],
    forward: Callable[[], object],
    device: torch.device,
    sampler: Sampler,
    settings: Settings,
    samples_per_pass: int,
) -> ComponentEnergy:
    """Both methods for every component, on the model as it is (the run's precision applied)."""
    calls = capture(model, components, forward)
    times = profile_times(model, components, forward, device, settings.profile_passes)
    measuring = measures_energy(sampler)
    sampler.start()
    try:
        time.sleep(TRACE_MARGIN_S if measuring else 0.0)
        idle, _, idle_tags = idle_baseline(device, sampler, settings.idle_s, settings.idle_store)
        # As the benchmark: fixed passes, then (with a sensor) until latency and power settle.
        warm = warm_up(lambda _: forward(), [None], device, settings.warmup_iters, measuring,
                       lambda t0, t1: _mean_power(sampler, t0, t1), settings.warmup_max_s, settings.warmup_rule)
        whole = metered(forward, device, sampler, settings.iters, settings.min_window_s)
        replays = replay_by_type(model, components, calls, device, sampler, settings.replay_iters, settings.replay_min_s)
        time.sleep(TRACE_MARGIN_S if measuring else 0.0)
    finally:
        trace = sampler.stop()

    def energy_of(result: WindowResult) -> WindowEnergy:
        return window_energy(sampler.name, trace, result.t0, result.t1, result.counter_j)

    whole_energy = energy_of(whole)
    idle_w = idle.power_w if idle is not None else None
    whole_j, whole_net_j = _per_pass(whole_energy, whole, idle_w)
    found = ComponentEnergy(times, whole.duration_s / whole.iterations, whole_j, whole_net_j)
    found.attribution_j = _split_or_none(whole_j, times.components, times.whole_s)
    found.attribution_net_j = _split_or_none(whole_net_j, times.components, times.whole_s)
    reasons = [f"whole model: {r}" for r in check(whole, whole_energy, idle_w, settings.min_window_s).reasons]
    for replayed in replays:
        energy = energy_of(replayed.window)
        total, net = _per_pass(energy, replayed.window, idle_w)
        found.replay_alone_s |= replayed.seconds_alone
        found.replay_j |= _split_or_none(total, replayed.seconds_alone)
        found.replay_net_j |= _split_or_none(net, replayed.seconds_alone)
        reasons += [f"replay {replayed.type}: {r}" for r in check(replayed.window, energy, idle_w, settings.replay_min_s).reasons]
    found.metrics = {
        "layers_whole_model_time_ms": found.whole_s_per_pass * 1e3,
        "layers_time_capture_ratio": times.captured,
        **energy_metrics(whole_energy, idle_w, whole.duration_s, whole.iterations * samples_per_pass),
    }
    ratios = {
        "layers_capture_ratio_replay": _ratio(found.replay_j, whole_j),
        "layers_capture_ratio_attribution": _ratio(found.attribution_j, whole_j),
        "layers_capture_ratio_replay_net": _ratio(found.replay_net_j, whole_net_j),
        "layers_capture_ratio_attribution_net": _ratio(found.attribution_net_j, whole_net_j),
    }
    found.metrics |= {k: v for k, v in ratios.items() if v is not None}
    found.metrics |= {"warmup_iterations": warm.iterations, "warmup_duration_s": warm.duration_s}
    found.tags = {
        "eaq.energy": whole_energy.status,
        "eaq.energy.sampler": whole_energy.sampler,
        "eaq.warmup.settled": str(warm.settled).lower() if warm.settled is not None else "not asked",
        **idle_tags,
    }
    if whole_energy.energy_j is None:
        found.tags["eaq.energy.reason"] = whole_energy.reason
    else:
        found.tags |= {"eaq.energy.source": whole_energy.source, "eaq.valid": str(not reasons).lower()}
        found.tags |= {"eaq.valid.reasons": "; ".join(reasons)} if reasons else {}
    return found


__all__ = ["ComponentEnergy", "Settings", "measure_components"]
