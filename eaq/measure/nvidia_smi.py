"""The old way, kept so users can compare: ``nvidia-smi`` polling ``power.draw``.

Lines are read as they arrive (``stdbuf -oL`` forces line buffering where available:
a block-buffered pipe delivered 17 of ~800 samples in the tool eaq replaces) and
timestamped on arrival. There is no counter, so energy is the integral of the readings,
which on Ampere and newer GPUs are 1-second averages: expect it to lag and under-count.
What nvidia-smi says on stderr, and an exit before it was stopped, land in the trace's notes:
a wrong ``--id`` or a driver mismatch otherwise reads as a window with no samples, no reason.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
import time
from typing import IO

from eaq.measure.trace import PowerTrace


class NvidiaSmiSampler:
    name = "nvidia_smi"

    def __init__(self, uuid: str | None, interval_s: float = 0.02) -> None:
        self.uuid = uuid
        self.interval_s = interval_s
        self.trace = PowerTrace(interval_s=interval_s)
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._stderr: IO[str] | None = None
        self._stopping = False

    def available(self) -> str | None:
        if shutil.which("nvidia-smi") is None:
            return "nvidia-smi is not on PATH"
        if self.uuid is None:
            return "no CUDA device UUID given; nvidia_smi measures the GPU a run uses"
        return None

    @property
    def polling(self) -> bool:
        """Whether its nvidia-smi still runs: one that exited (a GPU it cannot see) feeds its trace no more samples,
        and a wait for one would wait FIRST_SAMPLE_S (eaq.measure.samplers.wait_for_sample), three times a run."""
        return self._process is not None and self._process.poll() is None

    def _command(self) -> list[str]:
        base = [
            "nvidia-smi", f"--id={self.uuid}", "--query-gpu=power.draw",
            "--format=csv,noheader,nounits", f"-lms={max(1, round(self.interval_s * 1000))}",
        ]
        return ["stdbuf", "-oL", *base] if shutil.which("stdbuf") else base

    def _consume(self) -> None:
        process = self._process
        assert process is not None and process.stdout is not None
        for line in process.stdout:
            try:
                self.trace.add(time.perf_counter(), {"power_smi_w": float(line.strip())})
            except ValueError:
                self.trace.note(f"nvidia-smi printed a line that is not a number: {line.strip()!r}")
        # Its output ended. Not stopped by stop(): it exited on its own, said now, so a window whose energy is
        # taken before stop() (the idle baseline) already carries the reason.
        status = process.wait()
        if not self._stopping:
            self._note_exit(status)
            self._note_stderr()

    def start(self) -> None:
        from eaq.measure.nvml import nvml_uuid

        self.uuid = nvml_uuid(self.uuid) if self.uuid else None
        self._stopping = False
        # A file, not a pipe: nobody reads stderr while it polls, and a full pipe would stall it.
        self._stderr = tempfile.TemporaryFile("w+", errors="replace")  # a stray byte must not fail the run at stop()
        self._process = subprocess.Popen(
            self._command(), stdout=subprocess.PIPE, stderr=self._stderr, text=True, bufsize=1
        )
        self._reader = threading.Thread(target=self._consume, name="eaq-nvidia-smi-reader", daemon=True)
        self._reader.start()

    def energy_j(self) -> float | None:
        return None  # no counter: the window integrates the trace

    def stop(self) -> PowerTrace:
        if self._process is not None:
            exited = self._process.poll()  # an exit of its own just before this, which the reader may not have said
            self._stopping = True  # the reader, at the end of the output, then knows the exit was ours
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
            if self._reader is not None:
                self._reader.join(timeout=5)
            self._process = None
            if exited is not None:
                self._note_exit(exited)
            self._note_stderr()  # what it said before it was stopped (the reader took it if it exited on its own)
        return self.trace

    def _note_exit(self, status: int) -> None:
        """An exit of its own, said once (by the reader at the end of the output, or by stop())."""
        note = f"nvidia-smi exited with status {status} before it was stopped"
        if note not in self.trace.notes:
            self.trace.note(note)

    def _note_stderr(self) -> None:
        """nvidia-smi's complaints, once, as one note (its last 500 characters)."""
        if self._stderr is None:
            return
        self._stderr.seek(0)
        said = " ".join(self._stderr.read().split())
        self._stderr.close()
        self._stderr = None
        if said:
            self.trace.note(f"nvidia-smi said: {said[-500:]}")

    def snapshot(self) -> dict[str, float]:
        return {}

    def utilization(self, start_unix_s: float, end_unix_s: float) -> list[float] | None:
        return None  # its query is power only
