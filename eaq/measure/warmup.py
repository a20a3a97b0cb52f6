"""Warm-up until the device has settled, so the window measures steady state.

A fixed count of passes is not enough on a GPU: power and clocks ramp for hundreds of
milliseconds after work starts (seen in the power traces in docs/results). In ``settle``
mode, warm-up runs in short chunks and stops when the last ``BLOCK`` chunk means of
latency and (where a power trace is running) of power show no trend: the drift that the
least-squares line through them predicts across the block is either within a small
tolerance of their mean (2% latency, 3% power), or not significant against the chunks'
own noise (Student t, 95%).

Why not "two chunks agree within 3%", the rule before: on an H100 the workload's own
power moves +-10% from one 0.5 s chunk to the next inside a steady window (fp16:
302-379 W), so two chunks rarely agreed and runs warmed up for 1.4-10 s (the 10 s cap)
although their traces were flat after ~1 s (docs/results/2026-11-23-h100-sweep-time).
A trend test tells a ramp (means moving one way, more than their scatter explains) from
noise (means scattered about a level); see docs/results/2026-11-24-h100-sweep-time for
the rule replayed on a real H100 trace. ``max_s`` still caps it (then ``settled`` is
False). ``max_s`` counts from the end of the fixed passes: those include torch.compile's
compilation (19 s for GPT-2-medium bf16, 72 s with fp8 on an H100), which would
otherwise use up the settling time before one chunk ran.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from eaq.measure.timing import run_timed

LATENCY_TOLERANCE = 0.02
POWER_TOLERANCE = 0.03
CHUNK_S = 0.25
# Chunk means one decision looks at: 1.5 s of 0.25 s chunks, enough points for a slope
# and its scatter (4 degrees of freedom), short against the 5 s window.
BLOCK = 6
# Two-sided 95% Student t for BLOCK - 2 degrees of freedom.
T_CRITICAL = 2.776


def stationary(means: Sequence[float], tolerance: float, block: int = BLOCK, t_critical: float = T_CRITICAL) -> bool:
    """Whether the last ``block`` chunk means show no trend.

    The fitted drift across the block must be within ``tolerance`` of the block's mean,
    or the slope within ``t_critical`` standard errors of zero, the error taken from the
    means' own noise: stationary noise settles as soon as there are ``block`` chunks; a
    ramp or a step does not while it moves the means more than their noise does. A drift
    smaller than that noise over the block cannot be told from it in ``block`` chunks.
    """
    if len(means) < block:
        return False
    ys = [float(m) for m in means[-block:]]
    xs = range(block)
    x_mean, y_mean = (block - 1) / 2, sum(ys) / block
    sxx = sum((x - x_mean) ** 2 for x in xs)
    slope = sum((x - x_mean) * (y - y_mean) for x, y in zip(xs, ys)) / sxx
    drift = abs(slope) * (block - 1)
    if drift <= tolerance * abs(y_mean):
        return True
    # Two estimates of the chunks' noise, and the smaller counts: the scatter about the line
    # (a step inside the block inflates it, and would hide as noise) and the median change
    # from one chunk to the next (one step is one change; 0.954 sigma for normal noise).
    about_line = math.sqrt(sum((y - y_mean - slope * (x - x_mean)) ** 2 for x, y in zip(xs, ys)) / (block - 2))
    chunk_to_chunk = statistics.median(abs(b - a) for a, b in zip(ys, ys[1:])) / 0.954
    return abs(slope) < t_critical * min(about_line, chunk_to_chunk) / math.sqrt(sxx)


def pairs_agree(means: Sequence[float], tolerance: float) -> bool:
    """The rule before the trend test, kept to reproduce that protocol side by side
    (``trials.warmup_rule=pairs``, 0.5 s chunks): the last two chunk means within ``tolerance``."""
    if len(means) < 2:
        return False
    previous, current = means[-2], means[-1]
    return abs(current - previous) <= tolerance * abs(previous)


# Settle rule -> (its test on the chunk means so far, its chunk length in seconds).
RULES: dict[str, tuple[Callable[[Sequence[float], float], bool], float]] = {
    "trend": (stationary, CHUNK_S),
    "pairs": (pairs_agree, 0.5),
}


@dataclass(frozen=True)
class WarmupResult:
    iterations: int
    duration_s: float
    # True when latency and power settled; None when settling was not asked for.
    settled: bool | None


def warm_up(
    step: Callable[[Any], object],
    inputs: Sequence[Any],
    device: torch.device,
    min_iters: int,
    settle: bool,
    power_w: Callable[[float, float], float | None] = lambda t0, t1: None,
    max_s: float = 10.0,
    rule: str = "trend",
    chunk_s: float | None = None,
) -> WarmupResult:
    """``power_w(t0, t1)`` gives the mean power over an interval, or None where the trace has no sample in it.

    ``rule`` names the settle test in ``RULES``; ``chunk_s`` overrides its chunk length. A chunk without a power sample
    (a poll stall, samples that arrive late, polls slower than a chunk) joins the next one's power mean: a gap can
    neither end warm-up nor hide a ramp, and slow polls give fewer, longer power means. Until a first sample arrives
    the run may have no power trace at all, and settles on latency alone.
    """
    settled_by, rule_chunk_s = RULES[rule]
    chunk_s = chunk_s if chunk_s is not None else rule_chunk_s
    start = time.perf_counter()
    iterations = len(run_timed(step, inputs, device, min_iters, 0.0, label="warm-up", progress=True)) if min_iters else 0
    if not settle:
        return WarmupResult(iterations, time.perf_counter() - start, None)
    latency: list[float] = []
    power: list[float] = []
    unmeasured_since: float | None = None  # the start of the chunks whose power is in no mean yet
    settling = time.perf_counter()
    while time.perf_counter() - settling < max_s:
        t0 = time.perf_counter()
        latencies = run_timed(step, inputs, device, 1, chunk_s, label="warm-up", progress=True)
        iterations += len(latencies)
        latency.append(sum(latencies) / len(latencies))
        unmeasured_since = t0 if unmeasured_since is None else unmeasured_since
        mean = power_w(unmeasured_since, time.perf_counter())
        if mean is not None:
            power.append(mean)
            unmeasured_since = None
        if settled_by(latency, LATENCY_TOLERANCE) and (not power or settled_by(power, POWER_TOLERANCE)):
            return WarmupResult(iterations, time.perf_counter() - start, True)
    return WarmupResult(iterations, time.perf_counter() - start, False)
