"""NVIDIA GPU energy through NVML: the energy counter first, instant power as the trace.

Why this shape (measured on an H100 here, driver 580): the energy counter and the power
fields update every ~100 ms; ``nvmlDeviceGetPowerUsage`` (``power.draw``) is a 1-second
average on Ampere and newer, and integrating it under-counted energy by up to 12%, while
the instant field (``NVML_FI_DEV_POWER_INSTANT``) agreed with the counter within ~2%. So
the window's energy is the counter delta; the instant field, polled in the background, is
the trace and the cross-check; the averaged field is kept to show the difference. Where a
GPU lacks a field, the sampler falls back (instant -> average) and says so in the trace.
A counter read costs ~4 ms, so it is read only at the two ends of a window. The polling
runs in its own process (``poll_process``), so it costs the measured loop no GIL time.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from eaq.measure.nvml_read import NvmlReader, import_pynvml, nvml_uuid
from eaq.measure.poll_process import PollProcess
from eaq.measure.trace import PowerTrace

__all__ = ["NvmlSampler", "device_summaries", "gpu_facts", "nvml_uuid"]


class NvmlSampler:
    """One GPU, found by UUID (CUDA_VISIBLE_DEVICES reorders indices; UUIDs are stable)."""

    name = "nvml"

    def __init__(
        self, uuid: str | None, interval_s: float = 0.015, nvml: ModuleType | None = None, companion: Any = None
    ) -> None:
        self.uuid = uuid
        self.interval_s = interval_s
        self._nvml_given = nvml
        self._nvml = nvml
        self._handle: Any = None
        self._poll: PollProcess | None = None
        # Another sampler run over the same session (nvidia-smi), whose trace is kept for comparison.
        self.companion = companion
        self._trace = PowerTrace()

    @property
    def trace(self) -> PowerTrace:
        """The samples so far (drained from the polling process; outside windows only)."""
        if self._poll is not None:
            self._poll.drain()
        return self._trace

    def available(self) -> str | None:
        try:
            self._open()
        except Exception as exc:  # NVMLError, missing library, bad UUID
            return f"NVML cannot read this GPU ({type(exc).__name__}: {exc})"
        return None

    def _open(self) -> None:
        """The parent's own handle: for the counter reads at window ends and the snapshots."""
        if self._handle is not None:
            return
        nvml = self._nvml = self._nvml or import_pynvml()
        nvml.nvmlInit()
        if self.uuid is None:
            raise ValueError("no CUDA device UUID given; the nvml sampler measures the GPU a run uses")
        self._handle = nvml.nvmlDeviceGetHandleByUUID(nvml_uuid(self.uuid))

    def start(self) -> None:
        self._open()
        assert self.uuid is not None
        self._poll = PollProcess(NvmlReader(self.uuid, self._nvml_given), self.interval_s, self._trace)
        try:
            self._poll.start()
        except RuntimeError as exc:
            self._trace.note(f"no power trace: {exc}")
            self._poll = None
        if self.companion is not None:
            try:
                self.companion.start()
            except BaseException:  # the polling process is up: it must not outlive a start that failed
                if self._poll is not None:
                    self._poll.stop()
                    self._poll = None
                raise

    def pause(self, paused: bool) -> None:
        """Stop or resume polling without ending the session (the overhead check's off/on)."""
        if self._poll is not None:
            self._poll.pause(paused)

    def energy_j(self) -> float | None:
        """Cumulative energy counter (J); None where the GPU has none or the read failed."""
        nvml = self._nvml
        try:
            return nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle) / 1e3
        except nvml.NVMLError as exc:
            self._trace.note(f"energy counter unreadable ({exc}); energy from the power trace instead")
            return None

    def stop(self) -> PowerTrace:
        if self._poll is not None:
            self._poll.stop()
            self._poll = None
        if self.companion is not None:
            companion = self.companion.stop()
            self._trace.companions.append(companion)
            for note in companion.notes:
                self._trace.note(f"{self.companion.name}: {note}")
            self.companion = None
        return self._trace

    # -- facts for validity checks ----------------------------------------------------
    def snapshot(self) -> dict[str, float]:
        """Temperature, SM clock, performance state, clock-event reasons, power limit, other processes: each where readable."""
        nvml, h = self._nvml, self._handle
        reads = {
            "temperature_c": lambda: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),
            "sm_clock_mhz": lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM),
            "pstate": lambda: nvml.nvmlDeviceGetPerformanceState(h),
            "clock_event_reasons": lambda: nvml.nvmlDeviceGetCurrentClocksEventReasons(h),
            "power_limit_w": lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1e3,
            "other_processes": lambda: other_processes([p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(h)]),
        }
        facts: dict[str, float] = {}
        for name, read in reads.items():
            try:
                facts[name] = float(read())
            except Exception:  # an unsupported query leaves that fact out; checks skip it
                continue
        return facts


def other_processes(pids: list[int], own: int | None = None, holds_context: bool | None = None) -> int:
    """How many processes but this one hold a context on the GPU, from NVML's list of their PIDs.

    The driver knows no PID namespaces: in a container with its own (Docker's default) NVML
    lists the host's PIDs, and this process's PID there is not ``os.getpid()`` (NVIDIA's
    nvidia-docker#1483). Counting every PID but our own would then count this process as
    another and flag every window. So where our PID is not listed and this process holds a
    CUDA context (it measures work on this GPU), one of the listed PIDs is taken to be it.
    ``own`` and ``holds_context`` default to this process's.
    """
    own = os.getpid() if own is None else own
    if own in pids:
        return len(pids) - 1
    if holds_context is None:
        import torch

        holds_context = torch.cuda.is_initialized()
    return max(len(pids) - 1, 0) if holds_context else len(pids)


def gpu_facts(uuid: str, nvml: ModuleType | None = None) -> dict[str, str]:
    """Driver, power limit, persistence mode and clocks of one GPU, for env.json (what is readable)."""
    try:
        nvml = nvml or import_pynvml()
        nvml.nvmlInit()
        handle = nvml.nvmlDeviceGetHandleByUUID(nvml_uuid(uuid))
    except Exception as exc:  # no NVML here: say so rather than fail the run
        return {"nvml": f"unavailable ({type(exc).__name__})"}
    reads = {
        "driver": lambda: nvml.nvmlSystemGetDriverVersion(),
        "power_limit_w": lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1e3,
        "persistence_mode": lambda: nvml.nvmlDeviceGetPersistenceMode(handle),
        "sm_clock_max_mhz": lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM),
        "mem_clock_max_mhz": lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM),
        "applications_sm_clock_mhz": lambda: nvml.nvmlDeviceGetApplicationsClock(handle, nvml.NVML_CLOCK_SM),
    }
    facts = {}
    for name, read in reads.items():
        try:
            facts[name] = str(read())
        except Exception:  # a query this GPU or driver does not answer
            continue
    return facts


def _mig_on(nvml: ModuleType, handle: Any) -> bool:
    try:
        return nvml.nvmlDeviceGetMigMode(handle)[0] == 1
    except Exception:  # a GPU without MIG (or a driver without the query): off
        return False


def device_summaries(nvml: ModuleType | None = None) -> list[dict[str, Any]]:
    """Per GPU, in NVML's order (the PCI bus's): name, UUID, compute capability, memory and whether MIG is on (its
    instances are what CUDA then sees, named apart from the GPU), read without a CUDA context."""
    try:
        nvml = nvml or import_pynvml()
        nvml.nvmlInit()
        found = []
        for i in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            name = nvml.nvmlDeviceGetName(handle)
            uuid = nvml.nvmlDeviceGetUUID(handle)
            found.append({"name": name.decode() if isinstance(name, bytes) else name, "major": major, "minor": minor,
                          "uuid": uuid.decode() if isinstance(uuid, bytes) else uuid,
                          "total_memory": nvml.nvmlDeviceGetMemoryInfo(handle).total, "mig": _mig_on(nvml, handle)})
        return found
    except Exception:  # no driver, no library: nothing to tell
        return []
