"""The report: a real CPU sweep into tmp_path, aggregates checked by hand, figures, HTML in a real browser."""

from __future__ import annotations

import html
import json
import math
import re
import time
import os
from pathlib import Path
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys

from mlflow.tracking import MlflowClient
import pandas as pd
import pytest
from scipy import stats

from eaq.errors import EaqError
from eaq.report.aggregate import aggregate, config_label, ratio_interval, wide
from tests.conftest import FAST, REPO, all_runs, run_eaq, store

CHROMEDRIVER = Path("/usr/bin/chromedriver")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, subprocess.CompletedProcess[str]]:
    """fp32 and int8 x 3 trials of the tiny BERT, on this CPU: (output dir, parent run id, the sweep's process)."""
    out = tmp_path_factory.mktemp("report") / "outputs"
    result = run_eaq(out, "-m", "precision=fp32,int8", "trial=1,2,3", *FAST, "isolate=false")
    assert result.returncode == 0, result.stderr[-3000:]
    parents = [r for r in store(out).search_runs([e.experiment_id for e in store(out).search_experiments()])
               if r.data.tags.get("eaq.kind") == "sweep"]
    assert len(parents) == 1
    return out, parents[0].info.run_id, result


def report(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "eaq.report", "--uri", f"sqlite:///{out}/mlflow.db", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)


def children(out: Path, parent: str) -> list:
    client = store(out)
    return client.search_runs([e.experiment_id for e in client.search_experiments()],
                              filter_string=f"tags.`mlflow.parentRunId` = '{parent}'")


def test_sweep_end_logs_aggregates_on_parent_and_prints_table(sweep) -> None:
    out, parent, result = sweep
    runs = children(out, parent)
    parent_run = store(out).get_run(parent)
    assert parent_run.info.status == "FINISHED"  # logged while the parent was open, then closed by mlflow_sweep
    for precision in ("fp32", "int8"):
        mine = [r for r in runs if r.data.params["precision.name"] == precision]
        latencies = [r.data.metrics["latency_mean_ms"] for r in mine]
        label = config_label({"model": "bert-tiny-random", "precision": precision, "batch_size": 4, "seq_len": 32,
                              "compile": False})
        half = stats.t.ppf(0.975, 2) * statistics.stdev(latencies) / math.sqrt(3)
        logged = parent_run.data.metrics
        assert logged[f"latency_mean_ms/{label}/mean"] == pytest.approx(statistics.mean(latencies), rel=1e-9)
        assert logged[f"latency_mean_ms/{label}/ci95_high"] == pytest.approx(statistics.mean(latencies) + half, rel=1e-9)
        assert logged[f"latency_mean_ms/{label}/n"] == 3
        assert not any(name.startswith("energy_per_sample_mj/") for name in logged)  # no sensor here: not logged as 0
        assert label in result.stdout
    artifacts = {f.path for f in store(out).list_artifacts(parent, "report")}
    assert "report/report.html" in artifacts and "report/aggregates.csv" in artifacts
    assert "not measured" in result.stdout  # energy per sample column of the compact table
    # Without energy, the last column ranks by latency: the faster configuration is "best", the other its ratio with
    # the delta-method interval of the ratios (three trials a side).
    values = {p: pd.Series([r.data.metrics["latency_mean_ms"] for r in runs if r.data.params["precision.name"] == p])
              for p in ("fp32", "int8")}
    slow, fast = sorted(values, key=lambda p: values[p].mean(), reverse=True)
    rows = {p: next(line for line in result.stdout.splitlines() if f"-{p}-b4-s32" in line and line.startswith("|"))
            for p in values}
    assert "latency_mean_vs_best" in result.stdout
    assert rows[fast].rstrip(" |").endswith("best")
    ratio, low, high = ratio_interval(values[slow], values[fast])
    assert ratio == pytest.approx(values[slow].mean() / values[fast].mean())
    # Two decimals; two significant digits below 0.1 (a noisy pair of trials on a loaded machine: 0.053, not 0.05).
    shown = {bound: f"{bound:.2f}" if bound >= 0.1 else f"{bound:.2g}" for bound in (low, high)}
    assert rows[slow].rstrip(" |").endswith(f"{ratio:.2f}x [{shown[low]}, {shown[high]}]")
    assert f"python -m eaq.report --uri sqlite:///{out}/mlflow.db --sweep {parent}" in result.stdout


def test_a_sweep_is_named_to_the_report_as_to_eaq_diff(sweep) -> None:
    """--sweep took the parent run's id alone: its name (the one the MLflow UI lists, and eaq.diff --sweep takes) and
    its folder were "no such run"."""
    from eaq.report.frame import fetch_runs

    out, parent, _ = sweep
    uri = f"sqlite:///{out}/mlflow.db"
    (folder,) = {path.parent for path in out.parent.rglob("mlflow_parent_run_id.txt")}
    name = store(out).get_run(parent).info.run_name
    by_id = sorted(r.info.run_id for r in fetch_runs(uri, sweep=parent))
    assert len(by_id) == 6
    assert sorted(r.info.run_id for r in fetch_runs(uri, sweep=name)) == by_id
    assert sorted(r.info.run_id for r in fetch_runs(uri, sweep=str(folder))) == by_id
    with pytest.raises(EaqError, match="no such sweep folder, run id or run name in"):
        fetch_runs(uri, sweep="sweep-1999")
    # One job's folder inside it: said as such (it read "no such sweep folder"), naming the sweep's.
    job = next(path for path in folder.iterdir() if path.is_dir() and (path / ".hydra").is_dir())
    with pytest.raises(EaqError, match=f"^--sweep {re.escape(str(job))} is one job's folder of the sweep in "
                                       f"{re.escape(str(folder))}: pass that folder.$"):
        fetch_runs(uri, sweep=str(job))


def test_report_aggregates_match_a_hand_computation(sweep, tmp_path: Path) -> None:
    out, parent, _ = sweep
    result = report(out, "--sweep", parent, "--out", str(tmp_path / "rep"), "--baseline", "fp32")
    assert result.returncode == 0, result.stderr
    frame = pd.read_parquet(tmp_path / "rep" / "runs.parquet")
    assert len(frame) == 6 and len(pd.read_csv(tmp_path / "rep" / "runs.csv")) == 6
    # Where the runs ran is read from their records; one device, dataset and sampler name no configuration.
    assert set(frame["dataset"]) == {"sample"} and set(frame["sampler"]) == {"auto"} and set(frame["setting"]) == {""}
    assert frame["device_name"].notna().all() and frame["device_name"].nunique() == 1
    table = pd.read_csv(tmp_path / "rep" / "aggregates.csv")
    runs = children(out, parent)
    by_precision = {p: [r for r in runs if r.data.params["precision.name"] == p] for p in ("fp32", "int8")}
    for precision, mine in by_precision.items():
        for metric in ("latency_mean_ms", "throughput_samples_per_s", "model_size_mb"):
            values = [r.data.metrics[metric] for r in mine]
            row = table[(table["precision"] == precision) & (table["metric"] == metric)].iloc[0]
            mean, std = statistics.mean(values), statistics.stdev(values)
            half = stats.t.ppf(0.975, len(values) - 1) * std / math.sqrt(len(values))
            assert (row["n"], row["runs"], row["invalid"], row["failed"]) == (3, 3, 0, 0)
            assert row["mean"] == pytest.approx(mean, rel=1e-9)
            assert row["std"] == pytest.approx(std, rel=1e-9)
            assert (row["ci_low"], row["ci_high"]) == pytest.approx((mean - half, mean + half), rel=1e-9)
            assert row["cv"] == pytest.approx(std / mean, rel=1e-9)
    assert "energy_per_sample_mj" not in set(table["metric"])  # not measured, so not a row of zeros
    ratios = pd.read_csv(tmp_path / "rep" / "ratios.csv")
    int8 = ratios[(ratios["precision"] == "int8") & (ratios["metric"] == "latency_mean_ms")].iloc[0]
    lat = {p: [r.data.metrics["latency_mean_ms"] for r in mine] for p, mine in by_precision.items()}
    assert int8["ratio"] == pytest.approx(statistics.mean(lat["int8"]) / statistics.mean(lat["fp32"]), rel=1e-9)
    assert int8["ci_low"] < int8["ratio"] < int8["ci_high"]
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "not measured" in page and "python -m eaq.run" in page and "precision=int8" in page


def test_a_run_killed_before_it_logged_its_configuration_counts_for_no_configuration() -> None:
    # Killed between its start and its parameters: no model, no precision. It sank the sweep's report
    # (sorting NaN among model names) and with it the sweep's summary.
    run = {"kind": "benchmark", "status": "FINISHED", "valid": None, "model": "m", "precision": "fp32", "batch_size": 4,
           "seq_len": 32, "compile": False, "compile_tuning": True, "compile_pattern_matcher": True, "cuda_graphs": False,
           "workload": "forward", "setting": "", "running": False, "latency_mean_ms": 1.0}
    killed = dict.fromkeys(run) | {"kind": "benchmark", "status": "KILLED", "running": False}
    table = aggregate(pd.DataFrame([run, run | {"latency_mean_ms": 1.2}, killed]), metrics=("latency_mean_ms",))
    assert list(table["model"]) == ["m"] and table.iloc[0]["n"] == 2 and table.iloc[0]["failed"] == 0
    # A run still under way (a report built while its sweep runs) has not failed: counted as running.
    table = aggregate(pd.DataFrame([run, run | {"status": "RUNNING", "running": True}, run | {"status": "FAILED"}]), metrics=("latency_mean_ms",))
    assert table.iloc[0][["n", "runs", "failed", "running"]].tolist() == [1, 3, 1, 1]
    assert [config_label(row) for _, row in wide(table).reset_index().iterrows()] == ["m-fp32-b4-s32"]


def test_a_report_logged_again_onto_a_run_shows_its_own_figures(tmp_path: Path) -> None:
    # MLflow shows the value of the highest (step, timestamp): stamped 0, the largest value ever logged won.
    from eaq.report.build import Report, log
    from eaq.tracking.run_logger import TrackedRun
    from eaq.tracking.store import open_store

    client, experiment = open_store(f"sqlite:///{tmp_path}/mlflow.db", "eaq", str(tmp_path / "artifacts"))
    run = TrackedRun(client, experiment, "sweep", {"eaq.kind": "sweep"})
    config = {"model": "m", "precision": "fp32", "batch_size": 4, "seq_len": 32, "compile": False, "compile_tuning": True,
              "compile_pattern_matcher": True, "cuda_graphs": False, "workload": "forward", "setting": "",
              "metric": "latency_mean_ms", "ci_low": math.nan, "ci_high": math.nan, "n": 1, "logged": 1}
    for mean in (12.0, 10.0):
        out = tmp_path / f"report-{mean}"
        out.mkdir()
        log(client, run.run_id, Report(out, out / "report.html", pd.DataFrame([config | {"mean": mean}]), [], ""))
        time.sleep(0.01)
    assert client.get_run(run.run_id).data.metrics["latency_mean_ms/m-fp32-b4-s32/mean"] == 10.0


def test_the_report_logged_onto_a_run_carries_no_credential(tmp_path: Path) -> None:
    # The report's files (runs.csv holds artifact URIs) reach the store by the report's own writer, not TrackedRun.
    from eaq.report.build import Report, log
    from eaq.tracking.run_logger import TrackedRun
    from eaq.tracking.store import open_store

    client, experiment = open_store(f"sqlite:///{tmp_path}/mlflow.db", "eaq", str(tmp_path / "artifacts"))
    run = TrackedRun(client, experiment, "sweep", {"eaq.kind": "sweep"})
    out = tmp_path / "report"
    out.mkdir()
    (out / "runs.csv").write_text("run_id,artifact_uri\nabc,https://user:hunter2@store.example/eaq\n")
    log(client, run.run_id, Report(out, out / "report.html", pd.DataFrame(columns=["metric"]), [], ""))
    logged = Path(client.download_artifacts(run.run_id, "report/runs.csv", str(tmp_path / "back"))).read_text()
    assert "hunter2" not in logged and "https://user:<redacted>@store.example/eaq" in logged


def test_ratio_interval_is_the_delta_method_on_the_log_with_welch_df() -> None:
    a, b = pd.Series([10.0, 12.0, 11.0]), pd.Series([5.0, 5.5])
    ratio, low, high = ratio_interval(a, b)
    # Welch-Satterthwaite over the relative variances the delta method adds: the variance of the ratio's log.
    ra, rb = a.var() / 3 / 11**2, b.var() / 2 / 5.25**2
    df = (ra + rb) ** 2 / (ra**2 / 2 + rb**2 / 1)
    spread = math.exp(stats.t.ppf(0.975, df) * math.sqrt(ra + rb))
    assert (ratio, low, high) == pytest.approx((11 / 5.25, 11 / 5.25 / spread, 11 / 5.25 * spread))
    # A metric's unit does not change the interval, and the other side as the baseline gives its reciprocal (a
    # latency ratio and its speed-up, read apart, drew opposite conclusions from one pair of configurations).
    assert ratio_interval(a * 1000, b)[1:] == pytest.approx((low * 1000, high * 1000))
    assert ratio_interval(b, a) == pytest.approx((1 / ratio, 1 / high, 1 / low))
    slower, faster = pd.Series([12.5, 14.0, 15.5]), pd.Series([10.0, 11.0, 12.0])
    separated = lambda r: r[1] > 1 or r[2] < 1  # noqa: E731
    assert separated(ratio_interval(slower, faster)) == separated(ratio_interval(faster, slower))
    # Two noisy trials: wide, but a ratio of positive figures, never below 0.
    assert 0 < ratio_interval(pd.Series([1.0, 9.0]), pd.Series([5.0, 5.2]))[1]
    assert math.isnan(ratio_interval(a, pd.Series([5.0]))[1])  # one baseline trial: no interval claimed
    # From an aggregate table's mean, std and n (the summary's "x vs best"): the same interval, by the same code.
    from eaq.report.aggregate import ratio_from_summary

    summary = ratio_from_summary(a.mean(), a.std(), len(a), b.mean(), b.std(), len(b))
    assert summary == pytest.approx((ratio, low, high), rel=1e-12)
    assert math.isnan(ratio_from_summary(11.0, math.nan, 1, 5.25, b.std(), 2)[1])
    assert all(map(math.isnan, ratio_from_summary(11.0, math.nan, math.nan, 5.25, b.std(), 2)))  # no count: no ratio
    assert all(map(math.isnan, ratio_from_summary(math.nan, math.nan, 0, 5.25, b.std(), 2)))


def test_every_figure_is_written_and_the_missing_ones_say_why(sweep, tmp_path: Path) -> None:
    out, parent, _ = sweep
    result = report(out, "--sweep", parent, "--out", str(tmp_path / "rep"))
    assert result.returncode == 0, result.stderr
    written = sorted((tmp_path / "rep" / "figures").iterdir())
    assert {p.name for p in written} >= {"overview_bert-tiny-random.png", "overview_bert-tiny-random.svg",
                                         "tradeoff_bert-tiny-random.png", "tradeoff_bert-tiny-random.svg"}
    assert all(p.stat().st_size > 0 for p in written)
    assert "energy not measured" in result.stdout  # Pareto front and power trace: left out with the reason
    assert "no layer-analysis runs" in result.stdout


def _log_layers_run(uri: str, experiment_id: str, folder: Path, **tags: str) -> None:
    """A run shaped as issue 11's contract says a layers run is, logged through the real MLflow client."""
    client = MlflowClient(tracking_uri=uri)
    run = client.create_run(experiment_id, run_name="bert-tiny-random-fp32-b4-layers",
                            tags={"eaq.kind": "layers", "eaq.layers.share_basis": "time", **tags})
    for key, value in {"model.name": "bert-tiny-random", "precision.name": "fp32", "batch_size": "4", "seq_len": "32",
                       "trial": "1", "compile": "False"}.items():
        client.log_param(run.info.run_id, key, value)
    layers = folder / "layers"
    layers.mkdir(parents=True)
    types = ["embeddings", "attention", "ffn", "attention", "ffn", "head"]
    pd.DataFrame({"component": [f"c{i}" for i in range(6)], "type": types, "block": ["", 0, 0, 1, 1, ""],
                  "modules": ["m"] * 6, "params": [100] * 6, "flops_per_pass": [1e6] * 6,
                  "time_ms_per_pass": [0.1, 0.3, 0.4, 0.3, 0.4, 0.2], "energy_replay_mj_per_pass": [""] * 6,
                  "energy_attribution_mj_per_pass": [""] * 6, "energy_share": [0.06, 0.18, 0.24, 0.18, 0.24, 0.1],
                  "sensitivity_kl": [0.01, 0.2, 0.1, 0.3, 0.05, 0.02], "sensitivity_impact": [0.1, 0.5, 0.3, 0.6, 0.2, 0.1],
                  "ablation_kl": [""] * 6, "ablation_impact": [0.2, 0.7, 0.4, 0.8, 0.3, ""]}).to_csv(layers / "components.csv", index=False)
    pd.DataFrame({"type": ["embeddings", "attention", "ffn", "head"], "energy_share": [0.06, 0.36, 0.48, 0.1],
                  "sensitivity_impact": [0.1, 0.9, 0.4, 0.1], "ablation_impact": [0.2, 1.0, 0.5, ""]}
                 ).to_csv(layers / "component_types.csv", index=False)
    pd.DataFrame({"scope": ["all"] * 4 + ["attention"] * 2, "impact": ["sensitivity", "sensitivity", "ablation", "ablation",
                                                                        "sensitivity", "ablation"],
                  "method": ["pearson", "spearman"] * 3, "r": [0.8, 0.7, 0.6, 0.5, 0.9, -0.2],
                  "p_value": [0.05, 0.1, 0.2, 0.3, 0.01, 0.8], "n": [6, 6, 5, 5, 2, 2]}).to_csv(layers / "correlation.csv", index=False)
    client.log_artifacts(run.info.run_id, str(layers), "layers")
    client.set_terminated(run.info.run_id, "FINISHED")


def test_layer_figures_come_from_a_layers_runs_csv_artifacts(sweep, tmp_path: Path) -> None:
    out, _, _ = sweep
    shutil.copy(out / "mlflow.db", tmp_path / "mlflow.db")  # the shared sweep's store stays as the other tests expect
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    experiment = MlflowClient(tracking_uri=uri).get_experiment_by_name("eaq")
    _log_layers_run(uri, experiment.experiment_id, tmp_path / "artifacts")
    result = subprocess.run([sys.executable, "-m", "eaq.report", "--uri", uri, "--out", str(tmp_path / "rep")],
                            cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    names = {p.name for p in (tmp_path / "rep" / "figures").iterdir() if p.stat().st_size > 0}
    for figure in ("energy", "impact", "scatter", "correlation"):
        assert any(n.startswith(f"layers_{figure}_") and n.endswith(".png") for n in names), (figure, names)
    assert "no layer-analysis runs" not in result.stdout


def test_runs_flagged_invalid_are_not_drawn_unless_asked_for(sweep, tmp_path: Path) -> None:
    """A flagged layers run gets a note, not figures; the default power trace is a run that counts; one asked for by
    --trace-run is drawn with the checks' finding in its title."""
    out, parent, _ = sweep
    shutil.copy(out / "mlflow.db", tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    _log_layers_run(uri, client.get_experiment_by_name("eaq").experiment_id, tmp_path / "artifacts",
                    **{"eaq.valid": "false", "eaq.valid.reasons": "power cap reached"})
    runs = sorted(children(out, parent), key=lambda r: (r.data.params["precision.name"], r.data.params["trial"]))
    kept = runs[0]
    for run in runs[1:]:
        client.set_tag(run.info.run_id, "eaq.valid", "false")
        client.set_tag(run.info.run_id, "eaq.valid.reasons", "poll coverage 0.90 < 0.99")
    result = subprocess.run([sys.executable, "-m", "eaq.report", "--uri", uri, "--out", str(tmp_path / "rep")],
                            cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "is flagged invalid (power cap reached): its layer figures are not drawn" in page
    assert not any(p.name.startswith("layers_") for p in (tmp_path / "rep" / "figures").iterdir())
    assert f"power trace: {kept.info.run_name}" in page
    assert not any(f"power trace: {r.info.run_name}" in page for r in runs[1:] if r.info.run_name != kept.info.run_name)
    flagged = runs[-1]
    asked = subprocess.run([sys.executable, "-m", "eaq.report", "--uri", uri, "--out", str(tmp_path / "asked"),
                            "--trace-run", flagged.info.run_id], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert asked.returncode == 0, asked.stderr
    assert (f"power trace: {flagged.info.run_name} (flagged invalid: poll coverage 0.90 &lt; 0.99)"
            in (tmp_path / "asked" / "report.html").read_text())


def test_the_reports_commands_are_shell_words_where_paths_hold_spaces(tmp_path: Path) -> None:
    """The report's command lines are pasted into a shell: a path with a space must stay one word."""
    out = tmp_path / "my outputs"
    assert run_eaq(out, *FAST).returncode == 0
    rep = tmp_path / "my report"
    result = report(out, "--out", str(rep))
    assert result.returncode == 0, result.stderr
    page = html.unescape((rep / "report.html").read_text())
    lines = [line.removeprefix("<pre>").removesuffix("</pre>") for line in page.splitlines()]
    run_line = shlex.split(next(line for line in lines if line.startswith("python -m eaq.run")))
    assert f"paths.output_dir={out}" in run_line
    report_line = shlex.split(next(line for line in lines if line.startswith("python -m eaq.report")))
    assert report_line[report_line.index("--out") + 1] == str(rep)
    assert report_line[report_line.index("--uri") + 1] == f"sqlite:///{out}/mlflow.db"


def test_report_html_displays_every_image_in_a_real_browser(sweep, tmp_path: Path) -> None:
    """Headless Chromium from the distribution; in CI (CI=true) a missing browser fails the test."""
    if not CHROMEDRIVER.exists() and os.environ.get("CI") != "true":
        pytest.skip("chromium-driver not installed (apt-get install chromium chromium-driver); CI installs it")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    out, parent, _ = sweep
    assert report(out, "--sweep", parent, "--out", str(tmp_path / "rep")).returncode == 0
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        driver.get((tmp_path / "rep" / "report.html").as_uri())
        images = driver.execute_script(
            "return Array.from(document.images).map(i => [i.alt, i.complete, i.naturalWidth]);")
        assert len(images) >= 2, images
        assert all(complete and width > 0 for _, complete, width in images), images
        errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        assert not errors, json.dumps(errors)
    finally:
        driver.quit()


def test_invalid_runs_are_counted_not_averaged(sweep, tmp_path: Path) -> None:
    out, parent, _ = sweep
    shutil.copy(out / "mlflow.db", tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    fp32 = sorted((r for r in children(out, parent) if r.data.params["precision.name"] == "fp32"),
                  key=lambda r: r.data.params["trial"])
    client.set_tag(fp32[0].info.run_id, "eaq.valid", "false")  # what the validity checks leave on a flagged GPU run
    client.set_tag(fp32[0].info.run_id, "eaq.valid.reasons", "poll coverage 0.90 < 0.99")
    result = subprocess.run([sys.executable, "-m", "eaq.report", "--uri", uri, "--sweep", parent, "--out", str(tmp_path / "rep")],
                            cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    table = pd.read_csv(tmp_path / "rep" / "aggregates.csv")
    row = table[(table["precision"] == "fp32") & (table["metric"] == "latency_mean_ms")].iloc[0]
    kept = [r.data.metrics["latency_mean_ms"] for r in fp32[1:]]
    assert (row["n"], row["runs"], row["invalid"], row["failed"]) == (2, 3, 1, 0)
    assert row["mean"] == pytest.approx(statistics.mean(kept), rel=1e-9)
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "poll coverage 0.90 &lt; 0.99" in page and fp32[0].info.run_name in page


def test_a_failed_run_is_counted_and_named_in_the_sweeps_report(out: Path, tmp_path: Path) -> None:
    result = run_eaq(out, "-m", "batch_size=0,4", *FAST[:2], "seq_len=32", "isolate=false")
    assert result.returncode != 0  # the sweep still fails for its failed run; the report does not hide it
    parent = next(r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "sweep")
    assert parent.info.status == "FAILED"
    folder = Path(store(out).download_artifacts(parent.info.run_id, "report", str(tmp_path)))
    table = pd.read_csv(folder / "aggregates.csv")
    failed = table[table["batch_size"] == 0]
    assert not failed.empty and (failed["failed"] == 1).all() and (failed["n"] == 0).all()
    assert (table.loc[table["batch_size"] == 4, "n"] == 1).all()
    page = (folder / "report.html").read_text()
    assert "bert-tiny-random-fp32-b0-t1" in page and "FAILED" in page


def test_a_sweep_of_one_precision_eager_and_compiled_draws_each_apart(out: Path, tmp_path: Path) -> None:
    from eaq.report.aggregate import aggregate, wide
    from eaq.report.figures import with_variants
    from eaq.report.frame import load

    # One precision at one batch size in two configurations: every per-model figure has two bars or points
    # where a figure keyed by precision alone would have had one label twice (the report failed on it).
    result = run_eaq(out, "-m", "compile=false,true", "compile_tuning=false", *FAST, "isolate=false")
    assert result.returncode == 0, result.stderr[-3000:]
    parent = next(r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "sweep")
    folder = Path(store(out).download_artifacts(parent.info.run_id, "report", str(tmp_path)))
    figures = {p.name for p in (folder / "figures").glob("*.png")}
    assert {"overview_bert-tiny-random.png", "tradeoff_bert-tiny-random.png"} <= figures
    table = pd.read_csv(folder / "aggregates.csv")
    # Exactly the two configurations that ran: eager (its compiler settings read as the defaults: they did
    # nothing) and compiled with Inductor's defaults, and nothing the keys' values could combine into.
    assert sorted(map(tuple, table[["compile", "compile_tuning"]].drop_duplicates().values.tolist())) == [(False, True), (True, False)]
    assert set(with_variants(wide(aggregate(load(f"sqlite:///{out}/mlflow.db"))))["variant"]) == {"fp32", "fp32 compiled untuned"}


def test_workload_cuda_graphs_and_compiler_settings_keep_configurations_apart(tmp_path: Path) -> None:
    # A forward pass, a compiled one with and without CUDA graphs or with other compiler settings, and
    # generation of 128 tokens at the same model and shape measure different things: none may be averaged
    # into another. A run logged before the workload group and the cuda_graphs flag existed counts as the
    # forward pass it was.
    from eaq.report.aggregate import aggregate, compact
    from eaq.report.frame import load

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("eaq")
    base = {"model.name": "gpt2-tiny-random", "precision.name": "bf16", "batch_size": "4", "seq_len": "32"}
    configs = {
        "old forward": ({"compile": "False"}, "latency_mean_ms", [10.0]),
        "forward": ({"compile": "False", "cuda_graphs": "False", "workload.name": "forward", "workload.new_tokens": "128"},
                    "latency_mean_ms", [12.0, 14.0]),
        "compiled": ({"compile": "True", "cuda_graphs": "False", "workload.name": "forward"}, "latency_mean_ms", [5.0, 6.0]),
        "graphs": ({"compile": "True", "cuda_graphs": "True", "workload.name": "forward"}, "latency_mean_ms", [2.0, 3.0]),
        # Inductor's defaults, its rewrites off: other compilations; an eager run's compiler settings do nothing.
        "untuned": ({"compile": "True", "compile_tuning": "False", "workload.name": "forward"}, "latency_mean_ms", [7.0, 8.0]),
        "no rewrites": ({"compile": "True", "compile_tuning": "True", "compile_pattern_matcher": "False",
                         "workload.name": "forward"}, "latency_mean_ms", [9.0]),
        "eager untuned": ({"compile": "False", "compile_tuning": "False", "workload.name": "forward"}, "latency_mean_ms", [16.0]),
        "generate": ({"compile": "False", "cuda_graphs": "False", "workload.name": "generate", "workload.new_tokens": "128"},
                     "time_per_output_token_mean_ms", [40.0, 44.0]),
        "generate compiled": ({"compile": "True", "cuda_graphs": "False", "workload.name": "generate", "workload.new_tokens": "128"},
                              "time_per_output_token_mean_ms", [20.0, 22.0]),
    }
    for params, metric, values in configs.values():
        for trial, value in enumerate(values, 1):
            run = client.create_run(experiment, tags={"eaq.kind": "benchmark", "eaq.valid": "true"})
            for key, param in {**base, **params, "trial": str(trial)}.items():
                client.log_param(run.info.run_id, key, param)
            client.log_metric(run.info.run_id, metric, value)
            client.set_terminated(run.info.run_id)
    table = aggregate(load(uri, experiment="eaq"))
    means = {config_label(row): (row["metric"], row["n"], row["mean"]) for _, row in table.iterrows() if row["n"] > 0}
    prefix = "gpt2-tiny-random-bf16-b4-s32"
    assert means == {
        prefix: ("latency_mean_ms", 4, pytest.approx(13.0)),  # the old run, the two new forward runs and the eager untuned one
        f"{prefix}-compiled": ("latency_mean_ms", 2, pytest.approx(5.5)),
        f"{prefix}-compiled-untuned": ("latency_mean_ms", 2, pytest.approx(7.5)),
        f"{prefix}-compiled-no-pattern-matcher": ("latency_mean_ms", 1, pytest.approx(9.0)),
        f"{prefix}-compiled-graphs": ("latency_mean_ms", 2, pytest.approx(2.5)),
        f"{prefix}-gen128": ("time_per_output_token_mean_ms", 2, pytest.approx(42.0)),
        f"{prefix}-compiled-gen128": ("time_per_output_token_mean_ms", 2, pytest.approx(21.0)),
    }
    # The closing table ranks each workload on its own cost, in its own column: forward passes by
    # latency per batch, generation by time per output token, each blank in the other's rows.
    ranks = compact(table).set_index("configuration")[["latency_mean_vs_best", "time_per_output_token_mean_vs_best"]]
    # With its 95% interval where both sides have two trials or more (the one-trial configuration: none).
    assert ranks.loc[f"{prefix}-compiled", "latency_mean_vs_best"].startswith("2.20x [")
    assert ranks.loc[f"{prefix}-compiled-no-pattern-matcher", "latency_mean_vs_best"] == f"{9.0 / 2.5:.2f}x"
    ranks = ranks.map(lambda cell: cell.split(" [")[0])
    assert ranks.to_dict("index") == {
        prefix: {"latency_mean_vs_best": f"{13.0 / 2.5:.2f}x", "time_per_output_token_mean_vs_best": ""},
        f"{prefix}-compiled": {"latency_mean_vs_best": f"{5.5 / 2.5:.2f}x", "time_per_output_token_mean_vs_best": ""},
        f"{prefix}-compiled-untuned": {"latency_mean_vs_best": f"{7.5 / 2.5:.2f}x", "time_per_output_token_mean_vs_best": ""},
        f"{prefix}-compiled-no-pattern-matcher": {"latency_mean_vs_best": f"{9.0 / 2.5:.2f}x", "time_per_output_token_mean_vs_best": ""},
        f"{prefix}-compiled-graphs": {"latency_mean_vs_best": "best", "time_per_output_token_mean_vs_best": ""},
        f"{prefix}-gen128": {"latency_mean_vs_best": "", "time_per_output_token_mean_vs_best": f"{42.0 / 21.0:.2f}x"},
        f"{prefix}-compiled-gen128": {"latency_mean_vs_best": "", "time_per_output_token_mean_vs_best": "best"},
    }


def test_runs_of_two_devices_datasets_or_samplers_are_never_averaged_together(tmp_path: Path) -> None:
    # One store can hold runs of an H100 and an H200 (two stores of a multi-GPU study read together), or of
    # two datasets or samplers: each is a configuration of its own, named by what differs, ranked in its own scope.
    from eaq.report.aggregate import compact
    from eaq.report.compare import compare
    from eaq.report.frame import load
    from eaq.report.table import runs_table

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("eaq")
    base = {"model.name": "m", "batch_size": "4", "seq_len": "32", "compile": "False", "workload.name": "forward",
            "sampler.name": "nvml"}
    runs = [("NVIDIA H100 80GB HBM3", "sst2", "bf16", [100.0, 104.0]), ("NVIDIA H100 80GB HBM3", "sst2", "fp8", [80.0]),
            ("NVIDIA H200", "sst2", "bf16", [90.0, 92.0]), ("NVIDIA H200", "sst2", "fp8", [60.0]),
            ("Intel(R) Xeon(R) Processor", "synthetic", "bf16", [70.0])]
    for device, dataset, precision, energies in runs:
        for trial, energy in enumerate(energies, 1):
            run = client.create_run(experiment, tags={"eaq.kind": "benchmark", "eaq.valid": "true",
                                                      "eaq.env.device_name": device})
            for key, value in {**base, "dataset.name": dataset, "precision.name": precision, "trial": str(trial)}.items():
                client.log_param(run.info.run_id, key, value)
            client.log_metric(run.info.run_id, "energy_per_sample_mj", energy)
            client.log_metric(run.info.run_id, "quality_accuracy", 0.9 - energy / 1000)
            client.set_terminated(run.info.run_id)
    # A run that failed before it logged its environment (no device name): its configuration ran on the CPU only,
    # so it is counted there. A layers run with another sampler does not rename the benchmark's configurations.
    for kind, params, status in (("benchmark", {"dataset.name": "synthetic", "precision.name": "bf16"}, "FAILED"),
                                 ("layers", {"dataset.name": "sst2", "precision.name": "bf16", "sampler.name": "auto"}, "FINISHED")):
        run = client.create_run(experiment, tags={"eaq.kind": kind}).info.run_id
        for key, value in {**base, "trial": "9", **params}.items():
            client.log_param(run, key, value)
        client.set_terminated(run, status)
    frame = load(uri, experiment="eaq")
    table = aggregate(frame)
    failed = table[(table["failed"] > 0)]
    assert set(failed["setting"]) == {"Intel(R) Xeon(R) Processor synthetic"} and set(failed["precision"]) == {"bf16"}
    energy = table[table["metric"] == "energy_per_sample_mj"]
    means = {config_label(row): (row["n"], row["mean"]) for _, row in energy.iterrows()}
    assert means == {
        "m-bf16-b4-s32-NVIDIA-H100-80GB-HBM3-sst2": (2, pytest.approx(102.0)),
        "m-bf16-b4-s32-Intel-R-Xeon-R-Processor-synthetic": (1, pytest.approx(70.0)),
        "m-bf16-b4-s32-NVIDIA-H200-sst2": (2, pytest.approx(91.0)),
        "m-fp8-b4-s32-NVIDIA-H100-80GB-HBM3-sst2": (1, pytest.approx(80.0)),
        "m-fp8-b4-s32-NVIDIA-H200-sst2": (1, pytest.approx(60.0)),
    }
    # Ranked within its own device and dataset: the H100's fp8 is its scope's best, not 1.33x the H200's.
    ranks = compact(table).set_index("configuration")["energy_per_sample_vs_best"].to_dict()
    assert ranks["m-fp8-b4-s32-NVIDIA-H100-80GB-HBM3-sst2"] == "best" and ranks["m-fp8-b4-s32-NVIDIA-H200-sst2"] == "best"
    assert ranks["m-bf16-b4-s32-Intel-R-Xeon-R-Processor-synthetic"] == "best"
    # The labels name the sweep's aggregates in MLflow, which refuses a "(" in a metric's name.
    from eaq.report.build import aggregate_metrics
    from mlflow.entities import Metric
    summary = client.create_run(experiment).info.run_id
    client.log_batch(summary, metrics=[Metric(k, v, 0, 0) for k, v in aggregate_metrics(table).items()])
    assert "energy_per_sample_mj/m-bf16-b4-s32-Intel-R-Xeon-R-Processor-synthetic/mean" in client.get_run(summary).data.metrics
    # fp8 over bf16 on each device alone.
    from eaq.report.aggregate import ratios
    found = ratios(frame, "bf16", ("energy_per_sample_mj",))
    found = found[found["precision"] == "fp8"].set_index("setting")["ratio"].to_dict()
    assert found == {"NVIDIA H100 80GB HBM3 sst2": pytest.approx(80.0 / 102.0), "NVIDIA H200 sst2": pytest.approx(60.0 / 91.0)}
    # The energy-quality figure draws a front per device and dataset (three panels), not one through all of them.
    import matplotlib.image
    from eaq.report.figures import pareto
    configs = wide(table)
    widths = [matplotlib.image.imread(pareto(rows, "m", tmp_path / name).png).shape[1]
              for name, rows in (("all", configs), ("one", configs[configs["setting"] == "NVIDIA H200 sst2"]))]
    assert widths[0] == pytest.approx(3 * widths[1], rel=0.02)
    # compare, on the same store, keeps them apart the same way and compares each with its own baseline.
    from eaq.report.compare import COLUMNS
    rows = compare(runs_table([uri], columns=COLUMNS), "bf16")
    fp8 = rows[rows["precision.name"] == "fp8"].set_index("eaq.env.device_name")["energy_vs_baseline_pct"].to_dict()
    assert fp8 == {"NVIDIA H100 80GB HBM3": pytest.approx((80.0 / 102.0 - 1) * 100),
                   "NVIDIA H200": pytest.approx((60.0 / 91.0 - 1) * 100)}
    assert len(rows) == 5 and set(rows["dataset.name"]) == {"sst2", "synthetic"}
    assert set(rows["eaq.env.device_name"]) == {"NVIDIA H100 80GB HBM3", "NVIDIA H200", "Intel(R) Xeon(R) Processor"}


def test_a_run_left_marked_running_by_a_sweep_that_ended_counts_as_failed(tmp_path: Path) -> None:
    # A job killed with SIGKILL (or on a lost host) cannot mark its run: MLflow keeps it RUNNING for good. It is
    # under way only while its sweep is; once the sweep ended it did not finish, and the report says so.
    from eaq.report.frame import load
    from eaq.report.html import problems

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("eaq")
    ended = client.create_run(experiment, tags={"eaq.kind": "sweep"}).info.run_id
    client.set_terminated(ended, "FAILED")
    live = client.create_run(experiment, tags={"eaq.kind": "sweep"}).info.run_id
    names = {}
    for parent, finish in ((ended, True), (ended, False), (live, False)):
        run = client.create_run(experiment, tags={"eaq.kind": "benchmark", "mlflow.parentRunId": parent}).info.run_id
        for key, value in {"model.name": "m", "precision.name": "fp32", "batch_size": "4", "seq_len": "32"}.items():
            client.log_param(run, key, value)
        if finish:
            client.log_metric(run, "latency_mean_ms", 1.0)
            client.set_terminated(run)
        names[run] = "finished" if finish else "lost" if parent == ended else "running"
    frame = load(uri, experiment="eaq")
    row = aggregate(frame).iloc[0]
    assert row[["n", "runs", "failed", "running"]].tolist() == [1, 3, 1, 1]
    why = {names[r]: w for r, w in zip(problems(frame)["run id"], problems(frame)["why"])}
    assert why == {"lost": "its sweep ended while it was marked running (its process was killed)", "running": "marked running: still running, or killed before it could say"}


def test_the_front_says_what_dominates_and_whether_the_trials_separate_it(tmp_path: Path) -> None:
    # The H100's figures of 2026-11-25 (docs/results/2026-11-25-h100-layers/late): energy per sample of 3 trials
    # and drift from fp32, per model (a classifier's agreement, a causal LM's top-1 agreement).
    from eaq.report.front import verdicts
    from eaq.report.frame import load

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("eaq")
    measured = {
        ("distilbert-base-random", "quality_agreement_with_fp32"): {
            "bf16": (1.0, [20.68, 21.36, 20.86]), "fp8": (0.9688, [21.38, 22.54, 21.75]),
            "int8": (1.0, [34.65, 33.80, 35.54]), "mixed": (1.0, [22.38, 22.50, 22.42])},
        ("gpt2-small-random", "quality_top1_agreement_with_fp32"): {
            "bf16": (0.9601, [56.77, 56.94, 54.94]), "fp8": (0.7802, [55.12, 57.31, 55.23]),
            "int8": (0.9164, [75.06, 75.27, 75.15]), "mixed": (0.8708, [57.11, 55.31, 55.18])},
        # And a plan whose saving the trials do separate: 20% cheaper than bf16 in every trial, drifting more.
        ("gpt2-tiny-random", "quality_top1_agreement_with_fp32"): {
            "bf16": (0.99, [10.0, 10.1, 10.2]), "mixed": (0.95, [8.0, 8.1, 8.2])},
        # Equal quality: the cheapest on the means (a wide spread) dominates only on the means; the dominator the
        # trials separate is the steady one, not the cheapest.
        ("bert-tiny-random", "quality_agreement_with_fp32"): {
            "bf16": (1.0, [6.0, 10.0, 14.0]), "fp16": (1.0, [10.0, 10.1, 10.2]), "int8": (1.0, [10.3, 10.4, 10.5])},
    }
    for (model, quality), precisions in measured.items():
        for precision, (drift, energies) in precisions.items():
            for trial, energy in enumerate(energies, 1):
                run = client.create_run(experiment, tags={"eaq.kind": "benchmark", "eaq.valid": "true"})
                params = {"model.name": model, "precision.name": precision, "batch_size": "64", "seq_len": "128",
                          "compile": "True", "compile_tuning": "False", "workload.name": "forward", "trial": str(trial)}
                for key, value in params.items():
                    client.log_param(run.info.run_id, key, value)
                client.log_metric(run.info.run_id, "energy_per_sample_mj", energy)
                client.log_metric(run.info.run_id, quality, drift)
                client.set_terminated(run.info.run_id)
    # Neither an invalid run nor another configuration of the same precision (eager) enters int8's trials.
    for tags, params, energy in (({"eaq.valid": "false"}, {"compile": "True", "compile_tuning": "False"}, 99.0),
                                 ({"eaq.valid": "true"}, {"compile": "False"}, 30.0)):
        run = client.create_run(experiment, tags={"eaq.kind": "benchmark", **tags})
        for key, value in {"model.name": "bert-tiny-random", "precision.name": "int8", "batch_size": "64", "seq_len": "128",
                           "workload.name": "forward", "trial": "4", **params}.items():
            client.log_param(run.info.run_id, key, value)
        client.log_metric(run.info.run_id, "energy_per_sample_mj", energy)
        client.log_metric(run.info.run_id, "quality_agreement_with_fp32", 1.0)
        client.set_terminated(run.info.run_id)
    found = verdicts(load(uri, experiment="eaq")).set_index("configuration")
    short = {label: (row["verdict"], row["versus"].split("-b64")[0].rsplit("-", 1)[-1]) for label, row in found.iterrows()}
    name = lambda model, precision: f"{model}-{precision}-b64-s128-compiled-untuned"  # noqa: E731
    assert short == {
        # DistilBERT: bf16 as faithful and cheaper than the plan in every trial: the plan is dominated, and the
        # interval of 22.43 / 20.97 lies above 1; fp8 drifts more and costs more, but its trials overlap bf16's.
        name("distilbert-base-random", "bf16"): ("on the front", ""),
        name("distilbert-base-random", "mixed"): ("dominated", "bf16"),
        name("distilbert-base-random", "int8"): ("dominated", "bf16"),
        name("distilbert-base-random", "fp8"): ("dominated on the means only", "bf16"),
        # GPT-2: the plan is below bf16 on the means (55.87 against 56.22) with more drift, so on the front,
        # but 0.6% is not outside three trials' spread; fp8 drifts more than the plan at the same cost.
        name("gpt2-small-random", "bf16"): ("on the front", ""),
        name("gpt2-small-random", "mixed"): ("on the front, not separated from it", "bf16"),
        name("gpt2-small-random", "int8"): ("dominated", "bf16"),
        name("gpt2-small-random", "fp8"): ("dominated on the means only", "mixed"),
        name("gpt2-tiny-random", "bf16"): ("on the front", ""),
        name("gpt2-tiny-random", "mixed"): ("on the front, beyond it", "bf16"),
        name("bert-tiny-random", "bf16"): ("on the front", ""),
        name("bert-tiny-random", "fp16"): ("dominated on the means only", "bf16"),
        name("bert-tiny-random", "int8"): ("dominated", "fp16"),
        # Eager int8, its own configuration: one trial, so no interval, and against the cheapest dominator.
        "bert-tiny-random-int8-b64-s128": ("dominated on the means only", "bf16"),
    }
    steady = found.loc[name("bert-tiny-random", "int8")]
    assert steady["ratio"] == pytest.approx(10.4 / 10.1) and steady["ratio_ci_low"] > 1
    beyond = found.loc[name("gpt2-tiny-random", "mixed")]
    assert beyond["ratio"] == pytest.approx(8.1 / 10.1) and beyond["ratio_ci_high"] < 1
    mixed = found.loc[name("distilbert-base-random", "mixed")]
    assert mixed["ratio"] == pytest.approx(statistics.mean([22.38, 22.50, 22.42]) / statistics.mean([20.68, 21.36, 20.86]))
    assert 1 < mixed["ratio_ci_low"] < mixed["ratio"] < mixed["ratio_ci_high"]
    assert verdicts(load(uri, experiment="eaq").drop(columns=[c for c in ("quality_agreement_with_fp32",
                    "quality_top1_agreement_with_fp32")])).startswith("no quality metric")
    # Read as printed: a quality strictly better by 8e-8 is not shown as the same "1".
    from eaq.report.front import markdown, shown

    assert shown(pd.DataFrame({"quality_mean": [0.99999992, 1.0, math.nan]}))["quality_mean"].tolist() == ["0.99999992", "1", ""]
    assert "0.99999992" in markdown(pd.DataFrame({"cost_mean": [1.5], "quality_mean": [0.99999992]}))  # as the CLI prints


CAPTURE_METRICS = {("time", "components only"): "layers_time_capture_ratio",
                   ("time", "with blocks"): "layers_time_capture_ratio_with_blocks"}


def test_layer_report_shows_the_work_outside_components_and_both_capture_ratios(out: Path, tmp_path: Path) -> None:
    """A real tiny task=layers run: the capture table carries its logged ratios, the energy figure its outside
    entries by basis; the same store stripped of outside.csv and the with-blocks metrics (a run logged
    before they existed) still builds, with the new parts left out and said so."""
    import matplotlib
    from eaq.report.build import build

    done = run_eaq(out, "task=layers", *FAST)
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = all_runs(out)
    uri = f"sqlite:///{out}/mlflow.db"
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # SVG text as text, so the labels can be read back
        built = build(uri, tmp_path / "rep")
    capture = pd.read_csv(tmp_path / "rep" / "layers_capture.csv")
    time = capture[capture["method"] == "time"].iloc[0]
    assert time["trials (valid/finished)"] == "1/1"
    # Each row names its whole configuration, as the report's other tables do.
    params = run.data.params
    assert time["configuration"] == f"{params['model.name']}-{params['precision.name']}-b{params['batch_size']}-s{params['seq_len']}"
    for (_, scope), metric in CAPTURE_METRICS.items():  # one trial: the logged value itself, no interval claimed
        assert time[scope] == f"{run.data.metrics[metric]:.4g} (1 trial)"
    assert (capture.loc[capture["method"] != "time", "components only"] == "not measured").all()  # no sensor here
    page = built.html.read_text()
    assert "capture ratio per method" in page and "target 0.95-1.05" in page and time["with blocks"] in page
    svg = next((tmp_path / "rep" / "figures").glob("layers_energy_*.svg")).read_text()
    assert "block_ops (measured)" in svg and "model_glue (remainder)" in svg and "not logged" not in svg

    artifacts = Path(run.info.artifact_uri.removeprefix("file://"))
    (artifacts / "layers" / "outside.csv").unlink()
    con = sqlite3.connect(out / "mlflow.db")
    for table in ("metrics", "latest_metrics"):
        con.execute(f"DELETE FROM {table} WHERE key LIKE '%with_blocks' OR key LIKE 'layers_block_ops%' "
                    "OR key LIKE 'layers_model_glue%'")
    con.commit()
    con.close()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        older = build(uri, tmp_path / "older")
    capture = pd.read_csv(tmp_path / "older" / "layers_capture.csv")
    assert (capture["with blocks"] == "not logged (run predates layers/outside.csv)").all()
    assert (capture.loc[capture["method"] == "time", "components only"] == time["components only"]).all()
    svg = next((tmp_path / "older" / "figures").glob("layers_energy_*.svg")).read_text()
    assert "not logged" in svg and "block_ops" not in svg
    assert {f.title for f in older.figures if f.png is None} == {f.title for f in built.figures if f.png is None}
