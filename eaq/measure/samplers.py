"""Power and energy sensors read around a measurement window.

Each sampler says whether it can run here (``available``), and ``stop`` returns one
``EnergyReading``. Where no sensor exists the reading says ``unavailable`` and why, so a
run never reports an energy figure it did not measure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

RAPL_ROOT = Path("/sys/class/powercap")


@dataclass(frozen=True)
class EnergyReading:
    """Energy over the window; ``status`` is 'measured' or 'unavailable' (then ``reason``)."""

    status: str
    sampler: str
    reason: str = ""
    energy_j: float | None = None


class Sampler(Protocol):
    name: str

    def available(self) -> str | None:
        """``None`` if this sensor can be read here, else why not."""

    def start(self) -> None: ...

    def stop(self) -> EnergyReading: ...


@dataclass
class NoSampler:
    """Measures nothing, and says why."""

    reason: str = "sampler=none was chosen"
    name: str = "none"

    def available(self) -> str | None:
        return None

    def start(self) -> None:
        pass

    def stop(self) -> EnergyReading:
        return EnergyReading(status="unavailable", sampler=self.name, reason=self.reason)


def _nvml_absent() -> str:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # NVMLError or a missing libnvidia-ml: both mean no NVIDIA sensor
        return f"NVML is not usable ({exc})"
    if count == 0:
        return "NVML sees no NVIDIA GPU"
    return "an NVIDIA GPU is present but eaq's nvml sampler is not built yet"


def _rapl_absent() -> str:
    zones = sorted(RAPL_ROOT.glob("intel-rapl:*/energy_uj")) if RAPL_ROOT.exists() else []
    if not zones:
        return f"no RAPL zones under {RAPL_ROOT}"
    return "RAPL zones exist but eaq's rapl sampler is not built yet"


SAMPLERS = ("auto", "none")


def select_sampler(name: str) -> Sampler:
    """``auto`` picks the best sensor this machine has; with none, a NoSampler that says why."""
    if name == "none":
        return NoSampler()
    if name == "auto":
        return NoSampler(reason=f"no energy sensor: {_nvml_absent()}; {_rapl_absent()}", name="auto")
    from eaq.errors import ConfigError

    raise ConfigError(f"sampler {name!r} does not exist; valid: {', '.join(SAMPLERS)}.")
