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
import statistics
import time
from types import ModuleType
from typing import Any

from eaq.measure.nvml_read import NvmlReader, import_pynvml, nvml_uuid
from eaq.measure.poll_process import PollProcess
from eaq.measure.trace import PowerTrace

__all__ = ["CLOCK_EVENT_FIELDS", "NvmlSampler", "device_summaries", "gpu_facts", "nvml_uuid"]

# The clock-event reasons NVML keeps a cumulative time for (its NVML_FI_DEV_CLOCKS_EVENT_REASON_<suffix> fields),
# by the label the snapshot's ``clock_event_ns_<label>`` facts carry.
CLOCK_EVENT_FIELDS = {
    "power_cap": "SW_POWER_CAP",
    "sync_boost": "SYNC_BOOST",
    "software_thermal": "SW_THERM_SLOWDOWN",
    "hardware_thermal": "HW_THERM_SLOWDOWN",
    "hardware_power_brake": "HW_POWER_BRAKE_SLOWDOWN",
}


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

    @property
    def polling(self) -> bool:
        """Whether the polling process feeds the trace (started and not stopped); the counter reads need none."""
        return self._poll is not None

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
            # Kept for the next session (task=layers runs several on one sampler: the first one alone had it), its
            # trace once among the companions, growing session after session as this one's does.
            companion = self.companion.stop()
            if not any(c is companion for c in self._trace.companions):
                self._trace.companions.append(companion)
            for note in companion.notes:
                self._trace.note(f"{self.companion.name}: {note}")
        return self._trace

    # -- facts for validity checks ----------------------------------------------------
    def utilization(self, start_unix_s: float, end_unix_s: float) -> list[float] | None:
        """GPU utilization (%) of NVML's samples whose periods lie between two wall-clock times, all processes together.

        The driver keeps a sample every ~200 ms (H100, driver 580), each the share of its period any kernel ran;
        an idle window's are all 0 unless something else used the GPU in it, which the process list read at the
        window's two ends misses when it started and ended inside (docs/results/2026-11-26-h100-throttle-counters).
        """
        nvml = self._nvml
        try:
            _, samples = nvml.nvmlDeviceGetSamples(self._handle, nvml.NVML_GPU_UTILIZATION_SAMPLES, int(start_unix_s * 1e6))
            # A sample tells of the period before its time stamp; the first after ``start`` covers some of what ran
            # before (the run's own work up to the window's sync). Only samples whose whole period lies in the window
            # count, the period taken from their spacing.
            stamps = sorted(sample.timeStamp for sample in samples)
            if len(stamps) < 2:
                return []
            period_us = statistics.median(b - a for a, b in zip(stamps, stamps[1:]))
            first_us, end_us = start_unix_s * 1e6 + period_us, end_unix_s * 1e6
            return [float(sample.sampleValue.uiVal) for sample in samples if first_us <= sample.timeStamp <= end_us]
        except Exception as exc:  # NVMLError, or an answer of a shape this reading does not expect
            # NOT_FOUND: no sample since then (a window shorter than one period); anything else: cannot tell.
            return [] if getattr(exc, "value", None) == getattr(nvml, "NVML_ERROR_NOT_FOUND", None) else None

    def snapshot(self) -> dict[str, float]:
        """Temperature, SM clock, performance state, clock-event reasons and their cumulative times, power limit, other
        processes: each where readable."""
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
        return facts | self._clock_event_times()

    def _clock_event_times(self) -> dict[str, float]:
        """NVML's cumulative time (ns) each clock-event reason has held the clocks back, where this GPU keeps it.

        The reasons' bits (``clock_event_reasons``) say what holds the clocks at the instant of a read, so a window
        read at its two ends misses a slowdown in its middle; these counters only grow, and their difference over a
        window is the time each reason held in it. One field read for all (~6 ms on the H100, outside the window).
        """
        nvml = self._nvml
        wanted = {
            label: getattr(nvml, f"NVML_FI_DEV_CLOCKS_EVENT_REASON_{suffix}", None) for label, suffix in CLOCK_EVENT_FIELDS.items()
        }
        known = {label: field_id for label, field_id in wanted.items() if field_id is not None}  # an older pynvml lacks some
        try:
            answers = nvml.nvmlDeviceGetFieldValues(self._handle, list(known.values()))
        except Exception:  # a driver without the fields: the two ends' bits still judge
            return {}
        times = {
            f"clock_event_ns_{label}": float(answer.value.ullVal)
            for label, answer in zip(known, answers, strict=True)
            if answer.nvmlReturn == nvml.NVML_SUCCESS
        }
        # When they were read: two reads bracket a window by a few ms, and a share of that span is at most 1.
        return times | {"clock_event_read_s": time.perf_counter()} if times else {}


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
