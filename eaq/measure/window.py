"""A measurement window: sync, start the sensor, run, sync, stop; one result object.

Modelled on Zeus's ``begin_window``/``end_window``: the window owns the device syncs and
the sensor reads at its two ends, so nothing else needs to, and nothing inside it does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from eaq.device import synchronize
from eaq.measure.samplers import EnergyReading, Sampler


@dataclass(frozen=True)
class WindowResult:
    start_unix_s: float
    end_unix_s: float
    duration_s: float
    iterations: int
    energy: EnergyReading


class MeasurementWindow:
    """``with MeasurementWindow(device, sampler) as w: ...; w.iterations = n``; then ``w.result``."""

    def __init__(self, device: torch.device, sampler: Sampler) -> None:
        self.device = device
        self.sampler = sampler
        self.iterations = 0
        self.result: WindowResult | None = None

    def __enter__(self) -> MeasurementWindow:
        synchronize(self.device)
        self.sampler.start()
        self._start_unix = time.time()
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        synchronize(self.device)
        duration = time.perf_counter() - self._start
        energy = self.sampler.stop()
        self.result = WindowResult(self._start_unix, self._start_unix + duration, duration, self.iterations, energy)
