"""What running a sampler costs the measured loop, measured in one process.

Separate runs cannot show a 1% effect: on a GPU at batch 1, where Python dispatch
dominates, run-to-run spread between fresh processes was ±20% (docs/results). So the
check alternates short blocks with the sampler off and on inside one process, in ABBA
order to cancel drift, and reports the median of the paired on/off ratios of each block's
median latency. A sampler that can pause (the NVML polling process: SIGSTOP/SIGCONT) runs
through the whole check and is only frozen for the "off" blocks, so no start-up cost or
disturbance sits between blocks; others are started and stopped around each "on" block.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from eaq.measure.samplers import Sampler
from eaq.measure.timing import run_timed


@dataclass(frozen=True)
class Overhead:
    off_ms: float
    on_ms: float
    # Median over block pairs of (on / off - 1) of the blocks' median latencies, in percent.
    overhead_pct: float
    # Half the interquartile range of the paired ratios: the resolution of the figure.
    spread_pct: float
    pairs: int


def _median_ms(step: Callable[[Any], object], inputs: Sequence[Any], device: torch.device, iters: int) -> float:
    return statistics.median(run_timed(step, inputs, device, iters, 0.0, label="overhead")) * 1e3


def sampler_overhead(
    step: Callable[[Any], object],
    inputs: Sequence[Any],
    device: torch.device,
    make_sampler: Callable[[], Sampler],
    pairs: int,
    iters: int,
) -> Overhead:
    offs, ons, ratios = [], [], []
    sampler = make_sampler()
    pausable = hasattr(sampler, "pause")
    if pausable:
        sampler.start()
    try:
        for i in range(pairs):
            result = {}
            for on in (False, True) if i % 2 == 0 else (True, False):
                if pausable:
                    sampler.pause(not on)
                    result[on] = _median_ms(step, inputs, device, iters)
                elif on:
                    sampler = make_sampler()
                    sampler.start()
                    try:  # stopped even if the step raises: a poller (nvidia-smi's process, RAPL's thread) outlives it
                        result[on] = _median_ms(step, inputs, device, iters)
                    finally:
                        sampler.stop()
                else:
                    result[on] = _median_ms(step, inputs, device, iters)
            offs.append(result[False])
            ons.append(result[True])
            ratios.append(result[True] / result[False] - 1)
    finally:
        if pausable:
            sampler.pause(False)
            sampler.stop()
    return Overhead(
        off_ms=statistics.median(offs),
        on_ms=statistics.median(ons),
        overhead_pct=statistics.median(ratios) * 100,
        spread_pct=half_iqr_pct(ratios),
        pairs=pairs,
    )


def half_iqr_pct(ratios: Sequence[float]) -> float:
    """Half the interquartile range of ``ratios``, in percent; NaN for one ratio, which has no spread to tell (not 0).

    Quartiles within the ratios measured ("inclusive"): the default method extrapolates past them for a few pairs
    (the ratios 0 and 2% read as -0.5% to 2.5%, three times their spread)."""
    if len(ratios) < 2:
        return math.nan
    q1, _, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
    return (q3 - q1) / 2 * 100
