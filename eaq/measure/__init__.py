"""Timing, memory and energy measurement. Knows nothing of models, MLflow or Hydra."""

from eaq.measure.memory import PeakMemory
from eaq.measure.samplers import EnergyReading, Sampler, select_sampler
from eaq.measure.stats import LatencyStats
from eaq.measure.timing import run_timed
from eaq.measure.window import MeasurementWindow, WindowResult

__all__ = [
    "EnergyReading",
    "LatencyStats",
    "MeasurementWindow",
    "PeakMemory",
    "Sampler",
    "WindowResult",
    "run_timed",
    "select_sampler",
]
