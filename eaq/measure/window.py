"""A measurement window: sync, read the counter, run, sync, read the counter; one result.

Modelled on Zeus's ``begin_window``/``end_window``: the window owns the device syncs,
the counter reads and the device snapshots at its two ends, so nothing else needs to,
and nothing inside it does. The sampler must already be started; its trace is read
after it stops, so the end of the window has samples on both sides.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from eaq.device import synchronize
from eaq.measure.samplers import Sampler


@dataclass(frozen=True)
class WindowResult:
    start_unix_s: float
    end_unix_s: float
    # perf_counter() seconds at the two syncs: the same clock as the sampler's trace.
    t0: float
    t1: float
    iterations: int
    counter_j: tuple[float | None, float | None]
    before: dict[str, float] = field(default_factory=dict)
    after: dict[str, float] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        return self.t1 - self.t0


class MeasurementWindow:
    """``with MeasurementWindow(device, sampler) as w: ...; w.iterations = n``; then ``w.result``."""

    def __init__(self, device: torch.device, sampler: Sampler) -> None:
        self.device = device
        self.sampler = sampler
        self.iterations = 0
        self.result: WindowResult | None = None

    def __enter__(self) -> MeasurementWindow:
        synchronize(self.device)
        self._before = self.sampler.snapshot()
        self._counter0 = self.sampler.energy_j()
        self._unix0 = time.time()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        synchronize(self.device)
        t1 = time.perf_counter()
        counter1 = self.sampler.energy_j()
        after = self.sampler.snapshot()
        self.result = WindowResult(
            start_unix_s=self._unix0,
            end_unix_s=self._unix0 + (t1 - self._t0),
            t0=self._t0,
            t1=t1,
            iterations=self.iterations,
            counter_j=(self._counter0, counter1),
            before=self._before,
            after=after,
        )
