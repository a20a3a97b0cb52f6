"""Summaries of per-iteration latencies."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LatencyStats:
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    std_ms: float
    iterations: int

    @classmethod
    def from_seconds(cls, latencies_s: list[float]) -> LatencyStats:
        ms = np.asarray(latencies_s, dtype=np.float64) * 1e3
        p50, p90, p99 = np.percentile(ms, [50, 90, 99])
        std = float(ms.std(ddof=1)) if ms.size > 1 else 0.0
        return cls(float(ms.mean()), float(p50), float(p90), float(p99), std, int(ms.size))
