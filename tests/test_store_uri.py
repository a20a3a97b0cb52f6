"""A relative ``tracking.uri=sqlite:///rel/x.db`` names the file under the folder the user launched eaq from.

SQLite opens a relative path against the working folder of the process that opens the store; a job may run in
another one than the sweep's (``hydra.job.chdir=true``, a launcher's worker or node started elsewhere), and its runs
would land in another file than the sweep's parent run.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from conftest import FAST, mlflow_server_on, run_eaq
from eaq.config import absolute_store_uri
from eaq.tasks.job import _job_store


@pytest.mark.parametrize(("uri", "expected"), [
    ("sqlite:///rel/x.db", "sqlite:////launch/rel/x.db"),
    ("sqlite:///./rel/../x.db?mode=rwc", "sqlite:////launch/rel/../x.db?mode=rwc"),  # a query stays the query; '..' too
    ("sqlite:///~/x.db", "sqlite:////launch/~/x.db"),  # a folder named ~, as SQLite reads it in the sweep's process
    ("sqlite:////abs/x.db", "sqlite:////abs/x.db"),  # absolute already
    ("sqlite:///:memory:", "sqlite:///:memory:"),
    ("sqlite+pysqlite:///rel/x.db", "sqlite+pysqlite:////launch/rel/x.db"),  # a driver named
    ("sqlite:///file:rel.db?mode=ro&uri=true", "sqlite:///file:rel.db?mode=ro&uri=true"),  # sqlite's own URI form
    ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),  # a server's URI is no path
    ("postgresql+psycopg://u@db/mlflow", "postgresql+psycopg://u@db/mlflow"),
])
def test_only_a_relative_sqlite_path_is_anchored(uri: str, expected: str) -> None:
    assert absolute_store_uri(uri, "/launch") == expected


def test_a_job_opens_the_store_under_the_folder_it_was_launched_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A job whose working folder is another one than the launch folder (Hydra's runtime.cwd, carried to every job).
    launch, job = tmp_path / "launch", tmp_path / "job"
    launch.mkdir()
    job.mkdir()
    monkeypatch.chdir(job)
    resolved = {"tracking": {"uri": "sqlite:///rel/x.db", "experiment": "eaq", "artifact_location": str(tmp_path / "art")}}
    client, _ = _job_store(resolved, str(launch))
    assert resolved["tracking"]["uri"] == f"sqlite:///{launch}/rel/x.db"  # what the run logs as its param
    assert (launch / "rel" / "x.db").is_file() and not (job / "rel").exists()
    assert client.get_experiment_by_name("eaq") is not None


def test_a_run_in_another_working_folder_logs_to_the_store_under_the_launch_folder(tmp_path: Path) -> None:
    launch, out = tmp_path / "launch", tmp_path / "outputs"
    launch.mkdir()
    cmd = [sys.executable, "-m", "eaq.run", *FAST, f"paths.output_dir={out}", "hydra.job.chdir=true",
           "tracking.uri=sqlite:///rel/x.db"]
    result = subprocess.run(cmd, cwd=launch, capture_output=True, text=True, timeout=600,
                            env=os.environ | {"PYTHONUNBUFFERED": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    stray = sorted(str(p) for p in out.rglob("*.db"))
    assert not stray, f"the run's store landed in its job folder: {stray}"
    client = MlflowClient(tracking_uri=f"sqlite:///{launch}/rel/x.db")
    assert (launch / "rel" / "x.db").is_file()
    assert len(client.search_runs([e.experiment_id for e in client.search_experiments()])) == 1


PASSWORD = "S3cretPw"


class _Forward(BaseHTTPRequestHandler):
    """Passes each request on to a real MLflow server, but answers 503 (its retries used up: a server gone away after
    ``/health`` answered) to those the server's ``refuse`` picks by path and body; where it says "gone", the server
    then stops listening (a server stopped mid-sweep: every later connection refused)."""

    server: _FlakyServer

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if refused := self.server.refuse(self.path, body):
            status, answer = 503, b'{"error_code": "TEMPORARILY_UNAVAILABLE", "message": "down"}'
            if refused == "gone":  # shut down, not only closed: the serving thread's poll held it open till its next turn
                self.server.socket.shutdown(socket.SHUT_RDWR)
                self.server.socket.close()
        else:
            request = urllib.request.Request(self.server.target + self.path, data=body or None, method=self.command,
                                             headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    status, answer = response.status, response.read()
            except urllib.error.HTTPError as error:
                status, answer = error.code, error.read()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    do_GET = do_POST = do_PATCH = do_DELETE = _forward

    def log_message(self, *args: object) -> None:
        pass


class _FlakyServer(ThreadingHTTPServer):
    def __init__(self, target: str, refuse: Callable[[str, bytes], bool | str]) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        self.target, self.refuse = target, refuse


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """One real MLflow server for this module's tests (each starts in ~8 s): each test sweeps into its own experiment."""
    folder = tmp_path_factory.mktemp("server")
    with mlflow_server_on(f"sqlite:///{folder}/server.db", folder / "artifacts") as port:
        yield port


@contextmanager
def flaky_store(server: int, refuse: Callable[[str, bytes], bool | str]) -> Iterator[tuple[str, MlflowClient]]:
    """The real MLflow server behind ``_FlakyServer``: the URI a sweep is given (with a password, which the server
    ignores) and a client of the server itself, to read back what was recorded."""
    proxy = _FlakyServer(f"http://127.0.0.1:{server}", refuse)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://alice:{PASSWORD}@127.0.0.1:{proxy.server_address[1]}", MlflowClient(f"http://127.0.0.1:{server}")
    finally:
        proxy.shutdown()
        proxy.server_close()


def _sweep(out: Path, uri: str, experiment: str) -> subprocess.CompletedProcess[str]:
    """Two trials into ``experiment`` (one per test: they share one server)."""
    environ = os.environ | {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "no_proxy": "127.0.0.1,localhost"}
    return run_eaq(out, "-m", *FAST, "isolate=false", f"tracking.uri={uri}", f"tracking.experiment={experiment}",
                   "trial=1,2", environ=environ)


def _runs(client: MlflowClient, experiment: str) -> list:
    """Every run of ``experiment`` (the sweep's parent included)."""
    return client.search_runs([client.get_experiment_by_name(experiment).experiment_id])


def test_a_job_whose_run_the_store_refuses_is_said_redacted_and_the_sweep_goes_on(server: int, out: Path) -> None:
    """The store failing a job's run's creation (or resume's search, or its skip's tag) raised MLflow's exception
    out of the job: Hydra printed the job's overrides and MLflow's message, the password of both in clear, and
    stopped the sweep."""
    creates = []

    def refuse_runs_but_the_sweeps(path: str, body: bytes) -> bool:
        if path.endswith("/runs/create"):
            creates.append(path)
            return len(creates) > 1
        return False

    with flaky_store(server, refuse_runs_but_the_sweeps) as (uri, client):
        result = _sweep(out, uri, "refused-runs")
        (parent,) = _runs(client, "refused-runs")
    printed = result.stdout + result.stderr
    assert PASSWORD not in printed, printed[-3000:]
    assert "Error executing job" not in printed and "Traceback" not in printed, printed[-3000:]
    failures = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(failures) == 2, result.stderr[-3000:]  # both jobs ran, and each said why it failed
    assert all(line.startswith("error: the MLflow tracking store tracking.uri=http://alice:<redacted>@127.0.0.1:")
               and "runs/create" in line for line in failures), failures
    assert "0 finished, 2 failed" in result.stderr and "sweep: " in result.stdout, printed[-3000:]
    # Neither left a run to count: the summary says so, and the sweep exits 1 (it read "nothing measured", exit 0).
    assert "2 job(s) left no run in the store" in result.stdout and result.returncode == 1, result.stdout[-2000:]
    # ... and so does the parent run, which was recorded FINISHED with no run failed.
    assert parent.data.tags["eaq.kind"] == "sweep" and parent.info.status == "FAILED"
    assert parent.data.metrics["sweep_jobs_unrecorded"] == 2 and parent.data.metrics["sweep_runs"] == 0


def test_a_run_whose_last_metrics_the_store_refuses_ends_failed_and_says_why_redacted(server: int, out: Path) -> None:
    """The run's last metrics and its end were logged after the job's error handling: the store failing there left
    the run RUNNING, and MLflow's exception, password and all, stopped the sweep."""
    with flaky_store(server, lambda path, body: path.endswith("/runs/log-batch") and b"run_wall_s" in body) as (uri, client):
        result = _sweep(out, uri, "refused-metrics")
        runs = _runs(client, "refused-metrics")
    printed = result.stdout + result.stderr
    assert PASSWORD not in printed and "Error executing job" not in printed, printed[-3000:]
    assert result.returncode == 1, printed[-3000:]  # the summary's: runs that did not finish
    jobs = [r for r in runs if r.data.tags.get("eaq.kind") == "benchmark"]
    assert len(jobs) == 2 and {r.info.status for r in jobs} == {"FAILED"}, [(r.info.run_name, r.info.status) for r in jobs]
    for run in jobs:
        assert run.data.tags["eaq.error"].startswith("EaqError: the MLflow tracking store tracking.uri=http://alice:<redacted>@")
        assert PASSWORD not in run.data.tags["eaq.error"]


def test_a_store_gone_mid_sweep_is_said_once_and_nothing_more_is_asked_of_it(server: int, out: Path) -> None:
    """A server stopped mid-sweep: each closing record after it (the run's FAILED, the search for the runs under way, the
    parent's) waited out MLflow's retries, about 4 minutes a request (SIGTERM's KILLED record too: a stopped sweep lived
    on for 7 minutes), and the sweep's exit ended in a traceback of its exit hook."""
    with flaky_store(server, lambda path, body: "gone" if path.endswith("/runs/log-batch") and b"run_wall_s" in body
                     else False) as (uri, client):
        result = _sweep(out, uri, "gone")
        runs = _runs(client, "gone")
    printed = result.stdout + result.stderr
    assert PASSWORD not in printed and "Traceback" not in printed, printed[-3000:]
    assert result.returncode == 2, printed[-3000:]  # the next job found no store: the sweep stops, as at its start
    # The first run's end, said at once, then the sweep's: once each, and the records as the store last had them.
    assert printed.count("the run's FAILED record could not be written, it stays RUNNING in the store: the MLflow server "
                         "tracking.uri=http://alice:<redacted>@127.0.0.1:") == 1, printed[-3000:]
    assert printed.count("and its runs under way stay as they are in the store (RUNNING): the MLflow server") == 1, printed[-3000:]
    assert {r.info.status for r in runs} == {"RUNNING"}, [(r.info.run_name, r.info.status) for r in runs]
