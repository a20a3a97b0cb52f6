"""CPU package and DRAM energy from Linux powercap (RAPL) counters.

The counters are in microjoules and wrap at ``max_energy_range_uj``; a background poller
reads them often enough (every ``interval_s``) that no wrap is missed, accumulating the
wrap-corrected total that the window reads at its ends.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from eaq.measure.poller import Poller
from eaq.measure.trace import PowerTrace

RAPL_ROOT = Path("/sys/class/powercap")


@dataclass
class _Zone:
    name: str
    energy_file: Path
    max_range_uj: int
    last_uj: int = 0
    total_uj: int = 0

    def update(self) -> None:
        now = int(self.energy_file.read_text())
        self.total_uj += now - self.last_uj if now >= self.last_uj else now + self.max_range_uj - self.last_uj
        self.last_uj = now


def find_zones(root: Path = RAPL_ROOT) -> list[_Zone]:
    """Package zones (top-level ``intel-rapl:N`` named ``package-N``) and their DRAM subzones.

    core/uncore are inside the package. A top-level ``psys`` zone (Intel client CPUs) measures
    the whole platform, packages included: counting it beside them would count them twice.
    """
    zones = []
    for folder in sorted(root.glob("intel-rapl:*")):
        name = (folder / "name").read_text().strip() if (folder / "name").exists() else folder.name
        is_package = folder.name.count(":") == 1 and name.startswith("package")
        if is_package or name == "dram":
            zones.append(_Zone(f"{folder.name}:{name}", folder / "energy_uj", int((folder / "max_energy_range_uj").read_text())))
    return zones


# RAPL is polled no more often than this, whatever sampler.interval_ms asks.
FASTEST_S = 0.05


class RaplSampler:
    name = "rapl"

    def __init__(self, root: Path = RAPL_ROOT, interval_s: float = FASTEST_S) -> None:
        self.root = root
        self.interval_s = max(interval_s, FASTEST_S)
        self.trace = PowerTrace(fastest_s=FASTEST_S)
        if interval_s < FASTEST_S:  # said with the run: its sampler.interval_ms param is not the interval it polled at
            self.trace.notes.append(f"RAPL polled every {FASTEST_S * 1e3:g} ms, its fastest, not every "
                                    f"{interval_s * 1e3:g} ms (sampler.interval_ms)")
        self._zones: list[_Zone] = []
        self._lock = threading.Lock()
        self._poller: Poller | None = None
        self._last: tuple[float, int] | None = None

    def available(self) -> str | None:
        try:
            self._zones = find_zones(self.root)
            for zone in self._zones:
                zone.last_uj = int(zone.energy_file.read_text())
        except (OSError, ValueError) as exc:
            return f"RAPL counters under {self.root} are not readable ({exc}); reading them usually needs root"
        if not self._zones:
            return f"no RAPL zones under {self.root}"
        return None

    def _total_uj(self) -> int:
        with self._lock:
            for zone in self._zones:
                zone.update()
            return sum(z.total_uj for z in self._zones)

    def _read(self) -> tuple[float, dict[str, float]]:
        """The mean power since the last read, stamped at the middle of that interval: it is an average over the
        interval, not a reading at its end (stamped there, the trace lagged half an interval, 25 ms at 50 ms polls)."""
        now, total = time.perf_counter(), self._total_uj()
        last, self._last = self._last, (now, total)
        if last is None or now <= last[0]:
            return now, {}
        return (last[0] + now) / 2, {"power_rapl_w": (total - last[1]) / 1e6 / (now - last[0])}

    def start(self) -> None:
        reason = self.available() if not self._zones else None
        if reason:
            raise RuntimeError(reason)
        # A session after another (task=layers runs several on one sampler): its first point is no average over the
        # time between the two, stamped in the gap.
        self._last = None
        self._poller = Poller(self._read, self.interval_s, self.trace, name="eaq-rapl-poller")
        self._poller.start()

    def energy_j(self) -> float | None:
        return self._total_uj() / 1e6

    def stop(self) -> PowerTrace:
        if self._poller is not None:
            self._poller.stop()
            self._poller = None
        return self.trace

    def snapshot(self) -> dict[str, float]:
        return {}

    def utilization(self, start_unix_s: float, end_unix_s: float) -> list[float] | None:
        return None  # the CPU package runs the OS and every process: no idle of its own to tell
