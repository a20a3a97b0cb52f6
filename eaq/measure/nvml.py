"""NVIDIA GPU energy through NVML: the energy counter first, instant power as the trace.

Why this shape (measured on an H100 here, driver 580): the energy counter and the power
fields update every ~100 ms; ``nvmlDeviceGetPowerUsage`` (``power.draw``) is a 1-second
average on Ampere and newer, and integrating it under-counted energy by up to 12%, while
the instant field (``NVML_FI_DEV_POWER_INSTANT``) agreed with the counter within ~2%. So
the window's energy is the counter delta; the instant field, polled in the background, is
the trace and the cross-check; the averaged field is kept to show the difference. Where a
GPU lacks a field, the sampler falls back (instant -> average) and says so in the trace.
A counter read costs ~4 ms, so it is read only at the two ends of a window.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from eaq.measure.poller import Poller
from eaq.measure.trace import PowerTrace


def _import_pynvml() -> ModuleType:
    import pynvml

    return pynvml


def nvml_uuid(torch_uuid: str) -> str:
    """torch prints a device UUID bare; NVML wants it prefixed with ``GPU-``."""
    text = str(torch_uuid)
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


class NvmlSampler:
    """One GPU, found by UUID (CUDA_VISIBLE_DEVICES reorders indices; UUIDs are stable)."""

    name = "nvml"

    def __init__(
        self, uuid: str | None, interval_s: float = 0.015, nvml: ModuleType | None = None, companion: Any = None
    ) -> None:
        self.uuid = uuid
        # Another sampler run over the same session (nvidia-smi), whose trace is kept for comparison.
        self.companion = companion
        self.interval_s = interval_s
        self._nvml = nvml
        self._handle: Any = None
        self._poller: Poller | None = None
        self._fields: list[int] = []
        self.trace = PowerTrace()

    # -- set-up -----------------------------------------------------------------------
    def available(self) -> str | None:
        try:
            self._open()
        except Exception as exc:  # NVMLError, missing library, bad UUID
            return f"NVML cannot read this GPU ({type(exc).__name__}: {exc})"
        return None

    def _open(self) -> None:
        if self._handle is not None:
            return
        nvml = self._nvml = self._nvml or _import_pynvml()
        nvml.nvmlInit()
        if self.uuid is None:
            raise ValueError("no CUDA device UUID given; the nvml sampler measures the GPU a run uses")
        self._handle = nvml.nvmlDeviceGetHandleByUUID(nvml_uuid(self.uuid))

    def _probe_fields(self) -> None:
        """Keep the power fields this GPU answers; note each one it lacks."""
        nvml = self._nvml
        wanted = {nvml.NVML_FI_DEV_POWER_INSTANT: "instant", nvml.NVML_FI_DEV_POWER_AVERAGE: "average"}
        try:
            answers = nvml.nvmlDeviceGetFieldValues(self._handle, list(wanted))
        except nvml.NVMLError as exc:
            self.trace.note(f"power fields unreadable ({exc}); trace from nvmlDeviceGetPowerUsage (1 s average)")
            return
        for field_id, answer in zip(wanted, answers, strict=True):
            if answer.nvmlReturn == nvml.NVML_SUCCESS:
                self._fields.append(field_id)
            else:
                self.trace.note(f"this GPU has no {wanted[field_id]} power field (NVML return {answer.nvmlReturn})")

    # -- sampling ---------------------------------------------------------------------
    def _read(self) -> dict[str, float]:
        nvml = self._nvml
        if not self._fields:
            return {"power_average_w": nvml.nvmlDeviceGetPowerUsage(self._handle) / 1e3}
        values: dict[str, float] = {}
        for field_id, answer in zip(self._fields, nvml.nvmlDeviceGetFieldValues(self._handle, self._fields), strict=True):
            if answer.nvmlReturn != nvml.NVML_SUCCESS:
                continue
            name = "power_instant_w" if field_id == nvml.NVML_FI_DEV_POWER_INSTANT else "power_average_w"
            values[name] = answer.value.uiVal / 1e3
        return values

    def start(self) -> None:
        self._open()
        self._probe_fields()
        self._poller = Poller(self._read, self.interval_s, self.trace)
        self._poller.start()
        if self.companion is not None:
            self.companion.start()

    def energy_j(self) -> float | None:
        """Cumulative energy counter (J); None where the GPU has none or the read failed."""
        nvml = self._nvml
        try:
            return nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle) / 1e3
        except nvml.NVMLError as exc:
            self.trace.note(f"energy counter unreadable ({exc}); energy from the power trace instead")
            return None

    def stop(self) -> PowerTrace:
        if self._poller is not None:
            self._poller.stop()
            self._poller = None
        if self.companion is not None:
            companion = self.companion.stop()
            self.trace.companions.append(companion)
            for note in companion.notes:
                self.trace.note(f"{self.companion.name}: {note}")
            self.companion = None
        return self.trace

    # -- facts for validity checks ----------------------------------------------------
    def snapshot(self) -> dict[str, float]:
        """Temperature, SM clock, clock-event reasons, power limit, other processes: each where readable."""
        nvml, h = self._nvml, self._handle
        reads = {
            "temperature_c": lambda: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),
            "sm_clock_mhz": lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM),
            "clock_event_reasons": lambda: nvml.nvmlDeviceGetCurrentClocksEventReasons(h),
            "power_limit_w": lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1e3,
            "other_processes": lambda: sum(p.pid != os.getpid() for p in nvml.nvmlDeviceGetComputeRunningProcesses(h)),
        }
        facts: dict[str, float] = {}
        for name, read in reads.items():
            try:
                facts[name] = float(read())
            except Exception:  # an unsupported query leaves that fact out; checks skip it
                continue
        return facts
