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


# The longest an aligned window waits for the counter's next update at either end (NVML's: every ~100 ms).
ALIGN_LIMIT_S = 0.3


class MeasurementWindow:
    """``with MeasurementWindow(device, sampler) as w: ...; w.iterations = n``; then ``w.result``.

    ``aligned``: open and close the window on the energy counter's updates. A window opened and closed anywhere holds
    part of a step more or less than its duration; aligned, it spans whole steps, and its time is theirs, to the
    ~4 ms of a counter read (an H100's 2 s idle windows spread 0.7% opened anywhere, 0.2% aligned:
    docs/results/2026-11-26-h100-idle-aligned). Only for a window the device spends idle (the idle baseline): the
    wait for the last update is inside it.
    """

    def __init__(self, device: torch.device, sampler: Sampler, aligned: bool = False) -> None:
        self.device = device
        self.sampler = sampler
        self.aligned = aligned
        self.iterations = 0
        self.result: WindowResult | None = None

    def _counter(self) -> tuple[float | None, float]:
        """(the counter, when it was read); aligned, the first value after it next changes and when that was seen."""
        value, seen = self.sampler.energy_j(), time.perf_counter()
        if self.aligned and value is not None:
            start = seen
            while seen - start < ALIGN_LIMIT_S and (now := self.sampler.energy_j()) == value:
                seen = time.perf_counter()
            value, seen = now, time.perf_counter()
        return value, seen

    def __enter__(self) -> MeasurementWindow:
        synchronize(self.device)
        self._before = self.sampler.snapshot()
        unix, perf = time.time(), time.perf_counter()
        self._counter0, self._t0 = self._counter()
        self._unix0 = unix + (self._t0 - perf)  # the wall clock at t0 (aligned: the update it opened on)
        return self

    def __exit__(self, *exc: object) -> None:
        synchronize(self.device)
        counter1, t1 = self._counter()
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
