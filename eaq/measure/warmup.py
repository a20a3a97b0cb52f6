"""Warm-up until the device has settled, so the window measures steady state.

A fixed count of passes is not enough on a GPU: power and clocks ramp for hundreds of
milliseconds after work starts (seen in the power traces in docs/results). In ``settle``
mode, warm-up runs in chunks until two chunks in a row agree on mean latency (within 2%)
and, where a power trace is running, on mean power (within 3%), or until ``max_s``.
``max_s`` counts from the end of the fixed passes: those include torch.compile's
compilation (19 s for GPT-2-medium bf16, 72 s with fp8 on an H100), which would
otherwise use up the settling time before one chunk ran.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from eaq.measure.timing import run_timed

LATENCY_TOLERANCE = 0.02
POWER_TOLERANCE = 0.03


@dataclass(frozen=True)
class WarmupResult:
    iterations: int
    duration_s: float
    # True when latency and power settled; None when settling was not asked for.
    settled: bool | None


def _close(a: float | None, b: float | None, tolerance: float) -> bool:
    return a is None or b is None or abs(a - b) <= tolerance * abs(b)


def warm_up(
    step: Callable[[Any], object],
    inputs: Sequence[Any],
    device: torch.device,
    min_iters: int,
    settle: bool,
    power_w: Callable[[float, float], float | None] = lambda t0, t1: None,
    chunk_s: float = 0.5,
    max_s: float = 10.0,
) -> WarmupResult:
    """``power_w(t0, t1)`` gives the mean power over an interval, or None without a trace."""
    start = time.perf_counter()
    iterations = len(run_timed(step, inputs, device, min_iters, 0.0, label="warm-up")) if min_iters else 0
    if not settle:
        return WarmupResult(iterations, time.perf_counter() - start, None)
    previous: tuple[float, float | None] | None = None
    settling = time.perf_counter()
    while time.perf_counter() - settling < max_s:
        t0 = time.perf_counter()
        latencies = run_timed(step, inputs, device, 1, chunk_s, label="warm-up")
        iterations += len(latencies)
        current = (sum(latencies) / len(latencies), power_w(t0, time.perf_counter()))
        if previous and _close(current[0], previous[0], LATENCY_TOLERANCE) and _close(current[1], previous[1], POWER_TOLERANCE):
            return WarmupResult(iterations, time.perf_counter() - start, True)
        previous = current
    return WarmupResult(iterations, time.perf_counter() - start, False)
