"""The layers task: where a model's energy goes, component by component, and what each is worth.

``python -m eaq.run task=layers ...``: load as the benchmark does (model, data, batches);
group the fp32 model into components and count their FLOPs; measure impact on the data
from the ``layers.base`` float model (sensitivity to ``layers.target``, ablation), outside
any window; apply the run's precision; measure energy per component by replay and
attribution (eaq.layers.energy); correlate energy share with impact; choose a
mixed-precision plan within the budget. Wiring only: eaq/layers computes, and batching,
protocol durations and the idle baseline's store are shared with the benchmark
(eaq/tasks/shared.py), so both tasks see the same data and reuse the same baseline.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from eaq.config import LAYER_BASES, LAYER_TARGETS, EaqConfig, protocol_seconds
from eaq.data import Examples
from eaq.device import describe_device, draw_key, resolve_device
from eaq.errors import ConfigError, UnsupportedPrecisionError
from eaq.layers.attribution import component_flops
from eaq.layers.components import Component, component_params, find_components, unmeasured
from eaq.layers.energy import ComponentEnergy, Settings, measure_components, measure_passes, without_cache, without_full_mask
from eaq.layers.impact import EvalData, Outputs, ablation, by_type, each, lowerable, run_outputs, sensitivity
from eaq.layers.plan import NEEDS, REQUIRES, Budget, choose_plan, default_budget, split_type_savings
from eaq.layers.tables import (
    COMPONENT_COLUMNS, CORRELATION_COLUMNS, OUTSIDE_COLUMNS, SAVING_COLUMNS, TYPE_COLUMNS, TYPE_SAVING_COLUMNS, Impacts,
    component_costs, component_rows, correlation_rows, energy_shares, outside_rows, saving_rows, type_metrics, type_rows,
    told_apart, type_saving_rows, write_csv,
)
from eaq.measure.phases import Phases
from eaq.measure.samplers import Sampler, measures_energy, select_sampler
from eaq.models import load_model, load_tokenizer, weights_identity
from eaq.precision import build_precision, get_precision, proof, runnable
from eaq.precision.base import Precision, base_dtype, set_tf32
from eaq.precision.native import Autocast
from eaq.precision.mixed import (LAYER_FORMATS, MixedPrecision, Plan, apply_plan, base_refusal, fitting_base, plan_model,
                                 save_plan)
from eaq.tasks.compile import compile_model, graph_skips, require_graphs
from eaq.tasks.idle import idle_store
from eaq.tasks.isolation import phase_listener
from eaq.tasks.shared import check_positions, check_scored_labels, data_metrics, data_tags, make_inputs, read_examples, run_precision
from eaq.tasks.result import TaskResult

FLOAT_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
# Replay windows, when left null and energy is measured: ~30 updates of a ~100 ms sensor.
REPLAY_MIN_S = 3.0


def _runs_here(setting: str, name: str, device: torch.device, instead: Callable[[], str]) -> None:
    """Refuse a format of ``setting`` that cannot run for real on ``device``, naming the setting and what would
    (``instead``, asked only then): precision's own sentence says "precision=fp8", which the user did not write, and
    lists precisions (amp_bf16, the base) this setting refuses."""
    if reason := build_precision(name, device).requirements.unmet(name, device):
        raise UnsupportedPrecisionError(f"{setting}={name}: {reason}; {instead()}.")


def _targets_here(base: str, plan: bool, device: torch.device) -> str:
    """The formats ``layers.target`` can take on ``device`` over ``layers.base``: a plan's layer formats (or a float
    cast without a plan) computing in the base's float; where none does, the base they would need."""
    here = runnable(device)
    targets = [t for t in (LAYER_FORMATS if plan else LAYER_TARGETS) if t != base and t in here]
    fitting = [t for t in targets if not (t in LAYER_FORMATS and base_refusal(t, base, device))]
    if fitting:
        return f"on {device} it can be {', '.join(fitting)}"
    needs = {t: fitting_base(t, device) for t in targets}
    return f"on {device} none computes in layers.base={base}: " + ", ".join(
        f"set layers.base={b} for {', '.join(t for t in targets if needs[t] == b)}" for b in dict.fromkeys(needs.values()))


def _budget(cfg: EaqConfig, labelled: bool) -> Budget:
    """The plan's quality budget, checked against the data before any model loads: accuracy
    needs labels and perplexity needs raw text, else the plan would fail after all the impact work."""
    kind, limit = cfg.layers.budget, cfg.layers.budget_limit  # both or neither, a kind of BUDGETS: eaq.config.validate
    budget = default_budget(cfg.model.head, labelled, cfg.dataset.kind == "raw") if kind is None or limit is None \
        else Budget(kind, limit)
    if budget.kind in REQUIRES:
        head, kind = REQUIRES[budget.kind]
        lacks = (" (no labels)" if kind == "labelled" and not labelled else
                 f" (kind {cfg.dataset.kind}, not raw text)" if kind == "raw" and cfg.dataset.kind != "raw" else "")
        if cfg.model.head != head or lacks:
            raise ConfigError(
                f"the plan's budget is in {budget.kind}, which needs {NEEDS[budget.kind]}; this run has "
                f"model.head={cfg.model.head} and dataset={cfg.dataset.name}{lacks}. "
                "Use layers.budget=impact layers.budget_limit=0.01, or layers.plan=false."
            )
    return budget


def _saving_mode(cfg: EaqConfig, base: str, device: torch.device) -> str:
    """How the plan learns what lowering saves (``layers.saving``; its value is checked by eaq.config.validate),
    checked against the run before any model loads."""
    if cfg.layers.target not in LAYER_FORMATS:
        raise ConfigError(
            f"layers.target={cfg.layers.target}: a plan's layers take one of {', '.join(LAYER_FORMATS)} (the rest runs the "
            f"base, {base}); choose one of those, or layers.plan=false to measure {cfg.layers.target}'s impact without a plan."
        )
    if cfg.layers.saving == "measured" and cfg.precision.name != base:
        # Offered only where that base takes the target's layers (int8 on a CPU computes in fp32: bf16 was advised, then
        # refused).
        also = f" (or set layers.base={cfg.precision.name})" if cfg.precision.name in FLOAT_NAMES.values() and not (
            cfg.layers.target in LAYER_FORMATS and base_refusal(cfg.layers.target, cfg.precision.name, device)) else ""
        raise ConfigError(
            f"layers.saving=measured compares the run's components with the same components in layers.target={cfg.layers.target}, "
            f"so the run must measure the plan's base: precision={cfg.precision.name} but the base is {base}; "
            f"run it with precision={base}{also}."
        )
    return cfg.layers.saving


def _impacts(
    cfg: EaqConfig, base_model: nn.Module, components: list[Component], data: EvalData, device: torch.device, base: str,
    reference: Outputs,
) -> tuple[Impacts, Impacts]:
    """(Per component, per type): sensitivity to layers.target and, if asked, ablation."""
    target = cfg.layers.target
    found = []
    for groups in (each(components), by_type(components)):
        lowered = sensitivity(base_model, groups, data, device, target, base, reference)
        skipped = ablation(base_model, groups, data, reference) if cfg.layers.ablation else {}
        found.append(Impacts(lowered, skipped))
    return found[0], found[1]


@torch.inference_mode()
def layers(cfg: EaqConfig, artifact_dir: Path) -> TaskResult:
    """The layer analysis of one model and precision; its phases are logged as the benchmark's are (progress lines,
    ``phase_*_s`` metrics that add up to the run's wall time)."""
    phases = Phases(phase_listener())
    with phases("prepare"):
        device, precision, sampler, examples, budget, saving_mode, base = _prepare(cfg)
    with phases("load"):
        tokenizer = load_tokenizer(cfg.model) if examples is not None else None
        (batches, stream), _ = make_inputs(cfg, tokenizer, examples, device)
        loaded = load_model(cfg.model, with_tokenizer=examples is not None, device=device, tokenizer=tokenizer)
        model = loaded.model.to(device)
    check_scored_labels(cfg, loaded, batches)  # before the flops and impact passes
    measuring = measures_energy(sampler)
    batch = batches.full()[0]  # as the benchmark task passes it: what compiled savings measure
    timed = without_cache(model, without_full_mask(batch))
    forward = lambda: model(**timed)  # noqa: E731  (model is rebound below: the precision's)
    components = find_components(model)
    if budget is not None and not lowerable(model, components, cfg.layers.target, device):
        raise ConfigError(
            f"no Linear layer of {cfg.model.name} has a shape {cfg.layers.target}'s kernel takes on {device.type}, so "
            "there is no plan to make; choose another layers.target, or layers.plan=false."
        )
    with phases("reference"):
        params = {c.name: component_params(model, c) for c in components}
        flops = component_flops(model, components, forward)  # on the fp32 model, as the benchmark's roofline

    tags = {"eaq.kind": "layers", "eaq.device": str(device), "eaq.weights": cfg.model.weights, "eaq.model_source": loaded.source}
    tags |= data_tags(examples)
    per_component, per_type = Impacts({}, {}), Impacts({}, {})
    base_model = data = reference = None
    with phases("impact"):
        if cfg.layers.impact:
            base_model = get_precision(base, device).apply(copy.deepcopy(model), device)
            stride = cfg.dataset.perplexity_stride or max(1, cfg.seq_len // 2)
            data = EvalData(cfg.model.head, batches.distinct(cfg.trials.quality_max_batches), batches.labels, stream, cfg.seq_len, stride)
            reference = run_outputs(base_model, data)
            per_component, per_type = _impacts(cfg, base_model, components, data, device, base, reference)
            tags["eaq.layers.impact"] = f"{cfg.layers.target} from {base}" + (", ablation" if cfg.layers.ablation else "") + (
                "" if examples is not None else "; on synthetic token ids: drift from the unchanged model only, no task quality"
            )
        else:
            tags["eaq.layers.impact"] = "not measured: layers.impact=false"
            if cfg.layers.plan:  # its default: no plan.yaml, said (the run's layers.plan=true read as one made)
                tags["eaq.layers.plan"] = "not made: layers.impact=false (a plan is chosen by each component's measured impact)"
        # The float model, kept for the models whose costs tell the plan what lowering saves.
        fp32_model = copy.deepcopy(model).cpu() if saving_mode != "assumed" else None  # on the host until needed

    with phases("precision"):
        model = precision.apply(model, device)
        evidence = proof(model)
        if isinstance(precision, MixedPrecision):  # which layer runs which format, read from the model, as a benchmark
            tags |= precision.tags(model)
            precision.write_layers(model, artifact_dir / "layers" / "precision_layers.csv")
    min_window_s, idle_s = protocol_seconds(cfg.trials, measuring)
    settings = Settings(
        iters=cfg.trials.iters,
        min_window_s=min_window_s,
        idle_s=idle_s,
        warmup_iters=cfg.trials.warmup_iters,
        replay_iters=cfg.layers.replay_iters,
        replay_min_s=cfg.layers.replay_min_s if cfg.layers.replay_min_s is not None else (REPLAY_MIN_S if measuring else 0.0),
        profile_passes=cfg.layers.profile_passes,
        warmup_max_s=cfg.trials.warmup_max_s,
        cuda_graphs=cfg.layers.cuda_graphs,
        warmup_rule=cfg.trials.warmup_rule,
        idle_store=idle_store(cfg, device, sampler),
    )

    with phases("components"):
        energy = measure_components(model, components, forward, device, sampler, settings, cfg.batch_size)
    with phases("artifacts"):
        tables = _tables(components, params, flops, energy, per_component, per_type, artifact_dir / "layers")
    shares, basis, types_out, folder = tables
    metrics = {
        **energy.metrics,
        **type_metrics(types_out),
        "layers_components": len(components),
        "model_size_mb": evidence["model_size_mb"],
        "quantized_linear_layers": evidence["quantized_linear_layers"],
        "linear_layers": evidence["linear_layers"],
        "weights_outside_linear_share": evidence["weights_outside_linear_share"],
        **data_metrics(cfg, batches),
    }
    tags |= energy.tags | {"eaq.layers.share_basis": basis, "eaq.proof.stored_dtypes": str(evidence["stored_dtypes"])}
    if unhooked := unmeasured(components):
        tags["eaq.layers.unmeasured"] = (
            "parameters used inside a module that also holds another component's module, so no hook times them alone, "
            "and their work counts in their block's own ops (outside every block, only in the whole model's): "
            + "; ".join(f"{c} ({why})" for c, why in unhooked.items()))
    if budget is not None and base_model is not None and data is not None:  # both set when impact was measured
        with phases("plan"):
            cost, saving = shares, None
            if saving_mode == "measured" and fp32_model is not None:
                cost, saving, basis = _measured_saving(cfg, fp32_model, components, energy, timed, device, sampler, settings,
                                                       base, folder, tags)
            elif saving_mode == "compiled" and fp32_model is not None:
                cost, saving, basis = _compiled_saving(cfg, fp32_model, base_model, components, shares, batch, device, sampler,
                                                       settings, base, folder, tags)
            _plan(cfg, base_model, components, data, device, budget, per_component, cost, saving, basis, base, reference, folder, tags)
    with phases("cooldown"):  # as the benchmark's: a sweep's next run starts from a cool device
        time.sleep(cfg.trials.cooldown_s)
    return TaskResult(metrics=metrics | phases.metrics(), tags=tags, device=describe_device(device), files=[folder])


def _prepare(cfg: EaqConfig) -> tuple[torch.device, Precision, Sampler, Examples | None, Budget | None, str, str]:
    """Everything that can be refused, checked before the model loads: (device, precision, sampler, examples, plan
    budget or None, saving mode, the impact model's format)."""
    device = resolve_device(cfg.device)
    precision = run_precision(cfg, device)
    if isinstance(precision, Autocast):
        # Components are the model's own modules, measured alone: an autocast region around the whole model
        # would not hold around them, and the replays would run fp32.
        raise ConfigError(
            f"task=layers measures each component alone, outside the autocast region {cfg.precision.name} puts around "
            "the whole model, so its components would run fp32: use a precision stored in the weights (fp16, bf16, "
            "fp8, int8, ...), or task=benchmark for autocast."
        )
    if cfg.compile or cfg.cuda_graphs:
        raise ConfigError(
            "task=layers hooks and replays the eager model's modules, which a compiled model does not run one by one; "
            "drop compile/cuda_graphs (task=benchmark measures the compiled whole model; task=layers captures its "
            "own CUDA graphs of the eager passes: layers.cuda_graphs, on by default)."
        )
    base = cfg.layers.base or FLOAT_NAMES[base_dtype(device)]
    _runs_here("layers.base", base, device,  # the impact model's format must run here too
               lambda: f"on {device} it can be {', '.join(b for b in LAYER_BASES if b in runnable(device))}")
    if cfg.layers.impact and cfg.layers.target == base:
        # Lowering fp16 to fp16 changed nothing: every sensitivity 0, the correlation "the same for all components".
        raise ConfigError(
            f"layers.target={cfg.layers.target} is the base the components are lowered from (layers.base={base}): "
            "each component's sensitivity would be 0; choose another target (int8 by default), or layers.impact=false."
        )
    if cfg.layers.impact:
        # And the format components are lowered to.
        _runs_here("layers.target", cfg.layers.target, device, lambda: _targets_here(base, cfg.layers.plan, device))
        if cfg.layers.target in LAYER_FORMATS and (mismatch := base_refusal(cfg.layers.target, base, device)):
            raise ConfigError(
                f"layers.target={cfg.layers.target} cannot lower components of the layers.base={base} model: {mismatch}; "
                f"set layers.base={fitting_base(cfg.layers.target, device)}."
            )
    sampler = select_sampler(cfg.sampler.name, device, cfg.sampler.interval_ms / 1e3, cfg.sampler.compare_nvidia_smi)
    check_positions(cfg)
    examples = read_examples(cfg)
    budget = _budget(cfg, examples is not None and examples.labels is not None) if cfg.layers.plan and cfg.layers.impact else None
    saving_mode = _saving_mode(cfg, base, device) if budget is not None else "assumed"
    torch.manual_seed(cfg.trial)
    set_tf32(False)
    return device, precision, sampler, examples, budget, saving_mode, base


def _tables(components: list[Component], params: dict[str, int], flops: dict[str, float], energy: ComponentEnergy,
            per_component: Impacts, per_type: Impacts, folder: Path) -> tuple[dict[str, float], str, list[dict], Path]:
    """components.csv, component_types.csv, outside.csv and correlation.csv under ``folder``: (energy shares, their
    basis, the per-type rows, the folder)."""
    shares, basis = energy_shares(components, energy)
    rows_out = component_rows(components, params, flops, energy, shares, per_component)
    types_out = type_rows(rows_out, per_type)
    write_csv(folder / "components.csv", COMPONENT_COLUMNS, rows_out)
    write_csv(folder / "component_types.csv", TYPE_COLUMNS, types_out)
    assert energy.outside is not None  # measure_components always accounts for it
    write_csv(folder / "outside.csv", OUTSIDE_COLUMNS, outside_rows(energy.outside))
    # Imported here: scipy is needed by task=layers only, and every run imports this module
    # through eaq.tasks.job (the GPU image has no scipy unless its wheelhouse adds it).
    from eaq.layers.correlation import correlations

    impacts = {m: {n: i.impact for n, i in found.items()} for m, found in
               (("sensitivity", per_component.sensitivity), ("ablation", per_component.ablation)) if found}
    write_csv(folder / "correlation.csv", CORRELATION_COLUMNS,
              correlation_rows(correlations({c.name: c.type for c in components}, shares, impacts)))
    return shares, basis, types_out, folder


def _measured_saving(
    cfg: EaqConfig, fp32_model: nn.Module, components: list[Component], energy: ComponentEnergy, inputs: dict[str, object],
    device: torch.device, sampler: Sampler, settings: Settings, base: str, folder: Path, tags: dict[str, str],
) -> tuple[dict[str, float], dict[str, float], str]:
    """``layers.saving=measured``: the components measured again with the target applied uniformly (the run's own
    measurement is the base's). Returns each component's cost in the base and its saving (base - target), in the
    same unit, and their basis. Writes layers/plan_saving.csv; tags the target windows' validity."""
    # Counted before the target is applied (in place): which components it changes at all.
    layers = {c.name: len(lowerable(fp32_model, [c], cfg.layers.target, device)) for c in components}
    target_model = get_precision(cfg.layers.target, device).apply(fp32_model.to(device), device)
    lowered = measure_components(target_model, components, lambda: target_model(**inputs), device, sampler, settings, cfg.batch_size)
    both, basis = component_costs(components, energy, lowered)
    if not both:
        raise ConfigError(
            "layers.saving=measured found no cost basis (replay or attribution energy, or time) complete and positive "
            f"in both the {base} and the {cfg.layers.target} measurement; use layers.saving=assumed or compiled."
        )
    cost, cost_target = both
    tags |= {f"eaq.layers.saving.{key.removeprefix('eaq.')}": value for key, value in lowered.tags.items()
             if key in ("eaq.energy", "eaq.valid", "eaq.valid.reasons", "eaq.valid.notes", "eaq.layers.cuda_graphs")}
    saving, noise = told_apart(layers, {name: cost[name] - cost_target[name] for name in cost})
    write_csv(folder / "plan_saving.csv", SAVING_COLUMNS, saving_rows(components, layers, cost, cost_target, basis, noise))
    return cost, saving, basis


def _compiled_saving(
    cfg: EaqConfig, fp32_model: nn.Module, base_model: nn.Module, components: list[Component], cost: dict[str, float],
    inputs: dict[str, object], device: torch.device, sampler: Sampler, settings: Settings, base: str, folder: Path,
    tags: dict[str, str],
) -> tuple[dict[str, float], dict[str, float], str]:
    """``layers.saving=compiled``: the whole pass compiled in the base, then with each type's lowerable layers in the
    target, then in the base again, each in its own window (eaq.layers.energy.measure_passes); each type's saving
    split over its components by their cost in the run (eaq.layers.plan.split_type_savings). Returns each component's
    cost (its share of the compiled base pass) and saving, in the same unit, and their basis. Writes
    layers/plan_saving_by_type.csv; tags what was built and whether its windows are valid.

    The passes are the deployment the plan will be benchmarked as: ``inputs`` as the benchmark task passes them
    (an all-ones attention mask and a causal LM's KV cache kept, unlike the eager analysis's passes, which drop
    both to match the replays), and, with ``layers.cuda_graphs`` on a CUDA device, Inductor's CUDA graphs (the
    benchmark's ``cuda_graphs=true``). On the 2026-11-25 H100 call without either, DistilBERT-base's compiled bf16
    pass took 2.97 ms here against 1.95 ms in the benchmark, and the plan its savings chose (attention in fp8,
    2.5% cheaper here) cost 25% more time in the benchmark: a saving measured on another pass."""
    target = cfg.layers.target
    able = {c.name: lowerable(base_model, [c], target, device) for c in components}
    members = {kind: [c.name for c in components if c.type == kind and able[c.name]] for kind in dict.fromkeys(c.type for c in components)}
    members = {kind: names for kind, names in members.items() if names}
    if not members:  # nothing to lower: choose_plan says so, with no compilation spent
        return cost, {}, "compiled_time"
    layers = {kind: [layer for name in names for layer in able[name]] for kind, names in members.items()}
    quantized: dict[str, int] = {}  # what each built pass holds, read from its weights (eaq.precision.proof)
    graphs = cfg.layers.cuda_graphs and device.type == "cuda"
    tags["eaq.layers.saving.pass"] = f"compiled{', CUDA graphs' if graphs else ''}; inputs: {', '.join(sorted(inputs))}"

    def compiled(name: str, plan: Plan | None) -> Callable[[], Callable[[], object]]:
        def build() -> Callable[[], object]:
            fresh = copy.deepcopy(fp32_model).to(device)
            model = apply_plan(fresh, device, plan) if plan else get_precision(base, device).apply(fresh, device)
            quantized[name] = proof(model)["quantized_linear_layers"]
            run = compile_model(model, cuda_graphs=graphs, tuning=cfg.compile_tuning, pattern_matcher=cfg.compile_pattern_matcher)
            run(**inputs)  # compiles here, outside every window and before the warm-up's settling
            return lambda: run(**inputs)
        return build

    skips = graph_skips()
    found = measure_passes({"base": compiled("base", None)}
                           | {kind: compiled(kind, Plan(base, dict.fromkeys(layers[kind], target))) for kind in members}
                           | {"base again": compiled("base again", None)}, device, sampler, settings)
    if graphs:  # every pass graphed or the run fails: a saving between a graphed and an ungraphed pass is none
        require_graphs(skips, "layers.saving=compiled with layers.cuda_graphs=true",
                       "Choose the plan with layers.cuda_graphs=false (its replays then run without graphs too), "
                       "and bench it with cuda_graphs=false.")
    table, basis, saved = type_saving_rows({kind: quantized[kind] for kind in members}, (found["base"], found["base again"]),
                                           {kind: found[kind] for kind in members})
    write_csv(folder / "plan_saving_by_type.csv", TYPE_SAVING_COLUMNS, table)
    invalid = [f"{row['type']}: {row['valid']}" for row in table if row["valid"] not in ("true", "not checked (no energy)")]
    tags["eaq.layers.saving.valid"] = "false" if invalid else "true" if basis == "compiled_energy" else "not checked (no energy)"
    tags |= {"eaq.layers.saving.valid.reasons": "; ".join(invalid)} if invalid else {}
    notes = [f"{name}: {note}" for name, cost in found.items() for note in cost.notes]
    tags |= {"eaq.layers.saving.valid.notes": "; ".join(notes)} if notes else {}
    whole = table[0]["base_per_pass"] / 1e3  # the compiled base pass, J or s: each component's cost is its share of it
    return {name: share * whole for name, share in cost.items()}, split_type_savings(members, saved, cost), basis


def _plan(
    cfg: EaqConfig, base_model: nn.Module, components: list[Component], data: EvalData, device: torch.device, budget: Budget,
    impacts: Impacts, cost: dict[str, float], saving: dict[str, float] | None, basis: str, base: str,
    reference: Outputs | None, folder: Path, tags: dict[str, str],
) -> None:
    """Choose the plan saving the most (by the cost basis) within the budget; write layers/plan.yaml."""
    named = {"replay": "energy_replay", "attribution": "energy_attribution"}.get(basis, basis)
    if saving is None and cfg.precision.name != base:  # assumed savings rank by the run's own costs
        named += f", measured in {cfg.precision.name} (the run's precision), not in the base {base}"
    choice = choose_plan(base_model, components, data, device, budget, impacts.sensitivity, cost, named, cfg.layers.target, base,
                         reference, saving)
    choice.plan.meta["model"] = plan_model(cfg.model.name, weights_identity(cfg.model, draw_key(device)))
    save_plan(choice.plan, folder / "plan.yaml")
    tags["eaq.layers.plan"] = f"{len(choice.plan.layers)} layers to {cfg.layers.target} ({budget.describe()}; saving {choice.plan.meta['saving']})"
