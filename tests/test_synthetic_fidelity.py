"""Fidelity to fp32 on synthetic token ids (trials.fidelity_on_synthetic): the drift axis of the
energy front on random-weight GPU runs, opt-in so timed sweeps on synthetic ids gain no phases."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FAST, all_runs, run_eaq
from eaq.report.compare import COLUMNS as COMPARE_COLUMNS, compare, main as compare_main, spelled
from eaq.report.table import PRESETS, runs_table

NO_QUALITY = "dataset is synthetic token ids: no quality figures for meaningless text"


def _quality(run) -> dict[str, float]:
    return {k: v for k, v in run.data.metrics.items() if k.startswith("quality_")}


def _benchmarks(out: Path) -> list:
    return [r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"]


def test_fidelity_on_synthetic_logs_drift_per_precision_once_per_configuration(out: Path) -> None:
    result = run_eaq(out, "-m", "model.head=embedding,sequence_classification", "precision=fp32,int8", "trial=1,2",
                     *FAST, "dataset=synthetic", "trials.fidelity_on_synthetic=true")
    assert result.returncode == 0, result.stderr[-3000:]
    runs = _benchmarks(out)
    assert len(runs) == 8
    by = {(r.data.params["model.head"], r.data.params["precision.name"], r.data.params["trial"]): r for r in runs}
    for run in runs:
        assert "fidelity to fp32 only" in run.data.tags["eaq.quality.reason"]
        assert not {"quality_accuracy", "quality_perplexity"} & set(run.data.metrics)
    # fp32 against its own reference: no drift.
    embed, classify = _quality(by["embedding", "fp32", "1"]), _quality(by["sequence_classification", "fp32", "1"])
    assert embed["quality_cosine_to_fp32_mean"] == pytest.approx(1.0, abs=1e-6)
    assert embed["quality_cosine_to_fp32_min"] == pytest.approx(1.0, abs=1e-6)
    assert classify["quality_agreement_with_fp32"] == 1.0 and classify["quality_kl_from_fp32"] == pytest.approx(0.0, abs=1e-9)
    # int8 drifts, and the figures say so: the class distributions move (the tiny model's pooled
    # embeddings move less than fp32 rounding, so cosine cannot tell here; it is logged all the same).
    classify = _quality(by["sequence_classification", "int8", "1"])
    assert classify["quality_agreement_with_fp32"] < 1.0 or classify["quality_kl_from_fp32"] > 0
    assert "quality_cosine_to_fp32_mean" in _quality(by["embedding", "int8", "1"])
    # The ids are one fixed seed's, not the trial's: trial 2 reads trial 1's figures.
    for head in ("embedding", "sequence_classification"):
        for precision in ("fp32", "int8"):
            first, second = by[head, precision, "1"], by[head, precision, "2"]
            assert first.data.tags["eaq.quality.source"] == "computed in this run"
            assert second.data.tags["eaq.quality.source"].startswith("cache")
            assert _quality(first) == _quality(second)
    # The front's table (docs/results/layers-gpu.sh) shows energy and drift side by side.
    table = runs_table([f"sqlite:///{out}/mlflow.db"], columns=PRESETS["front"])
    assert {"latency_mean_ms", "quality_agreement_with_fp32", "quality_kl_from_fp32", "quality_cosine_to_fp32_mean"} <= set(table.columns)


def test_fidelity_is_off_by_default_and_its_reference_never_mixes_with_text(out: Path) -> None:
    cache = out / "cache"
    assert run_eaq(out, *FAST, "dataset=synthetic").returncode == 0
    (off,) = _benchmarks(out)
    assert not _quality(off) and off.data.tags["eaq.quality.reason"] == NO_QUALITY
    assert not list(cache.glob("fp32-reference-*")) and not list(cache.glob("quality-*"))  # no phase gained
    # Text, then synthetic with fidelity: the same model and shape, two references.
    assert run_eaq(out, *FAST).returncode == 0
    text_references = set(cache.glob("fp32-reference-*"))
    assert len(text_references) == 1
    done = run_eaq(out, *FAST, "dataset=synthetic", "trials.fidelity_on_synthetic=true")
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(set(cache.glob("fp32-reference-*")) - text_references) == 1


def test_generation_on_synthetic_ids_logs_generated_token_agreement(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = run_eaq(out, "-m", "precision=fp32,int8", "model=gpt2_tiny_random", "workload=generate", "workload.new_tokens=6",
                   "dataset=synthetic", "dataset.max_samples=4", "trials=quick", "batch_size=2", "seq_len=16", "isolate=false",
                   "trials.fidelity_on_synthetic=true")
    assert done.returncode == 0, done.stderr[-3000:]
    runs = {r.data.params["precision.name"]: r for r in _benchmarks(out)}
    fp32, int8 = _quality(runs["fp32"]), _quality(runs["int8"])
    assert fp32["quality_generated_match_rate"] == 1.0 and fp32["quality_top1_agreement_with_fp32"] == 1.0
    assert 0 <= int8["quality_generated_match_rate"] <= 1 and "quality_top1_agreement_with_fp32" in int8
    # compare answers a generation sweep in its own figures, per output token: generation has no per-batch latency, and
    # its rows read "not measured" in every figure before.
    table = compare(runs_table([f"sqlite:///{out}/mlflow.db"], columns=COMPARE_COLUMNS), "fp32").set_index("precision.name")
    assert "latency_ms" not in table and "energy_mj_per_sample" not in table  # no forward run: no forward column
    rate = {p: runs[p].data.metrics["time_per_output_token_mean_ms"] for p in runs}
    assert table["ms_per_token"].to_dict() == pytest.approx(rate)
    assert table.loc["int8", "latency_vs_baseline_pct"] == pytest.approx((rate["int8"] / rate["fp32"] - 1) * 100)
    assert table.loc["int8", "ttft_ms"] > 0 and table.loc["int8", "tokens_per_s"] > 0
    # On screen, a per-token figure no run measured says so (energy on this CPU), not a blank of another workload's.
    shown = spelled(table.reset_index(), "fp32").set_index("precision.name")
    assert shown.loc["int8", "energy_mj_per_token"] == "not measured" and shown.loc["int8", "energy_vs_baseline_pct"] == "not measured"
    assert compare_main(["--uri", f"sqlite:///{out}/mlflow.db", "--baseline", "fp32", "--grid", "latency_ms"]) == 2
    assert "--grid latency_ms is a figure of forward runs" in capsys.readouterr().err
