"""A background thread that reads a sensor at a fixed interval into a PowerTrace.

Used for RAPL, whose reads are plain file reads of a few microseconds and whose poller
must run in the measuring process to keep its wrap-corrected counter current. NVML is
polled from a separate process instead (``poll_process``): as a thread it cost a batch-1
GPU loop 1.7-3.7% (docs/results/2026-11-22-h100-overhead).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from eaq.measure.trace import PowerTrace

# One read: the time its values stand for (perf_counter seconds) and a value per channel (W); no values for none.
Read = Callable[[], tuple[float, dict[str, float]]]


class Poller:
    def __init__(self, read: Read, interval_s: float, trace: PowerTrace, name: str = "eaq-power-poller") -> None:
        self._read = read
        self._interval = interval_s
        self._trace = trace
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        trace.interval_s = interval_s

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        deadline = time.perf_counter()
        while not self._stop.is_set():
            try:
                stamp, values = self._read()
            except Exception as exc:  # a failed read is a gap in the trace, not a crashed run
                self._trace.note(f"a power read failed: {type(exc).__name__}: {exc}")
                values = {}
            if values:
                self._trace.add(stamp, values)
            deadline = max(deadline + self._interval, time.perf_counter())  # a stall stays a gap (poll_process.py)
            self._stop.wait(max(0.0, deadline - time.perf_counter()))
