"""One Hydra job as one MLflow run: created first, always ended, errors in one sentence.

A single run validates its config first: a bad value exits 2 in one sentence and records
nothing (a typo leaves no run in the store). A sweep's job creates its run first, so a bad
value of one job is a FAILED run with its reason (in the UI and the sweep's summary) while
the sweep carries on; the sweep callback reports the failures and the exit code at the end.
No run is ever left RUNNING where the store answers.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from mlflow.exceptions import MlflowException
from omegaconf import DictConfig, OmegaConf
from sqlalchemy.exc import DBAPIError

from eaq.config import GROUPS, EaqConfig, absolute_store_uri, validate
from eaq.errors import ConfigError, EaqError, JobEndedError
from eaq.exit import stop_with_parent
from eaq.files import exclusive, from_launch_folder, try_exclusive
from eaq.slots import check_slots, gpu_slot, local_executor, shared_cpu
from eaq.tasks.ahead import wait_for_device
from eaq.tasks.isolation import run_in_process, run_isolated, start_server
from eaq.tracking.failures import store_failed
from eaq.tracking.flatten import config_hash, flatten, read_files, resolved_config
from eaq.tracking.run_logger import PARENT_TAG, SUPERSEDED_TAG, TrackedRun, end_run
from eaq.tracking.store import open_store, unanswered
from eaq.tracking.callbacks import parent_run_id, record_skip, skipped_runs, sweep_dir
from eaq.tracking.environment import capture, cpu_model, device_name, summary_tags
from eaq.tracking.progress import leave_record, output_sink, show_phase
from eaq.tracking.redact import redact, redacted_traceback, remember
from eaq.tracking.run_logger import CONFIG_FILE, ENV_FILE, FILES_FILE, REUSED_FILE, finished_run

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from eaq.tasks.result import TaskResult

log = logging.getLogger(__name__)
# A sweep's run's job number (hydra.job.num): how the sweep finds the run of a job that could not end it itself.
JOB_TAG = "eaq.sweep.job"
# Each task by name, imported only where it runs (the forked process, with isolate=true).
TASKS = {
    "benchmark": "eaq.tasks.benchmark:benchmark",
    "calibrate": "eaq.tasks.roofline:run_calibration",
    "layers": "eaq.tasks.layers:layers",
}


def _report_error(exc: BaseException, debug: bool) -> None:
    """The error on stderr, redacted: a traceback can quote a URL with its password (a log file keeps stderr). Above a
    sweep's progress bars where they are drawn (written straight to their stream, it ran through them)."""
    text = (redacted_traceback(exc) if debug or not isinstance(exc, EaqError) else "")
    text += f"error: {redact(str(exc))}\n"
    sink = output_sink()
    if sink is not None:
        sink(text)
    else:
        print(text, end="", file=sys.stderr)


def rehearsal() -> str | None:
    """Why a run under submitit's local executor (``hydra/launcher=slurm_local``) stands for no configuration; else None.

    That executor starts every job of a sweep at once on this host, so each run's timing and energy are those of
    the crowd: a rehearsal of a cluster sweep, flagged invalid so that the report counts it only as such and a later
    sweep on this host measures its configuration again rather than skip it as done.
    """
    if not local_executor():
        return None
    return ("ran under submitit's local executor, which starts every job of the sweep at once on this host: a "
            "rehearsal, its timing and energy the crowd's; measure with the basic launcher, hydra/launcher=gpus or slurm")


def out_of_memory(exc: BaseException, resolved: dict[str, Any]) -> EaqError | None:
    """The sentence for torch running out of device memory (``torch.OutOfMemoryError``, known by name: this process
    does not import torch), naming what sets the memory a run needs; None for any other error.

    The forked run's error travels back as that class, and ended in a traceback from the process measuring it."""
    if type(exc).__name__ != "OutOfMemoryError" or not type(exc).__module__.startswith("torch"):
        return None
    # torch's first three sentences: what it tried to allocate, of how much free (then a paragraph of allocator advice)
    said = ". ".join(str(exc).strip().split(". ")[:3]).rstrip(".") or "no detail"
    return EaqError(
        f"the device ran out of memory running model.name={resolved['model']['name']} at batch_size={resolved['batch_size']}, "
        f"seq_len={resolved['seq_len']}, precision={resolved['precision']['name']} ({said}); lower batch_size or seq_len, "
        "use a smaller model, or free the device of other processes (nvidia-smi lists them)."
    )


def scheduler_ended(exc: BaseException, hydra_cfg: Any) -> JobEndedError | None:
    """The sentence for a SLURM job that submitit's signal handler ended (its ``UncompletedJobError``, known by name:
    this process need not import submitit); None for any other error.

    SLURM signals a job (USR2, about two minutes ahead) before its time limit or a preemption; eaq's launchers never
    requeue a run (eaq_launchers' ``checkpoint``), so submitit raises in the job, whose run ends FAILED: said as what
    happened and what to change, not as submitit's "Job not requeued because: checkpoint function returned None"."""
    # The signal lands in whatever runs: inside a store call, SQLAlchemy wraps it (StatementError, its .orig).
    chain: list[BaseException] = []
    found: BaseException | None = exc
    while found is not None and found not in chain:
        chain.append(found)
        found = getattr(found, "orig", None) or found.__cause__ or found.__context__
    if not any(type(e).__name__ == "UncompletedJobError" and type(e).__module__.startswith("submitit") for e in chain):
        return None
    limit = OmegaConf.select(hydra_cfg, "launcher.timeout_min", default=None)
    return JobEndedError(
        f"SLURM signalled this job that it is about to end: its time limit (hydra.launcher.timeout_min={limit}) or a "
        "preemption (the job's error output under the sweep folder's .submitit/ says which); eaq does not requeue a "
        "run: give jobs more time, or submit where they are not preempted. The same command again measures only what "
        "did not finish (resume)."
    )


def _end(run: TrackedRun, status: str, error: BaseException, uri: str, debug: bool) -> None:
    """End a job's run as ``status``, ``error`` its reason. A store that fails to take it (``uri``: its setting, as the
    message names it) is said, redacted,
    not raised: the job's own error is the one to report (an interrupt, to raise), and the sweep's summary counts a run
    left RUNNING as not finished. A store that has gone since (a server stopped mid-sweep) is said at once, not after
    MLflow's retries (eaq.tracking.store.unanswered)."""
    if (why := unanswered(run.client.tracking_uri)) is not None:
        _report_error(EaqError(f"the run's {status} record could not be written, it stays RUNNING in the store: {why}"),
                      debug)
        return
    try:
        run.end(status, error)
    except MlflowException as failure:
        _report_error(store_failed(failure, uri), debug)


def _speed(m: dict[str, float]) -> list[str]:
    """The latency and throughput part of a summary line: per batch, or per prefill and output token."""
    if "time_per_output_token_mean_ms" in m:
        return [
            f"TTFT {m['time_to_first_token_mean_ms']:.2f} ms",
            f"{m['time_per_output_token_mean_ms']:.2f} ms/token (p50 {m['time_per_output_token_p50_ms']:.2f}, "
            f"p99 {m['time_per_output_token_p99_ms']:.2f})",
            f"{m['decode_tokens_per_s']:.1f} tokens/s",
        ]
    return [
        f"{m['latency_mean_ms']:.2f} ms/batch (p50 {m['latency_p50_ms']:.2f}, p99 {m['latency_p99_ms']:.2f})",
        f"{m['throughput_samples_per_s']:.1f} samples/s",
    ]


def summary_line(name: str, result: TaskResult) -> str:
    m, t = result.metrics, result.tags
    if "latency_mean_ms" not in m and "time_per_output_token_mean_ms" not in m:
        return f"{name}: " + ", ".join(f"{k} {v:.4g}" for k, v in m.items())
    # Scores to four decimals; figures in tokens (a count, a mean position) as numbers of tokens, however many.
    quality = [f"{k.removeprefix('quality_')} " + (f"{v:.4f}" if not k.endswith("_tokens") else
                                                  f"{v:.0f}" if float(v).is_integer() else f"{v:.1f}")
               for k, v in m.items() if k.startswith("quality_")]
    per = next(((key, unit) for key, unit in (("energy_per_sample_mj", "sample"), ("decode_energy_per_token_mj", "token")) if key in m), None)
    power = m.get("power_mean_w", m.get("decode_power_mean_w"))
    energy = (
        f"{m[per[0]]:.2f} mJ/{per[1]} at {power:.0f} W ({t['eaq.energy.source']})"
        if per
        else f"energy unavailable ({t.get('eaq.energy.reason', '')})"
    )
    parts = [
        *_speed(m),
        f"model {m['model_size_mb']:.1f} MB",
        f"peak RSS {m['memory_peak_rss_mb']:.0f} MB",
        *quality,
        energy,
        # A run flagged invalid counts in no average: the line says so and why, once, measured energy or not.
        *([f"INVALID ({t.get('eaq.valid.reasons', '')})"] if t.get("eaq.valid") == "false" else []),
    ]
    return f"{name}: " + ", ".join(parts)


def _early_tags(run: TrackedRun) -> Callable[[dict[str, str]], None]:
    """Sets on ``run`` the tags its task tells as soon as it knows them (eaq.tasks.isolation.tag_now).

    A store that fails to take them is logged, not raised: the result carries the same tags, set at the run's end
    (where a store still failing fails the run), so a passing hiccup costs no measurement; and the thread relaying an
    isolated task's events must keep draining them, or a task printing more than the pipe holds would block."""
    def set_tags(tags: dict[str, str]) -> None:
        try:
            run.set_tags(tags)
        except Exception as exc:
            log.warning("%s: tags %s not set while the run is under way (%s); they are set with its result",
                        run.run.info.run_name, ", ".join(tags), redact(str(exc)))

    return set_tags


def _new_run(client: MlflowClient, experiment_id: str, resolved: dict[str, Any], digest: str, tags: dict[str, str]) -> TrackedRun:
    """The run of the job Hydra has set up (``HydraConfig``): its name, group choices, config hash and kind,
    under the sweep's parent run in a multirun, tagged with its job number there (``JOB_TAG``)."""
    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    choices = {f"eaq.group.{g}": str(hydra_cfg.runtime.choices.get(g)) for g in GROUPS}
    return TrackedRun(
        client,
        experiment_id,
        run_name=str(resolved["run_name"]),
        tags={**choices, "eaq.config_hash": digest,
              "eaq.settings_hash": config_hash(resolved, hydra_cfg.runtime.cwd, code=False),
              # The task as asked, so that a calibration that failed is not read as a failed benchmark.
              "eaq.kind": str(resolved.get("task") or "benchmark"),
              **({JOB_TAG: str(hydra_cfg.job.num)} if multirun else {}), **tags},
        parent_run_id=parent_run_id(sweep_dir(hydra_cfg)) if multirun else None,
    )


def _job_store(resolved: dict, launched_from: str) -> tuple[MlflowClient, str]:
    """The store and experiment of a job's run. A relative sqlite path names the file under the folder the user
    launched from (Hydra's runtime.cwd), whichever folder this job runs in; the resolved config records that path.
    A relative artifact folder is read from there too (the store opens before ``validate`` reads the other paths)."""
    tracking = resolved["tracking"]
    tracking["uri"] = absolute_store_uri(tracking["uri"], launched_from)
    return open_store(tracking["uri"], tracking["experiment"], from_launch_folder(tracking["artifact_location"], launched_from))


def record_ended_job(cfg: DictConfig, reason: str, run_status: str = "FAILED") -> str:
    """Record a sweep's job that returned no result as FAILED: ended from outside (a scheduler's time limit, out of
    memory, a cancel), or exited or raised before its run could end. Returns how the job counts for the sweep's
    progress (``failed``; ``finished`` or ``skipped`` where it got that far before it ended).

    Such a job runs none of its own ends: its run stays RUNNING, or never exists if the job died before creating it,
    and the sweep's summary would call the sweep finished. Called in the sweep's process, by the launcher that
    collects the jobs (hydra_plugins/eaq_launchers), with ``HydraConfig`` set to that job's and ``cfg`` its config:
    the job's run (found by its number under the sweep's parent) ends FAILED with ``reason``; where there is none, a
    FAILED run of the job's name and config says it, so resume measures the configuration again. A job without a run
    that resume had skipped (its configuration's FINISHED run among the sweep's skips) stays skipped: a FAILED run
    beside the FINISHED one would put a failure in the report that no measurement had. ``run_status``: KILLED for a job
    the stopped sweep cancelled.
    """
    hydra_cfg = HydraConfig.get()
    resolved = resolved_config(cfg)
    remember(resolved)  # this process logs the job's params: a URL's password in them is redacted, as run_job does
    client, experiment_id = _job_store(resolved, hydra_cfg.runtime.cwd)
    error = JobEndedError(reason)
    name = str(resolved["run_name"])
    folder = sweep_dir(hydra_cfg)
    found = _job_runs(client, experiment_id, hydra_cfg)
    for existing in found:
        if existing.info.status == "RUNNING":
            end_run(client, existing.info.run_id, run_status, error)
    digest = config_hash(resolved, hydra_cfg.runtime.cwd) if not found else ""  # files read once, where needed
    if any(existing.info.status == "FINISHED" for existing in found):  # ended after its run did, in its teardown
        status = "finished"
    elif not found and (skipped := _skipped_for(client, experiment_id, digest, folder)):
        log.info("%s: ended after resume skipped it for run %s (%s)", name, skipped, redact(reason))
        status = "skipped"
    else:
        if not found:
            run = _new_run(client, experiment_id, resolved, digest, {})
            try:
                run.log_params(flatten(resolved))
            finally:
                run.end(run_status, error)
        log.error("%s: %s", name, redact(reason))
        status = "failed"
    leave_record(name, status, None)
    return status


def _job_runs(client: MlflowClient, experiment_id: str, hydra_cfg: Any) -> list:
    """The runs of this sweep's job (its number under the sweep's parent run), however many times it started."""
    where = f"tags.`{JOB_TAG}` = '{hydra_cfg.job.num}' and tags.`{PARENT_TAG}` = '{parent_run_id(sweep_dir(hydra_cfg))}'"
    return client.search_runs([experiment_id], filter_string=where, max_results=10)


def _supersede(client: MlflowClient, experiment_id: str, hydra_cfg: Any) -> None:
    """Mark replaced the runs an earlier start of this job did not finish, ending FAILED one it left RUNNING: a
    scheduler that requeues a job itself (SLURM's PreemptMode=REQUEUE after a preemption eaq's run ended FAILED, a node
    failure) starts it again from the top, and the sweep's summary and report counted the first start's run as a
    second, failed run of the job (tag ``SUPERSEDED_TAG``: they count neither)."""
    why = "the scheduler started this job again (a requeue) before this run finished; the job's next run replaces it"
    for earlier in _job_runs(client, experiment_id, hydra_cfg):
        if earlier.info.status != "FINISHED":
            client.set_tag(earlier.info.run_id, SUPERSEDED_TAG, why)
            if earlier.info.status == "RUNNING":
                end_run(client, earlier.info.run_id, "FAILED", JobEndedError(why))


def _after_the_same_configuration(held: ExitStack, lock: Path, name: str) -> float:
    """Hold the lock of this job's configuration for the job's life (``held``), after any other job of it in the
    sweep; the seconds waited, said as it starts to wait.

    One job of a configuration at a time, the next looking for the first's FINISHED run (resume): side by side
    (hydra/launcher=gpus, slurm_local) neither saw the other's, and a configuration given twice (compile_tuning=
    true,false of an eager run) was measured twice, reported as two trials of one."""
    try:
        handle = try_exclusive(lock)
        if handle is not None:
            held.callback(handle.close)
            return 0.0
        log.info("%s: another job of this sweep measures the same configuration; waiting for it to end (its run is "
                 "then reused)", name)
        waited = time.perf_counter()
        held.enter_context(exclusive(lock))
        return time.perf_counter() - waited
    except OSError as exc:  # a shared file system without locks (a cluster's): each job on its own, as before
        log.info("%s: the configuration's lock could not be taken (%s); a duplicate running meanwhile is not waited "
                 "for", name, exc)
        return 0.0


def _skipped_for(client: MlflowClient, experiment_id: str, digest: str, folder: Path) -> str | None:
    """The FINISHED run of config hash ``digest`` that a job of the sweep in ``folder`` was skipped for, if any."""
    skipped = set(skipped_runs(folder))
    if not skipped:
        return None
    where = f"tags.`eaq.config_hash` = '{digest}' and attributes.status = 'FINISHED'"
    return next((r.info.run_id for r in client.search_runs([experiment_id], filter_string=where, max_results=100)
                 if r.info.run_id in skipped), None)


def run_job(cfg: DictConfig) -> str:
    """One run, logged; returns how it ended (``finished``, ``failed``, ``skipped``) for the sweep's progress.

    An error the run's own handling did not take (a bug, before its record opened) ends the job here, its traceback
    redacted: raised on, Hydra printed it and then the job's overrides, a store's password in clear. A single run exits
    1; a sweep's job is recorded FAILED with the error (the sweep's summary lists it; under submitit its traceback was
    in the job's log file alone) and the sweep goes on."""
    try:
        with ExitStack() as held:  # what the job holds until it ends (its configuration's lock in a sweep)
            return _run_job(cfg, held)
    except Exception as exc:
        _report_error(exc, True)
        if HydraConfig.get().mode != RunMode.MULTIRUN:
            sys.exit(1)
        try:
            return record_ended_job(cfg, f"the job stopped before its run began, on an error eaq did not handle "
                                         f"({type(exc).__name__}: {redact(str(exc))}); its traceback is in the job's output")
        except Exception as unrecorded:  # the store itself failing: the summary counts the job as leaving no run
            log.error("the job's error could not be recorded as a failed run: %s", redact(str(unrecorded)))
            return "failed"


def _run_job(cfg: DictConfig, held: ExitStack) -> str:
    started = time.perf_counter()
    if local_executor():
        stop_with_parent()  # its controller killed alone, the job measured on as an orphan and closed its run FINISHED
    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    try:
        resolved = resolved_config(cfg)
    except ConfigError as exc:  # no run can be logged of a config that does not resolve
        _report_error(exc, False)
        sys.exit(2)
    remember(resolved)  # a URL's password in the config is redacted from every record, whatever its characters
    debug = bool(resolved.get("debug"))
    slots = resolved["gpu_slots"]
    if slots["enabled"] is None:  # null: slots go with the launcher that runs a job per GPU
        slots["enabled"] = cfg.gpu_slots.enabled = hydra_cfg.runtime.choices.get("hydra/launcher") == "gpus"
    # Only a name given on the command line is checked against the group's choice: a preset of one's own
    # (conf/precision/my_plan.yaml building on mixed) names another precision on purpose.
    # As written, not resolved: a SLURM job's tracking.uri=${oc.env:EAQ_TRACKING_URI}, replayed by eaq.rerun, stopped
    # here where the variable is not set, in a traceback quoting the overrides after it (a password in clear).
    renamed = any(str(o).lstrip("+").startswith("precision.name=")
                  for o in OmegaConf.to_container(hydra_cfg.overrides.task, resolve=False))  # type: ignore[union-attr]
    validated: EaqConfig | EaqError
    try:
        validated = validate(cfg, hydra_cfg.runtime.choices.get("precision") if renamed else None, hydra_cfg.runtime.cwd)
        if slots["enabled"]:
            # What the slot would refuse, before the run opens (a single run's refusal left a FAILED run); and the
            # order before the fork server starts: it keeps the environment it starts with. A sweep's values of
            # device or isolate are its jobs' own: the sweep's check saw none of them.
            check_slots(str(resolved.get("device", "auto")), bool(resolved.get("isolate", True)), slots["count"])
    except EaqError as exc:
        if not multirun:  # a command line with a mistake measured nothing: said, and no run is left in the store
            _report_error(exc, debug)
            sys.exit(2)
        validated = exc  # a sweep's job: its FAILED run is how the sweep's summary and its report count it
    try:
        if resolved.get("isolate", True):
            start_server()  # its imports run while this process opens the store and logs the config
        client, experiment_id = _job_store(resolved, hydra_cfg.runtime.cwd)
    except EaqError as exc:
        _report_error(exc, debug)
        sys.exit(2)

    files = read_files(resolved, hydra_cfg.runtime.cwd)  # as the run starts: hashed, and recorded in env.json
    digest = config_hash(resolved, hydra_cfg.runtime.cwd, files=files)
    # Where the run will be, as far as it can be told before it starts: resume reuses only a run measured there, and
    # the run carries it from its start, so a run that fails before its end still says which device it was on.
    spec = str(resolved.get("device", "auto"))
    device = device_name(spec)
    uri = f"tracking.uri={resolved['tracking']['uri']}"
    run: TrackedRun | None = None
    same_s = 0.0
    try:  # every store call of the job: one that fails is the job's failure, said in one redacted sentence
        # A calibration's result is the cache it writes (paths are not in the hash): a sweep of them measures again,
        # as a single one does, and resume never reads an emptied cache as done.
        if multirun and resolved.get("resume", True) and resolved.get("task") != "calibrate":
            if device is not None:  # where a finished run can be reused at all
                same_s = _after_the_same_configuration(held, sweep_dir(hydra_cfg) / f".config-{digest}.lock",
                                                       str(resolved["run_name"]))
            done = finished_run(client, experiment_id, digest, device) if device is not None else None
            if device is None:
                log.info("%s: resume: which device this run gets cannot be told ahead (no GPU NVML can see for "
                         "device=%s, GPUs of several names, or MIG); nothing reused", resolved["run_name"], spec)
            if done is not None:
                record_skip(client, sweep_dir(hydra_cfg), done)
                Path(hydra_cfg.runtime.output_dir).mkdir(parents=True, exist_ok=True)
                (Path(hydra_cfg.runtime.output_dir) / REUSED_FILE).write_text(f"{done}\n")
                log.info("%s: skipped, already FINISHED as run %s (resume=false to run it again)", resolved["run_name"], done)
                return "skipped"
            settings = config_hash(resolved, hydra_cfg.runtime.cwd, code=False, files=files)
            if device is not None and (older := finished_run(client, experiment_id, settings, device, tag="eaq.settings_hash")):
                log.info("%s: measured again: run %s measured these settings with other eaq code (eaq's code counts in "
                         "resume; env.json's eaq_code says which ran)", resolved["run_name"], older)
        if multirun:
            _supersede(client, experiment_id, hydra_cfg)
        run = _new_run(
            client, experiment_id, resolved, digest,
            # Only where sure: "auto" read as the CPU because NVML saw no GPU may yet run on one that torch sees.
            {"eaq.env.device_name": device} if device is not None and not (spec == "auto" and device == cpu_model()) else {},
        )
        output_dir = Path(hydra_cfg.runtime.output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
        run.log_params(flatten(resolved))
        (output_dir / CONFIG_FILE).write_text(OmegaConf.to_yaml(cfg, resolve=True))
        run.log_artifact(output_dir / CONFIG_FILE)
        (output_dir / FILES_FILE).write_text(json.dumps(files, indent=2, sort_keys=True))
        run.log_artifact(output_dir / FILES_FILE)
        run.log_artifacts(output_dir / ".hydra", ".hydra")
        if isinstance(validated, EaqError):
            raise validated
        config = validated
        task = TASKS[config.task]
        setup_s = time.perf_counter() - started - same_s
        # Device work a sweep started ahead of its runs (eaq.tasks.ahead) ends before this run touches the device.
        ahead_s = wait_for_device(config.paths.cache_dir)
        gpus = config.gpu_slots
        waiting = time.perf_counter()  # for a free GPU slot: another sweep on this host may hold them all, for minutes
        with gpu_slot(gpus.dir, gpus.count, run.run.info.run_name, run.run_id) if gpus.enabled else nullcontext() as slot:
            slot_s = time.perf_counter() - waiting
            if slot is not None:
                config.device = slot.device(config.device)
            if config.isolate:
                result, overhead_s = run_isolated(task, config, output_dir, on_phase=show_phase, on_output=output_sink(),
                                                  on_tags=_early_tags(run))
                result.metrics["isolation_overhead_s"] = overhead_s
            else:
                result, import_s = run_in_process(task, config, output_dir, on_phase=show_phase, on_tags=_early_tags(run))
                result.metrics["phase_import_s"] = import_s
            logging_started = time.perf_counter()  # the slot's tags and release count with logging: none in no phase
            if slot is not None:
                result.tags.update(slot.tags())
                if reason := shared_cpu(result.tags):
                    result.invalidate(reason)
            if reason := rehearsal():
                result.invalidate(reason)
        show_phase("logging")
        result.metrics["phase_setup_s"] = setup_s
        if same_s:
            result.metrics["phase_same_config_s"] = same_s
        result.metrics["phase_ahead_s"] = ahead_s
        if gpus.enabled:
            result.metrics["phase_slot_s"] = slot_s
        run.log_metrics(result.metrics)
        run.set_tags(result.tags)
        env = capture(result.device, digest, files)
        (output_dir / ENV_FILE).write_text(json.dumps(env, indent=2, sort_keys=True, default=str))
        run.log_artifact(output_dir / ENV_FILE)
        run.set_tags(summary_tags(env))
        for file in result.files:  # a folder keeps its name under the run's artifacts (layers/)
            run.log_artifacts(file, file.name) if file.is_dir() else run.log_artifact(file)
        run.log_metrics({"phase_logging_s": time.perf_counter() - logging_started, "run_wall_s": time.perf_counter() - started})
        run.end("FINISHED")
    except KeyboardInterrupt as exc:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the KILLED record short
        if run is not None:  # Ctrl-C's interrupt says nothing: its record reads "KeyboardInterrupt: " without this
            _end(run, "KILLED", exc if str(exc) else KeyboardInterrupt("stopped by SIGINT (Ctrl-C, or its sweep stopping)"),
                 uri, debug)
        raise
    except Exception as exc:
        # A database's own error (DBAPIError) is the store's; SQLAlchemy's wrapping of another error raised inside a
        # store call (SLURM's signal to end, as submitit raises it) is that error's.
        error = scheduler_ended(exc, hydra_cfg) or (
            store_failed(exc, uri) if isinstance(exc, (MlflowException, DBAPIError)) else out_of_memory(exc, resolved) or exc)
        if run is not None:
            _end(run, "FAILED", error, uri, debug)
        _report_error(error, debug)
        if not multirun:
            sys.exit(2 if isinstance(error, EaqError) else 1)
        return "failed"
    log.info(summary_line(run.run.info.run_name, result))
    return "finished"
