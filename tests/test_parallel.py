"""Beyond one job at a time: GPU slots, parallel sweeps on SQLite and on an MLflow server over
PostgreSQL, and a sweep through submitit's local executor (issue 17).

Everything is real: Hydra's joblib and submitit launchers, a PostgreSQL cluster started from
the distribution's binaries, ``mlflow server`` over it. Only the GPUs are faked, by their
count (``gpu_slots.count=2`` on this CPU machine; the runs measure on the CPU).
"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import multiprocessing
import os
import pickle
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import psutil
import pytest
import submitit
from hydra import compose, initialize_config_dir
from hydra.conf import HydraConf
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.types import RunMode
from hydra.utils import instantiate
from mlflow.entities import Run
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf, open_dict
from submitit.core.utils import DelayedSubmission

from conftest import FAST, REPO, all_runs, command_line, free_port, mlflow_server_on, run_eaq, store
from eaq.config import register_schemas
from eaq.errors import ConfigError
from eaq.metrics import documented_tag
from eaq.report.multi_gpu import side_by_side
from eaq.slots import LOG_FILE, gpu_slot, slot_count, visible_gpus
from eaq.tracking.progress import SweepProgress

TRIALS = ("1", "2", "3")
# Logged by every benchmark run that ended FINISHED (the last two after everything else).
METRICS = {"latency_mean_ms", "throughput_samples_per_s", "model_size_mb", "quality_cosine_to_fp32_mean", "run_wall_s", "phase_logging_s"}


def parallel_sweep(slots: Path, *overrides: str, trials: tuple[str, ...] = TRIALS) -> list[str]:
    """Three trials (or ``trials``), two jobs at a time on two faked GPU slots."""
    return ["-m", "hydra/launcher=gpus", "gpu_slots.count=2", f"gpu_slots.dir={slots}", "device=cpu", *FAST, "sampler=none", f"trial={','.join(trials)}", *overrides]


def check_sweep(client: MlflowClient, stdout: str, trials: tuple[str, ...] = TRIALS) -> list[Run]:
    """Every run of the sweep arrived exactly once, FINISHED, with all its metrics, under one FINISHED parent."""
    experiment = client.get_experiment_by_name("eaq")
    runs = client.search_runs([experiment.experiment_id])
    children = [r for r in runs if r.data.tags.get("eaq.kind") == "benchmark"]
    (parent,) = [r for r in runs if r.data.tags.get("eaq.kind") == "sweep"]
    assert sorted(r.info.run_name for r in children) == [f"bert-tiny-random-fp32-b4-t{t}" for t in trials]
    assert {r.info.status for r in children} == {"FINISHED"}
    for run in children:
        assert METRICS <= run.data.metrics.keys(), (run.info.run_name, METRICS - run.data.metrics.keys())
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert len({frozenset(r.data.metrics) for r in children}) == 1  # the same metrics on every run
    assert parent.info.status == "FINISHED" and parent.data.metrics["sweep_runs"] == len(trials)
    assert f"sweep: {len(trials)} of {len(trials)} runs finished" in stdout
    return children


def slot_holds(slots: Path) -> list[tuple[str, float, float]]:
    """(key, taken, released) per hold, from the slots' log; every take released."""
    open_holds: dict[tuple[int, str], float] = {}
    holds = []
    for line in (slots / LOG_FILE).read_text().splitlines():
        entry = json.loads(line)
        key = (entry["pid"], entry["key"])
        if entry["event"] == "take":
            open_holds[key] = entry["time"]
        else:
            holds.append((entry["key"], open_holds.pop(key), entry["time"]))
    assert open_holds == {}
    return holds


def overlapping(a: tuple[str, float, float], b: tuple[str, float, float]) -> bool:
    return a[1] < b[2] and b[1] < a[2]


def _hold(slots: Path, index: int) -> None:
    with gpu_slot(slots, 2, f"run{index}", f"id{index}"):
        time.sleep(0.4)


def test_gpu_slots_are_held_by_one_process_at_a_time(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_hold, args=(tmp_path, i)) for i in range(5)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
    assert [p.exitcode for p in processes] == [0] * 5
    holds = slot_holds(tmp_path)
    assert len(holds) == 5 and {key for key, _, _ in holds} == {"gpu0", "gpu1"}
    assert not [(a, b) for i, a in enumerate(holds) for b in holds[i + 1 :] if a[0] == b[0] and overlapping(a, b)]
    assert any(overlapping(a, b) for i, a in enumerate(holds) for b in holds[i + 1 :])  # two GPUs in use at once


def test_a_slots_log_survives_a_cut_line_and_a_killed_jobs_take_ends_at_the_next_take_of_its_gpu(tmp_path: Path) -> None:
    """A take never released (its job killed) whose pid is alive again (reused) is not every later run's neighbour:
    the next take of the same lock proves it gone. A line a crash cut mid-write is skipped, not a failed run."""
    import json
    import os

    from eaq.slots import LOG_FILE, Slot, neighbours

    live = os.getppid()  # a live process standing for a reused pid
    lines = [
        {"event": "take", "key": "gpu0", "index": 0, "run": "killed", "run_id": "k", "pid": live, "time": 1.0},
        {"event": "take", "key": "gpu0", "index": 0, "run": "next", "run_id": "n", "pid": 7, "time": 2.0},
        {"event": "release", "key": "gpu0", "pid": 7, "time": 3.0},
    ]
    (tmp_path / LOG_FILE).write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"event": "take", "ke')
    assert neighbours(Slot(tmp_path, 1, "gpu1", "mine", "m", taken=2.5), until=4.0) == ["next (gpu 0, run n)"]
    assert neighbours(Slot(tmp_path, 1, "gpu1", "mine", "m", taken=3.5), until=4.0) == []  # "killed" ended at 2.0
    # The run that took the killed job's lock next never ran beside it (the kernel freed the lock when it died): on a
    # CPU, counting it flagged that run invalid as a shared CPU.
    mine = {"event": "take", "key": "gpu0", "index": 0, "run": "mine", "run_id": "m", "pid": os.getpid(), "time": 5.0}
    (tmp_path / LOG_FILE).write_text("".join(json.dumps(line) + "\n" for line in [lines[0], mine]))
    assert neighbours(Slot(tmp_path, 0, "gpu0", "mine", "m", taken=5.0), until=6.0) == []
    assert neighbours(Slot(tmp_path, 1, "gpu1", "other", "o", taken=0.5), until=6.0) == ["killed (gpu 0, run k)", "mine (gpu 0, run m)"]


def test_a_neighbour_killed_while_it_held_its_slot_is_still_a_neighbour(tmp_path: Path) -> None:
    """A take never released whose process is gone (killed: out of memory) was dropped, though it ran beside this
    run: a CPU run it shared was counted valid."""
    script = ("import sys, time; from eaq.slots import gpu_slot\n"
              f"with gpu_slot({str(tmp_path)!r}, 2, 'killed', 'k'):\n    print('held', flush=True); time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with gpu_slot(tmp_path, 2, "mine", "m") as slot:
            holder.kill()  # no release written
            holder.wait()
            assert slot.tags()["eaq.neighbours"] == "killed (gpu 0, run k)"
    finally:
        holder.kill()
    # Killed before this run took its slot (its lock free by then): never beside it.
    with gpu_slot(tmp_path, 2, "later", "l") as slot:
        assert slot.tags()["eaq.neighbours"] == "none"


def test_slots_on_a_host_without_gpus_keep_device_auto_on_the_cpu(tmp_path: Path) -> None:
    from eaq.slots import Slot

    assert Slot(tmp_path, 1, "gpu1", "r", "i").device("auto") == "cpu"  # gpu_slots.count=N on a CPU host
    assert Slot(tmp_path, 1, "GPU-1234", "r", "i").device("auto") == "cuda:1"
    with pytest.raises(ConfigError, match="NVML sees no GPU"):
        Slot(tmp_path, 1, "gpu1", "r", "i").device("cuda")


def test_a_slots_release_that_cannot_be_written_still_frees_the_slot(tmp_path: Path, caplog) -> None:
    """The release's log entry raised (a full or read-only disk) before the lock was let go: the joblib worker kept
    the slot held, and with one slot every later job of the sweep waited for it for good."""
    from eaq.slots import LOG_FILE

    folder = tmp_path / "slots"
    with gpu_slot(folder, 1, "first", "a"):
        (folder / LOG_FILE).unlink()
        (folder / LOG_FILE).mkdir()  # writing the release now fails (as root, a read-only file would not)
    assert "GPU slot gpu0 is free, and its release could not be written" in caplog.text
    (folder / LOG_FILE).rmdir()
    started = time.monotonic()
    with gpu_slot(folder, 1, "second", "b") as slot:  # in this same process, as a joblib worker's next job
        assert slot.index == 0
    assert time.monotonic() - started < 5


def test_the_slots_folder_and_its_files_are_open_to_every_user_of_the_host(tmp_path: Path) -> None:
    folder = tmp_path / "slots"
    with gpu_slot(folder, 2, "r", "i"):
        pass
    assert folder.stat().st_mode & 0o7777 == 0o1777
    modes = {f.name: f.stat().st_mode & 0o777 for f in folder.iterdir()}
    assert modes and set(modes.values()) == {0o666}, modes


@pytest.mark.skipif(bool(visible_gpus()), reason="this host has GPUs; the check is for a host without")
def test_the_gpus_launcher_on_a_host_without_gpus_stops_in_one_sentence_before_any_run(out: Path) -> None:
    with pytest.raises(ConfigError, match=r"sees no GPU.*gpu_slots\.count=N"):
        slot_count(None)
    result = run_eaq(out, "-m", "hydra/launcher=gpus", *FAST, "trial=1,2")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: the sweep stopped: resolving the launcher's settings (hydra.launcher) failed (GPU slots "
        "(hydra/launcher=gpus, or gpu_slots.enabled=true) give each job one of this host's GPUs, and this process sees "
        "no GPU (NVML found none); run on a GPU host, or set gpu_slots.count=N (under hydra/launcher=gpus, N jobs at "
        "once on the CPU).)"
    ]
    assert not out.exists()  # no store, no parent run
    # Slots asked for under the basic launcher: the sentence named hydra/launcher=gpus alone, which was not picked.
    single = run_eaq(out, *FAST, "gpu_slots.enabled=true")
    assert single.returncode == 2 and "or gpu_slots.enabled=true) give each job one of this host's GPUs" in single.stderr
    single = run_eaq(out, "hydra/launcher=gpus", *FAST)  # one run under the gpus launcher: refused as it started
    assert single.returncode == 2 and "give each job one of this host's GPUs" in single.stderr
    assert not (out / "mlflow.db").exists()  # before the run opened: no FAILED run of a command-line mistake
    # The same under the basic launcher's sweep: once, before any run (each job failed on it, a sweep of FAILED runs).
    swept = out.parent / "swept"
    sweep = run_eaq(swept, "-m", *FAST, "gpu_slots.enabled=true", "trial=1,2")
    assert sweep.returncode == 2 and "or gpu_slots.enabled=true) give each job one of this host's GPUs" in sweep.stderr
    assert sweep.stderr.count("give each job one of this host's GPUs") == 1 and not swept.exists()


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        # Every job at once on one device (device=auto: cuda:0, or the CPU), none of them told of the others.
        (["gpu_slots.count=2", "gpu_slots.enabled=false"], "with gpu_slots.enabled=false nothing gives each its own GPU"),
        (["gpu_slots.count=0"], "gpu_slots.count=0: a slot count is at least 1"),
        # Each job refused it, after the sweep had started: a sweep of FAILED runs.
        (["gpu_slots.count=2", "isolate=false"], "isolate=false with GPU slots (hydra/launcher=gpus, or gpu_slots.enabled=true)"),
        (["gpu_slots.count=2", "device=cuda:1"], "device=cuda:1 with GPU slots (hydra/launcher=gpus, or gpu_slots.enabled=true)"),
        (["gpu_slots.count=2", "hydra/launcher=basic", "gpu_slots.enabled=true", "isolate=false"], "isolate=false with GPU slots"),
        # Hydra's own joblib launcher: jobs side by side, measuring each other, counted valid and reused by resume.
        (["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], "hydra/launcher=joblib runs jobs side by side and nothing"),
    ],
)
def test_a_gpus_sweep_whose_slots_cannot_keep_jobs_apart_stops_before_any_run(out: Path, overrides: list[str], expected: str) -> None:
    result = run_eaq(out, "-m", "hydra/launcher=gpus", *FAST, "trial=1,2", *overrides)
    assert result.returncode == 2 and expected in result.stderr, result.stderr[-2000:]
    assert not out.exists()  # no store, no parent run


def test_a_sweep_another_launcher_runs_starts_no_fork_server_in_its_own_process(out: Path, tmp_path: Path) -> None:
    """The sweep's process started its fork server (torch's imports: 455 MB, 4 s of CPU) under hydra/launcher=gpus,
    whose jobs run in joblib's workers, each with a server of its own: it competed with their start."""
    command = [sys.executable, "-m", "eaq.run", *parallel_sweep(tmp_path / "slots", trials=("1", "2")),
               "trials.min_duration_s=5", f"paths.output_dir={out}"]
    sweep = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    servers = set()
    try:
        while sweep.poll() is None:
            with contextlib.suppress(psutil.NoSuchProcess):
                servers |= {c.pid for c in psutil.Process(sweep.pid).children() if "forkserver" in command_line(c)}
            time.sleep(0.2)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    assert sweep.returncode == 0
    assert not servers
    # Where the jobs do run in the sweep's process (one slot: joblib's one worker is its caller; the basic launcher),
    # its server starts first thing, its imports overlapping the sweep's set-up (an H200 host's one-GPU gpus sweep).
    from eaq.run import _sweep_elsewhere

    assert _sweep_elsewhere(["-m", "hydra/launcher=slurm_local"]) and not _sweep_elsewhere(["hydra/launcher=slurm"])
    assert not _sweep_elsewhere(["-m", "hydra/launcher=gpus", "gpu_slots.count=1"])
    assert not _sweep_elsewhere(["-m", "trial=1,2"]) and not _sweep_elsewhere(["-m", "hydra/launcher=joblib"])


def test_a_gpus_worker_killed_stops_the_sweep_in_a_sentence_and_closes_its_records(out: Path, tmp_path: Path) -> None:
    """joblib cannot lose a worker (the out-of-memory killer) and go on: the sweep ended in a 47-line traceback."""
    command = [sys.executable, "-m", "eaq.run", *parallel_sweep(tmp_path / "slots"), "trials.min_duration_s=60",
               f"paths.output_dir={out}"]
    sweep = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not [r for r in all_runs(out) if r.info.status == "RUNNING" and r.data.tags.get("eaq.kind") == "benchmark"]:
            assert time.monotonic() < deadline and sweep.poll() is None, "no run started"
            time.sleep(0.5)
        workers = [c for c in psutil.Process(sweep.pid).children() if "LokyProcess" in command_line(c)]
        assert workers, [command_line(c) for c in psutil.Process(sweep.pid).children()]
        workers[0].kill()
        _, stderr = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    assert sweep.returncode == 1
    assert ("error: the sweep stopped: a worker process of hydra/launcher=gpus ended without its job (exit SIGKILL(-9): "
            "out of memory, or a signal sent to it)") in stderr, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    statuses = {r.data.tags.get("eaq.kind"): r.info.status for r in all_runs(out) if r.info.status != "KILLED"}
    assert statuses == {"sweep": "FAILED"}, statuses  # every run under way KILLED, none left RUNNING


def test_a_slot_sweeps_job_with_a_value_the_slot_refuses_is_one_failed_run_and_the_sweep_goes_on(out: Path) -> None:
    """The sweep's own check sees none of its swept values: a job refusing its own (isolate=false) stopped the whole
    sweep, exit 2, the other job never run and no report."""
    result = run_eaq(out, "-m", *FAST, "sampler=none", "gpu_slots.enabled=true", "gpu_slots.count=1",
                     f"gpu_slots.dir={out.parent / 'slots'}", "device=cpu", "isolate=false,true")
    assert result.returncode == 1, result.stderr[-3000:]
    statuses = sorted((r.data.params.get("isolate"), r.info.status) for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark")
    assert statuses == [("False", "FAILED"), ("True", "FINISHED")], statuses
    assert "isolate=false with GPU slots" in result.stderr


def test_a_configuration_given_twice_in_a_parallel_sweep_is_measured_once(out: Path, tmp_path: Path) -> None:
    """compile_tuning is not read by an eager run: the two jobs are one configuration, side by side on two slots.
    Neither saw the other's FINISHED run, both measured, and the report counted two trials of trial 1."""
    result = run_eaq(out, "-m", "hydra/launcher=gpus", "gpu_slots.count=2", f"gpu_slots.dir={tmp_path / 'slots'}",
                     "device=cpu", *FAST, "sampler=none", "compile_tuning=true,false")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "1 finished, 0 failed, 1 skipped" in result.stderr, result.stderr[-3000:]
    assert len([r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"]) == 1
    said = result.stdout + result.stderr + "".join(p.read_text() for p in out.rglob("*.log"))
    assert "another job of this sweep measures the same configuration; waiting for it to end" in said  # not silent


def test_a_slot_sweep_under_another_cuda_order_stops_before_any_run(out: Path) -> None:
    """The parent run opened and the jobs were listed before the first job refused the order: the sweep ended FAILED
    with no reason of its own (under slurm_local, each job a FAILED run saying so)."""
    result = run_eaq(out, "-m", "hydra/launcher=gpus", "gpu_slots.count=2", "device=cpu", *FAST, "trial=1,2",
                     environ=os.environ | {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"})
    assert result.returncode == 2 and "gpu_slots need CUDA_DEVICE_ORDER=PCI_BUS_ID" in result.stderr, result.stderr[-2000:]
    assert not out.exists()


def check_neighbours(children: list[Run], slots: Path) -> None:
    """Runs on one slot never overlapped; runs that overlapped on two name each other, and no others."""
    holds = slot_holds(slots)
    assert not [(a, b) for i, a in enumerate(holds) for b in holds[i + 1 :] if a[0] == b[0] and overlapping(a, b)]
    assert any(overlapping(a, b) for i, a in enumerate(holds) for b in holds[i + 1 :]), "the jobs never ran at once"
    named = {
        r.info.run_id: {n.split("run ")[-1].rstrip(")") for n in r.data.tags["eaq.neighbours"].split("; ")} - {"none"}
        for r in children
    }
    for run in children:
        assert run.data.tags["eaq.gpu_slot"] in ("0", "1")
        assert all(map(documented_tag, run.data.tags)), [t for t in run.data.tags if not documented_tag(t)]
        assert run.data.tags["eaq.neighbours.count"] == str(len(named[run.info.run_id]))
        # These sweeps run on the CPU: a run that had a neighbour shared its CPU and stands for no configuration.
        shared = run.data.tags["eaq.neighbours.count"] != "0"
        assert (run.data.tags.get("eaq.valid") == "false") == shared, run.data.tags
        assert not shared or "beside" in run.data.tags["eaq.valid.reasons"]
        for other in named[run.info.run_id]:
            assert run.info.run_id in named[other]
        # The wait for a slot is a phase too: the phases and the isolation account for the run's wall time.
        metrics = run.data.metrics
        unexplained = metrics["run_wall_s"] - sum(v for k, v in metrics.items() if k.startswith("phase_")) - metrics["isolation_overhead_s"]
        assert "phase_slot_s" in metrics and 0 <= unexplained < 0.1 + 0.05 * metrics["run_wall_s"], (unexplained, metrics)
    assert any(named.values())


def test_a_parallel_sweep_on_sqlite_logs_every_run_once_and_each_runs_neighbours(out: Path, tmp_path: Path) -> None:
    slots = tmp_path / "slots"
    result = run_eaq(out, *parallel_sweep(slots))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Joblib.Parallel(n_jobs=2" in result.stdout + result.stderr
    children = check_sweep(store(out), result.stdout)
    check_neighbours(children, slots)
    # Each job's line says its run counts for nothing, and why.
    shared = [r.info.run_name for r in children if r.data.tags["eaq.neighbours.count"] != "0"]
    said = [line.split(" - ")[1].split(":")[0] for line in (result.stdout + result.stderr).splitlines() if "INVALID (ran on the CPU beside" in line]
    assert sorted(said) == sorted(shared), said


def test_a_sweep_through_submitits_local_executor_logs_every_run_once(tmp_path: Path) -> None:
    """Launched as the README does, from a folder with the default paths (outputs/ under it): the launcher's folder
    interpolates ``${hydra:runtime.cwd}``, which the launcher check resolved before Hydra had set it, and every
    submitit sweep stopped there ("HydraConfig was not set"); the tests' absolute paths.output_dir hid it."""
    trials = ("1", "2")  # submitit starts every job at once, each in a fresh interpreter: two are enough
    command = [sys.executable, "-m", "eaq.run", "-m", "hydra/launcher=slurm_local", *FAST, "sampler=none", f"trial={','.join(trials)}"]
    env = os.environ | {"PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)}
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    out = tmp_path / "outputs"
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Submitit 'local' sweep" in result.stdout + result.stderr
    children = check_sweep(store(out), result.stdout, trials)
    # A rehearsal (every job at once on this host): no run stands for its configuration, and each says why.
    assert {r.data.tags["eaq.valid"] for r in children} == {"false"}
    assert all("submitit's local executor" in r.data.tags["eaq.valid.reasons"] for r in children)
    assert list(out.glob("multirun/*/.submitit/*/*_result.pkl"))  # each job went through submitit
    # Each job left its record in the sweep folder, as under joblib: one plain line per finished job.
    lines = [line for line in result.stderr.splitlines() if line.startswith("[sweep ")]
    assert [line.split("]")[0] for line in lines] == ["[sweep 1/2", "[sweep 2/2"], lines
    assert lines[-1].endswith("; 2 finished, 0 failed, 0 skipped"), lines


def _wait_for_a_measuring_run(sweep: subprocess.Popen, out: Path) -> None:
    """Until the sweep's job has a benchmark run RUNNING in the store; a sweep that ended first fails with its output."""
    deadline = time.monotonic() + 300
    while not any(r.info.status == "RUNNING" and r.data.tags.get("eaq.kind") == "benchmark" for r in all_runs(out)):
        if sweep.poll() is not None:
            stdout, stderr = sweep.communicate()
            pytest.fail(f"the sweep ended (exit {sweep.returncode}) before its job's run started:\n{stdout[-2000:]}\n{stderr[-4000:]}")
        assert time.monotonic() < deadline, "the job's run never started"
        time.sleep(0.2)


def test_a_job_signalled_before_its_time_limit_ends_its_one_run_failed_saying_so(out: Path) -> None:
    """SLURM signals a job (USR2, through submitit's handler) ahead of its time limit or a preemption; upstream's
    launcher then requeued it, and each start left a run RUNNING (the local executor's three requeues ran a slow job
    four times). The signal is sent here as SLURM would, to the job's process, while its run measures."""
    command = [sys.executable, "-m", "eaq.run", "-m", "hydra/launcher=slurm_local", *FAST, "sampler=none",
               "trials.min_duration_s=60", f"paths.output_dir={out}"]
    sweep = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=os.environ | {"PYTHONUNBUFFERED": "1"})
    try:
        _wait_for_a_measuring_run(sweep, out)
        (task,) = psutil.Process(_job_processes(out)[0]).children()  # the local executor's controller runs the task
        task.send_signal(signal.SIGUSR2)
        stdout, stderr = sweep.communicate(timeout=120)
    finally:
        sweep.kill()
    assert sweep.returncode == 1, stderr[-3000:]
    (run,) = [r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"]  # started once, not requeued
    assert run.info.status == "FAILED", run.data.tags
    assert run.data.tags["eaq.error"].startswith("JobEndedError: SLURM signalled this job that it is about to end: its "
                                                 "time limit (hydra.launcher.timeout_min=60)"), run.data.tags["eaq.error"]
    assert "sweep: 0 of 1 runs finished" in stdout


def test_slurms_signal_raised_inside_a_store_call_is_read_as_the_signal_not_as_the_store_failing() -> None:
    """submitit raises where the job is: inside a store call SQLAlchemy wraps it (StatementError), and the run's error
    read "the MLflow tracking store ... failed (Job not requeued ...)" (a clean-clone CI run, 2026-11-29)."""
    from sqlalchemy.exc import StatementError
    from submitit.core.utils import UncompletedJobError

    from eaq.tasks.job import scheduler_ended

    signalled = UncompletedJobError("Job not requeued because: checkpoint function returned None.")
    hydra = OmegaConf.create({"launcher": {"timeout_min": 60}})
    for raised in (signalled, StatementError("(submitit...) Job not requeued", "INSERT INTO runs", {}, signalled)):
        assert str(scheduler_ended(raised, hydra)).startswith("SLURM signalled this job that it is about to end")
    assert scheduler_ended(StatementError("a store's own error", "INSERT", {}, ValueError("x")), hydra) is None


def test_a_submitit_sweep_stopped_by_sigterm_stops_its_jobs(out: Path) -> None:
    """SIGTERM, as a scheduler stops the sweep's own job, to the sweep's process alone, started in the background of a
    script (SIGINT ignored, inherited by every process it starts: the SIGINT the sweep hands its jobs passed them by,
    and they measured on as orphans after the sweep said they stopped)."""
    command = [sys.executable, "-m", "eaq.run", "-m", "hydra/launcher=slurm_local", *FAST, "sampler=none",
               "trials.min_duration_s=60", f"paths.output_dir={out}"]
    sweep = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=os.environ | {"PYTHONUNBUFFERED": "1"}, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        _wait_for_a_measuring_run(sweep, out)
        family = [sweep.pid, *(p.pid for p in psutil.Process(sweep.pid).children(recursive=True))]
        sweep.send_signal(signal.SIGTERM)
        stdout, stderr = sweep.communicate(timeout=120)
    finally:
        sweep.kill()
    assert sweep.returncode == 143, stderr[-3000:]
    deadline = time.monotonic() + 60  # the job's process records its run KILLED as it stops, then exits
    while (alive := [p for p in family if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]) \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not alive, f"processes of the stopped sweep still running: {alive}"
    (run,) = [r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"]
    assert run.info.status == "KILLED"


def test_a_gpus_sweep_stopped_by_sigterm_leaves_no_run_running(out: Path, tmp_path: Path) -> None:
    """joblib kills its workers (and the runs' processes under them) as the sweep stops, before they can record their
    runs' end: the parent ended FAILED and the runs under way stayed RUNNING. The sweep's process ends them KILLED."""
    command = [sys.executable, "-m", "eaq.run", *parallel_sweep(tmp_path / "slots", trials=("1", "2")),
               "trials.min_duration_s=60", f"paths.output_dir={out}"]
    sweep = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=os.environ | {"PYTHONUNBUFFERED": "1"})
    try:
        _wait_for_a_measuring_run(sweep, out)
        sweep.send_signal(signal.SIGTERM)
        stdout, stderr = sweep.communicate(timeout=120)
    finally:
        sweep.kill()
    assert sweep.returncode == 143, stderr[-3000:]
    runs = all_runs(out)
    measuring = [r for r in runs if r.data.tags.get("eaq.kind") == "benchmark"]
    assert measuring and not any(r.info.status == "RUNNING" for r in runs), [(r.info.run_name, r.info.status) for r in runs]
    assert all(r.info.status == "KILLED" for r in measuring), [(r.info.run_name, r.info.status) for r in measuring]
    (parent,) = [r for r in runs if r.data.tags.get("eaq.kind") == "sweep"]
    assert parent.info.status == "FAILED"


def test_a_launcher_setting_submitit_does_not_take_is_one_sentence(out: Path) -> None:
    """submitit's NameError ended the sweep in a traceback."""
    result = run_eaq(out, "-m", "hydra/launcher=slurm_local", "+hydra.launcher.signal_delay_s=90", *FAST, "sampler=none")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "hydra.launcher holds a setting submitit's local executor does not take (Unknown argument 'signal_delay_s'" in result.stderr
    (parent,) = all_runs(out)
    assert parent.info.status == "FAILED"  # the sweep's parent run, closed as the sweep exits


def test_a_slurm_sweep_stopped_cancels_its_jobs_still_queued_or_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SLURM's jobs run on other nodes, out of any signal's reach: a stopped sweep said its run was KILLED while they
    measured on, and the same command again submitted their configurations a second time. (No SLURM here: jobs that
    say whether they are done and take a cancel stand in for submitit's.)"""
    from hydra_plugins.eaq_launchers.submitit_collect import LocalLauncher, SlurmLauncher

    class Job:
        def __init__(self, job_id: int, done: bool) -> None:
            self.job_id, self._done, self.cancelled, self.looked = job_id, done, False, 0

        def done(self) -> bool:
            self.looked += 1
            if self.job_id == 3 and self.looked == 1:  # the stop comes as the sweep looks at the jobs; job 2 had
                jobs[1]._done = True                   # just ended from outside (out of memory), uncollected
                raise KeyboardInterrupt
            return self._done

        def cancel(self, check: bool = True) -> None:
            self.cancelled = True

    previous = signal.getsignal(signal.SIGINT)
    for launcher, cancelled in ((SlurmLauncher(), [False, False, True]), (LocalLauncher(), [False, False, False])):
        jobs = [Job(1, done=True), Job(2, done=False), Job(3, done=False)]
        recorded = []  # each job's record: collected (its result, or its run ended FAILED), or ended KILLED from here
        monkeypatch.setattr(launcher, "_executor", lambda: type("Executor", (), {"map_array": lambda *_: jobs})())
        # Collected after the jobs still running were cancelled: a job without a result takes submitit 15 s to give up on.
        monkeypatch.setattr(launcher, "_collect", lambda job, overrides, number: recorded.append(
            (number, "collected" if jobs[2].cancelled == launcher._CANCEL_ON_STOP else "collected before the cancel")))
        monkeypatch.setattr(launcher, "_ended", lambda job, overrides, number, reason, status: recorded.append((number, status)))
        launcher.config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path / "sweep")}}})
        with pytest.raises(KeyboardInterrupt):
            launcher.launch([["trial=1"], ["trial=2"], ["trial=3"]], 0)
        assert [job.cancelled for job in jobs] == cancelled
        # The jobs that had ended are collected under either launcher: job 2's run stayed RUNNING for good.
        assert recorded == [(0, "collected"), (1, "collected"), *([(2, "KILLED")] if any(cancelled) else [])]
    signal.signal(signal.SIGINT, previous)  # the stop's handling ignored it in this process


def test_a_job_the_scheduler_started_again_ends_its_earlier_run_and_leaves_others_alone(tmp_path: Path) -> None:
    """SLURM requeues a job itself (PreemptMode=REQUEUE, a node failure) with no signal to the job: its next start
    ends FAILED the run the first left RUNNING, which the sweep's summary counted as a second, failed run of the job."""
    from omegaconf import OmegaConf

    from eaq.tasks.job import JOB_TAG, _supersede
    from eaq.tracking.callbacks import PARENT_ID_FILE
    from eaq.tracking.run_logger import PARENT_TAG, TrackedRun
    from eaq.tracking.store import open_store

    client, experiment = open_store(f"sqlite:///{tmp_path}/mlflow.db", "eaq", str(tmp_path / "artifacts"))
    parent = TrackedRun(client, experiment, "sweep", {"eaq.kind": "sweep"})
    (tmp_path / PARENT_ID_FILE).write_text(parent.run_id)
    job = {PARENT_TAG: parent.run_id, "eaq.kind": "benchmark"}
    runs = {key: TrackedRun(client, experiment, key, {JOB_TAG: number, **job}) for key, number in (("first start", "3"), ("another job", "4"))}
    finished = TrackedRun(client, experiment, "ended", {JOB_TAG: "3", **job})
    finished.end("FINISHED")
    failed = TrackedRun(client, experiment, "preempted", {JOB_TAG: "3", **job})
    failed.end("FAILED")  # ended by eaq as SLURM signalled a preemption, before SLURM requeued the job
    _supersede(client, experiment, OmegaConf.create({"job": {"num": 3}, "sweep": {"dir": str(tmp_path)}, "runtime": {"cwd": "/"}}))
    first = client.get_run(runs["first start"].run_id)
    assert first.info.status == "FAILED" and "started this job again (a requeue)" in first.data.tags["eaq.error"]
    assert "eaq.superseded" in first.data.tags and "eaq.superseded" in client.get_run(failed.run_id).data.tags
    assert client.get_run(runs["another job"].run_id).info.status == "RUNNING"
    assert "eaq.superseded" not in client.get_run(runs["another job"].run_id).data.tags
    ended = client.get_run(finished.run_id)
    assert ended.info.status == "FINISHED" and "eaq.superseded" not in ended.data.tags
    # Neither the sweep's summary nor the report counts a replaced start.
    from eaq.report.frame import fetch_runs

    counted = {r.info.run_id for r in fetch_runs(f"sqlite:///{tmp_path}/mlflow.db", sweep=parent.run_id)}
    assert counted == {runs["another job"].run_id, finished.run_id}


def test_a_slurm_sweep_where_there_is_no_slurm_is_one_sentence_before_anything_opens(out: Path) -> None:
    """submitit's own check ("Could not detect srun") came after the sweep's parent run opened: a 29-line traceback,
    exit 1, and a FAILED sweep of nothing in the store."""
    path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                           if not any((Path(d) / tool).exists() for tool in ("sbatch", "srun")))
    done = run_eaq(out, "-m", "hydra/launcher=slurm", *FAST, "precision=fp32,fp16", environ=os.environ | {"PATH": path})
    assert done.returncode == 2, done.stderr[-3000:]
    assert "this machine has no SLURM (sbatch and srun are not on PATH)" in done.stderr
    assert "hydra/launcher=slurm_local" in done.stderr and "Traceback" not in done.stderr
    assert not (out / "mlflow.db").exists() or not all_runs(out)


def test_the_slurm_preset_hands_every_setting_to_submitits_slurm_executor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """eaq's SLURM launcher builds submitit's executor itself (it collects jobs its own way): the preset's keys, a key
    of submitit's SLURM launcher set from the command line and the executor's own setting all arrive. This machine has
    no SLURM: an ``srun`` that does nothing stands in for the one submitit looks for before building."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    register_schemas()
    OmegaConf.register_new_resolver("eaq.pid", os.getpid, replace=True)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        config = compose("config", return_hydra_config=True, overrides=[
            "hydra/launcher=slurm", "hydra.launcher.partition=gpu", "hydra.launcher.qos=high", "hydra.launcher.timeout_min=90",
            "hydra.launcher.max_num_timeout=2", f"hydra.sweep.dir={tmp_path / 'sweep'}"])
    HydraConfig.instance().set_config(config)
    executor = instantiate(config.hydra.launcher)._executor()
    assert type(executor._executor).__name__ == "SlurmExecutor" and executor._executor.max_num_timeout == 2
    assert str(executor.folder) == str(tmp_path / "sweep" / ".submitit" / "%j")
    settings = executor._executor.parameters
    assert {k: settings[k] for k in ("partition", "qos", "time", "gpus_per_node", "cpus_per_task", "mem", "array_parallelism")} == {
        "partition": "gpu", "qos": "high", "time": 90, "gpus_per_node": 1, "cpus_per_task": 8, "mem": "64GB", "array_parallelism": 16}


def test_a_job_without_a_result_is_said_by_how_it_ended(tmp_path: Path) -> None:
    """Real jobs of submitit's local executor: one that raised, one that exited, one killed from outside. Each reason
    says which, with where its output is: a job that could not reach the store was blamed on a time limit."""
    from hydra_plugins.eaq_launchers.submitit_collect import _why
    from submitit.core.utils import UncompletedJobError

    # Defined here, so that cloudpickle sends them by value: the jobs' interpreters cannot import this test module.
    def _raises() -> None:
        raise RuntimeError("the model's config could not be read")

    def _exits() -> None:
        print("error: the MLflow tracking store could not be opened", file=sys.stderr, flush=True)
        # What multiprocessing's resource tracker writes on a process's way out: no warning is what ended the job.
        print("/usr/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: There "
              "appear to be 1 leaked semaphore objects\n  warnings.warn('resource_tracker: There appear to be %d '\n"
              "/home/my user/torch/cuda/__init__.py:174: UserWarning: CUDA initialization: no driver\n"
              "  return torch._C._cuda_getDeviceCount() > 0", file=sys.stderr, flush=True)
        os._exit(2)  # as a job's sys.exit(2) that submitit never sees return: no result file

    def _sleeps() -> None:
        time.sleep(60)

    executor = submitit.AutoExecutor(cluster="local", folder=tmp_path / "%j")
    executor.update_parameters(timeout_min=5)
    raised, exited, killed = (executor.submit(f) for f in (_raises, _exits, _sleeps))
    deadline = time.monotonic() + 60
    while not (Path(tmp_path) / killed.job_id / f"{killed.job_id}_0_log.out").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    _kill_tree(int(killed.job_id))
    reasons = []
    for job in (raised, exited, killed):
        with pytest.raises(UncompletedJobError) as error:
            job.results()
        reasons.append(_why(job, error.value))
    assert f"job {raised.job_id} raised before it returned (RuntimeError: the model's config could not be read)" in reasons[0]
    assert f"job {exited.job_id} exited without returning a result" in reasons[1]
    assert "the last line of its error output: error: the MLflow tracking store could not be opened" in reasons[1]
    assert f"job {killed.job_id} ended before it finished, from outside (submitit reads its state as INTERRUPTED)" in reasons[2]
    assert all("_0_log.out" in r and "resume" in r for r in reasons), reasons


def _job_processes(out: Path) -> dict[int, int]:
    """Job number -> pid of each job submitit's local executor has started (its folder is named by the pid; the
    pickled submission holds the job's arguments, the number third)."""
    jobs = {}
    for folder in out.glob("multirun/*/.submitit/*"):
        submitted = folder / f"{folder.name}_submitted.pkl"
        if submitted.exists():
            try:
                jobs[DelayedSubmission.load(submitted).args[2]] = int(folder.name)
            except (EOFError, pickle.UnpicklingError):  # still being written
                pass
    return jobs


def _kill_tree(pid: int) -> None:
    """SIGKILL a job and everything it started, as SLURM ends a job past its time limit or memory (its cgroup)."""
    job = psutil.Process(pid)
    for process in [*job.children(recursive=True), job]:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()


def test_a_job_ended_from_outside_is_a_failed_run_and_the_sweep_goes_on_to_its_summary_and_report(out: Path) -> None:
    """Three jobs through submitit: one killed before it could open its run, one killed while its run measured, one
    left alone. Upstream's launcher stopped the sweep at the first (no summary, no report, a RUNNING run)."""
    command = [sys.executable, "-m", "eaq.run", "-m", "hydra/launcher=slurm_local", *FAST, "sampler=none", "trial=1,2,3",
               "trials.min_duration_s=15", f"paths.output_dir={out}"]
    sweep = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=os.environ | {"PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 300
        while 0 not in (jobs := _job_processes(out)):
            assert time.monotonic() < deadline and sweep.poll() is None, "the first job never started"
            time.sleep(0.05)
        _kill_tree(jobs[0])
        killed_running = None
        while killed_running is None:
            assert time.monotonic() < deadline and sweep.poll() is None, "the second job's run never started"
            time.sleep(0.2)
            running = [r for r in all_runs(out) if r.data.tags.get("eaq.sweep.job") == "1" and r.info.status == "RUNNING"]
            if running:
                killed_running = running[0].info.run_id
                _kill_tree(_job_processes(out)[1])
        stdout, stderr = sweep.communicate(timeout=600)
    finally:
        sweep.kill()
    assert sweep.returncode == 1, stderr[-3000:]
    children = {r.data.tags["eaq.sweep.job"]: r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"}
    assert sorted(children) == ["0", "1", "2"]
    assert children["1"].info.run_id == killed_running  # the killed job's own run, ended by the sweep
    for number in ("0", "1"):
        run = children[number]
        assert run.info.status == "FAILED"
        assert run.data.tags["eaq.error"].startswith("JobEndedError: job "), run.data.tags
        assert "ended before it finished" in run.data.tags["eaq.error"]
        assert run.data.params["trial"] == str(int(number) + 1)  # the killed job's config, even where it logged none
        assert all(map(documented_tag, run.data.tags)), [t for t in run.data.tags if not documented_tag(t)]
    assert children["2"].info.status == "FINISHED"
    assert "sweep: 1 of 3 runs finished" in stdout
    assert "FAILED: bert-tiny-random-fp32-b4-t1: JobEndedError: job" in stderr
    lines = [line for line in stderr.splitlines() if line.startswith("[sweep ")]
    assert len(lines) == 3 and lines[-1].endswith("; 1 finished, 2 failed, 0 skipped"), lines
    (parent,) = [r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "sweep"]
    assert parent.info.status == "FAILED"
    assert "report/report.html" in {f.path for f in store(out).list_artifacts(parent.info.run_id, "report")}


def test_a_job_whose_submitit_controller_is_killed_stops_measuring_and_its_run_does_not_finish(out: Path) -> None:
    """submitit's local executor runs each job's task under a controller process (the pid the sweep folder names). A
    SIGKILL to that controller alone left the task an orphan measuring on: the collector recorded the job failed, then
    the orphan closed its run FINISHED and the sweep said every run finished, exit 0."""
    command = [sys.executable, "-m", "eaq.run", "-m", "hydra/launcher=slurm_local", *FAST, "sampler=none",
               "trials.min_duration_s=60", f"paths.output_dir={out}"]
    sweep = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=os.environ | {"PYTHONUNBUFFERED": "1"}, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not [r for r in all_runs(out) if r.info.status == "RUNNING" and r.data.tags.get("eaq.kind") == "benchmark"]:
            assert time.monotonic() < deadline and sweep.poll() is None, "the job's run never started"
            time.sleep(0.2)
        controller = psutil.Process(_job_processes(out)[0])
        tasks = controller.children()
        assert tasks, "the controller started no task"
        controller.kill()  # the controller alone: its task is left to notice
        killed = time.monotonic()
        _, stderr = sweep.communicate(timeout=300)
        assert time.monotonic() - killed < 45, "the task measured on to the end of its 60 s"
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    assert not [t for t in tasks if t.is_running() and t.status() != psutil.STATUS_ZOMBIE], "the task outlived its controller"
    assert sweep.returncode == 1, stderr[-3000:]
    (run,) = [r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"]
    assert run.info.status in ("KILLED", "FAILED"), run.info.status
    said = run.data.tags["eaq.error"]  # the task's own word, or the collector's where it came first
    assert "submitit's controller) ended" in said or "ended before it finished" in said, said


def test_a_slurm_local_sweep_started_under_nohup_outlives_the_terminals_hangup(out: Path) -> None:
    """A job's task stops when its controller dies; a SIGHUP to the sweep's process group (a logout, which nohup has
    it ignore) had been taken for that death, and its run ended KILLED."""
    command = [sys.executable, "-m", "eaq.run", "-m", "hydra/launcher=slurm_local", *FAST, "sampler=none",
               "trials.min_duration_s=10", f"paths.output_dir={out}"]
    sweep = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        deadline = time.monotonic() + 300
        while not [r for r in all_runs(out) if r.info.status == "RUNNING" and r.data.tags.get("eaq.kind") == "benchmark"]:
            assert time.monotonic() < deadline and sweep.poll() is None, "the job's run never started"
            time.sleep(0.2)
        os.killpg(sweep.pid, signal.SIGHUP)
        _, stderr = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    assert sweep.returncode == 0, stderr[-3000:]
    assert [r.info.status for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"] == ["FINISHED"]


def test_a_job_ended_from_outside_is_recorded_when_it_ends_not_when_the_jobs_before_it_do(out: Path) -> None:
    """The jobs were collected in the order submitted: a later job killed from outside (out of memory at minute 1)
    stayed RUNNING, uncounted in the progress, until every job before it ended (hours), and for good where the sweep
    was stopped first."""
    command = [sys.executable, "-m", "eaq.run", "-m", "hydra/launcher=slurm_local", *FAST, "sampler=none",
               "trials.min_duration_s=300,30", f"paths.output_dir={out}"]
    said = out.parent / "stderr.txt"  # a file, not a pipe: nothing reads it while the sweep runs
    with said.open("w") as stderr:
        sweep = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=stderr,
                                 env=os.environ | {"PYTHONUNBUFFERED": "1"}, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not ({r.data.tags.get("eaq.sweep.job") for r in all_runs(out) if r.info.status == "RUNNING"}
                   if list(out.glob("multirun/*/mlflow_parent_run_id.txt")) else set()) >= {"0", "1"}:
            assert time.monotonic() < deadline and sweep.poll() is None, "the jobs' runs never started"
            time.sleep(0.5)
        _kill_tree(_job_processes(out)[1])
        ended = time.monotonic()
        while (late := {r.data.tags["eaq.sweep.job"]: r.info.status for r in all_runs(out)
                        if r.data.tags.get("eaq.kind") == "benchmark"})["1"] == "RUNNING":
            assert time.monotonic() < ended + 60, "the killed job's run stayed RUNNING"
            time.sleep(0.5)
        assert late == {"0": "RUNNING", "1": "FAILED"}  # recorded while the job submitted before it still measures
        os.kill(sweep.pid, signal.SIGTERM)
        sweep.wait(timeout=300)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    assert sweep.returncode == 143, said.read_text()[-3000:]
    assert sorted(r.info.status for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark") == ["FAILED", "KILLED"]


def _ended_job(out: Path, sweep: Path, overrides: list[str]) -> str:
    """What the sweep's process records for job 0 of the sweep in ``sweep`` that returned no result, set up as eaq's
    submitit launcher sets it up (eaq.tasks.job.record_ended_job under that job's HydraConfig)."""
    from eaq.tasks.job import record_ended_job

    register_schemas()
    OmegaConf.register_new_resolver("eaq.pid", os.getpid, replace=True)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        config = compose("config", return_hydra_config=True,
                         overrides=[*overrides, f"paths.output_dir={out}", f"hydra.sweep.dir={sweep}"])
    with open_dict(config.hydra):
        config.hydra.mode, config.hydra.job.num, config.hydra.runtime.cwd = RunMode.MULTIRUN, 0, str(REPO)
    HydraConfig.instance().set_config(config)
    task_config = config.copy()
    with open_dict(task_config):
        del task_config["hydra"]
    return record_ended_job(task_config, "job 7 ended before it finished, from outside")


def test_a_job_ended_after_resume_skipped_it_stays_skipped(out: Path) -> None:
    """A job its scheduler ended between resume's skip and its return has no run to end: it counts as skipped, with no
    FAILED run beside the FINISHED one it was skipped for. A job of a sweep that skipped nothing is still a failure."""
    overrides = [*FAST, "sampler=none", "trial=1"]
    for sweep in ("first", "second"):
        done = run_eaq(out, "-m", *overrides, f"hydra.sweep.dir={out / sweep}")
        assert done.returncode == 0, done.stderr[-2000:]
    assert "sweep: nothing measured (parent run " in done.stdout and "; 1 skipped, already FINISHED" in done.stdout, done.stdout
    (measured,) = [(r.info.run_id, r.info.status) for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"]

    assert _ended_job(out, out / "second", overrides) == "skipped"
    assert [(r.info.run_id, r.info.status) for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"] == [measured]
    assert json.loads((out / "second" / ".progress" / "0.json").read_text())["status"] == "skipped"

    assert _ended_job(out, out / "third", overrides) == "failed"
    statuses = sorted(r.info.status for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark")
    assert statuses == ["FAILED", "FINISHED"]


def _postgres_bin() -> Path | None:
    """The folder of initdb and pg_ctl: on PATH, or where Debian's packages put them."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(versions[-1]).parent if versions else None


@pytest.fixture
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on a loopback port; yields its SQLAlchemy URI, stops and deletes it after.

    PostgreSQL refuses to run as root, so as root the cluster belongs to the ``postgres``
    user the distribution's package creates, in a folder of its own outside pytest's
    (root-only) tmp_path.
    """
    binaries = _postgres_bin()
    if binaries is None:
        reason = "PostgreSQL's initdb and pg_ctl are not installed (apt-get install postgresql; .ci/run does)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}: in CI they must be")
        pytest.skip(reason)
    as_user: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="eaq-postgres-"))
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    data = folder / "data"

    def pg(*cmd: str) -> None:
        done = subprocess.run([*as_user, *cmd], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{cmd[0]} failed: {done.stdout[-2000:]}{done.stderr[-2000:]}"

    try:
        pg(str(binaries / "initdb"), "-D", str(data), "-U", "eaq", "--auth=trust", "-E", "UTF8", "--no-sync")
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        pg(str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(folder / "server.log"), "-w", "start")
        try:
            pg(str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "eaq", "eaq")
            yield f"postgresql+psycopg://eaq@127.0.0.1:{port}/eaq"
        finally:
            pg(str(binaries / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_parallel_sweep_on_an_mlflow_server_over_postgresql_logs_every_run_once_and_resumes(
    out: Path, tmp_path: Path, postgres: str
) -> None:
    with mlflow_server_on(postgres, tmp_path / "server-artifacts", workers=2) as port:
        uri = f"http://127.0.0.1:{port}"
        slots = tmp_path / "slots"
        result = run_eaq(out, *parallel_sweep(slots, f"tracking.uri={uri}"))
        assert result.returncode == 0, result.stderr[-3000:]
        client = MlflowClient(tracking_uri=uri)
        children = check_sweep(client, result.stdout)
        check_neighbours(children, slots)
        assert not (out / "mlflow.db").exists()  # nothing went to the default SQLite store

        # The same sweep again (one job at a time): a configuration FINISHED on the server is skipped, unless its run
        # shared this CPU with another (two jobs at once on one CPU measure each other): that one is measured again.
        shared = [r for r in children if r.data.tags["eaq.neighbours.count"] != "0"]
        again = run_eaq(out, "-m", "device=cpu", *FAST, "sampler=none", f"trial={','.join(TRIALS)}", f"tracking.uri={uri}")
        assert again.returncode == 0, again.stderr[-3000:]
        reused = len(TRIALS) - len(shared)
        assert (f"{reused} skipped, already FINISHED" in again.stdout) == (reused > 0), again.stdout
        runs = client.search_runs([client.get_experiment_by_name("eaq").experiment_id])
        assert len([r for r in runs if r.data.tags.get("eaq.kind") == "benchmark"]) == len(TRIALS) + len(shared)
        # Its report, built from the server, is of the runs it reused and measured: every trial of the one configuration.
        assert "sweep report: not built" not in again.stderr
        from eaq.report.frame import load
        parent = max((r for r in runs if r.data.tags.get("eaq.kind") == "sweep"), key=lambda r: r.info.start_time)
        assert len([t for t in parent.data.tags if t.startswith("eaq.reused.")]) == reused
        assert sorted(load(uri, sweep=parent.info.run_id)["trial"]) == sorted(int(t) for t in TRIALS)


def test_a_store_password_with_spaces_reaches_postgresql_and_no_record(out: Path, postgres: str) -> None:
    """SQLAlchemy takes a password raw, spaces and all; no shape rule can tell its end from the text after a URL, so
    eaq redacts the password it was given. The cluster trusts every login: the password is carried, not checked."""
    password = "pa ss word"
    uri = postgres.replace("eaq@", f"eaq:{password}@", 1)
    result = run_eaq(out, "-m", *FAST, "sampler=none", "trial=1", f"tracking.uri={uri}")
    assert result.returncode == 0, result.stderr[-3000:]
    # Nor as Hydra escapes it in a sweep's overrides (pa\\ ss\\ word) or YAML folds it over two lines (.hydra/hydra.yaml's
    # override_dirname, every override on one line, is folded at a space past 80 characters).
    spelled = re.compile(rb"pa(?:\\?\s)+ss(?:\\?\s)+word")
    assert not spelled.search((result.stdout + result.stderr).encode())
    assert [p for p in out.rglob("*") if p.is_file() and spelled.search(p.read_bytes())] == []
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("eaq").experiment_id])
    assert len(runs) == 2 and {r.info.status for r in runs} == {"FINISHED"}
    records = [(r.data.params, r.data.tags, r.info.run_name) for r in runs]
    assert password not in repr(records)
    (child,) = [r for r in runs if r.data.tags.get("eaq.kind") == "benchmark"]
    assert child.data.params["tracking.uri"] == postgres.replace("eaq@", "eaq:<redacted>@", 1)


def _frame(energies: dict[str, list[float]]) -> pd.DataFrame:
    """Benchmark runs as eaq.report.frame builds them: one row per trial of each precision."""
    rows = [
        {"kind": "benchmark", "status": "FINISHED", "valid": "true", "model": "m", "precision": precision,
         "batch_size": 8, "seq_len": 128, "compile": False, "compile_tuning": True, "compile_pattern_matcher": True,
         "cuda_graphs": False, "workload": "forward", "setting": "", "running": False, "trial": trial,
         "energy_per_sample_mj": value}
        for precision, values in energies.items()
        for trial, value in enumerate(values, 1)
    ]
    return pd.DataFrame(rows)


def test_one_gpu_against_two_agrees_only_within_the_trials_own_spread() -> None:
    one = _frame({"bf16": [10.0, 11.0, 12.0], "fp32": [10.0, 10.1, 10.2]})
    two = _frame({"bf16": [10.5, 11.5, 12.5], "fp32": [12.0, 12.1, 12.2]})
    table = side_by_side(one, two)
    assert table.loc["m-bf16-b8-s128", "agree"] == "yes"  # 0.5 apart, std 1
    assert table.loc["m-fp32-b8-s128", "agree"] == "no"  # 2 apart, std 0.1
    assert table.loc["m-fp32-b8-s128", "difference_pct"] == pytest.approx(19.8, abs=0.1)


def test_a_parallel_sweep_prints_progress_lines_from_its_jobs_records(out: Path, tmp_path: Path) -> None:
    """Under joblib no job's hook runs in the sweep process: the plain lines come from the records the jobs leave."""
    # Each trial finishes with cuda_graphs=false and fails with cuda_graphs=true (it needs compile=true).
    result = run_eaq(out, *parallel_sweep(tmp_path / "slots", "cuda_graphs=false,true", trials=("1", "2")))
    assert result.returncode == 1, result.stderr[-3000:]  # a sweep with failed runs exits 1
    assert "Joblib.Parallel(n_jobs=2" in result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("[sweep ")]
    assert [line.split("]")[0] for line in lines] == [f"[sweep {i}/4" for i in range(1, 5)], lines
    statuses = [line.split("]")[1].split(" in ")[0].rsplit(" ", 1)[1] for line in lines]
    assert sorted(statuses) == ["failed", "failed", "finished", "finished"], lines
    assert lines[-1].endswith("; 2 finished, 2 failed, 0 skipped"), lines
    # Each line's counts are those of the runs ended so far, and the time left is on all but the last.
    for i, line in enumerate(lines):
        counts = ", ".join(f"{statuses[: i + 1].count(s)} {s}" for s in ("finished", "failed", "skipped"))
        assert f"; {counts}" in line, line
        assert ("left" in line) == (i < 3), line
    assert not any("\r" in line or "\x1b[" in line for line in result.stderr.splitlines())  # no bar, no escape codes


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _joblib_config(sweep_dir: Path, num: int = 0) -> DictConfig:
    """What Hydra hands the callbacks in a joblib sweep of two jobs: the sweep's config, or job ``num``'s."""
    config = OmegaConf.create({"run_name": f"run{num}", "hydra": OmegaConf.structured(HydraConf)})
    config.hydra.merge_with({
        "launcher": {"_target_": "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"},
        "sweeper": {"params": None}, "sweep": {"dir": str(sweep_dir)}, "overrides": {"task": ["trial=1,2"]},
        "mode": RunMode.MULTIRUN, "job": {"num": num}, "runtime": {"cwd": str(sweep_dir.parent)},
    })
    return config


def test_in_a_terminal_the_bar_counts_what_jobs_in_other_processes_record(tmp_path: Path) -> None:
    """The bar, not plain lines, in a terminal: no phase line is drawn under joblib, and the bar does without it."""
    terminal = _Terminal()
    progress = SweepProgress(terminal)
    progress.on_multirun_start(_joblib_config(tmp_path))
    for num, job_return in enumerate((JobReturn(status=JobStatus.COMPLETED, _return_value="finished"), JobReturn(status=JobStatus.FAILED))):
        worker = pickle.loads(pickle.dumps(progress))  # the copy joblib hands a worker
        config = _joblib_config(tmp_path, num)
        HydraConfig.instance().set_config(config)  # as Hydra sets it for each job
        worker.on_job_start(config)
        worker.on_job_end(config, job_return)
    progress.on_multirun_end(_joblib_config(tmp_path))
    drawn = terminal.getvalue()
    assert "[sweep " not in drawn, drawn
    assert drawn.split("\r")[-1].startswith("sweep: 100%") and "2/2" in drawn and "1 finished, 1 failed, 0 skipped]" in drawn, drawn
    # One time-left figure, eaq's: tqdm's own remaining time and rate counted the failed run's none.
    assert "<" not in drawn and "/run" not in drawn and "run/s" not in drawn, drawn


def test_with_stdout_redirected_the_run_lines_stay_in_its_file_under_a_terminals_bar(tmp_path: Path, monkeypatch) -> None:
    """``python -m eaq.run -m ... > sweep.log`` from a terminal: the bar (on stderr, the terminal) sent every line
    logged to stdout to the terminal too, the runs' result lines lost from the file. Both terminals: they go above it."""
    for stdout_is_terminal in (False, True):
        stdout = _Terminal() if stdout_is_terminal else io.StringIO()
        monkeypatch.setattr(sys, "stdout", stdout)
        progress = SweepProgress(_Terminal())
        progress.on_multirun_start(_joblib_config(tmp_path))
        assert (sys.stdout is stdout) != stdout_is_terminal
        progress.on_multirun_end(_joblib_config(tmp_path))
        assert sys.stdout is stdout


def test_a_terminal_that_reports_no_width_gets_the_plain_lines(tmp_path: Path) -> None:
    """A pty with no size (script's, docker exec -t's) drew neither the bar nor the plain lines: nothing at all."""
    import os

    master, slave = os.openpty()  # a new pty reports 0 columns until someone sets its size
    with open(slave, "w", closefd=True) as terminal:
        assert terminal.isatty() and os.get_terminal_size(slave).columns == 0
        progress = SweepProgress(terminal)
        progress.on_multirun_start(_joblib_config(tmp_path))
        progress._ended("a-fp32", "finished", 1.0)
        progress.on_multirun_end(_joblib_config(tmp_path))
    drawn = os.read(master, 65536).decode()
    os.close(master)
    assert "[sweep 1/2] a-fp32 finished in 1s" in drawn, drawn


def test_the_time_left_is_told_by_the_runs_that_finished_not_by_refusals() -> None:
    """Two precisions the device refuses fail in under a second: counted in, they read "about 0s left" before the
    minutes of runs still to come."""
    printed = io.StringIO()
    progress = SweepProgress(printed)
    progress.total = 6
    progress._ended("a-fp8", "failed", 0.2)
    assert printed.getvalue().endswith("about 1s left\n")  # nothing finished yet: 5 runs of 0.2 s is all there is to go by
    progress._ended("a-fp32", "finished", 60.0)
    progress._ended("a-int4", "failed", 0.2)
    assert printed.getvalue().splitlines()[-1].endswith("about 3m00s left")  # 3 more runs of a finished run's 60 s


def test_a_cpu_run_that_shared_the_cpu_is_invalid_and_resume_measures_its_configuration_again(tmp_path: Path) -> None:
    """gpu_slots.count=N on a host without GPUs runs N jobs at once on one CPU: such a run measured its neighbours too
    (45.8 against ~9.5 ms a batch alone), yet the report averaged it and resume skipped its configuration for it. A GPU
    run's neighbours were on other GPUs: it still counts."""
    from eaq.slots import shared_cpu
    from eaq.tasks.result import TaskResult
    from eaq.tracking.run_logger import TrackedRun, finished_run
    from eaq.tracking.store import open_store

    client, experiment = open_store(f"sqlite:///{tmp_path}/mlflow.db", "eaq", str(tmp_path / "artifacts"))

    def finished(config_hash: str, device: str, neighbours: str, **checks: str) -> tuple[str, TaskResult]:
        """A run as the job records it: the task's result, the slot's tags, the verdict on them."""
        metrics = {"valid": float(checks.get("eaq.valid") == "true")} if checks else {}
        result = TaskResult(metrics, {"eaq.config_hash": config_hash, "eaq.device": device, **checks, "eaq.neighbours.count": neighbours})
        if reason := shared_cpu(result.tags):
            result.invalidate(reason)
        run = TrackedRun(client, experiment, "r", result.tags)
        run.end("FINISHED")
        return run.run_id, result

    _, crowded = finished("cpu", "cpu", "1")
    assert crowded.tags["eaq.valid"] == "false" and "beside 1 other run" in crowded.tags["eaq.valid.reasons"]
    assert "valid" not in crowded.metrics  # no energy checks ran: no metric of theirs to follow the tag
    assert finished_run(client, experiment, "cpu") is None
    alone, result = finished("cpu", "cpu", "0")
    assert finished_run(client, experiment, "cpu") == alone and "eaq.valid" not in result.tags
    gpu, result = finished("gpu", "cuda:1", "1")
    assert finished_run(client, experiment, "gpu") == gpu and "eaq.valid" not in result.tags
    # A run its own checks judged keeps their reasons beside the slot's, and its metric follows the verdict.
    _, judged = finished("rapl", "cpu", "2", **{"eaq.valid": "false", "eaq.valid.reasons": "too few sensor updates"})
    reasons = judged.tags["eaq.valid.reasons"].split("; ")
    assert reasons[0] == "too few sensor updates" and "beside 2 other run" in reasons[1] and judged.metrics["valid"] == 0.0
    _, passed = finished("rapl", "cpu", "1", **{"eaq.valid": "true"})
    assert passed.tags["eaq.valid"] == "false" and passed.metrics["valid"] == 0.0
    assert finished_run(client, experiment, "rapl") is None


def test_a_sweep_of_another_sweeper_has_no_job_count_to_hold_it_to() -> None:
    """The basic sweeper's product of value lists is its jobs; another sweeper (Optuna's trials) chooses its own, and a
    count read as the basic sweeper's would call its runs missing and exit 1."""
    from eaq.tracking.jobs import BASIC, count_jobs

    def sweep(target: str) -> DictConfig:
        return OmegaConf.create({"hydra": {"sweeper": {"_target_": target, "params": None}, "overrides": {"task": ["trial=1,2", "batch_size=4,8"]}}})

    assert count_jobs(sweep(BASIC)) == 4
    assert count_jobs(sweep("hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper")) is None
