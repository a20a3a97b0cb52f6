"""Power samples over time, and the energy they imply between two instants."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class PowerTrace:
    """Samples from one sampler session, timestamped with ``time.perf_counter()`` seconds.

    ``channels`` maps a field name (``power_instant_w``, ``power_average_w``, ``rapl_package_w``...)
    to one value per timestamp (NaN where that read failed). ``sensor_times`` holds the
    sensor's own timestamp of each instant-power reading where it has one, to count how
    often the sensor really updated, which is slower than we poll.
    """

    times: list[float] = field(default_factory=list)
    channels: dict[str, list[float]] = field(default_factory=dict)
    sensor_times: list[float] = field(default_factory=list)
    interval_s: float = 0.0
    # Why a field fell back or a read failed, once each: logged with the run.
    notes: list[str] = field(default_factory=list)
    # Traces of other samplers run alongside over the same windows (nvidia-smi, to compare).
    companions: list[PowerTrace] = field(default_factory=list)

    def add(self, t: float, values: dict[str, float], sensor_time: float | None = None) -> None:
        self.times.append(t)
        for name, value in values.items():
            self.channels.setdefault(name, []).append(value)
        if sensor_time is not None:
            self.sensor_times.append(sensor_time)

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)

    def between(self, t0: float, t1: float) -> int:
        """How many samples fall inside [t0, t1]."""
        times = np.asarray(self.times)
        return int(((times >= t0) & (times <= t1)).sum())

    def sensor_updates(self, t0: float, t1: float) -> int:
        """Distinct sensor timestamps among the samples inside [t0, t1]."""
        if not self.sensor_times:
            return 0
        times = np.asarray(self.times[: len(self.sensor_times)])
        inside = np.asarray(self.sensor_times)[(times >= t0) & (times <= t1)]
        return int(np.unique(inside).size)

    def integrals_j(self, t0: float, t1: float) -> dict[str, float]:
        """Energy of every channel, companions' included, over [t0, t1], where the samples cover it."""
        found = {ch: e for ch in self.channels if (e := self.integral_j(ch, t0, t1)) is not None}
        for companion in self.companions:
            found |= companion.integrals_j(t0, t1)
        return found

    def integral_j(self, channel: str, t0: float, t1: float) -> float | None:
        """Trapezoidal energy of a power channel over [t0, t1], interpolating at both ends."""
        if channel not in self.channels:
            return None
        times = np.asarray(self.times)
        watts = np.asarray(self.channels[channel], dtype=np.float64)
        ok = ~np.isnan(watts)
        times, watts = times[ok], watts[ok]
        if times.size < 2 or t0 < times[0] or t1 > times[-1]:
            return None  # the trace does not cover the window
        inner = (times > t0) & (times < t1)
        t = np.concatenate(([t0], times[inner], [t1]))
        w = np.concatenate(([np.interp(t0, times, watts)], watts[inner], [np.interp(t1, times, watts)]))
        return float(np.sum((w[1:] + w[:-1]) * np.diff(t)) / 2)

    def stats_w(self, channel: str, t0: float, t1: float) -> dict[str, float]:
        if channel not in self.channels:
            return {}
        times = np.asarray(self.times)
        watts = np.asarray(self.channels[channel], dtype=np.float64)
        inside = watts[(times >= t0) & (times <= t1) & ~np.isnan(watts)]
        if inside.size == 0:
            return {}
        return {"mean": float(inside.mean()), "std": float(inside.std()), "min": float(inside.min()), "max": float(inside.max())}
