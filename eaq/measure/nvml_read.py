"""What NVML's polling process runs: open the GPU by UUID, read its power fields.

A module of its own, importing only the standard library, because the polling process
(``poll_process``, a fresh interpreter per run) unpickles ``NvmlReader`` and so imports
its module: from ``eaq.measure.nvml`` that pulled in numpy with the trace, ~60 of the
child's ~120 ms start on this project's CPU machine, paid by every run before its idle
baseline.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any


def import_pynvml() -> ModuleType:
    import pynvml

    return pynvml


def nvml_uuid(torch_uuid: str) -> str:
    """torch prints a device UUID bare; NVML wants it prefixed with ``GPU-``."""
    text = str(torch_uuid)
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


class NvmlReader:
    """Picklable recipe for the polling process: opens NVML there and reads the power fields."""

    def __init__(self, uuid: str, nvml: ModuleType | None = None) -> None:
        self.uuid = uuid
        self.nvml = nvml  # a test double, or None for the real pynvml

    def __call__(self) -> _FieldRead:
        nvml = self.nvml or import_pynvml()
        nvml.nvmlInit()
        return _FieldRead(nvml, nvml.nvmlDeviceGetHandleByUUID(nvml_uuid(self.uuid)))


class _FieldRead:
    """Reads the power fields this GPU answers; ``notes`` says which it lacks."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self.nvml, self.handle = nvml, handle
        self.notes: list[str] = []
        self.fields: list[int] = []
        wanted = {nvml.NVML_FI_DEV_POWER_INSTANT: "instant", nvml.NVML_FI_DEV_POWER_AVERAGE: "average"}
        try:
            answers = nvml.nvmlDeviceGetFieldValues(handle, list(wanted))
        except nvml.NVMLError as exc:
            self.notes.append(f"power fields unreadable ({exc}); trace from nvmlDeviceGetPowerUsage (1 s average)")
            return
        for field_id, answer in zip(wanted, answers, strict=True):
            if answer.nvmlReturn == nvml.NVML_SUCCESS:
                self.fields.append(field_id)
            else:
                self.notes.append(f"this GPU has no {wanted[field_id]} power field (NVML return {answer.nvmlReturn})")

    def __call__(self) -> dict[str, float]:
        nvml = self.nvml
        if not self.fields:
            return {"power_average_w": nvml.nvmlDeviceGetPowerUsage(self.handle) / 1e3}
        values: dict[str, float] = {}
        for field_id, answer in zip(self.fields, nvml.nvmlDeviceGetFieldValues(self.handle, self.fields), strict=True):
            if answer.nvmlReturn == nvml.NVML_SUCCESS:
                name = "power_instant_w" if field_id == nvml.NVML_FI_DEV_POWER_INSTANT else "power_average_w"
                values[name] = answer.value.uiVal / 1e3
        return values
