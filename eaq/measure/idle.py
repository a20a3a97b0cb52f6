"""The idle baseline: measured once, reused by later runs on the same device while it is fresh.

Every run used to sit idle for 5 s before its warm-up to learn the device's idle power,
the figure net energy subtracts. In a sweep that is the same figure measured again and
again (on an H100, 5.6 s of every 42 s run). A baseline is now kept per device and
sampler in the cache folder and reused while it is younger than ``max_age_s`` and the
device looks as it did then: temperature within ``max_temp_delta_c`` (leakage power
rises with temperature) and SM clock within ``max_clock_change`` (a different clock is
a different power state). Otherwise the run measures a new one and stores it. Each run
records which baseline it used and why it measured one.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


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
    max_age_s: float = 600.0
    max_temp_delta_c: float = 10.0
    max_clock_change: float = 0.25


def baseline_path(cache_dir: str | Path, device_key: str, sampler: str) -> Path:
    return Path(cache_dir) / "idle" / f"{device_key}-{sampler}.json"


def load_baseline(path: Path) -> IdleBaseline | None:
    """The stored baseline, or None when there is none or it cannot be read (then: measure)."""
    try:
        return IdleBaseline(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def save_baseline(path: Path, baseline: IdleBaseline) -> None:
    """Atomic: a run reading it at the same moment sees the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(baseline), indent=2))
    tmp.replace(path)


def stale_reason(baseline: IdleBaseline | None, sampler: str, facts: dict[str, float], policy: ReusePolicy) -> str | None:
    """Why ``baseline`` cannot stand for the device now (None: reuse it)."""
    if baseline is None:
        return "no stored baseline for this device"
    if baseline.sampler != sampler:
        return f"stored baseline was measured with sampler {baseline.sampler}, not {sampler}"
    age = baseline.age_s()
    if not 0 <= age <= policy.max_age_s:
        return f"stored baseline is {age:.0f} s old (reused up to {policy.max_age_s:.0f} s)"
    then, now = baseline.facts.get("temperature_c"), facts.get("temperature_c")
    if then is not None and now is not None and abs(now - then) > policy.max_temp_delta_c:
        return f"temperature moved from {then:.0f} to {now:.0f} C (reused within {policy.max_temp_delta_c:g} C)"
    then, now = baseline.facts.get("sm_clock_mhz"), facts.get("sm_clock_mhz")
    if then and now is not None and abs(now - then) > policy.max_clock_change * then:
        return f"SM clock moved from {then:.0f} to {now:.0f} MHz (reused within {policy.max_clock_change:.0%})"
    return None
