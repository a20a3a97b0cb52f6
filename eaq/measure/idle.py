"""The idle baseline: measured once, reused by later runs on the same device while it is fresh.

Every run used to sit idle for 5 s before its warm-up to learn the device's idle power,
the figure net energy subtracts. In a sweep that is the same figure measured again and
again (on an H100, 5.6 s of every 42 s run). A baseline is now kept per device and
sampler in the cache folder and reused while it is younger than ``max_age_s`` and the
device looks as it did then: temperature within ``max_temp_delta_c``, SM clock within
``max_clock_change`` (a different clock is a different power state) and, where the sampler
reads it, the same performance state. Temperature matters:
on the H100 here idle power was 130 W at 46 C and 142 W at 57 C, about 1.1 W per degree
(docs/results/2026-11-23-h100-sweep-time), so 3 C keeps a reused baseline within ~3.5 W. Otherwise the run measures a new one and stores it. Each run
records which baseline it used and why it measured one. ``idle_baseline`` is the one way to
get it, for the benchmark and for ``task=layers`` alike.

This module imports no torch: eaq/config.py takes the reuse defaults from ``ReusePolicy``, and the
sweep's process must not load torch.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from eaq.files import atomic_write_text, read_cached

if TYPE_CHECKING:
    import torch

    from eaq.measure.samplers import Sampler
    from eaq.measure.window import WindowResult


@dataclass(frozen=True)
class IdleBaseline:
    power_w: float
    duration_s: float
    measured_unix_s: float
    sampler: str
    # The device's facts when it was measured (sampler.snapshot(): temperature_c, sm_clock_mhz, ...).
    facts: dict[str, float] = field(default_factory=dict)

    def age_s(self, now_unix_s: float | None = None) -> float:
        return (time.time() if now_unix_s is None else now_unix_s) - self.measured_unix_s


@dataclass(frozen=True)
class ReusePolicy:
    """When a stored baseline still stands for the device; the defaults are ``trials``' too (eaq/config.py)."""

    max_age_s: float = 600.0
    # H100: idle power rose ~1.1 W per degree, so 3 C keeps a reused baseline within ~3.5 W.
    max_temp_delta_c: float = 3.0
    max_clock_change: float = 0.25


def baseline_path(cache_dir: str | Path, device_key: str, sampler: str) -> Path:
    return Path(cache_dir) / "idle" / f"{device_key}-{sampler}.json"


def load_baseline(path: Path) -> IdleBaseline | None:
    """The stored baseline, or None when there is none or it cannot be read (then: measure)."""
    return read_cached(path, lambda found: IdleBaseline(**json.loads(found.read_text())))


def save_baseline(path: Path, baseline: IdleBaseline) -> None:
    """Atomic (eaq.files): a run reading it at the same moment sees the old file or the new, never half."""
    atomic_write_text(path, json.dumps(asdict(baseline), indent=2))


def stale_reason(
    baseline: IdleBaseline | None, sampler: str, facts: dict[str, float], policy: ReusePolicy, idle_s: float = 0.0
) -> str | None:
    """Why ``baseline`` cannot stand for the device now (None: reuse it). ``idle_s``: the length the run asks for;
    a baseline measured over less (the 2 s default's, for a protocol that asks 5 s) is not what it asked."""
    if baseline is None:
        return "no stored baseline for this device"
    if baseline.sampler != sampler:
        return f"stored baseline was measured with sampler {baseline.sampler}, not {sampler}"
    if sampler == "nvidia_smi":  # the reuse rules below would pass a baseline of a GPU 25 C cooler (~27 W) unseen
        return "sampler nvidia_smi reads no GPU temperature or clock to check a stored baseline against"
    if baseline.duration_s < 0.99 * idle_s:
        return f"stored baseline was measured over {baseline.duration_s:.1f} s, this run asks for {idle_s:g} s"
    age = baseline.age_s()
    if not 0 <= age <= policy.max_age_s:
        return f"stored baseline is {age:.0f} s old (reused up to {policy.max_age_s:.0f} s)"
    then, now = baseline.facts.get("temperature_c"), facts.get("temperature_c")
    if then is not None and now is not None and abs(now - then) > policy.max_temp_delta_c:
        return f"temperature moved from {then:.0f} to {now:.0f} C (reused within {policy.max_temp_delta_c:g} C)"
    then, now = baseline.facts.get("sm_clock_mhz"), facts.get("sm_clock_mhz")
    if then and now is not None and abs(now - then) > policy.max_clock_change * then:
        return f"SM clock moved from {then:.0f} to {now:.0f} MHz (reused within {policy.max_clock_change:.0%})"
    # A device in another performance state idles at another power, whatever its SM clock reads.
    then, now = baseline.facts.get("pstate"), facts.get("pstate")
    if then is not None and now is not None and then != now:
        return f"performance state moved from P{then:.0f} to P{now:.0f}"
    return None


# The most utilization (%, mean of the idle window's samples) an idle baseline may show.
MAX_IDLE_BUSY_PCT = 1.0


def not_idle(window: WindowResult, sampler: Sampler) -> str | None:
    """Why the device was not idle through ``window``, or None: its utilization samples, else the processes at its ends.

    Another process's work in the idle window raises the baseline, and every run netting by it would report too
    little net energy (H100: a child's 0.6 s of matmuls in a 2 s idle window read 244 W against 128-133 W,
    probe_idle.json; this function refused such a window on three of its nine samples, 66-90%, check.json; both in
    docs/results/2026-11-26-h100-throttle-counters).
    """
    samples = sampler.utilization(window.start_unix_s, window.end_unix_s) or []
    busy = [value for value in samples if value > 0]
    # Busy for more than 1% of the window, by the samples' mean (a 1% blip is a read's, not another's work): another
    # process's 0.6 s in 2 s read 25% on the H100.
    if busy and sum(samples) / len(samples) > MAX_IDLE_BUSY_PCT:
        return f"the GPU was busy in {len(busy)} of the window's {len(samples)} utilization samples (up to {max(busy):.0f}%)"
    # The samples leave up to a period at either end unseen (only whole periods in the window count): the processes
    # at its ends cover those, as they do every measured window.
    others = max(window.before.get("other_processes", 0), window.after.get("other_processes", 0))
    if others:
        return f"{others:.0f} other process(es) held the GPU at the window's start or end"
    return None


def idle_baseline(
    device: torch.device, sampler: Sampler, idle_s: float, store: tuple[Path, ReusePolicy] | None
) -> tuple[IdleBaseline | None, WindowResult | None, dict[str, str]]:
    """The idle baseline a run uses: the one stored at ``store``'s path while its policy says it
    still stands, else measured now (``idle_s`` seconds idle, ``sampler`` running) and stored.

    ``store`` None: measure every time, keep nothing. Returns the baseline (None without
    energy), the idle window when one was measured now (for the trace), and tags saying
    which baseline it was and why (``eaq.idle``, ``eaq.idle.measured_unix_s``). A window the device did not
    spend idle (``not_idle``) gives no baseline, and is not stored.
    """
    from eaq.measure.energy import window_energy
    from eaq.measure.samplers import measures_energy, wait_for_sample
    from eaq.measure.window import MeasurementWindow

    if not measures_energy(sampler):  # an idle_s a preset sets (trials=gpu_energy: 5 s) slept for no baseline
        return None, None, {"eaq.idle": "none (no energy sensor: no energy to net)"}
    if idle_s <= 0:
        return None, None, {"eaq.idle": "none (no idle time asked for)"}
    stored = load_baseline(store[0]) if store else None
    reason = (stale_reason(stored, sampler.name, sampler.snapshot(), store[1], idle_s) if store else
              "reuse off: trials.idle_reuse=false, or a CPU the sweep's other jobs share")
    if reason is None and stored is not None:
        tags = {"eaq.idle": f"reused, measured {stored.age_s():.0f} s earlier", "eaq.idle.measured_unix_s": f"{stored.measured_unix_s:.3f}"}
        return stored, None, tags
    # On the counter's updates: the baseline every later run nets by spreads less (H100: 0.2% against 0.7%).
    with MeasurementWindow(device, sampler, aligned=True) as window:
        time.sleep(idle_s)
    assert window.result is not None
    # Without an energy counter (nvidia-smi; NVML before Volta) the trace integral is the energy, and it needs a
    # sample past the window's end, which the trace, read at once, does not hold yet.
    wait_for_sample(sampler)
    energy = window_energy(sampler.name, sampler.trace, window.result.t0, window.result.t1, window.result.counter_j)
    if energy.energy_j is None:
        return None, window.result, {"eaq.idle": f"measured in this run, no energy: {energy.reason}"}
    if (busy := not_idle(window.result, sampler)) is not None:
        # Not kept and not used: every run netting by it would subtract another's work. Without a baseline the run
        # reports total energy only, as a run without one always has.
        return None, window.result, {"eaq.idle": f"measured in this run, not used: {busy}"}
    baseline = IdleBaseline(
        power_w=energy.energy_j / energy.duration_s,
        duration_s=energy.duration_s,
        measured_unix_s=window.result.start_unix_s,
        sampler=sampler.name,
        # What the reuse rules compare (temperature, clocks, state); the clock-event counters and their read time mean
        # nothing to a later process.
        facts={k: v for k, v in window.result.before.items() if not k.startswith("clock_event_")},
    )
    if store:
        save_baseline(store[0], baseline)
    tags = {"eaq.idle": f"measured in this run ({reason})", "eaq.idle.measured_unix_s": f"{baseline.measured_unix_s:.3f}"}
    return baseline, window.result, tags
