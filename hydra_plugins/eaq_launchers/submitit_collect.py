"""submitit's launchers (hydra-submitit-launcher) that wait for every job, even where one was ended from outside.

Upstream's ``launch`` collects the jobs' results one after another, and the first job SLURM ended itself (its time
limit, out of memory, a cancel) raises submitit's ``UncompletedJobError`` there: the sweep stopped without waiting for
the jobs still running, without its summary and report, and the ended job's run stayed RUNNING. These launchers
submit the same jobs the same way and collect each: a job ended from outside becomes a FAILED run saying how it ended
and where its output is (eaq.tasks.job.record_ended_job), counted as failed by the sweep's progress, summary and exit
code, while the other jobs' results are still waited for. A job that exited or raised without returning its result
(a compute node that cannot reach the store) is recorded the same way, its reason from its state and error output. ``conf/hydra/launcher/slurm.yaml`` and ``slurm_local.yaml``
name them.

Neither do they pickle a credential: submitit pickles each job (this launcher with the sweep's config, the job's
overrides, Hydra's state) into the sweep folder, and writes the job's result beside it. A tracking URI holding a
password is handed to the jobs in the environment instead (``EAQ_TRACKING_URI``; SLURM's jobs inherit the environment
they were submitted from, its default), the pickled config naming the variable (``_credentials_out_of_the_pickles``).
"""

from __future__ import annotations

import copy
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlsplit

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

log = logging.getLogger(__name__)
# Settings of submitit's executor itself, not of each job's resources.
EXECUTOR_KEYS = {"submitit_folder", "max_num_timeout"}
# Job states (SLURM's; INTERRUPTED: the local executor's for a killed job) of a job ended from outside.
ENDED_FROM_OUTSIDE = {"TIMEOUT", "OUT_OF_MEMORY", "CANCELLED", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "INTERRUPTED"}
# The variable that hands the jobs a tracking URI holding a credential, and the value their pickled config holds.
URI_VARIABLE = "EAQ_TRACKING_URI"
URI_FROM_ENVIRONMENT = f"${{oc.env:{URI_VARIABLE}}}"


class _CollectingLauncher(BaseSubmititLauncher):
    # Whether a stopped sweep cancels its jobs: SLURM's run on other nodes, which no signal to this process reaches
    # (else they measured on, and the same command again submitted their configurations a second time).
    _CANCEL_ON_STOP = True
    # How often the sweep looks for jobs that ended (job.done(): SLURM's state through submitit's watcher, and a
    # chmod and a stat of each job's folder, on a shared file system for a whole array; submitit's own as_completed
    # waits 10 s).
    _COLLECT_POLL_S = 10.0

    def checkpoint(self, *args: Any, **kwargs: Any) -> None:
        """No requeue (upstream resubmits the job): a job SLURM signals before its time limit or a preemption ends
        its run FAILED (eaq.tasks.job.scheduler_ended says why), and resume measures the configuration again. A
        requeued job started over with its first run left RUNNING, the sweep counting both; the local executor's
        default of three requeues ran a slow job four times."""
        return None

    def _executor(self) -> Any:
        """submitit's executor for this launcher's cluster, its settings from ``hydra.launcher`` as upstream reads
        them: the keys every queue has by their names, the others prefixed with the cluster's (``slurm_qos``)."""
        import submitit

        init = {"folder": self.params["submitit_folder"]}
        if "max_num_timeout" in self.params:
            init[f"{self._EXECUTOR}_max_num_timeout"] = self.params["max_num_timeout"]
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init)
        common = set(OmegaConf.structured(BaseQueueConf).keys())
        try:
            executor.update_parameters(**{
                key if key in common else f"{self._EXECUTOR}_{key}": value
                for key, value in self.params.items() if key not in EXECUTOR_KEYS
            })
        except NameError as error:  # submitit's word for a setting its executor does not take: a sentence, exit 2
            print(f"error: the sweep stopped: hydra.launcher holds a setting submitit's {self._EXECUTOR} executor does "
                  f"not take ({str(error).splitlines()[0]}); drop it.", file=sys.stderr)
            raise SystemExit(2) from error
        return executor

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self.config is not None and job_overrides
        executor = self._executor()
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        log.info("Submitit '%s' sweep output dir : %s", self._EXECUTOR, sweep_dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if "mode" in self.config.hydra.sweep:
            os.chmod(sweep_dir, mode=int(str(self.config.hydra.sweep.mode), 8))
        numbers = list(range(initial_job_idx, initial_job_idx + len(job_overrides)))
        for number, overrides in zip(numbers, job_overrides):
            log.info("\t#%d : %s", number, " ".join(filter_overrides(overrides)))
        count = len(numbers)
        with _credentials_out_of_the_pickles(self) as job_override:
            jobs = executor.map_array(
                self, [[job_override(o) for o in overrides] for overrides in job_overrides], ["hydra.sweep.dir"] * count,
                numbers, [f"job_id_for_{n}" for n in numbers], [Singleton.get_state()] * count,
            )
        collected: dict[int, JobReturn] = {}

        def collect_ended() -> bool:
            """Collect every job that has ended and is not yet collected; whether any was."""
            ended = [i for i, job in enumerate(jobs) if i not in collected and job.done()]
            for i in ended:
                collected[i] = self._collect(jobs[i], list(job_overrides[i]), numbers[i])
            return bool(ended)

        try:
            # In the order they end, not the order submitted: a job ended from outside (out of memory) at minute 1
            # was recorded, and counted in the progress, only once the jobs submitted before it had ended (hours).
            while len(collected) < count:
                if not collect_ended():
                    time.sleep(self._COLLECT_POLL_S)
            return [collected[i] for i in range(count)]
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the sweep stops, and so do its jobs (their runs end KILLED)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the records below short
            # The jobs ended before the stop and not yet collected (killed from outside: their runs would stay RUNNING
            # for good) are collected, after the others are cancelled: a job with no result takes submitit 15 s to
            # give up on, and jobs left running while those waited measured on, and ran again on the next command.
            ended = [i for i, job in enumerate(jobs) if i not in collected and job.done()]
            pending = [(job, list(job_overrides[i]), numbers[i]) for i, job in enumerate(jobs)
                       if i not in collected and i not in ended] if self._CANCEL_ON_STOP else []
            for job, _, _ in pending:
                job.cancel(check=False)
            for i in ended:
                try:
                    collected[i] = self._collect(jobs[i], list(job_overrides[i]), numbers[i])
                except Exception as error:  # noqa: BLE001  one that cannot be recorded must not stop the others'
                    log.error("job %s ended before the stop and could not be recorded: %s", jobs[i].job_id, error)
            if not self._CANCEL_ON_STOP:
                raise
            if pending:
                log.warning("cancelled %d job(s) of the sweep still queued or running: %s", len(pending),
                            " ".join(str(job.job_id) for job, _, _ in pending))
            # Recorded here: SLURM ends a cancelled job with signals submitit's job process passes by, then kills it.
            for job, overrides, number in pending:
                self._ended(job, overrides, number, f"job {job.job_id} was cancelled as the sweep stopped (Ctrl-C or "
                            "SIGTERM); the same command again measures only what did not finish (resume).", "KILLED")
            raise

    def _collect(self, job: Any, overrides: list[str], number: int) -> JobReturn:
        """The job's result; for a job that returned none (ended from outside, exited, raised), its record as a failed
        run."""
        from submitit.core.utils import UncompletedJobError

        try:
            return job.results()[0]
        except UncompletedJobError as error:  # FailedJobError too: the job raised
            return self._ended(job, overrides, number, _why(job, error))

    def _ended(self, job: Any, overrides: list[str], number: int, reason: str, run_status: str = "FAILED") -> JobReturn:
        from eaq.tasks.job import record_ended_job

        assert self.hydra_context is not None and self.config is not None
        config = self.hydra_context.config_loader.load_sweep_config(self.config, overrides)
        with open_dict(config.hydra.job):
            config.hydra.job.num = number
            config.hydra.job.id = str(job.job_id)
        HydraConfig.instance().set_config(config)  # as the job had it: its name and folder interpolate hydra's
        task_config = config.copy()
        with read_write(task_config), open_dict(task_config):
            del task_config["hydra"]
        status = "failed"
        try:
            status = record_ended_job(task_config, reason, run_status)
        except Exception as error:  # one record that cannot be made must not stop the collection of the other jobs
            log.error("job %s returned no result, and could not be recorded as a failed run (%s): %s", job.job_id, error, reason)
        return JobReturn(overrides=overrides, cfg=task_config, hydra_cfg=config, status=JobStatus.COMPLETED,
                         _return_value=status, task_name=str(config.hydra.job.name))


@contextmanager
def _credentials_out_of_the_pickles(launcher: _CollectingLauncher) -> Iterator[Callable[[str], str]]:
    """While submitit pickles the jobs: a ``tracking.uri`` holding a credential is in the environment the jobs start
    with (``URI_VARIABLE``), and the launcher's config and Hydra's (both pickled, and each job's result holds its
    config) name that variable in its place, as do the job's overrides through the function this yields. The sweep's
    process gets its own back after."""
    from eaq.tracking.redact import redact

    assert launcher.config is not None
    uri = str(OmegaConf.select(launcher.config, "tracking.uri", default=""))
    if redact(uri) == uri:
        yield lambda override: override
        return
    hydra_config = HydraConfig.instance()
    own, own_hydra, before = launcher.config, hydra_config.cfg, os.environ.get(URI_VARIABLE)
    launcher.config = _uri_from_environment(own)
    hydra_config.cfg = _uri_from_environment(own_hydra)
    os.environ[URI_VARIABLE] = uri
    try:
        import cloudpickle  # submitit's own pickler

        password = urlsplit(uri).password or ""
        if password and password.encode() in cloudpickle.dumps((launcher, Singleton.get_state())):
            print(f"error: the sweep stopped before submitting: the password of tracking.uri={redact(uri)} would have "
                  f"been pickled into the sweep folder for submitit; pass it in the environment instead: export "
                  f"{URI_VARIABLE}=<the URI>, then tracking.uri='{URI_FROM_ENVIRONMENT}'.", file=sys.stderr)
            raise SystemExit(2)
        yield _override_from_environment
    finally:
        launcher.config, hydra_config.cfg = own, own_hydra
        if before is None:
            os.environ.pop(URI_VARIABLE, None)
        else:
            os.environ[URI_VARIABLE] = before


def _uri_from_environment(config: DictConfig) -> DictConfig:
    """A copy of ``config`` with ``tracking.uri`` and its command-line override naming ``URI_VARIABLE``, and Hydra's
    joined overrides (``hydra.job.override_dirname``) redacted."""
    from eaq.tracking.redact import redact

    config = copy.deepcopy(config)
    with read_write(config), open_dict(config):
        if "tracking" in config:
            config.tracking.uri = URI_FROM_ENVIRONMENT
    if "hydra" in config:
        hydra = config.hydra
        with read_write(hydra), open_dict(hydra):  # Hydra sets its node read-only, apart from the config's own flag
            hydra.overrides.task = [_override_from_environment(o) for o in hydra.overrides.task]
            hydra.job.override_dirname = redact(str(hydra.job.override_dirname))
    return config


def _override_from_environment(override: str) -> str:
    """A command-line override of ``tracking.uri`` (``+`` or ``++`` before it, Hydra's escapes in it) naming
    ``URI_VARIABLE`` for its value; any other as it is."""
    key, _, _ = override.partition("=")
    return f"{key}={URI_FROM_ENVIRONMENT}" if key.lstrip("+") == "tracking.uri" else override


# A Python warning's header ("file:12: UserWarning: ..."), followed by its source line, which a process writes on its
# way out (multiprocessing's resource tracker, torch's CUDA check at exit): neither is what ended a job.
WARNING_LINE = re.compile(r":\d+: \w*Warning: ")


def _last_line(text: str) -> str:
    """The last line of ``text`` that says something: not blank, and no warning's header or the source line after it."""
    lines, kept = text.splitlines(), []
    skip = False
    for line in lines:
        if WARNING_LINE.search(line):
            skip = True  # the header, and next the source line it quotes
            continue
        if not skip and line.strip():
            kept.append(line.strip())
        skip = False
    return kept[-1] if kept else ""


def _why(job: Any, error: Exception) -> str:
    """How a job that returned no result ended, by submitit's state for it (SLURM's, or the local executor's), and
    where its output is."""
    from submitit.core.utils import FailedJobError

    outputs = " and ".join(str(p) for p in (job.paths.stdout, job.paths.stderr) if p.exists()) or "none was written"
    resume = "The same command again measures only what did not finish (resume)."
    if isinstance(error, FailedJobError):  # its message: a header, the traceback between two rules, the log paths
        parts = str(error).split("-" * 22)
        raised = _last_line(parts[1] if len(parts) > 2 else str(error))
        return f"job {job.job_id} raised before it returned ({raised}); its output: {outputs}. {resume}"
    state = str(job.state)
    if state.split(" ")[0].upper() in ENDED_FROM_OUTSIDE:
        return (f"job {job.job_id} ended before it finished, from outside (submitit reads its state as {state}): a time "
                f"limit (give jobs more: hydra.launcher.timeout_min), out of memory (hydra.launcher.mem_gb) or a "
                f"cancel; its output: {outputs}. {resume}")
    last = _last_line(job.paths.stderr.read_text(errors="replace")) if job.paths.stderr.exists() else ""
    return (f"job {job.job_id} exited without returning a result (submitit reads its state as {state})"
            + (f"; the last line of its error output: {last}" if last else "") + f"; its output: {outputs}. {resume}")


class LocalLauncher(_CollectingLauncher):
    _EXECUTOR = "local"
    # Its jobs are this process's children: Ctrl-C reaches them with it, and SIGTERM's handler hands them SIGINT
    # (eaq.exit.stop_on_terminate); a cancel would send each a second one while it records its run KILLED.
    _CANCEL_ON_STOP = False
    _COLLECT_POLL_S = 1.0  # its done() is a process's poll()


class SlurmLauncher(_CollectingLauncher):
    _EXECUTOR = "slurm"
