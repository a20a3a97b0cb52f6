"""Timing, memory and energy measurement. Knows nothing of models, MLflow or Hydra."""

from eaq.measure.energy import WindowEnergy, energy_metrics, window_energy
from eaq.measure.memory import PeakMemory
from eaq.measure.samplers import NoSampler, Sampler, measures_energy, select_sampler
from eaq.measure.stats import LatencyStats
from eaq.measure.timing import run_timed
from eaq.measure.trace import PowerTrace
from eaq.measure.validity import Validity, check
from eaq.measure.window import MeasurementWindow, WindowResult

__all__ = [
    "LatencyStats",
    "MeasurementWindow",
    "NoSampler",
    "PeakMemory",
    "PowerTrace",
    "Sampler",
    "Validity",
    "WindowEnergy",
    "WindowResult",
    "check",
    "energy_metrics",
    "measures_energy",
    "run_timed",
    "select_sampler",
    "window_energy",
]
