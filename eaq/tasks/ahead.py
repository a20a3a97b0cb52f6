"""Roofline calibrations a sweep will need, measured while its fork server imports.

From an empty cache the first run of each matmul format paid its calibration after its
window: 3.0-3.1 s per format, 9.2 s of a 102.8 s six-run sweep on an H100, while that
sweep's first run had waited 11.7 s for the fork server's imports with the device idle
(docs/results/2026-11-24-h100-sweep-time). At the sweep's start this hook composes every
job's config as the launcher will, keeps those whose run will calibrate a peak (the
benchmark's forward workload with ``trials.roofline`` on, in a fork server), and measures
each format they need into the cache in one fork of the sweep's server
(``eaq.tasks.calibrate_ahead``, started from a thread of the sweep's process), through the
same ``eaq.tasks.roofline`` code and per-format lock a run uses. Formats already cached are
left out, and with none left nothing starts.

The measurement is the same; only its moment moves. So that nothing overlaps it, the
sweep's process holds the device gate (``gate_path``) from before the fork exists until it
ends, and every run passes the gate before it touches the device (``wait_for_device``,
timed as ``phase_ahead_s``): no run's idle, warm-up or window shares the device with a
calibration. Runs then find the peak cached; their tag
``eaq.roofline.calibration.measured_unix_s`` says when it was measured.

No idle baseline is taken here: a run measures its own, with its CUDA context open
(``eaq.tasks.idle`` says why, with the H100's figures).

The fork starts from Hydra's first start hook, so the callbacks' modules import nothing
heavy (MLflow, the report's pandas and scipy are imported in their hooks): Hydra instantiates
every callback before that hook, and those imports had delayed it by 1.6 of its 2.1 s on the
CPU machine.

On by default (``calibrate_ahead=null``) when the jobs run on a GPU one at a time
(``hydra/launcher=basic``, ``isolate=true``): without a fork server to wait for the
calibrations would only move, and other launchers run jobs elsewhere or on other devices.
"""

from __future__ import annotations

import functools
import logging
import os
import pickle
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, open_dict

from eaq.config import EaqConfig, TrackingConfig, validate
from eaq.files import exclusive, try_exclusive
from eaq.measure.nvml import device_summaries
from eaq.tasks import peaks
from eaq.tasks.isolation import run_isolated
from eaq.tracking.callbacks import fail_loudly, sweep_folder
from eaq.tracking.jobs import job_overrides

log = logging.getLogger(__name__)
LOG_FILE = "calibrate_ahead.log"


def gate_path(cache_dir: str | Path) -> Path:
    """Held while device work started ahead of the runs (this module's process) is under way."""
    return Path(cache_dir) / "roofline" / "device.lock"


def wait_for_device(cache_dir: str | Path) -> float:
    """Seconds spent waiting for the work started ahead to free the device (near 0 when there is none).

    A wait is said once: the gate is per cache folder, so a sweep sharing another's ``paths.cache_dir`` waits behind
    that sweep's calibrations too, which its log (``calibrate_ahead.log`` in that sweep's folder) shows.
    """
    start = time.perf_counter()
    if (free := try_exclusive(gate_path(cache_dir))) is not None:
        free.close()
        return time.perf_counter() - start
    log.info("waiting for the roofline calibrations a sweep runs ahead of its runs (gate %s; their progress is in "
             "calibrate_ahead.log in that sweep's folder)", gate_path(cache_dir))
    with exclusive(gate_path(cache_dir)):
        pass
    return time.perf_counter() - start


@functools.cache
def _on_gpu(spec: str) -> bool:
    """Asked once per device spec: NVML starts for ``auto``."""
    return spec.startswith("cuda") or (spec == "auto" and bool(device_summaries()))


def _wanted(cfg: EaqConfig) -> bool:
    """Whether working ahead is on for this job (``calibrate_ahead``; null: on a GPU)."""
    return cfg.calibrate_ahead if cfg.calibrate_ahead is not None else _on_gpu(cfg.device)


def _calibrates(cfg: EaqConfig) -> bool:
    """Whether this job's run would calibrate a peak in a fork server, and calibrating ahead is on for it."""
    return _wanted(cfg) and cfg.isolate and cfg.task == "benchmark" and cfg.workload.name == "forward" and cfg.trials.roofline


def _job_configs(config: DictConfig) -> Iterator[EaqConfig]:
    """Every job's validated config; a job that does not compose or validate is left to fail in its own run."""
    loader = GlobalHydra.instance().config_loader()
    for overrides in job_overrides(config):
        try:
            job = loader.load_sweep_config(config, overrides)
            HydraConfig.instance().set_config(job)  # its ${hydra:...} values, as the launcher sets them per job
            with open_dict(job):
                del job["hydra"]
            yield validate(job)
        except Exception as exc:  # noqa: BLE001  (the run reports it, in one sentence)
            log.debug("calibrate ahead: job %s left to its run: %s", overrides, exc)


@dataclass
class Plan:
    """What the process ahead of the runs measures: each distinct calibration."""

    calibrations: list[EaqConfig] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.calibrations)

    def caches(self) -> set[str]:
        return {cfg.paths.cache_dir for cfg in self.calibrations}

    def only(self, caches: set[str]) -> Plan:
        return Plan([c for c in self.calibrations if c.paths.cache_dir in caches])

    def to_pickle(self) -> bytes:
        """A plain list: the measuring fork (eaq.tasks.calibrate_ahead) must not import this module (Hydra's sweeper).

        Without the tracking settings: a calibration logs nothing, and a store's URI may hold a password, which nothing
        the sweep hands on may (its multirun.yaml and .hydra/ are redacted for it).
        """
        return pickle.dumps([replace(cfg, tracking=TrackingConfig()) for cfg in self.calibrations])


def needed(config: DictConfig) -> Plan:
    """One config per distinct calibration the sweep's runs would make (device, sampler, cache, window, precision).

    A calibration already cached is left out (``eaq.tasks.peaks``, read without torch): on
    the H100 a repeated sweep, every peak cached, still held its runs 4.7 s at the gate
    while a process imported torch to find them there.
    """
    if config.hydra.runtime.choices.get("hydra/launcher") != "basic":
        return Plan()
    found: dict[tuple[Any, ...], EaqConfig] = {}
    try:
        for cfg in _job_configs(config):
            if _calibrates(cfg) and not peaks.cached(cfg):
                key = (cfg.device, cfg.sampler.name, cfg.sampler.interval_ms, cfg.paths.cache_dir,
                       cfg.trials.roofline_window_s, cfg.precision.name, cfg.precision.plan)
                found.setdefault(key, cfg)
    finally:
        HydraConfig.instance().set_config(config)
    return Plan(list(found.values()))


class Ahead:
    """``task(*args)`` in a fork of this process's server, run from a thread of this process, which holds ``held``
    (the plan's device gates) until the fork has ended: no run of this process or another passes them in between.
    What the fork prints goes to ``log_file``."""

    def __init__(self, task: str, args: tuple[object, ...], log_file: IO[str], held: ExitStack) -> None:
        self.pid: int | None = None  # the fork's, once it runs
        self._stopped = False
        self._thread = threading.Thread(target=self._run, args=(task, args, log_file, held), daemon=True,
                                        name="eaq-calibrate-ahead")
        self._thread.start()

    def _run(self, task: str, args: tuple[object, ...], log_file: IO[str], held: ExitStack) -> None:
        def write(text: str) -> None:
            log_file.write(text)
            log_file.flush()

        with held:  # the gates open as the fork has ended, however it ended
            try:
                run_isolated(task, *args, on_output=write, on_start=self._started)
            except BaseException as exc:  # noqa: BLE001  (stopped, or it failed: each run measures what it lacks)
                write("stopped: the sweep ended before the calibrations did\n" if self._stopped
                      else f"ended without its plan measured: {type(exc).__name__}: {exc}\n")

    def _started(self, pid: int) -> None:
        self.pid = pid
        if self._stopped:  # stopped while the fork was starting
            self._kill()

    def _kill(self) -> None:
        if self.pid is not None:
            with suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> bool:
        """Whether the fork has ended (and the gates are open) within ``timeout`` seconds."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def stop(self) -> None:
        """End the fork at once, if it is still measuring (or starting), and wait until it has."""
        self._stopped = True
        if self._thread.is_alive():
            self._kill()
        self.wait(10)


def start(plan: Plan, folder: Path) -> Ahead | None:
    """Start measuring ``plan``, holding each cache's device gate for it from now until it has ended.

    The gates are locked here, before the fork exists, so no run can pass a gate between this call and the
    calibrations. A gate held already (another sweep on the same cache) leaves that cache's calibrations to the runs:
    None when that is all of them.
    """
    folder.mkdir(parents=True, exist_ok=True)
    with ExitStack() as held:  # closed here unless handed on
        caches = set()
        for cache_dir in sorted(plan.caches()):
            if (gate := try_exclusive(gate_path(cache_dir))) is not None:
                held.enter_context(gate)
                caches.add(cache_dir)
        if not (mine := plan.only(caches)):
            return None
        log_file = held.enter_context((folder / LOG_FILE).open("a"))
        return Ahead("eaq.tasks.calibrate_ahead:calibrate", (mine.to_pickle(),), log_file, held.pop_all())


class CalibrateAhead(Callback):
    """Hydra hook: at a multirun's start, calibrate the peaks its runs will need while the fork server imports."""

    def __init__(self) -> None:
        self.ahead: Ahead | None = None

    @fail_loudly("planning the roofline calibrations ahead of the runs (calibrate_ahead=false skips them)")
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        plan = needed(config)
        if plan:
            self.ahead = start(plan, sweep_folder(config))
            # Hydra runs the end hooks in reverse order and stops at an exit: the sweep's MLflow hook exits 1 after
            # failed runs, before this one's, and a calibration kept loading the GPU after the sweep had ended. Among
            # threading's exit hooks, which run before atexit's and in reverse: concurrent.futures' own (registered
            # at its import) waits for the fork's pool, and so kept a stopped sweep (Ctrl-C) alive until the
            # calibrations ended, the device loaded all the while.
            threading._register_atexit(self._stop)  # type: ignore[attr-defined]

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """A sweep whose runs were all skipped (resume) never waited for it: stop it rather than leave it behind."""
        self._stop()

    def _stop(self) -> None:
        if self.ahead is not None:
            self.ahead.stop()
