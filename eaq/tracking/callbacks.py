"""Hydra callback: one MLflow parent run per multirun, closed with a summary of its children.

The parent's id is written into the sweep folder, where every job (in this process or,
with another launcher, in its own) finds it. If the sweep dies before Hydra's end hook,
an exit hook still closes the parent, so no run is left RUNNING.

Hydra 1.3 turns an exception raised in a callback into a warning and carries on
(hydra/_internal/callbacks.py catches ``Exception``), so a sweep whose parent run could
not be created would run its jobs without a parent, print no summary and exit 0; every
hook here instead ends the sweep with one sentence and a non-zero exit (``SystemExit``
passes through Hydra). At each job's start the hook also redacts what Hydra wrote from
the command line (``multirun.yaml``, the job's ``.hydra/``; eaq.tracking.redact): a
credential in ``tracking.uri`` would otherwise stay there in clear.
"""

from __future__ import annotations

import atexit
import functools
import logging
import shutil
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from eaq.errors import ConfigError, EaqError
from eaq.files import atomic_write_text, from_launch_folder, try_exclusive
from eaq.slots import check_slots
from eaq.tracking.jobs import count_jobs
from eaq.tracking.redact import redact, redact_file, redact_folder, redacted_traceback, remember

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from eaq.tracking.run_logger import TrackedRun

log = logging.getLogger(__name__)
PARENT_ID_FILE = "mlflow_parent_run_id.txt"
# One file per job that resume skipped, each holding the run it matched: jobs on several nodes append to no shared
# file (O_APPEND over NFS can lose or merge lines, and a lost one read as a job that left no run).
SKIPPED_FOLDER = "skipped_runs"
# Held by a running sweep for its whole life: a second sweep pointed at the same folder stops.
SWEEP_LOCK_FILE = ".sweep.lock"

Hook = Callable[..., None]


def fail_loudly(what: str) -> Callable[[Hook], Hook]:
    """Make a Hydra hook's failure end the sweep: one sentence on stderr, exit 2 (EaqError) or 1.

    ``what`` completes "the sweep (or run) stopped: ... failed"; ``debug=true`` adds the traceback.
    """

    def decorate(hook: Hook) -> Hook:
        @functools.wraps(hook)
        def wrapper(self: Callback, config: DictConfig, **kwargs: Any) -> None:
            try:
                hook(self, config, **kwargs)
            except Exception as exc:
                if config.get("debug"):  # the traceback quotes what it was given: a store's URI, say
                    print(redacted_traceback(exc), end="", file=sys.stderr)
                launch = "sweep" if config.hydra.mode == RunMode.MULTIRUN else "run"
                print(f"error: the {launch} stopped: {what} failed ({redact(str(exc))})", file=sys.stderr)
                raise SystemExit(2 if isinstance(exc, EaqError) else 1) from exc

        return wrapper

    return decorate


def record_skip(client: MlflowClient, folder: str | Path, run_id: str) -> None:
    """A job that resume skipped leaves the id of the run it matched: in the sweep's folder for its summary, and
    as a tag on its parent run (one per run: parallel jobs never overwrite each other's) for its report, which
    then covers every configuration of the sweep, measured now or before."""
    from eaq.tracking.run_logger import REUSED_TAG

    atomic_write_text(Path(folder) / SKIPPED_FOLDER / f"{uuid.uuid4().hex}.txt", run_id + "\n")
    parent = parent_run_id(folder)
    if parent is not None:
        client.set_tag(parent, REUSED_TAG + run_id, redact(client.get_run(run_id).info.run_name))  # as every record


def skipped_runs(folder: str | Path) -> list[str]:
    """The run each skipped job of the sweep in ``folder`` was skipped for, as ``record_skip`` left them (two jobs of
    one configuration, two entries)."""
    return [run for path in sorted((Path(folder) / SKIPPED_FOLDER).glob("*.txt")) for run in path.read_text().split()]


def parent_run_id(folder: str | Path) -> str | None:
    """The sweep's parent run, from the id its start left in the sweep's folder (``folder``)."""
    path = Path(folder) / PARENT_ID_FILE
    return path.read_text().strip() if path.exists() else None


def _hold_sweep_folder(folder: Path) -> IO[str]:
    """Lock the sweep folder for this sweep's life (the kernel frees it when the process ends).

    Folders are named by time and process id (conf/config.yaml), so this fails only when
    two live sweeps are given the same ``hydra.sweep.dir``: they would share the parent-id
    and skipped-runs files and each report the other's runs.
    """
    handle = try_exclusive(folder / SWEEP_LOCK_FILE)
    if handle is None:
        raise EaqError(
            f"another sweep is running in the folder hydra.sweep.dir={folder}; give this one its own "
            "(leave hydra.sweep.dir at its default, which is unique per launch, or pass a new folder)."
        )
    return handle


class LauncherCheck(Callback):
    """Resolve the launcher's settings before anything else of the sweep starts.

    Hydra resolves them only when it builds the launcher, after the parent run is open, and
    a setting that cannot be resolved (``hydra/launcher=gpus`` on a host without GPUs) then
    ends the sweep in a traceback of OmegaConf's. Registered first, this ends it in the
    sentence that says what to do.
    """

    @fail_loudly("resolving the launcher's settings (hydra.launcher)")
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # The launcher's folders interpolate ${hydra:runtime.cwd} (paths.root's default), which Hydra sets per job.
        HydraConfig.instance().set_config(config)
        if config.hydra.runtime.choices.get("hydra/launcher") == "gpus" and config.gpu_slots.enabled is False:
            raise ConfigError(
                "hydra/launcher=gpus runs a job per slot at once, and with gpu_slots.enabled=false nothing gives each "
                "its own GPU: they would all measure one device at once, with no neighbours recorded. Leave "
                "gpu_slots.enabled at null (on), or pin devices yourself under the basic launcher (one job at a time)."
            )
        target = str(OmegaConf.select(config, "hydra.launcher._target_", default=""))
        choice = config.hydra.runtime.choices.get("hydra/launcher")
        if config.gpu_slots.enabled is True or (choice == "gpus" and config.gpu_slots.enabled is None):
            # What each job refused as it took its slot (isolate=false, device=cuda:1, another CUDA order, a slot
            # count this host cannot give): a sweep of FAILED runs, or its end in the middle. The host's GPUs and
            # order are not the jobs' under SLURM, whose nodes this host does not see.
            check_slots(str(config.device), bool(config.isolate), config.gpu_slots.count,
                        here=not target.endswith(".SlurmLauncher"))
        if target.endswith(".JoblibLauncher") and choice != "gpus" and config.gpu_slots.enabled is not True \
                and OmegaConf.select(config, "hydra.launcher.n_jobs", default=-1) != 1:
            # Hydra's own joblib launcher: its jobs ran side by side on one device, measured each other, and counted
            # (no slot, no neighbour recorded) in the report and in resume.
            raise ConfigError(
                f"hydra/launcher={choice} runs jobs side by side and nothing keeps them off one device: they would "
                "measure each other and count as valid; use hydra/launcher=gpus (a job per GPU, each run told of its "
                "neighbours), hydra.launcher.n_jobs=1, or the basic launcher (one job at a time)."
            )
        if target.endswith(".SlurmLauncher") and not (shutil.which("sbatch") and shutil.which("srun")):
            # submitit's own check came after the parent run opened: a traceback and a FAILED sweep of nothing.
            raise ConfigError(
                f"hydra/launcher={config.hydra.runtime.choices.get('hydra/launcher')} submits each job to SLURM, and "
                "this machine has no SLURM (sbatch and srun are not on PATH): launch the sweep from the cluster's login "
                "node, or rehearse it here with hydra/launcher=slurm_local (the same jobs, as local processes)."
            )
        try:
            OmegaConf.to_container(config.hydra.launcher, resolve=True)
        except InterpolationResolutionError as exc:
            cause: BaseException | None = exc
            while cause is not None and not isinstance(cause, EaqError):  # a resolver's own error, wrapped by OmegaConf
                cause = cause.__cause__ or cause.__context__
            raise cause or exc from None


def sweep_dir(hydra: Any) -> Path:
    """The sweep's folder (``hydra.sweep.dir``), a relative one read from the launch folder (``hydra.runtime.cwd``) as
    Hydra made it there, in the sweep's process and in a job's alike: under ``hydra.job.chdir=true`` a job runs in its
    own folder, from where a relative sweep folder (a relative ``paths.output_dir``) names another place. ``hydra``: a
    config's ``hydra`` node or ``HydraConfig.get()``."""
    return Path(from_launch_folder(str(hydra.sweep.dir), hydra.runtime.cwd))


def sweep_folder(config: DictConfig) -> Path:
    """The sweep's folder, from a multirun's start hook: Hydra sets its runtime config only per
    job, and the folder's path interpolates ``${hydra:...}``, so set it from the sweep's config first."""
    HydraConfig.instance().set_config(config)
    return sweep_dir(HydraConfig.get())


def _redact_if_written(path: Path) -> None:
    if path.is_file():
        redact_file(path)


class MlflowSweepCallback(Callback):
    def __init__(self) -> None:
        self.parent: TrackedRun | None = None
        self._gone_said = False  # the store stopped answering, and the sweep has said so
        # Whether the sweep's jobs end with its process (the basic launcher's, joblib's workers under gpus), so that a
        # run of it still RUNNING at its exit is measuring no more; submitit's jobs may run on (SLURM's, elsewhere).
        self._jobs_end_with_sweep = False
        self._sweep_lock: IO[str] | None = None

    def __getstate__(self) -> dict[str, Any]:
        """A parallel launcher (joblib, submitit) pickles the callbacks to its workers.

        The parent run and the sweep folder's lock belong to the sweep's own process: a
        worker only redacts its job's files (``on_job_start``) and finds the parent's id
        in the sweep folder, so its copy carries neither (a lock file cannot be pickled).
        """
        return {**self.__dict__, "parent": None, "_sweep_lock": None}

    @fail_loudly("creating the sweep's MLflow parent run")
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # MLflow is imported here, not with the module: Hydra instantiates every callback before
        # the first start hook runs, and calibrate_ahead's (registered before this one) starts
        # its process sooner without MLflow's import ahead of it (eaq/tasks/ahead.py).
        from eaq.tracking.run_logger import TrackedRun
        from eaq.tracking.store import open_store

        folder = sweep_folder(config)
        self._jobs_end_with_sweep = config.hydra.runtime.choices.get("hydra/launcher") in ("basic", "gpus")
        self._sweep_lock = _hold_sweep_folder(folder)
        shutil.rmtree(folder / SKIPPED_FOLDER, ignore_errors=True)  # left by an earlier sweep in this folder
        from eaq.tracking.flatten import resolved_config

        tracking = resolved_config(config.tracking)  # an interpolation that cannot be resolved: one sentence, exit 2
        client, experiment_id = open_store(tracking["uri"], tracking["experiment"], tracking["artifact_location"])
        self.parent = TrackedRun(
            client,
            experiment_id,
            run_name=f"sweep-{folder.name}",
            tags={"eaq.sweep_dir": str(folder.resolve()), "eaq.kind": "sweep"},
        )
        atexit.register(self._close_unfinished)
        # Hydra writes multirun.yaml after this hook; a job's start redacts it (on_job_start), and this, at the
        # process's exit, where the sweep stopped before any job started (an override no job config accepts).
        atexit.register(_redact_if_written, folder / "multirun.yaml")
        atomic_write_text(folder / PARENT_ID_FILE, self.parent.run_id)
        log.info("MLflow parent run %s (%s)", self.parent.run_id, redact(tracking["uri"]))

    @fail_loudly("redacting the job's records")
    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Hydra has just written the job's files (and, first, the sweep's) from the command line: redact them."""
        hydra = config.hydra
        remember(OmegaConf.to_container(config, resolve=False))  # this job's process may not have met its config yet
        if hydra.mode == RunMode.MULTIRUN:
            redact_file(sweep_dir(hydra) / "multirun.yaml")
        if hydra.output_subdir is not None:
            redact_folder(Path(hydra.runtime.output_dir) / hydra.output_subdir)

    def _close_unfinished(self) -> None:
        """At the sweep process's exit: its parent run, if the sweep stopped before its end, ends FAILED, and, where the
        jobs end with the sweep, every run of it still RUNNING ends KILLED. A job records its own run's end when
        stopped, but under hydra/launcher=gpus joblib kills its workers (and their runs' processes) at an interrupt
        before they can: their runs stayed RUNNING. submitit's launchers record the jobs they cancel themselves
        (hydra_plugins/eaq_launchers/submitit_collect.py), and a job they did not cancel may still be measuring."""
        if self.parent is None or self.parent.ended or self._store_gone():
            return
        from eaq.tracking.run_logger import PARENT_TAG, end_run, every_experiment, every_run

        client = self.parent.client
        try:
            if self._jobs_end_with_sweep:
                running = f"tags.`{PARENT_TAG}` = '{self.parent.run_id}' and attributes.status = 'RUNNING'"
                for run in every_run(client, every_experiment(client), running):
                    end_run(client, run.info.run_id, "KILLED", RuntimeError("the sweep stopped while this run was under way"))
        finally:
            self.parent.end("FAILED", RuntimeError("the sweep stopped before its end"))

    def _store_gone(self) -> bool:
        """Whether the store stopped answering since the sweep opened its parent run, said once, in a sentence: its
        closing requests would each wait out MLflow's retries (eaq.tracking.store.unanswered)."""
        from eaq.tracking.store import unanswered

        assert self.parent is not None
        if self._gone_said:
            return True
        why = unanswered(self.parent.client.tracking_uri)
        if why is not None:
            print(f"error: the sweep's parent run {self.parent.run_id} and its runs under way stay as they are in the "
                  f"store (RUNNING): {why}", file=sys.stderr)
            self._gone_said = True
        return self._gone_said

    @fail_loudly("closing the sweep's MLflow parent run")
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from eaq.tracking.run_logger import PARENT_TAG, SUPERSEDED_TAG, every_experiment, every_run

        if self.parent is None:
            return
        if self._store_gone():
            sys.exit(1)
        client = self.parent.client
        children = every_run(client, every_experiment(client), f"tags.`{PARENT_TAG}` = '{self.parent.run_id}'")
        children = [r for r in children if SUPERSEDED_TAG not in r.data.tags]  # a job's start that a later one replaced
        # In the order the runs started (the store lists the newest first): t1's error before t2's, as the jobs ran.
        failed = sorted((r for r in children if r.info.status != "FINISHED"), key=lambda r: r.info.start_time)
        skipped = len(skipped_runs(sweep_dir(HydraConfig.get())))
        # A job whose run the store never created (it refused) left nothing to count above: the jobs launched tell.
        # Counted before the parent ends: a sweep of such jobs alone was recorded FINISHED with no run failed.
        jobs = count_jobs(config)
        unrecorded = max(0, jobs - len(children) - skipped) if jobs is not None else 0
        self.parent.log_metrics({"sweep_runs": len(children), "sweep_runs_failed": len(failed),
                                 "sweep_jobs_unrecorded": unrecorded})
        self.parent.end("FAILED" if failed or unrecorded else "FINISHED")
        measured = f"{len(children) - len(failed)} of {len(children)} runs finished" if children else "nothing measured"
        print(
            f"sweep: {measured} (parent run {self.parent.run_id})"
            + (f"; {skipped} skipped, already FINISHED with the same config (resume=false to rerun them)" if skipped else "")
            + (f"; {unrecorded} job(s) left no run in the store (each said why above)" if unrecorded else "")
        )
        for r in failed:
            print(f"  {r.info.status}: {r.info.run_name}: {r.data.tags.get('eaq.error', 'no error recorded')}", file=sys.stderr)
        if failed or unrecorded:
            sys.exit(1)
