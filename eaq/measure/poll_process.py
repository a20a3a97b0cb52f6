"""Poll a power sensor from a separate process, so sampling never competes for the GIL.

Measured on an H100 at batch 1, where Python dispatch sets the pace, a poller *thread*
reading NVML every 15 ms slowed the loop by 1.7% (DistilBERT) to 3.7% (GPT-2 small); see
docs/results. A process has its own interpreter: the measured loop shares nothing with it
but a pipe, which the parent drains only outside the measurement window (``drain``).

The child is ``python -m eaq.measure.poll_process``, started with ``subprocess`` rather
than ``multiprocessing`` so it does not re-import the parent's main module (and torch with
it). It receives a pickled reader factory on stdin and builds the reader itself, so a
sensor handle such as NVML's is opened in the child. It keeps its samples until asked:
one byte ``d`` on its stdin asks for them (length-prefixed pickled messages on stdout),
and the closing of its stdin ends it. Sending only on request means a long window never
fills the pipe and blocks the poller. Both sides timestamp with ``perf_counter``
(CLOCK_MONOTONIC, system-wide on Linux), so the traces line up.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # the child never builds a trace: it starts without numpy (eaq.measure.nvml_read)
    from eaq.measure.trace import PowerTrace

# Builds, inside the child, a function that reads every channel once: {"power_instant_w": 231.5, ...}.
MakeReader = Callable[[], Callable[[], dict[str, float]]]
START_TIMEOUT_S = 60.0
# How long stop() waits for the child's last samples and its exit before killing it (a GPU fallen off the bus hangs
# a read, and the run must end rather than wait for it).
STOP_TIMEOUT_S = 10.0  # the longest a stop or a drain waits for the child's answer
DRAIN = b"d"
_HEADER = struct.Struct("!I")


def _send(stream: IO[bytes], message: tuple[str, Any]) -> None:
    blob = pickle.dumps(message)
    stream.write(_HEADER.pack(len(blob)) + blob)
    stream.flush()


def _read_exact(stream: IO[bytes], size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None  # end of stream
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(stream: IO[bytes]) -> tuple[str, Any] | None:
    header = _read_exact(stream, _HEADER.size)
    blob = header and _read_exact(stream, _HEADER.unpack(header)[0])
    return pickle.loads(blob) if blob else None


def _child() -> None:
    """The polling loop; sleeps in select() on stdin: a ``d`` asks for the samples, EOF means stop."""
    out, stdin = sys.stdout.buffer, sys.stdin.buffer
    received = _receive(stdin)
    assert received is not None
    make_reader, interval_s = received[1]
    try:
        read = make_reader()
    except Exception as exc:  # the parent turns this into the sampler's reason
        _send(out, ("failed", f"{type(exc).__name__}: {exc}"))
        return
    _send(out, ("ready", list(getattr(read, "notes", []))))
    batch: list[tuple[float, dict[str, float]]] = []
    notes: list[str] = []
    deadline = time.perf_counter()
    while True:
        now = time.perf_counter()
        try:
            batch.append((now, read()))
        except Exception as exc:  # a failed read is a gap in the trace, not a dead sampler
            message = f"a power read failed: {type(exc).__name__}: {exc}"
            if message not in notes:
                notes.append(message)
        # The next read on the interval's grid; after a stall (a busy host, SIGSTOP) from now on, so the
        # stall stays a gap the coverage check sees rather than a burst of reads that hides it.
        deadline = max(deadline + interval_s, time.perf_counter())
        while select.select([stdin], [], [], max(0.0, deadline - time.perf_counter()))[0]:
            request = os.read(stdin.fileno(), 1)
            _send(out, ("samples", (batch, notes)))
            batch = []
            if request != DRAIN:  # end of stdin: the parent wants us to stop
                _send(out, ("done", None))
                return


class PollProcess:
    def __init__(self, make_reader: MakeReader, interval_s: float, trace: PowerTrace) -> None:
        self._make_reader = make_reader
        self._interval = interval_s
        self._trace = trace
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Returns once the child reads its sensor; raises RuntimeError with its reason if it cannot."""
        env = os.environ | {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # unpickling finds what we can
        self._process = subprocess.Popen(
            [sys.executable, "-m", "eaq.measure.poll_process"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        assert self._process.stdin is not None and self._process.stdout is not None
        _send(self._process.stdin, ("start", (self._make_reader, self._interval)))
        if not select.select([self._process.stdout], [], [], START_TIMEOUT_S)[0]:
            # Killed, not asked: a child stuck opening its sensor (nvmlInit) would not answer a stop either.
            process, self._process = self._process, None
            process.kill()
            process.wait()
            raise RuntimeError(f"the power-polling process did not start within {START_TIMEOUT_S:g} s")
        message = _receive(self._process.stdout)
        if message is None or message[0] == "failed":
            self.stop()
            raise RuntimeError(message[1] if message else "the power-polling process exited at start")
        for note in message[1]:
            self._trace.note(note)
        self._trace.interval_s = self._interval  # samples are expected from now on (a failed start expects none)

    def pause(self, paused: bool) -> None:
        """Freeze (SIGSTOP) or resume (SIGCONT) the child: on/off without restart costs, for the overhead check."""
        if self._process is not None:
            os.kill(self._process.pid, signal.SIGSTOP if paused else signal.SIGCONT)

    def _take(self, message: tuple[str, Any] | None) -> bool:
        """Store one message; False at the end (the child said done, or its pipe closed)."""
        if message is None:
            return False
        kind, payload = message
        if kind == "samples":
            samples, notes = payload
            for t, values in samples:
                if values:
                    self._trace.add(t, values)
            for note in notes:
                self._trace.note(note)
        return kind != "done"

    def drain(self) -> None:
        """Fetch the samples taken so far into the trace (never call inside a measurement window)."""
        if self._process is None:
            return
        assert self._process.stdin is not None and self._process.stdout is not None
        try:
            self._process.stdin.write(DRAIN)
            self._process.stdin.flush()
        except BrokenPipeError:
            return
        if not select.select([self._process.stdout], [], [], STOP_TIMEOUT_S)[0]:
            # A read hung in the child (a GPU fallen off the bus): the run must go on to its end, not wait for it.
            # No samples follow, a gap the window's coverage and sensor-update checks judge.
            process, self._process = self._process, None
            process.kill()
            process.wait()
            self._trace.note(f"the power-polling process did not answer within {STOP_TIMEOUT_S:g} s (a sensor read hung) "
                             "and was stopped: no samples after it")
            return
        self._take(_receive(self._process.stdout))

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None and process.stdout is not None
        deadline = time.monotonic() + STOP_TIMEOUT_S
        try:
            process.stdin.close()
            # The last samples, while the child answers in time; then its exit, or it is killed.
            while select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))[0] and self._take(
                    _receive(process.stdout)):
                pass
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()


if __name__ == "__main__":
    try:
        _child()
    except (KeyboardInterrupt, BrokenPipeError):
        pass  # Ctrl-C reaches the whole process group; the parent records the run as KILLED
