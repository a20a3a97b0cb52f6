"""A test double of the NVML functions eaq calls, for a machine with no NVIDIA GPU.

It simulates a GPU whose power follows a piecewise-constant schedule: the energy counter
and the instant field update every ``update_s`` (like the ~100 ms of an H100), the
averaged field is a trailing ``average_s`` mean, and any call can be made unsupported or
made to fail after a number of calls, to drive the sampler's fallbacks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


# NVML's field ids of the cumulative clock-event times (nvml.h), by their NVML_FI_DEV_CLOCKS_EVENT_REASON_ suffix.
CLOCK_EVENT_FIELD_IDS = {"SW_POWER_CAP": 74, "SYNC_BOOST": 76, "SW_THERM_SLOWDOWN": 269, "HW_THERM_SLOWDOWN": 270,
                         "HW_POWER_BRAKE_SLOWDOWN": 271}


@dataclass
class FakeNvml:
    # (seconds after creation, watts) steps; the last one holds forever.
    schedule: list[tuple[float, float]] = field(default_factory=lambda: [(0.0, 300.0)])
    update_s: float = 0.01
    average_s: float = 1.0
    unsupported: set[str] = field(default_factory=set)
    # Function name -> number of successful calls before it starts raising.
    fail_after: dict[str, int] = field(default_factory=dict)
    processes: list[int] = field(default_factory=list)
    clock_event_reasons: int = 0
    # NVML_FI_DEV_CLOCKS_EVENT_REASON_<suffix> -> cumulative ns that reason held the clocks (a test moves them).
    clock_event_ns: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CLOCK_EVENT_FIELD_IDS, 0))
    temperature_c: int = 45
    # GPU utilization: (seconds after creation, seconds, %) periods some kernel ran; a sample every ``sample_s``.
    busy: list[tuple[float, float, int]] = field(default_factory=list)
    sample_s: float = 0.02
    pstate: int = 0

    NVML_SUCCESS = 0
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_NOT_FOUND = 6
    NVML_GPU_UTILIZATION_SAMPLES = 1
    NVML_ERROR_UNKNOWN = 999
    NVML_FI_DEV_POWER_AVERAGE = 185
    NVML_FI_DEV_POWER_INSTANT = 186
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVMLError = NVMLError

    def __getattr__(self, name: str) -> int:
        """The clock-event fields' ids, as pynvml names them."""
        suffix = name.removeprefix("NVML_FI_DEV_CLOCKS_EVENT_REASON_")
        if suffix in CLOCK_EVENT_FIELD_IDS:
            return CLOCK_EVENT_FIELD_IDS[suffix]
        raise AttributeError(name)

    def __post_init__(self) -> None:
        self.origin = time.perf_counter()
        self.origin_unix = time.time()
        self.calls: dict[str, int] = {}
        self.uuids: list[str] = []

    # -- the simulated physics --------------------------------------------------------
    def _tick(self) -> float:
        """Seconds since creation, rounded down to the last sensor update."""
        elapsed = time.perf_counter() - self.origin
        return elapsed - elapsed % self.update_s

    def watts(self, t: float) -> float:
        return [w for start, w in self.schedule if start <= t][-1]

    def energy_j(self, t: float) -> float:
        total, bounds = 0.0, [*self.schedule, (float("inf"), 0.0)]
        for (start, w), (end, _) in zip(bounds, bounds[1:]):
            if t > start:
                total += w * (min(t, end) - start)
        return total

    def _call(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if name in self.unsupported:
            raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        if name in self.fail_after and self.calls[name] > self.fail_after[name]:
            raise NVMLError(self.NVML_ERROR_UNKNOWN)

    # -- the NVML surface eaq uses ----------------------------------------------------
    def nvmlInit(self) -> None:
        self._call("nvmlInit")

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        self._call("nvmlDeviceGetHandleByUUID")
        self.uuids.append(uuid)
        return "handle"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        self._call("nvmlDeviceGetTotalEnergyConsumption")
        return int(self.energy_j(self._tick()) * 1e3)  # mJ

    def nvmlDeviceGetFieldValues(self, handle: str, field_ids: list[int]) -> list[SimpleNamespace]:
        self._call("nvmlDeviceGetFieldValues")
        t = self._tick()
        answers = []
        for field_id in field_ids:
            suffix = next((k for k, v in CLOCK_EVENT_FIELD_IDS.items() if v == field_id), None)
            if suffix is not None:
                held = self.clock_event_ns.get(suffix)
                code = self.NVML_SUCCESS if held is not None else self.NVML_ERROR_NOT_SUPPORTED
                answers.append(SimpleNamespace(nvmlReturn=code, value=SimpleNamespace(ullVal=held), timestamp=int(t * 1e6)))
                continue
            name = {self.NVML_FI_DEV_POWER_INSTANT: "instant", self.NVML_FI_DEV_POWER_AVERAGE: "average"}[field_id]
            if name in self.unsupported:
                answers.append(SimpleNamespace(nvmlReturn=self.NVML_ERROR_NOT_SUPPORTED, value=None, timestamp=0))
                continue
            # Real readings jitter from one update to the next; +-0.5 W marks each update.
            jitter = 0.5 if round(t / self.update_s) % 2 else -0.5
            watts = self.watts(t) + jitter if name == "instant" else self._average(t)
            answers.append(SimpleNamespace(nvmlReturn=self.NVML_SUCCESS, value=SimpleNamespace(uiVal=int(watts * 1e3)), timestamp=int(t * 1e6)))
        return answers

    def _average(self, t: float) -> float:
        start = max(0.0, t - self.average_s)
        return (self.energy_j(t) - self.energy_j(start)) / (t - start) if t > start else self.watts(t)

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        self._call("nvmlDeviceGetPowerUsage")
        return int(self._average(self._tick()) * 1e3)

    def nvmlDeviceGetTemperature(self, handle: str, sensor: int) -> int:
        self._call("nvmlDeviceGetTemperature")
        return self.temperature_c

    def nvmlDeviceGetClockInfo(self, handle: str, clock: int) -> int:
        self._call("nvmlDeviceGetClockInfo")
        return 1980

    def nvmlDeviceGetPerformanceState(self, handle: str) -> int:
        self._call("nvmlDeviceGetPerformanceState")
        return self.pstate

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: str) -> int:
        self._call("nvmlDeviceGetCurrentClocksEventReasons")
        return self.clock_event_reasons

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: str) -> int:
        self._call("nvmlDeviceGetEnforcedPowerLimit")
        return 700_000

    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list[SimpleNamespace]:
        self._call("nvmlDeviceGetComputeRunningProcesses")
        return [SimpleNamespace(pid=p) for p in self.processes]

    def nvmlDeviceGetSamples(self, handle: str, kind: int, since_us: int) -> tuple[int, list[SimpleNamespace]]:
        """Utilization samples newer than ``since_us`` (wall-clock us), each the busiest period it overlaps."""
        self._call("nvmlDeviceGetSamples")
        assert kind == self.NVML_GPU_UTILIZATION_SAMPLES
        now, samples = time.perf_counter() - self.origin, []
        for k in range(1, int(now / self.sample_s) + 1):
            t = k * self.sample_s
            stamp = int((self.origin_unix + t) * 1e6)
            if stamp <= since_us:
                continue
            value = max((pct for start, length, pct in self.busy if start < t and start + length > t - self.sample_s), default=0)
            samples.append(SimpleNamespace(timeStamp=stamp, sampleValue=SimpleNamespace(uiVal=value)))
        if not samples:
            raise NVMLError(self.NVML_ERROR_NOT_FOUND)
        return 1, samples
