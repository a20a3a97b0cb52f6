"""Summaries of per-iteration latencies, and the latency block of a window's metrics."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LatencyStats:
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    # None from one iteration: a sample standard deviation of one value is undefined (logged as 0, it read as steady).
    std_ms: float | None
    iterations: int

    @classmethod
    def from_seconds(cls, latencies_s: list[float]) -> LatencyStats:
        ms = np.asarray(latencies_s, dtype=np.float64) * 1e3
        p50, p90, p99 = np.percentile(ms, [50, 90, 99])
        std = float(ms.std(ddof=1)) if ms.size > 1 else None
        return cls(float(ms.mean()), float(p50), float(p90), float(p99), std, int(ms.size))


def latency_metrics(
    latencies_s: list[float],
    duration_s: float,
    work: int,
    latency: str = "latency",
    throughput: str = "throughput_samples_per_s",
    window: str = "",
) -> dict[str, float]:
    """The latency block of a window's metrics; names in eaq/metrics.py.

    One function for every window, named for what it measures: ``latency`` is the stem of the
    per-iteration figures (``time_per_output_token`` for decode steps), ``throughput`` the name
    of ``work`` (samples, tokens) per second of window, ``window`` the prefix of the window's
    duration and iteration count (``decode_``).
    """
    stats = LatencyStats.from_seconds(latencies_s)
    return {
        f"{latency}_mean_ms": stats.mean_ms,
        f"{latency}_p50_ms": stats.p50_ms,
        f"{latency}_p90_ms": stats.p90_ms,
        f"{latency}_p99_ms": stats.p99_ms,
        **({f"{latency}_std_ms": stats.std_ms} if stats.std_ms is not None else {}),
        throughput: work / duration_s,
        f"{window}window_duration_s": duration_s,
        f"{window}window_iterations": stats.iterations,
    }
