"""Power samples over time, and the energy they imply between two instants."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class PowerTrace:
    """Samples from one sampler session, timestamped with ``time.perf_counter()`` seconds.

    ``channels`` maps a field name (``power_instant_w``, ``power_average_w``, ``power_rapl_w``...)
    to one value per timestamp. We poll faster than the sensor updates (~100 ms on recent
    NVIDIA GPUs), so how often a channel's value changed tells how often it really updated.
    """

    times: list[float] = field(default_factory=list)
    channels: dict[str, list[float]] = field(default_factory=dict)
    interval_s: float = 0.0
    # The shortest poll interval its sampler honours (RAPL's); 0: any. Advice to poll faster stops there.
    fastest_s: float = 0.0
    # Why a field fell back or a read failed, once each: logged with the run.
    notes: list[str] = field(default_factory=list)
    # Traces of other samplers run alongside over the same windows (nvidia-smi, to compare).
    companions: list[PowerTrace] = field(default_factory=list)

    def add(self, t: float, values: dict[str, float]) -> None:
        """One sample. Every channel keeps one value per timestamp: a field this read lacks (its
        own NVML return failed) is NaN here, and a channel first seen late is NaN before."""
        before = len(self.times)
        self.times.append(t)
        for name, value in values.items():
            self.channels.setdefault(name, [float("nan")] * before).append(value)
        for name, column in self.channels.items():
            if name not in values:
                column.append(float("nan"))

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)

    def _aligned(self, channel: str) -> tuple[np.ndarray, np.ndarray]:
        """(times, the channel's values) cut to one length: a poller thread may append between the two reads."""
        values = self.channels[channel]
        n = min(len(self.times), len(values))
        return np.asarray(self.times[:n]), np.asarray(values[:n], dtype=np.float64)

    def between(self, t0: float, t1: float) -> int:
        """How many samples fall inside [t0, t1]."""
        times = np.asarray(self.times)
        return int(((times >= t0) & (times <= t1)).sum())

    def updates(self, channel: str, t0: float, t1: float) -> int:
        """How many times the channel's value changed inside [t0, t1]: the sensor's real updates."""
        if channel not in self.channels:
            return 0
        times, values = self._aligned(channel)
        inside = values[(times >= t0) & (times <= t1)]
        return int(np.count_nonzero(np.diff(inside[~np.isnan(inside)])))

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
        times, watts = self._aligned(channel)
        ok = ~np.isnan(watts)
        times, watts = times[ok], watts[ok]
        if times.size < 2 or t0 < times[0] or t1 > times[-1]:
            return None  # the trace does not cover the window
        inner = (times > t0) & (times < t1)
        t = np.concatenate(([t0], times[inner], [t1]))
        w = np.concatenate(([np.interp(t0, times, watts)], watts[inner], [np.interp(t1, times, watts)]))
        return float(np.sum((w[1:] + w[:-1]) * np.diff(t)) / 2)

    def stats_w(self, channel: str, t0: float, t1: float) -> dict[str, float]:
        """Mean/std/min/max over [t0, t1]; safe to call while a poller is still appending."""
        if channel not in self.channels:
            return {}
        times, watts = self._aligned(channel)
        inside = watts[(times >= t0) & (times <= t1) & ~np.isnan(watts)]
        if inside.size == 0:
            return {}
        return {"mean": float(inside.mean()), "std": float(inside.std()), "min": float(inside.min()), "max": float(inside.max())}
