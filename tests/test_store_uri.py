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
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from mlflow.tracking import MlflowClient
from omegaconf import open_dict

from conftest import CONF, FAST
from eaq.config import absolute_store_uri, register_schemas, validate

register_schemas()


@pytest.mark.parametrize(("uri", "expected"), [
    ("sqlite:///rel/x.db", "sqlite:////launch/rel/x.db"),
    ("sqlite:///./rel/../x.db?mode=rwc", "sqlite:////launch/x.db?mode=rwc"),  # a query stays the query
    ("sqlite:////abs/x.db", "sqlite:////abs/x.db"),  # absolute already
    ("sqlite:///:memory:", "sqlite:///:memory:"),
    ("sqlite+pysqlite:///rel/x.db", "sqlite+pysqlite:////launch/rel/x.db"),  # a driver named
    ("sqlite:///file:rel.db?mode=ro&uri=true", "sqlite:///file:rel.db?mode=ro&uri=true"),  # sqlite's own URI form
    ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),  # a server's URI is no path
    ("postgresql+psycopg://u@db/mlflow", "postgresql+psycopg://u@db/mlflow"),
])
def test_only_a_relative_sqlite_path_is_anchored(uri: str, expected: str) -> None:
    assert absolute_store_uri(uri, "/launch") == expected


def test_a_job_reads_the_store_path_against_the_folder_the_config_was_composed_in(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # Composed in the launch folder, as the sweep's process does (Hydra records runtime.cwd there and carries it to
    # every job); validated in a job whose working folder is another one.
    launch, job = tmp_path / "launch", tmp_path / "job"
    launch.mkdir()
    job.mkdir()
    monkeypatch.chdir(launch)
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=["paths.root=/x", "tracking.uri=sqlite:///rel/x.db"], return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    try:
        with open_dict(cfg):
            del cfg["hydra"]  # the job's own config, as Hydra hands it to the task
        monkeypatch.chdir(job)
        assert validate(cfg).tracking.uri == f"sqlite:///{launch}/rel/x.db"
    finally:
        HydraConfig.instance().cfg = None
    # Outside Hydra (a notebook, a test): this process's working folder.
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        plain = compose("config", overrides=["paths.root=/x", "tracking.uri=sqlite:///rel/x.db"])
    assert validate(plain).tracking.uri == f"sqlite:///{job}/rel/x.db"


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
