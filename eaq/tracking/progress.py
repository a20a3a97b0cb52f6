"""Hydra callback: where a sweep is, how many runs are done, failed or skipped, and how long is left.

A sweep of dozens of runs used to be a silent wait with one log line per finished run.
In a terminal this draws a progress bar for the sweep and, under it, one line with the
run in progress and its phase (load, quality, idle, warm-up, window, ...). When stderr
is not a terminal (CI logs, files) it prints plain lines instead: one when a run starts
each phase and one when it ends, with the counts and the time left.

The time left is the mean duration of the runs that ran (skipped ones take no time)
times the runs still to come. Phases reach this process through ``show_phase``: the job
passes it to the task, which runs here or in a forked process (eaq.tasks.isolation).
In a terminal, log lines (this process's, and a forked run's through ``output_sink``)
are written above the two progress lines rather than through them.

Under a launcher that runs jobs in other processes (joblib's workers, submitit's jobs on
this host or a cluster's nodes) no hook of a job runs here. Each job's copy of this
callback then leaves a record of how it ended in the sweep folder (``.progress/<job
number>.json``, written at once by rename), and a thread of the sweep process reads new
ones every ``POLL_S`` seconds: the counts and the time left as above, but no phase line
(several jobs run at once, and their phases do not cross processes). The sweep folder is
what every launcher shares with its jobs already (submitit keeps its own files there), so
this needs no store query and touches no job's measurement. With jobs running side by
side the time left is the sweep's wall time so far per run that ran, times those to come.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any, TextIO

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig
from tqdm.auto import tqdm
from tqdm.contrib import DummyTqdmFile

from eaq.files import atomic_write_text
from eaq.tracking.callbacks import sweep_dir, sweep_folder
from eaq.tracking.jobs import count_jobs

_active: SweepProgress | None = None
# The launcher that runs jobs in this process, one after another: the only one whose phases this display sees.
BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
# Under the sweep folder: one record per job that ended, from jobs that run in other processes.
RECORDS_DIR = ".progress"
# How often the sweep process looks for new records: a job lasts tens of seconds or more,
# and a listing of one small folder every few seconds costs nothing the jobs would notice.
POLL_S = 2.0


def show_phase(phase: str) -> None:
    """The run in progress has started ``phase``; shown by the sweep's progress, if one is running here."""
    if _active is not None:
        _active.phase(phase)


def output_sink() -> Callable[[str], None] | None:
    """Where a forked run's printed output should go: above the progress bars, when they are drawn."""
    return _active.write if _active is not None and _active.bar is not None else None


def _drawable(stream: TextIO) -> bool:
    """Whether the bars can be drawn on ``stream``: a terminal that reports a width. One that reports none (a pty with
    no size set: ``script``, ``docker exec -t`` or ``ssh -tt`` from a script) showed nothing, neither bar nor plain
    lines. A stream with no file behind it (a test's) is taken at its word."""
    if not stream.isatty():
        return False
    try:
        return os.get_terminal_size(stream.fileno()).columns > 0
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        return True


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def leave_record(run_name: str, status: str, took: float | None) -> None:
    """Tell the sweep's process that the job ``HydraConfig`` names ended (``status``, in ``took`` s): a record in the
    sweep folder, read by its progress display. Written by the job itself, or for a job that could not write it (its
    scheduler ended it) by the launcher collecting it."""
    hydra = HydraConfig.get()
    record = {"run_name": run_name, "status": status, "took_s": took}
    atomic_write_text(sweep_dir(hydra) / RECORDS_DIR / f"{hydra.job.num}.json", json.dumps(record))


class SweepProgress(Callback):
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total: int | None = None
        self.counts = {"finished": 0, "failed": 0, "skipped": 0}
        self.ran_s: dict[str, list[float]] = {}  # the durations of the jobs that ran, by how they ended
        self.run_name = ""
        self.run_started = self.phase_started = 0.0
        self.phase_name = ""  # the phase the run in progress is in
        self.bar: tqdm | None = None
        self.line: tqdm | None = None
        self._stdout: TextIO | None = None
        # Set when jobs run in other processes: where their records arrive, and what reads them.
        self.records: Path | None = None
        self.seen: set[str] = set()
        self.sweep_started = 0.0
        self._poller: threading.Thread | None = None
        self._stop = threading.Event()

    def __getstate__(self) -> dict[str, Any]:
        """A parallel launcher pickles the callbacks to its workers, where this display is not
        drawn (``_active`` is this process's): the copy leaves its stream, bars and poller behind,
        and takes fresh tallies, not the live ones the poller thread may be changing mid-pickle."""
        return {**self.__dict__, "stream": None, "bar": None, "line": None, "_stdout": None, "_poller": None, "_stop": None,
                "seen": set(), "ran_s": {}, "counts": dict.fromkeys(self.counts, 0)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, stream=state["stream"] or sys.stderr)

    # Hydra's hooks
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        global _active
        self.total = count_jobs(config)
        self.sweep_started = time.perf_counter()
        here = config.hydra.launcher.get("_target_") == BASIC_LAUNCHER
        if here:
            _active = self
        else:  # jobs run in other processes (joblib, submitit): their records in the sweep folder say how they ended
            self.records = sweep_folder(config) / RECORDS_DIR
            shutil.rmtree(self.records, ignore_errors=True)  # left by an earlier sweep in this folder
        if _drawable(self.stream):
            # Without tqdm's own remaining time and rate: they count failed and skipped runs, which take no time, so
            # the bar showed two time-left figures that disagreed; the postfix's (_counts) is the one.
            self.bar = tqdm(total=self.total, desc="sweep", unit="run", file=self.stream, position=0, dynamic_ncols=True,
                            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]")
            if here:
                self.line = tqdm(bar_format="{desc}", file=self.stream, position=1, dynamic_ncols=True)
            # Hydra's log handlers write to sys.stdout as it is when it configures them (for
            # every job): through this proxy their lines land above the bars, on the bars' stream. Only where stdout
            # is a terminal too: redirected (``> sweep.log``, ``| tee``), the run lines belong in the file.
            if sys.stdout is not None and sys.stdout.isatty():
                self._stdout = sys.stdout
                sys.stdout = DummyTqdmFile(self.stream)  # type: ignore[assignment]
        if self.records is not None:  # last: a record it reads finds the bar (or plain lines) ready
            self._poller = threading.Thread(target=self._poll_until_stopped, name="eaq-sweep-progress", daemon=True)
            self._poller.start()

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.run_name = str(config.get("run_name", ""))
        self.run_started = time.perf_counter()
        self.phase_name = ""

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        ok = job_return.status == JobStatus.COMPLETED and job_return.return_value in self.counts
        status = job_return.return_value if ok else "failed"
        took = time.perf_counter() - self.run_started
        if _active is self:
            self._ended(self.run_name, status, took)
        elif config.hydra.mode == RunMode.MULTIRUN:  # a job in another process: tell the sweep's through its folder
            leave_record(self.run_name, status, took)

    def _ended(self, run_name: str, status: str, took: float | None) -> None:
        """A job of the sweep ended (in ``took`` seconds, None where not known): count it, and show it on the bar or in
        one plain line."""
        self.counts[status] += 1
        if status != "skipped" and took is not None:
            self.ran_s.setdefault(status, []).append(took)
        if self.bar is not None:
            self.bar.set_postfix_str(self._counts(), refresh=False)
            self.bar.update()
            if self.line is not None:  # drawn only where phases arrive (the basic launcher)
                self.line.set_description_str("")
        else:
            self._print(self._done(), f"{run_name} {status}{'' if took is None else ' in ' + _duration(took)}; {self._counts()}")

    def _poll_until_stopped(self) -> None:
        while not self._stop.wait(POLL_S):
            self._poll()

    def _poll(self) -> None:
        """Count the records of jobs that ended since the last look, in the order of their job numbers."""
        assert self.records is not None
        new = [p for p in self.records.glob("*.json") if p.name not in self.seen]
        for path in sorted(new, key=lambda p: (len(p.stem), p.stem)):  # job numbers in numeric order
            self.seen.add(path.name)
            try:
                record = json.loads(path.read_text())
                self._ended(record["run_name"], record["status"], record["took_s"])
            except (OSError, ValueError, KeyError) as error:  # one bad record must not stop the display for the rest
                self._print(self._done(), f"progress record {path.name} unreadable ({error}); the sweep's summary counts from MLflow")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        global _active
        if self._poller is not None:
            # Every job has returned to the launcher: count the records that came since the last look
            # (on a network file system a record can still be on its way; the sweep's summary has it).
            self._stop.set()
            self._poller.join()
            self._poll()
        for bar in (self.line, self.bar):
            if bar is not None:
                bar.close()
        if self._stdout is not None:
            sys.stdout = self._stdout
        if _active is self:
            _active = None

    # What the run in progress reports
    def write(self, text: str) -> None:
        for line in text.rstrip("\n").splitlines():
            tqdm.write(line, file=self.stream)

    def phase(self, name: str) -> None:
        # The same phase entered again straight after itself (the sampler started, then its first sample awaited)
        # is one phase to a reader: a plain line each time printed it twice.
        again = name == self.phase_name
        self.phase_started, self.phase_name = time.perf_counter(), name
        if self.line is not None:
            self.line.set_description_str(f"  {self.run_name}: {name}")
        elif not again:
            self._print(self._done() + 1, f"{self.run_name}: {name}")

    def _done(self) -> int:
        return sum(self.counts.values())

    def _counts(self) -> str:
        text = ", ".join(f"{n} {k}" for k, n in self.counts.items())
        # The runs that finished tell how long one takes: a precision the device refuses fails in under a second,
        # and counted in, two such read "about 0s left" before minutes of runs. Before any finished, every run.
        ran = self.ran_s.get("finished") or [took for durations in self.ran_s.values() for took in durations]
        if self.total is not None and ran and self._done() < self.total:
            # One at a time, a run takes its own duration; side by side, the sweep's wall time per run.
            spent = time.perf_counter() - self.sweep_started if self.records is not None else sum(ran)
            left = (self.total - self._done()) * spent / len(ran)
            text += f"; about {_duration(left)} left"
        return text

    def _print(self, index: int, text: str) -> None:
        print(f"[sweep {index}/{self.total if self.total is not None else '?'}] {text}", file=self.stream, flush=True)
