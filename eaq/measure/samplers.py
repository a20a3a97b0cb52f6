"""Pick the power/energy sensor for a run.

Every sampler has the same small surface: ``available() -> reason | None``, ``start()``
(background polling into a PowerTrace), ``energy_j()`` (a cumulative counter, read only
at window ends; None where the sensor has no counter), ``stop() -> PowerTrace`` and
``snapshot()`` (device facts for the validity checks) and ``utilization(start, end)`` (the device's utilization samples (%) taken between two wall-clock times; None where this sensor cannot tell: whether an idle window was). Where no sensor exists the run
says ``unavailable`` and why; it never reports an energy it did not measure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

import torch

from eaq.errors import ConfigError
from eaq.measure.nvidia_smi import NvidiaSmiSampler
from eaq.measure.nvml import NvmlSampler
from eaq.measure.rapl import RaplSampler
from eaq.measure.trace import PowerTrace

SAMPLERS = ("auto", "nvml", "nvidia_smi", "rapl", "none")
# The longest wait for a sample past a window's edge (``wait_for_sample``): what a fixed
# margin used to be, or two of the slowest trace's polling intervals where that is longer
# (sampler.interval_ms=500 gives up before its next sample at 0.3 s, and the window reads unavailable).
TRACE_MARGIN_S = 0.3
# ... or this, for a trace without its first sample yet: nvidia-smi starts NVML itself before its
# first line (a second or more without persistence mode).
FIRST_SAMPLE_S = 3.0
# How often the wait looks at the trace (an NVML look drains the polling process: ~0.1 ms).
_LOOK_S = 0.002


class Sampler(Protocol):
    name: str
    # Filled while the sampler runs; read after stop() (or, for warm-up, while it runs).
    trace: PowerTrace

    def available(self) -> str | None: ...

    def start(self) -> None: ...

    def energy_j(self) -> float | None: ...

    def stop(self) -> PowerTrace: ...

    def snapshot(self) -> dict[str, float]: ...

    def utilization(self, start_unix_s: float, end_unix_s: float) -> list[float] | None: ...


@dataclass
class NoSampler:
    """Measures nothing, and says why."""

    reason: str = "sampler=none was chosen"
    name: str = "none"
    trace: PowerTrace = field(default_factory=PowerTrace)

    def available(self) -> str | None:
        return None

    def start(self) -> None:
        self.trace.note(self.reason)  # becomes the window's "unavailable" reason

    def energy_j(self) -> float | None:
        return None

    def stop(self) -> PowerTrace:
        return self.trace

    def snapshot(self) -> dict[str, float]:
        return {}

    def utilization(self, start_unix_s: float, end_unix_s: float) -> list[float] | None:
        return None


def measures_energy(sampler: Sampler) -> bool:
    """False for the stand-in that only says why nothing is measured."""
    return not isinstance(sampler, NoSampler)


def _traces(sampler: Sampler) -> list[PowerTrace]:
    """The traces a poller feeds: the sampler's and its companion's (nvidia-smi beside NVML), both read live. A sampler
    whose polling process did not start (``polling`` false; its trace notes why) feeds none: waiting on its trace
    cost FIRST_SAMPLE_S at each wait, ~9 s a run, for samples that never come."""
    companion = getattr(sampler, "companion", None)
    owners = [sampler, *([companion] if companion is not None else [])]
    return [owner.trace for owner in owners if getattr(owner, "polling", True)]


def wait_for_sample(sampler: Sampler, limit_s: float | None = None) -> float:
    """Wait until every trace the sampler keeps holds a sample taken after this call; the seconds waited.

    A window's trace integral interpolates at its edges, so the trace needs a sample on
    either side of each: called before the first window (idle) and after the last. A fixed
    0.3 s margin did that at 0.6 s a run, where the next sample comes within one polling
    interval (15 ms for NVML). Bounded by ``limit_s`` (a sensor that stopped delivering: the
    energy then says the trace does not cover the window, as before), by default the longest
    of TRACE_MARGIN_S, two polling intervals and, before a trace's first sample, FIRST_SAMPLE_S.
    Nothing to wait for without a sensor. Reading the trace drains NVML's polling process:
    never inside a window.
    """
    if not measures_energy(sampler) or not (traces := _traces(sampler)):
        return 0.0
    if limit_s is None:
        limit_s = max(TRACE_MARGIN_S, 2 * max(trace.interval_s for trace in traces),
                      FIRST_SAMPLE_S if any(not trace.times for trace in traces) else 0.0)
    start = time.perf_counter()
    while not all(trace.times and trace.times[-1] > start for trace in _traces(sampler)):
        if time.perf_counter() - start >= limit_s:
            break
        time.sleep(_LOOK_S)
    return time.perf_counter() - start


def _uuid(device: torch.device) -> str | None:
    if device.type != "cuda":
        return None
    return str(torch.cuda.get_device_properties(device).uuid)


def _make(name: str, device: torch.device, interval_s: float, compare_nvidia_smi: bool = False) -> Sampler:
    if name == "nvml":
        companion = NvidiaSmiSampler(_uuid(device), max(interval_s, 0.02)) if compare_nvidia_smi else None
        return NvmlSampler(_uuid(device), interval_s, companion=companion)
    if name == "nvidia_smi":
        return NvidiaSmiSampler(_uuid(device), interval_s)
    return RaplSampler(interval_s=interval_s)


def select_sampler(name: str, device: torch.device, interval_s: float = 0.015, compare_nvidia_smi: bool = False) -> Sampler:
    """``auto``: NVML for a CUDA run, RAPL for a CPU run, else none with the reason.

    A sampler named explicitly that cannot run here is an error, not a silent fallback.
    ``compare_nvidia_smi`` runs nvidia-smi beside NVML, for the old method's figure.
    """
    if name not in SAMPLERS:
        raise ConfigError(f"sampler {name!r} does not exist; valid: {', '.join(SAMPLERS)}.")
    if name == "none":
        return NoSampler()
    if name in ("nvml", "nvidia_smi") and device.type != "cuda":
        # RAPL advised only where it reads here: followed, it was refused in turn (no zones, or not readable).
        rapl = "rapl, " if RaplSampler().available() is None else ""
        raise ConfigError(f"sampler={name} measures a CUDA GPU but this run is on {device}; use sampler={rapl}auto or none.")
    if name == "rapl" and device.type != "cpu":
        # The host's packages would stand for the GPU's energy, shared with every job of the host (GPU slots keep
        # apart the GPUs, not the CPU), and their idle baseline stored under the GPU's key.
        raise ConfigError(f"sampler=rapl measures the host CPU's packages, not the {device} this run is on; use "
                          "sampler=nvml, auto or none.")
    if compare_nvidia_smi and name != "nvml":
        raise ConfigError("sampler.compare_nvidia_smi=true runs beside sampler=nvml; choose sampler=nvml.")
    if name != "auto":
        sampler = _make(name, device, interval_s, compare_nvidia_smi)
        reason = sampler.available()
        if reason:
            raise ConfigError(f"sampler={name} cannot run here: {reason}; use sampler=auto or sampler=none.")
        companion = getattr(sampler, "companion", None)  # nvidia-smi beside NVML: checked before either starts
        if companion is not None and (reason := companion.available()):
            raise ConfigError(f"sampler.compare_nvidia_smi=true cannot run here: {reason}; drop it (NVML alone measures).")
        return sampler
    candidate = _make("nvml" if device.type == "cuda" else "rapl", device, interval_s)
    reason = candidate.available()
    if reason is None:
        return candidate
    return NoSampler(reason=f"no energy sensor for {device}: {reason}", name="auto")
