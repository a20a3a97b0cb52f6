"""The real entrypoint in fresh processes: a multirun into tmp_path, read back from SQLite."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from statistics import mean
import subprocess
import sys
import time

import pytest

from conftest import FAST, REPO, all_runs, run_eaq
from eaq.errors import EaqError
from eaq.measure.rapl import find_zones
from eaq.metrics import METRIC_NAMES, documented_tag
from eaq.report.compare import COLUMNS as COMPARE_COLUMNS, compare, main as compare_main
from eaq.report.table import main as table_main, runs_table

REQUIRED = {
    "latency_mean_ms",
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p99_ms",
    "latency_std_ms",
    "throughput_samples_per_s",
    "memory_peak_rss_mb",
    "model_size_mb",
    "quality_cosine_to_fp32_mean",
}


def test_multirun_logs_finished_children_under_one_parent(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_eaq(out, "-m", "precision=fp32,int8", "trial=1,2", *FAST)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "sweep: 4 of 4 runs finished" in result.stdout

    runs = all_runs(out)
    parents = [r for r in runs if r.data.tags.get("eaq.kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("eaq.kind") == "benchmark"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert all(map(documented_tag, parents[0].data.tags)), [t for t in parents[0].data.tags if not documented_tag(t)]
    assert len(children) == 4
    parent_id = parents[0].info.run_id
    names = set()
    for child in children:
        assert child.info.status == "FINISHED"
        assert child.data.tags["mlflow.parentRunId"] == parent_id
        assert REQUIRED <= set(child.data.metrics), set(child.data.metrics)
        assert set(child.data.metrics) <= METRIC_NAMES  # nothing undocumented
        assert all(map(documented_tag, child.data.tags)), [t for t in child.data.tags if not documented_tag(t)]
        assert child.data.params["batch_size"] == "4"
        assert child.data.tags["eaq.group.model"] == "bert_tiny_random"
        assert child.data.tags["eaq.energy"] == "unavailable" and child.data.tags["eaq.energy.reason"]
        assert child.data.tags["eaq.memory.rss_peak"] == "warm-up and window"  # Linux resets the high-water mark
        names.add(child.info.run_name)
    assert names == {f"bert-tiny-random-{p}-b4-t{t}" for p in ("fp32", "int8") for t in (1, 2)}

    by_precision = {c.data.params["precision.name"]: c for c in children}
    int8 = by_precision["int8"]
    assert int8.data.metrics["quantized_linear_layers"] == int8.data.metrics["linear_layers"] > 0
    assert "int8=" in int8.data.tags["eaq.proof.stored_dtypes"]
    assert by_precision["fp32"].data.metrics["quantized_linear_layers"] == 0
    # Each run's resolved config, .hydra folder and environment are artifacts.
    client_artifacts = {a.path for a in _artifacts(out, int8.info.run_id)}
    assert {"config.yaml", ".hydra", "env.json"} <= client_artifacts

    # The report reads the store back; a table measured in parts reads several stores at once.
    uri = f"sqlite:///{out}/mlflow.db"
    assert table_main(["--uri", uri, "--preset", "precision", "--csv"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert rows[0].startswith("model.name,precision.name,batch_size,seq_len,trial,compile,cuda_graphs") and len(rows) == 1 + 4
    assert table_main(["--uri", uri, uri, "--csv"]) == 0  # a store named twice counts once
    assert len(capsys.readouterr().out.strip().splitlines()) == 1 + 4

    # What int8 buys against fp32, from the same store: one row per precision, means over the two trials.
    assert compare_main(["--uri", uri, "--baseline", "fp32", "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["precision.name"], r["trials"]) for r in rows] == [("fp32", "2"), ("int8", "2")]
    latency = {p: mean(c.data.metrics["latency_mean_ms"] for c in children if c.data.params["precision.name"] == p) for p in ("fp32", "int8")}
    assert float(rows[0]["latency_vs_baseline_pct"]) == 0
    assert float(rows[1]["latency_vs_baseline_pct"]) == pytest.approx((latency["int8"] / latency["fp32"] - 1) * 100)
    assert rows[1]["quantized"] == f"{int8.data.metrics['quantized_linear_layers']:.0f}/{int8.data.metrics['linear_layers']:.0f}"
    assert rows[1]["energy_mj_per_sample"] == "" and rows[1]["valid"] == ""  # no energy on a CPU without RAPL
    # The same figures as a grid: one row for the one shape, a column per precision and compile mode.
    assert compare_main(["--uri", uri, "--baseline", "fp32", "--grid", "latency_vs_baseline_pct", "--csv"]) == 0
    grid = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert list(grid[0]) == ["model.name", "seq_len", "batch_size", "fp32 eager", "int8 eager"] and len(grid) == 1
    assert float(grid[0]["int8 eager"]) == pytest.approx(float(rows[1]["latency_vs_baseline_pct"]))
    assert compare_main(["--uri", uri, "--baseline", "bf16"]) == 2
    assert "precisions found: fp32, int8" in capsys.readouterr().err


def _artifacts(out: Path, run_id: str):
    from conftest import store

    return store(out).list_artifacts(run_id)


def test_compare_keeps_compiler_settings_apart(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Tuned and default Inductor settings are two configurations: averaging them would blur both.
    result = run_eaq(out, "-m", "compile=true", "compile_tuning=false,true", *FAST)
    assert result.returncode == 0, result.stderr[-3000:]
    assert compare_main(["--uri", f"sqlite:///{out}/mlflow.db", "--baseline", "fp32", "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert sorted((r["compile_tuning"], r["trials"], float(r["latency_vs_baseline_pct"])) for r in rows) == [("False", "1", 0.0), ("True", "1", 0.0)]
    # In a grid, a setting that differs between runs labels the rows.
    assert compare_main(["--uri", f"sqlite:///{out}/mlflow.db", "--baseline", "fp32", "--grid", "latency_ms", "--csv"]) == 0
    grid = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert sorted(r["compile_tuning"] for r in grid) == ["False", "True"] and "fp32 compiled" in grid[0]


def test_compare_on_screen_leaves_a_setting_a_run_did_not_record_blank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A local model's row read "nan" under the random preset's model.architecture.model_type."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("eaq", artifact_location=(tmp_path / "artifacts").as_uri())
    for model, architecture in (("a", "bert"), ("b", "gpt2"), ("local", None)):
        run = client.create_run(experiment, tags={"eaq.kind": "benchmark"}).info.run_id
        params = {"model.name": model, "precision.name": "fp32", "seq_len": "32", "batch_size": "4", "trial": "1",
                  "compile": "False", **({"model.architecture.model_type": architecture} if architecture else {})}
        for key, value in params.items():
            client.log_param(run, key, value)
        client.log_metric(run, "latency_mean_ms", 1.0)
        client.set_terminated(run)
    assert compare_main(["--uri", uri, "--baseline", "fp32"]) == 0
    said = capsys.readouterr().out
    assert "| bert " in said and "nan" not in said, said


def test_compare_counts_flagged_runs_in_valid_only_and_keeps_workloads_apart() -> None:
    import pandas as pd

    def run(precision: str, energy: float, valid: str, workload: str = "forward", compile_tuning: str | None = "True") -> dict:
        return {"model.name": "m", "seq_len": "32", "batch_size": "4", "compile": "False", "compile_tuning": compile_tuning,
                "compile_pattern_matcher": "True", "cuda_graphs": "False", "workload.name": workload,
                "precision.name": precision, "trial": "1", "latency_mean_ms": 1.0, "energy_per_sample_mj": energy,
                "eaq.valid": valid}

    runs = pd.DataFrame([run("fp32", 100.0, "true"), run("fp32", 102.0, "true", compile_tuning=None),
                         run("int8", 50.0, "true"), run("int8", 500.0, "false"), run("int8", 60.0, "true", workload="generate")])
    table = compare(runs, "fp32")
    forward = table[table["workload.name"] == "forward"].set_index("precision.name")
    # The throttled int8 run is in "valid" (1 of 2), not in the mean; an eager run logged before compile_tuning
    # existed is the same configuration as one with the default; the generation run is a row of its own.
    assert forward.loc["int8", "energy_mj_per_sample"] == 50.0 and forward.loc["int8", "valid"] == "1/2"
    assert forward.loc["int8", "trials"] == 1 and forward.loc["fp32", "trials"] == 2
    assert forward.loc["fp32", "energy_mj_per_sample"] == 101.0 and len(table) == 3
    # Runs of an older eaq that recorded no device, beside runs of a named one: two configurations, as in the report
    # (they were averaged: one row of 4 trials); a run no check judged (a CPU's, no tag) is not counted as not valid.
    older = [run(p, e, v) | {"eaq.env.device_name": None} for p, e, v in (("fp32", 10.0, ""), ("fp32", 12.0, ""),
                                                                          ("fp32", 99.0, "false"), ("int8", 6.0, ""))]
    named = [run(p, e, "true") | {"eaq.env.device_name": "NVIDIA H100"} for p, e in (("fp32", 5.0), ("fp32", 5.0), ("int8", 3.0))]
    mixed = compare(pd.DataFrame(older + named), "fp32")
    rows = {(r["eaq.env.device_name"] if isinstance(r["eaq.env.device_name"], str) else None, r["precision.name"]):
            (r["trials"], r["energy_mj_per_sample"], r["valid"]) for _, r in mixed.iterrows()}
    assert rows == {(None, "fp32"): (2, 11.0, "2/3"), (None, "int8"): (1, 6.0, ""),
                    ("NVIDIA H100", "fp32"): (2, 5.0, "2/2"), ("NVIDIA H100", "int8"): (1, 3.0, "1/1")}, rows


def test_inductors_pattern_matcher_can_be_turned_off_for_every_precision_and_is_its_own_configuration(out: Path) -> None:
    import torch
    from torch import nn

    from eaq.precision import get_precision
    from eaq.tasks.compile import compile_model

    # The setting reaches Inductor: its rewrites of an int8_weight_only model happen, or none at all.
    cpu = torch.device("cpu")
    model = get_precision("int8_weight_only", cpu).apply(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64)), cpu)
    rewrites = []
    for on in (True, False):
        torch._dynamo.utils.counters.clear()
        compile_model(model, cuda_graphs=False, tuning=False, pattern_matcher=on)(torch.randn(8, 64))
        rewrites.append(torch._dynamo.utils.counters["inductor"]["pattern_matcher_count"])
    assert rewrites[0] > 0 and rewrites[1] == 0
    result = run_eaq(out, "-m", "compile=true", "compile_tuning=false", "compile_pattern_matcher=true,false", *FAST)
    assert result.returncode == 0, result.stderr[-3000:]
    tags = sorted(r.data.tags["eaq.compile.inductor"] for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark")
    assert tags == ["inductor defaults", "inductor defaults, pattern matcher off"]
    table = compare(runs_table([f"sqlite:///{out}/mlflow.db"], columns=COMPARE_COLUMNS), "fp32")
    assert sorted(table["compile_pattern_matcher"].astype(str)) == ["False", "True"]  # never averaged together
    refused = run_eaq(out, "compile_pattern_matcher=false", *FAST)  # eager: no compiler to set
    assert refused.returncode == 2 and "compile_pattern_matcher=false is a torch.compile setting: add compile=true" in refused.stderr


def test_a_compiled_graph_inductor_ran_without_cuda_graphs_fails_the_run() -> None:
    import torch
    from torch import nn

    from eaq.errors import EaqError
    from eaq.tasks.compile import compile_model, graph_skips, require_graphs

    # Inductor cannot graph a CPU model: asked to, it skips and only logs it (and counts it).
    x = torch.randn(4, 16)
    before = graph_skips()
    with torch.inference_mode():
        compile_model(nn.Linear(16, 16), cuda_graphs=True, tuning=False)(x)
    with pytest.raises(EaqError, match=r"cuda_graphs=true asks for CUDA graphs, and Inductor ran 1 compiled graph\(s\) without them"):
        require_graphs(before, "cuda_graphs=true", "Measure this configuration with cuda_graphs=false.")
    # Not asked for graphs: nothing skipped, nothing to fail.
    before = graph_skips()
    with torch.inference_mode():
        compile_model(nn.Linear(16, 16), cuda_graphs=False, tuning=False)(x)
    require_graphs(before, "cuda_graphs=true", "")


def test_named_sweep_composes(out: Path) -> None:
    result = run_eaq(out, "-cd", "sweeps", "-cn", "precision_trials", "--cfg", "hydra")
    assert result.returncode == 0, result.stderr
    assert "precision: fp32,int8" in result.stdout and "trial: 1,2,3" in result.stdout


@pytest.mark.parametrize(
    ("override", "expected", "recorded"),
    [
        # A value the config itself refuses measured nothing: no run is left in the store for a typo.
        ("batch_size=0", "batch_size=0 is out of range: it must be a number of at least 1.", False),
        # Typos of a value were refused only once the run had opened: a FAILED run of each.
        ("sampler.name=nvlm", "sampler.name='nvlm' is not valid: use one of auto, nvml, nvidia_smi, rapl, none.", False),
        ("task=layers layers.target=int3", "layers.target='int3' is not valid: use one of int8, int8_weight_only,", False),
        ("task=layers layers.budget=points layers.budget_limit=1", "layers.budget='points' is not valid: use one of accuracy_points", False),
        ("precision.name=int3", "precision.name=int3 is no precision eaq has: use one of fp32,", False),
        # Read by nothing under the forward workload; and generation named as forward passes (no -gen<N>).
        ("workload.new_tokens=32", "workload.new_tokens=32 is how many tokens generation makes, and this run measures "
         "forward passes: add workload=generate, or drop it.", False),
        ("workload.name=generate", "workload.name=generate: choose the workload with workload=generate", False),
        # NaN passed every range check: the measurement ran, then the pause after it failed in a traceback.
        ("trials.cooldown_s=nan", "trials.cooldown_s=nan is out of range: it must be a number of at least 0.", False),
        ("cuda_graphs=true", "cuda_graphs=true replays graphs that torch.compile captures: add compile=true, or drop cuda_graphs.", False),
        # hub.yaml names no model: OmegaConf's ??? there would have kept the schema's MiniLM and measured it as "hub".
        ("model=hub", "model.name=hub has no model.name_or_path: give a Hugging Face id or a folder saved with save_pretrained", False),
        # What only the machine refuses is a FAILED run of that configuration, counted with its other runs.
        ("device=cuda", "device=cuda was asked for but this machine has no CUDA GPU; use device=cpu or device=auto.", True),
        ("precision=fp8", "precision=fp8 runs on cuda, not on cpu; on cpu these run for real: fp32, fp16, bf16, amp_fp16, amp_bf16, int8, int8_weight_only.", True),
        ("cuda_graphs=true compile=true", "cuda_graphs=true needs a CUDA device and this run is on cpu; drop cuda_graphs or use device=cuda.", True),
    ],
)
def test_bad_value_exits_non_zero_with_one_sentence_and_no_running_run(out: Path, override: str, expected: str,
                                                                       recorded: bool) -> None:
    result = run_eaq(out, *FAST, *override.split())
    assert result.returncode == 2
    assert f"error: {expected}" in result.stderr
    assert "Traceback" not in result.stderr
    runs = all_runs(out)
    assert [r.info.status for r in runs] == (["FAILED"] if recorded else [])
    assert not recorded or expected in runs[0].data.tags["eaq.error"]


@pytest.mark.parametrize("sweep", [[], ["-m"]])
def test_a_value_of_the_wrong_type_gets_one_sentence_exit_2_before_anything_runs(out: Path, sweep: list[str]) -> None:
    """Hydra stopped at it in a few lines with exit 1, in a sweep at that value's job, its other values unmeasured."""
    result = run_eaq(out, *sweep, *FAST, "batch_size=4,abc" if sweep else "batch_size=abc", "trials.min_duration_s=x")
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip() == (
        "error: batch_size=abc: Value 'abc' of type 'str' could not be converted to Integer; give a value of the "
        "setting's type (`python -m eaq.run --cfg job` shows each setting's value)."
    )
    assert not (out / "mlflow.db").exists()  # refused before anything ran


@pytest.mark.parametrize(("overrides", "expected"), [
    (["hydra/launcher=gpu"], "hydra/launcher=gpu is not a launcher eaq or Hydra has; valid: basic, gpus, joblib, slurm, "
                             "slurm_local, submitit_local, submitit_slurm."),
    (["model=bert_tiny_random", "model.architecture.layer_norm_eps=1e-6"],
     "model.architecture.layer_norm_eps: model=bert_tiny_random's architecture has no key layer_norm_eps (its keys: "
     "model_type, vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size, "
     "max_position_embeddings); add it with +model.architecture.layer_norm_eps=1e-6, or fix the name."),
    # A misspelt key of its own: the closest named first (adding the misspelt one with + was refused next).
    (["model=bert_tiny_random", "model.architecture.hiden_size=64"],
     "model.architecture.hiden_size: model=bert_tiny_random's architecture has no key hiden_size: did you mean "
     "model.architecture.hidden_size? (A field of the model's config the preset leaves out: add it with "
     "+model.architecture.hiden_size=64.)"),
    # Another preset of the sweep has it: + is refused there (after the sweep opened, exit 1); ++ sets it in both
    # where it is a field of the lacking preset's config; where that config names it otherwise (GPT-2's n_embd: both
    # recorded, one built) or not at all, the presets are swept apart.
    (["hydra.mode=MULTIRUN", "model=bert_tiny_random,gpt2_tiny_random", "model.architecture.eos_token_id=5"],
     "model.architecture.eos_token_id: model=bert_tiny_random's architecture has no key eos_token_id (its keys: "
     "model_type, vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size, "
     "max_position_embeddings); set it in every preset with ++model.architecture.eos_token_id=5 (model=gpt2_tiny_random "
     "has it, which + refuses), or fix the name."),
    (["hydra.mode=MULTIRUN", "model=bert_tiny_random,gpt2_tiny_random", "model.architecture.hidden_size=32"],
     "model.architecture.hidden_size: model=gpt2_tiny_random's architecture has no key hidden_size (its keys: "
     "model_type, vocab_size, n_embd, n_layer, n_head, n_positions, bos_token_id, eos_token_id); model=gpt2_tiny_random's "
     "config (gpt2) names it n_embd and model=bert_tiny_random's has it: sweep them apart, one command each, each with "
     "its own key, or fix the name."),
    (["model=minilm", "model.architecture.num_hidden_layers=1"],
     "model.architecture.num_hidden_layers: model=minilm loads pretrained weights, whose architecture is theirs; "
     "model.architecture builds random weights (model.weights=random, as the *_random presets)."),
    (["++batch_size=abc"], "batch_size=abc: Value 'abc' of type 'str' could not be converted to Integer"),
])
def test_a_launcher_an_architecture_key_or_a_forced_value_hydra_would_refuse_is_one_sentence(
        out: Path, overrides: list[str], expected: str) -> None:
    """Hydra answered each with several lines (its search path, or advice to add the key with +) and exit 1."""
    result = run_eaq(out, *[o for o in FAST if not (o.startswith("model=") and any(v.startswith("model=") for v in overrides))],
                     *overrides)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().startswith(f"error: {expected}"), result.stderr[-2000:]
    assert len(result.stderr.strip().splitlines()) == 1 and not (out / "mlflow.db").exists()


def test_unknown_group_choice_gets_one_sentence_naming_valid_ones(out: Path) -> None:
    result = run_eaq(out, "-m", *FAST, "precision=fp32,int3")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: precision=int3 is not an option of the precision group; valid: amp_bf16, amp_fp16, bf16, fp16, "
        "fp32, fp8, int4_weight_only, int8, int8_weight_only, mixed, tf32 (or add conf/precision/int3.yaml)."
    )
    assert not (out / "mlflow.db").exists()  # refused before anything ran


def test_a_sweep_over_experiments_counts_its_runs_in_theirs(out: Path) -> None:
    """Each job logs to its own tracking.experiment: the summary searched the parent's, read "nothing measured" and
    (counting jobs that left no run) exited 1 for a sweep whose runs all finished."""
    result = run_eaq(out, "-m", *FAST, "sampler=none", "tracking.experiment=exp_a,exp_b")
    assert result.returncode == 0 and "sweep: 2 of 2 runs finished" in result.stdout, result.stdout[-2000:] + result.stderr[-2000:]


def test_a_glob_sweep_runs_each_option_it_matches_and_counts_them(out: Path) -> None:
    """The sweep's own reading of its jobs parsed without Hydra's config loader, which glob() lists options through:
    every glob sweep stopped at its start ("ConfigLoader is not set"), calibrate_ahead=false or not."""
    result = run_eaq(out, "-m", *FAST, "sampler=none", "precision=glob([fp32,bf16])", "calibrate_ahead=false")
    assert result.returncode == 0 and "sweep: 2 of 2 runs finished" in result.stdout, result.stdout[-2000:] + result.stderr[-2000:]
    assert "[sweep 1/2]" in result.stderr and "[sweep 2/2]" in result.stderr  # the progress lines know the total
    precisions = sorted(r.data.params["precision.name"] for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark")
    assert precisions == ["bf16", "fp32"]


def test_failing_job_in_sweep_leaves_others_finished_and_exits_non_zero(out: Path) -> None:
    # An override holding an interpolation only a job resolves: the sweep's planning read it resolved, and every such
    # sweep stopped at its start ("HydraConfig was not set"), calibrate_ahead=false or not.
    here = "dataset.path=${hydra:runtime.cwd}/eaq/data/sample_sentences.txt"
    result = run_eaq(out, "-m", "batch_size=0,4", "trial=1,2", *FAST[:2], "seq_len=32", here)
    assert result.returncode != 0
    assert "sweep: 2 of 4 runs finished" in result.stdout, result.stderr[-2000:]
    statuses = sorted(r.info.status for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark")
    assert statuses == ["FAILED", "FAILED", "FINISHED", "FINISHED"]
    # The summary lists the failures in the order the jobs ran (the store's newest first put t2 before t1).
    failures = [line.split(":")[1].strip() for line in result.stderr.splitlines() if line.startswith("  FAILED: ")]
    assert [name.rsplit("-", 1)[1] for name in failures] == ["t1", "t2"], failures
    assert not any(r.info.status == "RUNNING" for r in all_runs(out))


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["model=hub", "model.name_or_path=/no/such/model"], "model.name_or_path '/no/such/model' does not exist"),
        (["model=minilm", "model.classifier_head=package:minilm_sst2.safetensors"], "set model.head=sequence_classification"),
        # Past the position table torch's own error ended the run ("index out of range in self" on GPT-2).
        (["model=gpt2_tiny_random", "seq_len=2048"], "seq_len=2048 is longer than the"),
        (["task=layers", "seq_len=1024"], "lower seq_len to at most"),
        (["model=hub", "model.name_or_path=some-org/not-cached"], "pass model.name_or_path=DIR"),
        (["dataset.path=/no/such/texts.txt"], "dataset.path='/no/such/texts.txt' does not exist"),
        (["model=hub", "model.name_or_path=/tmp"], "'/tmp' is not a model folder"),
        (["tracking.uri=sqlite:////proc/eaq/mlflow.db"], "could not be opened"),
        (["tracking.uri=http://127.0.0.1:9"], "cannot be reached"),
        # MLflow's "Invalid experiment name" was read as a store that could not be opened.
        (["tracking.experiment="], "tracking.experiment is empty: name the MLflow experiment the runs go to"),
    ],
)
def test_bad_input_gets_one_sentence_no_traceback_and_no_running_run(out: Path, overrides: list[str], expected: str) -> None:
    result = run_eaq(out, *FAST, *overrides)
    assert result.returncode == 2, result.stderr[-2000:]
    assert expected in result.stderr and "Traceback" not in result.stderr
    if (out / "mlflow.db").exists():
        assert not any(r.info.status == "RUNNING" for r in all_runs(out))


@pytest.mark.skipif(bool(find_zones()), reason="readable RAPL zones here: sampler=rapl would calibrate, not fail")
def test_a_failed_calibration_is_recorded_as_a_calibration(out: Path) -> None:
    """Its run was tagged a benchmark until the calibration succeeded: failed, it read as a failed benchmark
    configuration in the report, which counts benchmark and layers runs."""
    result = run_eaq(out, *FAST, "task=calibrate", "sampler=rapl")  # no RAPL zones here (the mark)
    assert result.returncode == 2 and "sampler=rapl cannot run here" in result.stderr
    (run,) = all_runs(out)
    assert run.info.status == "FAILED" and run.data.tags["eaq.kind"] == "calibrate"


def test_a_calibration_without_an_energy_sensor_measures_the_bandwidth_and_says_why_flop_per_j_is_not(out: Path) -> None:
    """It was refused whole, though the bandwidth (generation's decode roofline) needs no sensor."""
    result = run_eaq(out, *FAST, "task=calibrate", "sampler=none")
    assert result.returncode == 0, result.stderr[-2000:]
    (run,) = all_runs(out)
    assert run.info.status == "FINISHED" and run.data.tags["eaq.kind"] == "calibrate"
    assert run.data.metrics["peak_bandwidth_gb_per_s"] > 0 and "peak_flop_per_j" not in run.data.metrics
    assert run.data.tags["eaq.calibration.flop_per_j"].startswith("unavailable: sampler=none measures no energy on cpu")
    cached = json.loads(next((out / "cache").rglob("bandwidth-*.json")).read_text())
    assert cached["gb_per_s"] == pytest.approx(run.data.metrics["peak_bandwidth_gb_per_s"])
    # Its phases add up to its wall time, as every run's do (the copies ran in no phase: 2.5 s unaccounted for).
    m = run.data.metrics
    accounted = sum(v for k, v in m.items() if k.startswith("phase_")) + m.get("isolation_overhead_s", 0)
    assert m["phase_bandwidth_s"] > 0 and 0 <= m["run_wall_s"] - accounted < 0.5, m
    # A sweep of it into an empty cache measures again, resume or not: its result is the cache, not the run.
    swept = run_eaq(out, "-m", *FAST, "task=calibrate", "sampler=none", f"paths.cache_dir={out / 'fresh'}")
    assert swept.returncode == 0 and "1 finished, 0 failed, 0 skipped" in swept.stderr, swept.stderr[-2000:]
    assert "sweep report: none for task=calibrate" in swept.stderr and "not built" not in swept.stderr
    # The report asked for it says the same, not "no runs; run python -m eaq.run -m ... into it first".
    from eaq.report.__main__ import main as report_main
    from eaq.tracking.callbacks import parent_run_id

    folder = next(p.parent for p in (out / "multirun").rglob("mlflow_parent_run_id.txt"))
    with pytest.raises(EaqError, match=r"holds calibrations alone, so there is no report: task=calibrate measures the device"):
        report_main.__wrapped__(["--uri", f"sqlite:///{out}/mlflow.db", "--sweep", parent_run_id(folder), "--out", str(out / "r")])
    with pytest.raises(EaqError, match=r"^--experiment eaq holds calibrations alone"):  # the store's whole experiment too
        report_main.__wrapped__(["--uri", f"sqlite:///{out}/mlflow.db", "--out", str(out / "r")])
    assert list((out / "fresh").rglob("bandwidth-*.json"))


@pytest.mark.parametrize("task", ["benchmark", "layers"])
def test_a_forward_run_refuses_a_text_shorter_than_one_row(out: Path, tmp_path: Path, task: str) -> None:
    """Its one short row was timed at 5 tokens in a run that recorded seq_len=32; only generate refused it."""
    short = tmp_path / "short.txt"
    short.write_text("a text of five words")  # five tokens of MiniLM's vocabulary
    result = run_eaq(out, *FAST, f"task={task}", "dataset=wikitext2", f"dataset.path={short}")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "holds 5 tokens, fewer than one row of seq_len=32: lower seq_len to at most 5" in result.stderr
    assert [r.info.status for r in all_runs(out)] == ["FAILED"]


def test_malformed_dataset_names_file_and_line(out: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"a fine sentence\nanother one\n\xff\xfe not utf-8\n")
    result = run_eaq(out, *FAST, f"dataset.path={bad}")
    assert result.returncode == 2 and f"{bad}, line 3: the file is not valid UTF-8" in result.stderr
    assert [r.info.status for r in all_runs(out)] == ["FAILED"]


def test_debug_shows_the_traceback(out: Path) -> None:
    result = run_eaq(out, *FAST, "dataset.path=/no/such/texts.txt", "debug=true")
    assert result.returncode == 2 and "Traceback" in result.stderr


def test_compiled_run_is_named_and_tagged_and_measures(out: Path) -> None:
    result = run_eaq(out, *FAST, "compile=true", "isolate=false")
    assert result.returncode == 0, result.stderr[-2000:]
    (run,) = all_runs(out)
    # Its quality figures (on eaq's sample sentences) are the eager model's, and it says so.
    assert "quality_cosine_to_fp32_mean" in run.data.metrics and run.data.tags["eaq.quality.model"].startswith("eager")
    assert run.info.run_name == "bert-tiny-random-fp32-compiled-b4-t1"
    assert run.data.tags["eaq.compile"] == "true" and run.data.params["compile"] == "True"
    assert run.data.tags["eaq.compile.inductor"] == "torchao recommended (coordinate-descent tuning)"  # for every precision
    assert run.data.tags["eaq.cuda_graphs"] == "false"
    assert run.data.metrics["latency_mean_ms"] > 0


READ_TOOLS = [["eaq.diff", "a", "b"], ["eaq.rerun", "a"], ["eaq.report", "--out", "rep"], ["eaq.report.table"],
              ["eaq.report.compare"], ["eaq.report.front"]]


@pytest.mark.parametrize("tool", READ_TOOLS, ids=lambda tool: tool[0])
def test_the_read_tools_say_a_missing_store_or_dead_server_in_seconds_and_create_nothing(tool: list[str], tmp_path: Path) -> None:
    """Their default store is relative to where they run: from another folder each created an empty one and answered
    about it; a dead server took 4 to 8 minutes of MLflow's retries and a traceback (eaq.diff's exit 1 read as
    'configurations differ')."""
    started = time.monotonic()
    missing = subprocess.run([sys.executable, "-m", *tool], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                             env=os.environ | {"PYTHONPATH": str(REPO)})
    missing_s = time.monotonic() - started
    assert missing.returncode == (1 if tool[0] == "eaq.report" else 2), missing
    assert f"there is no MLflow store at {tmp_path}/outputs/mlflow.db" in missing.stderr, missing.stderr
    assert not (tmp_path / "outputs").exists()
    started = time.monotonic()
    dead = subprocess.run([sys.executable, "-m", *tool, "--uri", "http://127.0.0.1:9"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=os.environ | {"PYTHONPATH": str(REPO)})
    # Minutes of retries before; now about as long as the same tool answering about a missing file, under the same load.
    assert time.monotonic() - started < missing_s + 30
    assert "the MLflow server --uri=http://127.0.0.1:9 cannot be reached" in dead.stderr and "Traceback" not in dead.stderr
    assert dead.returncode == (1 if tool[0] == "eaq.report" else 2)


def test_two_job_folders_are_compared_without_a_store(out: Path, tmp_path: Path) -> None:
    assert run_eaq(out, "-m", *FAST, "trial=1,2").returncode == 0
    folders = sorted(str(p) for p in (out / "multirun").glob("*/*_bert-*"))
    result = subprocess.run([sys.executable, "-m", "eaq.diff", *folders], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, env=os.environ | {"PYTHONPATH": str(REPO)})
    # Two trials of one configuration: the same measurement config (exit 0), the trial shown.
    assert result.returncode == 0 and "trial: 1 -> 2 (repeats of one configuration" in result.stdout, result
