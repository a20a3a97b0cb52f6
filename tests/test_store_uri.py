"""A relative ``tracking.uri=sqlite:///rel/x.db`` names the file under the folder the user launched eaq from.

SQLite opens a relative path against the working folder of the process that opens the store; a job may run in
another one than the sweep's (``hydra.job.chdir=true``, a launcher's worker or node started elsewhere), and its runs
would land in another file than the sweep's parent run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from conftest import FAST
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
