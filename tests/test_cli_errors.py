"""Every read tool answers a user's mistake alike: one line ``error: ...`` on stderr, a status, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from eaq.diff import main as diff_main
from eaq.report.__main__ import main as report_main
from eaq.report.compare import main as compare_main
from eaq.report.front import main as front_main
from eaq.report.multi_gpu import main as multi_gpu_main
from eaq.report.table import main as table_main
from eaq.rerun import main as rerun_main


@pytest.mark.parametrize(
    ("main", "args", "status"),
    [
        (report_main, ["--out", "rep"], 1),  # the report's 1: nothing to report (it printed the sentence alone)
        (front_main, [], 2),
        (table_main, [], 2),
        (compare_main, [], 2),
        (diff_main, ["a", "b"], 2),
        (rerun_main, ["a"], 2),
    ],
)
def test_a_missing_store_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], main, args: list[str],
                                           status: int) -> None:
    uri = f"sqlite:///{tmp_path}/none.db"  # not there: every tool reading a store says so
    args = [a if a != "rep" else str(tmp_path / "rep") for a in args]
    assert main([*args, "--uri", uri]) == status
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and str(tmp_path) in err[0], err


def test_the_multi_gpu_comparison_says_a_missing_store_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Its stores are --one and --two, not --uri; it was the one read tool whose error came as a traceback."""
    uri = f"sqlite:///{tmp_path}/none.db"
    assert multi_gpu_main(["--one", uri, "--two", uri, "--one-wall-s", "100", "--two-wall-s", "60"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and str(tmp_path) in err[0], err


def test_a_report_out_that_cannot_be_a_folder_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--out naming an existing file was a FileExistsError traceback."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("eaq", artifact_location=(tmp_path / "artifacts").as_uri())
    run = client.create_run(experiment, tags={"eaq.kind": "benchmark"}).info.run_id
    for key, value in {"model.name": "m", "precision.name": "fp32", "batch_size": "4", "seq_len": "32", "trial": "1"}.items():
        client.log_param(run, key, value)
    client.log_metric(run, "latency_mean_ms", 1.0)
    client.set_terminated(run, "FINISHED")
    (taken := tmp_path / "a-file").write_text("")
    assert report_main(["--uri", uri, "--out", str(taken)]) == 1
    err = [line for line in capsys.readouterr().err.strip().splitlines() if " INFO mlflow" not in line]  # the store's creation
    assert err == [f"error: --out {taken}: the report cannot be written there (File exists); pass a folder to create "
                   "or one that holds an earlier report."]
