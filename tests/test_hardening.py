"""Hard to break: no credential in any record, concurrent starts on a new store, failures that cannot be missed.

Real CLI processes, a real MLflow server and SQLite stores, real cache code in real
concurrent processes; nothing here is mocked.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import torch
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

from conftest import FAST, REPO, all_runs, free_port, mlflow_server_on, run_eaq, store
from eaq.errors import EaqError
from eaq.evaluate.reference import cached_reference
from eaq.files import exclusive
from eaq.measure.roofline import Calibration, load_calibration, save_calibration
from eaq.tracking import redact as redact_module
from eaq.tracking.redact import REDACTED, redact
from eaq.tracking.environment import NOT_RECORDED
from eaq.tracking.store import _check_reachable, open_store

# Secrets in values whose names give nothing away (redaction by name misses every one).
GITHUB_TOKEN = "ghp_" + "x7Q2" * 9
SECRET_ENV = {
    "DATABASE_URL": "postgresql://dbuser:DbPw-4711@db.internal:5432/eaq",
    "https_proxy": "http://proxyuser:ProxyPw-4712@proxy.invalid:3128",
    "EXTRA_HEADERS": "Authorization: Bearer BearerTok4713abcdef",
    "GIT_REMOTE": f"https://{GITHUB_TOKEN}@github.com/org/repo.git",
    # ... and in values of no known shape (a review found each in env.json in clear: no name or value rule knew them).
    "AZURE_DEVOPS_EXT_PAT": "azpat4715value",
    "DB_PW": "dbpw4716value",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0123ABCD/B0456EFGH/webhook4717value",
}
TRACKING_PASSWORD = "TrackPw-4714"
SECRETS = ["DbPw-4711", "ProxyPw-4712", "BearerTok4713abcdef", GITHUB_TOKEN, "azpat4715value", "dbpw4716value",
           "webhook4717value", TRACKING_PASSWORD]


def _files_holding(folder: Path, secrets: list[str]) -> list[str]:
    """Every file under ``folder`` whose bytes contain one of ``secrets``, as 'path: secret'."""
    found = []
    for file in folder.rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            found += [f"{file}: {s}" for s in secrets if s.encode() in data]
    return found


@pytest.fixture
def mlflow_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A real ``mlflow server`` on a free local port, its store under tmp_path/server."""
    folder = tmp_path / "server"
    folder.mkdir()
    with mlflow_server_on(f"sqlite:///{folder}/server.db", folder / "artifacts") as port:
        yield port, folder


def test_no_credential_from_the_environment_or_tracking_uri_lands_in_any_record(out: Path, mlflow_server) -> None:
    port, server_folder = mlflow_server
    uri = f"http://trackuser:{TRACKING_PASSWORD}@127.0.0.1:{port}"
    env = os.environ | SECRET_ENV | {"PYTHONUNBUFFERED": "1", "no_proxy": "127.0.0.1,localhost"}
    cmd = [sys.executable, "-m", "eaq.run", "-m", "precision=fp32,bf16", *FAST, f"paths.output_dir={out}", f"tracking.uri={uri}"]
    result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]

    assert _files_holding(out, SECRETS) == []
    assert _files_holding(server_folder, SECRETS) == []
    printed = result.stdout + result.stderr
    assert [s for s in SECRETS if s in printed] == []

    # The records are there, with the credential's place marked.
    redacted_uri = f"http://trackuser:{REDACTED}@127.0.0.1:{port}"
    (env_file, *_) = sorted(out.glob("multirun/*/0_*/env.json"))
    environ = json.loads(env_file.read_text())["environ"]
    assert {name: environ[name] for name in SECRET_ENV} == dict.fromkeys(SECRET_ENV, NOT_RECORDED)  # named, no value
    assert f"trackuser:{REDACTED}@" in next(out.glob("multirun/*/multirun.yaml")).read_text()
    assert list(out.glob("multirun/*/0_*/*.log"))  # the job's log file was written, and holds no secret
    client = MlflowClient(tracking_uri=uri)  # the server accepts the credentials, and ignores them
    children = [r for r in client.search_runs([e.experiment_id for e in client.search_experiments()]) if r.data.tags.get("eaq.kind") == "benchmark"]
    assert len(children) == 2 and all(r.info.status == "FINISHED" for r in children)
    assert {r.data.params["tracking.uri"] for r in children} == {redacted_uri}
    # The read tools' own sentences name the store redacted: an experiment not there, a sweep id no run has.
    for ask, said in ((["--experiment", "nope"], "--experiment nope: not in"), (["--sweep", "0" * 32], "no such sweep folder, run id or run name in")):
        told = subprocess.run([sys.executable, "-m", "eaq.report", "--uri", uri, *ask, "--out", str(out / "report")],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert said in told.stderr and redacted_uri in told.stderr and TRACKING_PASSWORD not in told.stdout + told.stderr, told.stderr
    # The tables' refusals of an experiment not there, and the report logged as a run of its own, which MLflow
    # announced on stdout with its URL, password and all, as the run ended.
    for tool, ask, status in (("eaq.report.table", ["--experiment", "nope"], 2), ("eaq.report.compare", ["--experiment", "nope"], 2),
                              ("eaq.report", ["--experiment", "eaq", "--log", "--out", str(out / "logged")], 0)):
        told = subprocess.run([sys.executable, "-m", tool, "--uri", uri, *ask], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=300)
        assert told.returncode == status and TRACKING_PASSWORD not in told.stdout + told.stderr, (tool, told.stdout[-2000:], told.stderr[-2000:])


def test_a_submitit_sweeps_pickled_jobs_hold_no_credential_and_its_jobs_still_reach_the_store(out: Path, mlflow_server) -> None:
    """submitit pickles each job (the launcher with the sweep's config, its overrides, Hydra's state) into the sweep
    folder for the job to unpickle: the tracking URI's password lay there in the clear."""
    port, _ = mlflow_server
    uri = f"http://trackuser:{TRACKING_PASSWORD}@127.0.0.1:{port}"
    env = os.environ | SECRET_ENV | {"PYTHONUNBUFFERED": "1", "no_proxy": "127.0.0.1,localhost"}
    cmd = [sys.executable, "-m", "eaq.run", "-m", "hydra/launcher=slurm_local", *FAST, "sampler=none",
           f"paths.output_dir={out}", f"tracking.uri={uri}"]
    result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert list(out.glob("multirun/*/.submitit/*/*_submitted.pkl"))  # the job went through submitit's pickles
    assert _files_holding(out, SECRETS) == []
    client = MlflowClient(tracking_uri=uri)
    (child,) = [r for r in client.search_runs([e.experiment_id for e in client.search_experiments()])
                if r.data.tags.get("eaq.kind") == "benchmark"]
    assert child.info.status == "FINISHED"
    assert child.data.params["tracking.uri"] == f"http://trackuser:{REDACTED}@127.0.0.1:{port}"


@pytest.mark.parametrize("mode", [[], ["-m"]], ids=["run", "sweep"])
def test_a_setting_reading_a_setting_no_config_has_is_one_sentence(out: Path, mode: list[str]) -> None:
    """Hydra resolves the run's name first: a misspelt key in it ended in Hydra's traceback blaming hydra.run.dir."""
    result = run_eaq(out, *mode, "run_name=x-${precison.name}", *FAST)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert ("error: run_name=x-${precison.name} reads the setting precison.name, which no config has: precison (did you "
            "mean precision?) is not a setting") in result.stderr, result.stderr
    assert not (out / "mlflow.db").exists()  # before anything runs


@pytest.mark.parametrize("mode", [[], ["-m"]], ids=["run", "sweep"])
def test_a_setting_whose_environment_variable_is_not_set_is_one_sentence(out: Path, mode: list[str]) -> None:
    """A submitit job's tracking.uri names EAQ_TRACKING_URI, and eaq.rerun replays it: without the variable, OmegaConf's
    traceback (exit 1) where eaq says what to set."""
    env = {k: v for k, v in os.environ.items() if k != "EAQ_UNSET_FOR_TEST"}
    result = run_eaq(out, *mode, "tracking.uri=${oc.env:EAQ_UNSET_FOR_TEST}", *FAST, environ=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert ("error: tracking.uri=${oc.env:EAQ_UNSET_FOR_TEST} reads the environment variable EAQ_UNSET_FOR_TEST, which "
            "is not set: export it, or give tracking.uri=<value>.") in result.stderr, result.stderr
    assert not (out / "mlflow.db").exists()  # before anything runs
    # In the run's name (its folder), which Hydra resolves before eaq sees the config: a 40-line traceback of Hydra's.
    named = run_eaq(out, *mode, "trial=${oc.env:EAQ_UNSET_FOR_TEST}", *FAST, environ=env)
    assert named.returncode == 2 and "error: trial=${oc.env:EAQ_UNSET_FOR_TEST} reads the environment variable" in named.stderr
    # Given again after it (as eaq.rerun replays a SLURM job's): the later one is the setting, and nothing resolves the
    # first (the job read every override resolved, and stopped in a traceback quoting them, the password passed after).
    again = run_eaq(out, *mode, "tracking.uri=${oc.env:EAQ_UNSET_FOR_TEST}", *FAST, "batch_size=0",
                    f"tracking.uri=sqlite:///{out}/again.db", environ=env)
    assert again.returncode == (1 if mode else 2) and "Traceback" not in again.stderr, again.stderr[-3000:]  # a sweep of a failed run: 1
    assert "batch_size=0" in again.stderr and "EAQ_UNSET_FOR_TEST" not in again.stderr


def test_two_sweeps_launched_at_once_on_a_new_store_each_get_their_parent_and_summary(out: Path) -> None:
    env = os.environ | {"PYTHONUNBUFFERED": "1"}
    sweeps = [
        subprocess.Popen(
            [sys.executable, "-m", "eaq.run", "-m", trials, *FAST, f"paths.output_dir={out}"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for trials in ("trial=1,2", "trial=3,4")
    ]
    outputs = [sweep.communicate(timeout=600) for sweep in sweeps]
    parents = []
    for sweep, (stdout, stderr) in zip(sweeps, outputs):
        assert sweep.returncode == 0, stderr[-3000:]
        assert "raised" not in stderr, stderr[-3000:]  # no callback failure turned into a warning
        summary = re.search(r"^sweep: 2 of 2 runs finished \(parent run (\w+)\)$", stdout, re.MULTILINE)
        assert summary, stdout[-3000:]
        parents.append(summary[1])
    assert len(set(parents)) == 2

    runs = all_runs(out)
    by_id = {r.info.run_id: r for r in runs}
    for parent in parents:
        assert by_id[parent].info.status == "FINISHED" and by_id[parent].data.tags["eaq.kind"] == "sweep"
        children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent]
        assert len(children) == 2 and all(r.info.status == "FINISHED" for r in children)
    assert len([r for r in runs if r.data.tags.get("eaq.kind") == "benchmark"]) == 4
    sweep_folders = sorted(p.parent for p in out.glob("multirun/*/mlflow_parent_run_id.txt"))
    assert sorted((f / "mlflow_parent_run_id.txt").read_text() for f in sweep_folders) == sorted(parents)


def test_a_sweep_whose_parent_run_cannot_be_created_stops_non_zero_in_one_sentence(out: Path) -> None:
    out.mkdir(parents=True)
    client = store(out)
    experiment = client.create_experiment("eaq", artifact_location=(out / "mlartifacts").as_uri())
    client.delete_experiment(experiment)  # as a user might, in the UI

    result = run_eaq(out, "-m", "trial=1,2", *FAST)
    assert result.returncode == 2, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr[-3000:]
    assert errors[0].startswith("error: the sweep stopped: creating the sweep's MLflow parent run failed")
    assert "tracking.experiment=eaq is deleted" in errors[0] and f"--experiment-id {experiment}" in errors[0]
    assert "Traceback" not in result.stderr and "raised" not in result.stderr
    assert client.search_runs([experiment], run_view_type=ViewType.ALL) == []
    assert list(out.glob("multirun/*/*_bert-tiny-random-*")) == []  # no job ran


def test_a_second_sweep_in_a_running_sweeps_folder_stops_and_the_first_is_untouched(out: Path, tmp_path: Path) -> None:
    import signal

    folder = tmp_path / "one-sweep-folder"
    cmd = [sys.executable, "-m", "eaq.run", "-m", "trial=1,2", *FAST, "trials.min_duration_s=2", f"paths.output_dir={out}",
           f"hydra.sweep.dir={folder}"]
    first = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=os.environ | {"PYTHONUNBUFFERED": "1"})
    # The first sweep is held still (SIGSTOP) while the second runs, so it is running whatever the second's start
    # costs on a loaded machine (long windows only made the race unlikely). Held while its run measures: its process
    # then waits on the measuring one, between store calls, its folder's lock held.
    measuring, lines = threading.Event(), []

    def read_stderr() -> None:
        for line in first.stderr:
            lines.append(line)
            if ": window" in line:
                measuring.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    assert measuring.wait(timeout=300), "the first sweep never reached its first window: " + "".join(lines)[-3000:]
    assert (folder / "mlflow_parent_run_id.txt").exists()
    os.kill(first.pid, signal.SIGSTOP)
    try:
        second = run_eaq(out, "-m", "trial=3", *FAST, f"hydra.sweep.dir={folder}")
    finally:
        os.kill(first.pid, signal.SIGCONT)
    stdout = first.stdout.read()
    first.wait(timeout=600)
    reader.join(timeout=60)
    stderr = "".join(lines)
    assert second.returncode == 2
    assert f"error: the sweep stopped: creating the sweep's MLflow parent run failed (another sweep is running in the folder hydra.sweep.dir={folder}" in second.stderr
    assert first.returncode == 0, stderr[-3000:]
    parent = (folder / "mlflow_parent_run_id.txt").read_text()
    assert f"sweep: 2 of 2 runs finished (parent run {parent})" in stdout
    assert len([r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "sweep"]) == 1


# Runs writing the same cache at once: WRITERS processes go through eaq's own cache code
# for ROUNDS keys. Each computes the value only after finding no cache (as a run does),
# then waits at the barrier, so that all of them write the same file at the same moment.
WRITERS, ROUNDS = 4, 20
REFERENCE = torch.arange(1_000_000, dtype=torch.float32)


def _reference_writer(cache_dir: Path, barrier: multiprocessing.synchronize.Barrier) -> None:
    def compute() -> torch.Tensor:
        barrier.wait(timeout=60)
        return REFERENCE

    for round_ in range(ROUNDS):
        cached_reference(cache_dir, f"key{round_}", compute)


def _reference_files(cache_dir: Path) -> bool:
    """One valid cache per key, and nothing else."""
    names = {f"fp32-reference-key{r}.safetensors" for r in range(ROUNDS)}
    return {f.name for f in cache_dir.iterdir()} == names and all(
        torch.equal(cached_reference(cache_dir, f"key{r}", lambda: torch.zeros(1)), REFERENCE) for r in range(ROUNDS)
    )


CALIBRATION = Calibration(device_name="cpu", matmul="float32", size=2048, tflops=0.5, flop_per_j=1e11, power_mean_w=50.0, duration_s=5.0, measured_unix_s=1.0)


def _calibration_writer(cache_dir: Path, barrier: multiprocessing.synchronize.Barrier) -> None:
    barrier.wait(timeout=60)
    for _ in range(200):  # small file, many writes: a reader in between must never see half of one
        save_calibration(cache_dir / "roofline-cpu-float32.json", CALIBRATION)
        assert load_calibration(cache_dir / "roofline-cpu-float32.json") == CALIBRATION


def _calibration_files(cache_dir: Path) -> bool:
    """The one cache file, valid."""
    return [f.name for f in cache_dir.iterdir()] == ["roofline-cpu-float32.json"] and load_calibration(cache_dir / "roofline-cpu-float32.json") == CALIBRATION


def _failing_fast(writer: Callable[..., None], cache_dir: Path, barrier: multiprocessing.synchronize.Barrier) -> None:
    """A writer that fails breaks the barrier, so the others fail at once instead of waiting for it."""
    try:
        writer(cache_dir, barrier)
    except BaseException:
        barrier.abort()
        raise


@pytest.mark.parametrize(
    ("writer", "check"), [(_reference_writer, _reference_files), (_calibration_writer, _calibration_files)], ids=["fp32_reference", "roofline_calibration"]
)
def test_runs_writing_the_same_cache_at_once_all_succeed_and_leave_one_valid_cache(
    tmp_path: Path, writer: Callable[..., None], check: Callable[[Path], bool]
) -> None:
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(WRITERS)
    processes = [context.Process(target=_failing_fast, args=(writer, tmp_path, barrier)) for _ in range(WRITERS)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=300)
    assert [p.exitcode for p in processes] == [0] * WRITERS
    assert check(tmp_path)  # no temporary file left behind either


def _hold_lock(lock: Path, log: Path) -> None:
    with exclusive(lock):
        with log.open("a") as handle:
            handle.write(f"in {os.getpid()}\n")
        time.sleep(0.3)
        with log.open("a") as handle:
            handle.write(f"out {os.getpid()}\n")


def test_exclusive_lets_one_process_in_at_a_time(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_hold_lock, args=(tmp_path / "x.lock", tmp_path / "log")) for _ in range(3)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
    lines = (tmp_path / "log").read_text().split()
    pairs = list(zip(lines[0::4], lines[1::4], lines[2::4], lines[3::4]))
    assert len(pairs) == 3 and all(a == "in" and c == "out" and b == d for a, b, c, d in pairs)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("postgresql://u:PASSWORD@host/db", f"postgresql://u:{REDACTED}@host/db"),
        ("http://user:p@ss@proxy:3128", f"http://user:{REDACTED}@proxy:3128"),  # an unescaped '@' in the password
        (r"tracking.uri=http\://u\:pw@h\:5000", rf"tracking.uri=http\://u\:{REDACTED}@h\:5000"),  # as Hydra's files write it
        ("https://tok123@github.com/x", f"https://{REDACTED}@github.com/x"),
        ("Authorization: Bearer abcdefghijkl", f"Authorization: {REDACTED}"),
        ("curl -H 'Bearer abcdefghijkl'", f"curl -H 'Bearer {REDACTED}'"),
        ("https://a.blob.core.windows.net/c?sv=2020&sig=AbC%2Bxyz&se=1", f"https://a.blob.core.windows.net/c?sv=2020&sig={REDACTED}&se=1"),
        ("Server=x;User Id=u;Password=hunter2;", f"Server=x;User Id=u;Password={REDACTED};"),
        ('{"api_key": "k-123"}', f'{{"api_key": "{REDACTED}"}}'),
        ("hf_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef12 AKIAIOSFODNN7EXAMPLE sk-proj-aaaaaaaaaaaaaaaaaaaaaaaa", f"{REDACTED} {REDACTED} {REDACTED}"),
        ("https://user:pa/ss@host/db", f"https://user:{REDACTED}@host/db"),  # an unescaped '/' in the password
        # '?', '#' and a space, which SQLAlchemy (MLflow's database stores) takes raw in a password.
        ("postgresql+psycopg://eaq:s3cr#et@db:5432/eaq", f"postgresql+psycopg://eaq:{REDACTED}@db:5432/eaq"),
        ("tracking.uri=postgresql://eaq:pa?ss@db/x", f"tracking.uri=postgresql://eaq:{REDACTED}@db/x"),
        # A URL with a port and an address later on the line is no password: left whole.
        ("INFO connecting to http://localhost:5000/api/2.0 as user@example.com",
         "INFO connecting to http://localhost:5000/api/2.0 as user@example.com"),
        ("pip install git+https://github.com:443/org/repo.git@v1.2", "pip install git+https://github.com:443/org/repo.git@v1.2"),
        ("PWD=/work/main OLDPWD=/tmp", "PWD=/work/main OLDPWD=/tmp"),
        ('{"A": "http://127.0.0.1:5000", "B": "git@example.com"}', '{"A": "http://127.0.0.1:5000", "B": "git@example.com"}'),
        ("Server=db;Uid=sa;Pwd=hunter2;", f"Server=db;Uid=sa;Pwd={REDACTED};"),
        # Hydra's hydra.yaml: a choice "basic" at a line's end is no header, and the next line is not its value.
        ("    hydra/sweeper: basic\n    hydra/launcher: gpus/joblib", "    hydra/sweeper: basic\n    hydra/launcher: gpus/joblib"),
        ("password=ab,cd&u=1", f"password={REDACTED}&u=1"),  # a comma inside the value
        ("db:\n  password: my secret\n  host: x", f"db:\n  password: {REDACTED}\n  host: x"),  # a YAML line to its end
        ('{"token": "a b, c", "n": 1}', f'{{"token": "{REDACTED}", "n": 1}}'),  # a quoted value whole
        ("Basic dXNlcjpwdw==", f"Basic {REDACTED}"),
        ("hydra/launcher=basic and a basic sweep", "hydra/launcher=basic and a basic sweep"),
        # Not credentials: left as they are.
        ("sqlite:////tmp/outputs/mlflow.db", "sqlite:////tmp/outputs/mlflow.db"),
        # Pinned packages of the environment's list (env.json), which run diffs compare: the version is no secret.
        ("google-auth==2.40.3 httpx-auth==0.22.0 x-token==1.0", "google-auth==2.40.3 httpx-auth==0.22.0 x-token==1.0"),
        # ... but a secret after "==" is one still.
        ("password==Xy9abc token==abc", f"password={REDACTED} token={REDACTED}"),
        ('{"PWD": "/work/x", "max_new_tokens": 3}', '{"PWD": "/work/x", "max_new_tokens": 3}'),
        # Names the environment's record treats as secret (a Hydra env_set in .hydra/hydra.yaml and multirun.yaml).
        ("+hydra.job.env_set.OPENAI_KEY=abc123def456", f"+hydra.job.env_set.OPENAI_KEY={REDACTED}"),
        ("      OPENAI_KEY: abc123def456\n      MYSQL_PWD: Zz9secret", f"      OPENAI_KEY: {REDACTED}\n      MYSQL_PWD: {REDACTED}"),
        ("Cookie: session=abc123", f"Cookie: {REDACTED}"),
        ("key: GPU-1234 monkey: 3 sort_keys: true", "key: GPU-1234 monkey: 3 sort_keys: true"),
        ("commit 0123456789abcdef0123456789abcdef01234567 hash 1a2b3c4d5e6f7a8b task-abcdefghijklmnopqrstuvwx", "commit 0123456789abcdef0123456789abcdef01234567 hash 1a2b3c4d5e6f7a8b task-abcdefghijklmnopqrstuvwx"),
    ],
)
def test_redact_finds_credentials_by_their_shape_and_leaves_the_rest(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected  # idempotent: redacting a record twice changes nothing


def test_a_password_eaq_was_given_is_redacted_wherever_it_appears_spaces_and_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact_module, "_KNOWN", {})
    uri = "postgresql+psycopg://eaq:pa ss%23word@db:5432/eaq"  # '#' percent-encoded, as a URL may carry it
    assert "pa ss" in redact(uri)  # by shape alone: a space ends a URL's authority
    redact_module.remember({"tracking": {"uri": uri}, "other": ["http://u:ab c@h", "https://x:no@h", 3]})
    for text, expected in [
        (uri, f"postgresql+psycopg://eaq:{REDACTED}@db:5432/eaq"),
        (r"tracking.uri=postgresql+psycopg\://eaq\:pa ss%23word@db\:5432/eaq",  # as Hydra's files write it
         rf"tracking.uri=postgresql+psycopg\://eaq\:{REDACTED}@db\:5432/eaq"),
        ("FATAL: password 'pa ss#word' rejected", f"FATAL: password '{REDACTED}' rejected"),  # decoded, in a message
        (r"- tracking.uri=postgresql+psycopg\://eaq\:pa\ ss%23word@db", rf"- tracking.uri=postgresql+psycopg\://eaq\:{REDACTED}@db"),
        ("  override_dirname: x=1,tracking.uri=postgresql+psycopg://eaq:pa\n    ss%23word@db",  # a sweep's escaping; YAML's fold
         f"  override_dirname: x=1,tracking.uri=postgresql+psycopg://eaq:{REDACTED}@db"),
        ("http://u:ab c@h", f"http://u:{REDACTED}@h"),
        ("yes no, no", "yes no, no"),  # a password shorter than MIN_KNOWN_CHARS is not a literal to replace
    ]:
        assert redact(text) == expected
        assert redact(expected) == expected
    # A password without whitespace is left to the shapes: replaced as plain text it rewrote tag names and keys.
    redact_module.remember(["http://mlflow:mlflow@server:5000", "http://admin:password@h", "postgresql://u:postgres@db/x"])
    for text, expected in [
        ("mlflow.parentRunId", "mlflow.parentRunId"),
        ("psql password=s3cretvalue", f"psql password={REDACTED}"),
        ("postgresql://u:postgres@db/x", f"postgresql://u:{REDACTED}@db/x"),
        ("http://mlflow:mlflow@server:5000", f"http://mlflow:{REDACTED}@server:5000"),
    ]:
        assert redact(text) == expected
        assert redact(expected) == expected


def test_a_read_tools_transfer_refused_a_figures_note_and_a_debug_traceback_quote_no_password(capsys) -> None:
    """MLflow's artifact client raises requests' error (a proxy's 413 on report.html's upload), whose message quotes
    the URL: the read tools printed its traceback; a figure's note quoted a store's error, and the end-of-sweep
    report's debug traceback its messages."""
    import requests

    from eaq.report.figures import Figure
    from eaq.tracking.failures import reported
    from eaq.tracking.redact import redacted_traceback

    url = f"http://alice:{TRACKING_PASSWORD}@127.0.0.1:5000/api/2.0/mlflow-artifacts/artifacts/0/report/runs.csv"

    @reported()
    def upload() -> int:
        raise requests.HTTPError(f"413 Client Error: Request Entity Too Large for url: {url}")

    assert upload() == 2
    said = capsys.readouterr().err
    assert "error: the MLflow tracking store named by --uri failed (413 Client Error" in said and TRACKING_PASSWORD not in said
    assert TRACKING_PASSWORD not in Figure("power trace", note=f"power_trace.csv could not be read (API request to {url})").note
    try:
        raise RuntimeError(f"API request to {url} failed")
    except RuntimeError as error:
        text = redacted_traceback(error)
    assert "RuntimeError: API request to http://alice:" in text and TRACKING_PASSWORD not in text


def test_a_sweep_that_stops_before_its_first_job_leaves_multirun_yaml_redacted(out: Path) -> None:
    """Hydra writes multirun.yaml after the sweep's start hook and only then composes each job: an override no job
    config accepts stopped the sweep with the file as the command line wrote it (a job's start redacts it)."""
    # `+` appends a key the config already has: Hydra refuses it composing the first job (a value of the wrong type,
    # which did the same, is now refused before Hydra starts).
    result = run_eaq(out, "-m", "+batch_size=4,8", "dataset.hub=https://alice:S3cretPw@example.org/x")
    assert result.returncode != 0 and "S3cretPw" not in result.stdout + result.stderr
    (written,) = out.glob("multirun/*/multirun.yaml")
    assert "dataset.hub=https://alice:<redacted>@example.org/x" in written.read_text()
    assert [p for p in out.rglob("*") if p.is_file() and b"S3cretPw" in p.read_bytes()] == []


def test_rerun_prints_its_command_without_the_password_passed_again(tmp_path: Path) -> None:
    """The README's way to rerun against a store with credentials passes its tracking.uri again: the printed command
    showed it whole (the run itself is refused at once here, batch_size=0)."""
    job = tmp_path / "job"
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text("- trials=quick\n")
    for uri in ("http://alice:S3cretPw@127.0.0.1:1", "http://alice:open sesame@127.0.0.1:1"):
        done = subprocess.run([sys.executable, "-m", "eaq.rerun", str(job), f"tracking.uri={uri}", "batch_size=0"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300, env=os.environ | {"PYTHONPATH": str(REPO)})
        printed = next(line for line in done.stdout.splitlines() if line.startswith("rerun: "))
        assert "tracking.uri=http://alice:<redacted>@127.0.0.1:1" in printed and "S3cret" not in printed and "sesame" not in printed
    assert not (tmp_path / "outputs" / "mlflow.db").exists()  # a job folder needs no store: none was created


def test_a_run_logged_with_a_password_in_its_store_uri_reruns_with_it_passed_again(tmp_path: Path, capsys) -> None:
    """Its logged override reads tracking.uri=http://alice:<redacted>@..., which Hydra's grammar refuses before the one
    passed again replaces it: every such rerun stopped with a LexerNoViableAltException, exit 1."""
    from eaq.rerun import main as rerun_main

    job = tmp_path / "job"
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text(
        "- trials=quick\n- tracking.uri=http\\://alice\\:<redacted>@127.0.0.1\\:1\n- batch_size=0\n")
    assert rerun_main([str(job)]) == 2  # not passed again: one sentence naming it
    assert "the run's tracking.uri held a credential, which is never recorded; pass tracking.uri=..." in capsys.readouterr().err
    uri = f"sqlite:///{tmp_path}/again.db"
    assert rerun_main([str(job), f"tracking.uri={uri}"]) == 2  # batch_size=0: eaq's own refusal, past Hydra's parser
    printed = capsys.readouterr().out  # the run's own output goes to the terminal: its exit 2 is eaq's, Hydra's was 1
    assert "tracking.uri=http" not in printed and "batch_size=0" in printed
    # Only the redacted override gives way: a logged `+key=` stays for the plain `key=` given again to set (dropped, the
    # plain one named a key the config does not have, and Hydra refused it).
    (job / ".hydra" / "overrides.yaml").write_text("- +model.architecture.extra=1\n- batch_size=0\n")
    assert rerun_main([str(job), "model.architecture.extra=2"]) == 2  # eaq's batch_size refusal, not Hydra's exit 1
    assert "+model.architecture.extra=1 batch_size=0 model.architecture.extra=2" in capsys.readouterr().out
    # A SLURM job's store, named by a variable its jobs had (hydra/launcher=slurm), given again: that one is the store,
    # and the logged one, which no shell of the rerun resolves, is dropped (it stopped the run in a traceback).
    (job / ".hydra" / "overrides.yaml").write_text("- trials=quick\n- tracking.uri=${oc.env:EAQ_UNSET_FOR_TEST}\n- batch_size=0\n")
    assert rerun_main([str(job), f"tracking.uri={uri}"]) == 2  # eaq's batch_size refusal
    assert "oc.env" not in capsys.readouterr().out


def test_a_database_store_refusing_the_connection_is_one_redacted_sentence_in_seconds(out: Path) -> None:
    """SQLAlchemy's error was caught by no store check: MLflow retried for ~100 s, the job ended in a traceback, and
    Hydra printed its overrides after it, the password in clear; the read tools exited 1 (diff's "they differ")."""
    uri = f"postgresql+psycopg://eaq:DeadPw123@127.0.0.1:{free_port()}/eaq"  # nothing listens there
    started = time.monotonic()
    result = run_eaq(out, *FAST, f"tracking.uri={uri}")
    assert result.returncode == 2 and time.monotonic() - started < 60, result.stderr[-3000:]
    assert "DeadPw123" not in result.stdout + result.stderr and "Traceback" not in result.stderr
    assert "error: the MLflow store tracking.uri=postgresql+psycopg://eaq:<redacted>@127.0.0.1" in result.stderr
    assert "refused the connection" in result.stderr
    for tool, code in ((["eaq.diff", "a", "b"], 2), (["eaq.report", "--experiment", "eaq"], 1)):  # as a dead server
        done = subprocess.run([sys.executable, "-m", *tool, "--uri", uri], cwd=out.parent, capture_output=True, text=True,
                              timeout=120, env=os.environ | {"PYTHONPATH": str(REPO)})
        assert done.returncode == code and "--uri=postgresql+psycopg://eaq:<redacted>@" in done.stderr, done.stderr[-3000:]
        assert "DeadPw123" not in done.stdout + done.stderr and "Traceback" not in done.stderr


def test_a_failing_run_prints_its_traceback_without_the_password(out: Path) -> None:
    """A non-eaq error prints a traceback, and its message can quote a URL with a password."""
    secret = "tracebackPW123"
    result = run_eaq(out, *FAST, f"model.name_or_path=https://user:{secret}@example.invalid/model", "model.weights=pretrained")
    assert result.returncode != 0
    assert "error:" in result.stderr
    assert secret not in result.stdout + result.stderr


@pytest.mark.parametrize("location", ["s3://bucket/eaq", "mlflow-artifacts:/eaq", None])
def test_an_artifact_location_uri_is_passed_as_given_and_null_is_the_stores_default(
        tmp_path: Path, monkeypatch, location: str | None) -> None:
    monkeypatch.chdir(tmp_path)  # MLflow's default root for a database store is ./mlruns
    client, experiment = open_store(f"sqlite:///{tmp_path}/mlflow.db", "eaq", location)
    found = client.get_experiment(experiment).artifact_location
    assert found == location if location else found.endswith(f"/{experiment}")  # MLflow's own default under its root
    assert not [p for p in tmp_path.rglob("*") if ":" in p.name]  # no folder named after a scheme


def test_a_password_in_the_artifact_location_is_refused_before_any_record(out: Path) -> None:
    """MLflow kept it in clear in the store's experiments and runs rows (the param alone was redacted), after the run
    had measured: ftp:// and sftp:// artifact stores take their password only from the URI."""
    result = run_eaq(out, *FAST, "sampler=none", "tracking.artifact_location=ftp://gina:Ftp4718secret@127.0.0.1:2121/art")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "tracking.artifact_location=ftp://gina:" in result.stderr and "holds a password" in result.stderr
    assert "Ftp4718secret" not in result.stdout + result.stderr
    assert not out.exists() or _files_holding(out, ["Ftp4718secret"]) == []
    assert not (out / "mlflow.db").exists() or all_runs(out) == []


def test_an_artifact_store_the_run_cannot_write_to_is_one_sentence_before_it_measures(out: Path) -> None:
    """The store client's traceback (ftplib's connection refused, or s3:// without boto3) named neither the store nor
    the setting."""
    location = f"ftp://127.0.0.1:{free_port()}/art"
    result = run_eaq(out, *FAST, "sampler=none", f"tracking.artifact_location={location}")
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"error: the run's artifacts cannot be stored at {location}/" in result.stderr, result.stderr[-3000:]
    assert "ms/batch" not in result.stdout + result.stderr  # stopped at its config, before measuring
    (run,) = all_runs(out)
    assert run.info.status == "FAILED" and "artifacts cannot be stored" in run.data.tags["eaq.error"]


def test_an_artifact_folder_is_made_absolute_and_created(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    client, experiment = open_store(f"sqlite:///{tmp_path}/mlflow.db", "eaq", "arts")
    assert client.get_experiment(experiment).artifact_location == (tmp_path / "arts").as_uri() and (tmp_path / "arts").is_dir()


class _Unauthorized(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the handler's API)
        self.send_response(401)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_a_server_that_answers_at_all_is_reachable_and_a_bad_port_never_quotes_the_password() -> None:
    server = HTTPServer(("127.0.0.1", 0), _Unauthorized)  # a proxy wanting a token MLflow would send
    thread = threading.Thread(target=server.handle_request, daemon=True)
    thread.start()
    try:
        _check_reachable(f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        thread.join(timeout=10)
        server.server_close()
    # An unescaped '/' in a password ends the authority there: urllib reads "zq9" as the port and says so.
    with pytest.raises(EaqError, match="is not a port number") as refused:
        _check_reachable("http://user:zq9/secretpart@127.0.0.1:5000")
    assert "zq9" not in str(refused.value) and "secretpart" not in str(refused.value)


def test_the_servers_check_trusts_mlflows_tls_settings(monkeypatch, tmp_path: Path) -> None:
    import ssl

    from eaq.tracking.store import _tls_context

    monkeypatch.setenv("MLFLOW_TRACKING_INSECURE_TLS", "1")  # MLflow reads 1 as true
    assert _tls_context().verify_mode == ssl.CERT_NONE
    monkeypatch.delenv("MLFLOW_TRACKING_INSECURE_TLS")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path))  # a folder of certificates, as requests takes it
    assert _tls_context().verify_mode == ssl.CERT_REQUIRED


def test_a_device_out_of_memory_is_one_sentence_naming_what_sets_the_memory_a_run_needs() -> None:
    """A run's torch.OutOfMemoryError, as it comes back pickled from the forked run, ended the job in a traceback
    (exit 1); a host's out-of-memory kill already had its sentence. (No GPU here: the error is made as CUDA's.)"""
    import pickle

    from eaq.tasks.job import out_of_memory

    said = ("CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 12.00 MiB "
            "is free. Including non-PyTorch memory, this process has 79.17 GiB memory in use. Of the allocated memory ...")
    resolved = {"model": {"name": "llama-7b-random"}, "batch_size": 64, "seq_len": 2048, "precision": {"name": "bf16"}}
    error = out_of_memory(pickle.loads(pickle.dumps(torch.OutOfMemoryError(said))), resolved)
    assert isinstance(error, EaqError)
    assert str(error) == (
        "the device ran out of memory running model.name=llama-7b-random at batch_size=64, seq_len=2048, precision=bf16 (CUDA "
        "out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 12.00 MiB is free); "
        "lower batch_size or seq_len, use a smaller model, or free the device of other processes (nvidia-smi lists them).")
    assert out_of_memory(RuntimeError("index out of range in self"), resolved) is None
