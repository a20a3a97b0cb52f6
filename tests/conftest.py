"""Shared fixtures: run the real CLI into tmp_path and read the real MLflow store back."""

from __future__ import annotations

import os

# Tests never reach a model hub; fail fast instead of retrying the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
# Small and fast: random-weight 2-layer BERT, a handful of timed passes.
FAST = ["model=bert_tiny_random", "trials=quick", "batch_size=4", "seq_len=32"]


def run_eaq(output_dir: Path, *overrides: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """``python -m eaq.run`` in a fresh process, writing everything under ``output_dir``."""
    cmd = [sys.executable, "-m", "eaq.run", *overrides, f"paths.output_dir={output_dir}"]
    env = os.environ | {"PYTHONUNBUFFERED": "1"}
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def store(output_dir: Path) -> MlflowClient:
    return MlflowClient(tracking_uri=f"sqlite:///{output_dir}/mlflow.db")


def all_runs(output_dir: Path) -> list:
    client = store(output_dir)
    experiments = client.search_experiments()
    return client.search_runs([e.experiment_id for e in experiments]) if experiments else []


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "outputs"
