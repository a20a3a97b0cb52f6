"""Mixed precision: a plan says which Linear layers run which quantized format.

``precision=mixed precision.plan=FILE`` runs a plan like any other precision. The plan
(YAML) names a float ``base`` format for everything it does not list, and a format per
Linear layer (module names as eaq loads the model: GPT-2's Conv1D are Linear already):

    base: fp32
    layers:
      encoder.layer.0.intermediate.dense: int8
      encoder.layer.0.output.dense: int8
    meta: {budget: "accuracy drop <= 0.5 points"}   # recorded, never read by apply

Every listed layer is quantized for real by the same torchao configs as the uniform
precisions (eaq.precision.torchao_quant), so the proof (stored dtypes, bytes) and the
kernel check apply per format. A layer the plan names that does not exist, is not a
Linear, or that its format's kernel cannot take (the shape rule) is refused before the
model runs, naming the layer and why: nothing is silently left in the base format.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml
from torch import nn

from eaq.errors import NO_PLAN, ConfigError, EaqError, UnsupportedPrecisionError, missing_plan
from eaq.precision.base import cast, dtype_name, set_tf32
from eaq.precision.kernel_check import (PROFILER_DTYPES, Calls, KernelCheck, Profile, copies, fallbacks_by_shape,
                                       linear_float_gemms, lowp_gemms, runs, times_run)
from eaq.precision.native import bf16, fp16, fp32
from eaq.precision.proof import tensor_dtypes, tied_linears
from eaq.precision.requirements import Requirements
from eaq.precision.torchao_quant import TorchaoQuant, _quantization, fp8, int4_weight_only, int8, int8_weight_only

log = logging.getLogger(__name__)

MIXED = "mixed"
# The float formats a plan's base can be (weights and math cast, as the uniform precisions).
BASES = {"fp32": fp32, "fp16": fp16, "bf16": bf16}
# The formats a plan can give a layer: torchao's, applied per layer.
LAYER_FORMATS = {"int8": int8, "int8_weight_only": int8_weight_only, "fp8": fp8, "int4_weight_only": int4_weight_only}


@dataclass
class Plan:
    """Which Linear layers run which format; every other module runs ``base``."""

    base: str
    layers: dict[str, str]
    # Free-form facts about how the plan was chosen (budget, measured quality, source run);
    # written and read back, never used to apply the plan.
    meta: dict[str, object] = field(default_factory=dict)
    # SHA-256 of the file's bytes as load_plan read them (what the run applied), "" for a plan not read from a file;
    # a record of where the plan came from, not part of what it says (two equal plans may be written differently).
    sha256: str = field(default="", compare=False)

    @property
    def applies(self) -> str:
        """SHA-256 of what the plan applies, its base and each layer's format (not its meta, order or spelling): two
        files the layers task wrote with the same choice and other notes (trials' shares) are one precision."""
        return hashlib.sha256(json.dumps({"base": self.base, "layers": self.layers}, sort_keys=True).encode()).hexdigest()

    def by_format(self) -> dict[str, list[str]]:
        """{format: [layer names]} in the plan's order."""
        groups: dict[str, list[str]] = {}
        for layer, fmt in self.layers.items():
            groups.setdefault(fmt, []).append(layer)
        return groups

    def validate(self, source: str = "the plan") -> None:
        """Formats the plan names exist: a typo fails here, with the valid names."""
        if self.base not in BASES:
            raise ConfigError(f"{source}: base {self.base!r} is not a float format; use one of {', '.join(BASES)}.")
        for layer, fmt in self.layers.items():
            if fmt not in LAYER_FORMATS:
                raise ConfigError(
                    f"{source}: layer {layer} has format {fmt!r}; a plan's layers take one of {', '.join(LAYER_FORMATS)} "
                    f"(float layers run the base, {self.base})."
                )


def runnable_formats(device: torch.device) -> list[str]:
    """The layer formats a plan can give a layer that run for real on ``device``."""
    return [name for name, make in LAYER_FORMATS.items() if make(device).requirements.unmet(name, device) is None]


def plan_model(name: str, weights: str) -> dict[str, str]:
    """What a plan records of the model it was chosen on (its ``meta.model``): its name and its weights' identity
    (eaq.models.weights_identity)."""
    return {"name": name, "weights": weights}


def check_plan_model(plan: Plan, name: str, weights: str, source: str) -> None:
    """Refuse a plan chosen on other weights than the run's (``weights``: eaq.models.weights_identity): its budget
    (accuracy or perplexity lost) was measured on those, and layer names and shapes alike (a fine-tuned sibling,
    another seed) would otherwise apply it without a word. A plan recording no model (written by hand, or before plans
    recorded one) is applied as written."""
    chosen_on = plan.meta.get("model")
    if not isinstance(chosen_on, dict) or "weights" not in chosen_on:
        return
    if chosen_on["weights"] != weights:
        raise ConfigError(
            f"{source} was chosen on {chosen_on.get('name', 'another model')} ({chosen_on['weights']}), and this run "
            f"loads {name} ({weights}), while the plan's quality budget holds for the weights it was chosen on; make a "
            "plan for these weights (task=layers on this model), or delete the plan's meta.model to apply it anyway."
        )


def save_plan(plan: Plan, path: str | Path) -> Path:
    """Write the plan as YAML (layers in the order given) and return its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump({"base": plan.base, "layers": dict(plan.layers), "meta": dict(plan.meta)}, sort_keys=False)
    path.write_text(text)
    return path


class _UniqueKeys(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice: PyYAML keeps the last silently, and a plan naming one layer
    twice (two formats) would run one of them without a word."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        keys = [self.construct_object(key, deep=deep) for key, _ in node.value]
        twice = sorted({str(k) for k in keys if keys.count(k) > 1})
        if twice:
            raise yaml.constructor.ConstructorError(None, None, f"given twice: {', '.join(twice)}", node.start_mark)
        return super().construct_mapping(node, deep=deep)


def load_plan(path: str | Path) -> Plan:
    """Read and check a plan file; a missing or malformed one fails with what to fix."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(missing_plan(path))
    raw = path.read_bytes()  # read once: the hash recorded is of the bytes applied, even if the file changes mid-run
    try:
        data = yaml.load(raw.decode(), Loader=_UniqueKeys)  # noqa: S506 (a safe loader)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"precision.plan={path} is not valid YAML ({exc}); fix the file.") from exc
    if isinstance(data, dict) and (unknown := sorted(str(k) for k in data if k not in ("base", "layers", "meta"))):
        # Layers under a misspelled key (``Layers:``, ``layer:``) would run in the base dtype without a word; named
        # first, as the shape's sentence below cannot say which key was meant.
        if isinstance(data.get("layers"), dict):
            raise ConfigError(f"precision.plan={path} has key {', '.join(unknown)}, which nothing reads; a plan has "
                              "'base', 'layers' and optionally 'meta': fix the name.")
        # No 'layers': a misspelt one, or layer names written beside 'base' (hundreds, in a real model).
        shown = ", ".join(unknown[:3]) + (f", ... ({len(unknown)} in all)" if len(unknown) > 3 else "")
        raise ConfigError(f"precision.plan={path} has no 'layers' and has key {shown}, which nothing reads: list the "
                          "layers under 'layers:' (Linear module name -> format), beside 'base' and optionally 'meta'.")
    if not isinstance(data, dict) or not isinstance(data.get("base"), str) or not isinstance(data.get("layers"), dict):
        raise ConfigError(
            f"precision.plan={path} must be a mapping with 'base' (a float format) and 'layers' "
            "(Linear module name -> format); see eaq/precision/mixed.py."
        )
    if not isinstance(data.get("meta") or {}, dict):
        raise ConfigError(f"precision.plan={path}: 'meta' must be a mapping (notes kept with the plan), not {data['meta']!r}.")
    plan = Plan(data["base"], {str(k): str(v) for k, v in data["layers"].items()}, dict(data.get("meta") or {}),
                hashlib.sha256(raw).hexdigest())
    plan.validate(f"precision.plan={path}")
    return plan


def _formats(plan: Plan, device: torch.device) -> dict[str, TorchaoQuant]:
    return {fmt: LAYER_FORMATS[fmt](device) for fmt in plan.by_format()}


def check_plan(model: nn.Module, plan: Plan, device: torch.device) -> None:
    """Refuse, before anything runs, a plan this model or device cannot run as written."""
    plan.validate()
    modules = dict(model.named_modules())
    tied = tied_linears(model)
    refusals = []  # each with its own fix: another base, another format, or the layer out of the plan
    for fmt_name, fmt in _formats(plan, device).items():
        if reason := base_refusal(fmt_name, plan.base, device):
            refusals.append(f"{reason}; set base: {_base_name(fmt.base)}")
        for layer in plan.by_format()[fmt_name]:
            if layer not in modules:
                refusals.append(f"layer {layer} does not exist in this model: remove it")
            elif layer in tied:  # every format leaves a tied head in the base
                refusals.append(f"layer {layer} cannot run {fmt_name}: its weight is the token table's (a tied LM head), "
                                "which quantized would be untied, the float table kept beside the copy: remove it")
            elif reason := fmt.refusal(modules[layer]):
                # Another format only where one takes this layer in this base here (the shape rule holds for all).
                others = [other for other in runnable_formats(device) if other != fmt_name and base_refusal(
                    other, plan.base, device) is None and LAYER_FORMATS[other](device).refusal(modules[layer]) is None]
                fix = f"give it {' or '.join(others)}, or remove it" if others else "remove it (no format takes it)"
                refusals.append(f"layer {layer} cannot run {fmt_name}: {reason}: {fix}")
    if refusals:
        raise UnsupportedPrecisionError(f"precision=mixed cannot run this plan ({'; '.join(refusals)}).")


def base_refusal(fmt_name: str, base: str, device: torch.device) -> str | None:
    """Why layers in ``fmt_name`` cannot sit in a model of float ``base`` on ``device`` (their activations are in
    another dtype), or None; the name of the base that fits is ``fitting_base``."""
    fmt = LAYER_FORMATS[fmt_name](device)
    if fmt.base == BASES[base](device).dtype:
        return None
    return f"{fmt_name} on {device.type} computes with activations in {dtype_name(fmt.base)}, not the base {base}"


def fitting_base(fmt_name: str, device: torch.device) -> str:
    """The float base ``fmt_name``'s layers compute with on ``device``."""
    return _base_name(LAYER_FORMATS[fmt_name](device).base)


def _base_name(dtype: torch.dtype) -> str:
    return next(name for name, make in BASES.items() if make(torch.device("cpu")).dtype == dtype)


def apply_plan(model: nn.Module, device: torch.device, plan: Plan) -> nn.Module:
    """Cast the model to the plan's base and quantize each listed layer to its format, for real."""
    check_plan(model, plan, device)
    if not plan.layers:  # a valid plan (the layers task writes one when no component is cheaper lowered)
        # Said, so that a front with this run beside uniform base runs reads as one model measured twice.
        log.warning("the plan lowers no layer: every layer runs the base, %s, so this run measures uniform %s", plan.base, plan.base)
    set_tf32(False)
    model = cast(model, device, BASES[plan.base](device).dtype)
    for fmt_name, fmt in _formats(plan, device).items():
        names = set(plan.by_format()[fmt_name])
        _quantization().quantize_(model, fmt.config(), filter_fn=lambda m, fqn, names=names: fqn in names)
    return model


def _linear_names(model: nn.Module) -> tuple[str, ...]:
    """The model's Linear layers by the names a plan gives them (GPT-2's Conv1D are Linear once eaq loads it)."""
    return tuple(name for name, module in model.named_modules() if isinstance(module, nn.Linear))


def layer_formats(model: nn.Module) -> dict[str, str]:
    """{Linear layer: what its weight stores}, read from the model, not from the plan.

    A quantized layer shows its torchao tensor type and stored dtype (``Int8Tensor int8``, with
    `` + activations`` where activations are quantized at run time too),
    a float one its dtype: the per-layer part of the proof.
    """
    described = {}
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            weight = module.weight.data
            if type(weight) in (torch.Tensor, nn.Parameter):
                described[name] = dtype_name(weight.dtype)
            else:
                # Dynamic-activation formats (int8, fp8) carry how they quantize activations.
                dynamic = " + activations" if getattr(weight, "act_quant_kwargs", None) is not None else ""
                described[name] = f"{type(weight).__name__} {_stored_dtype(weight)}{dynamic}"
    return described


def _stored_dtype(weight: torch.Tensor) -> str:
    """The dtype most of a quantized weight's values are stored in, named as the proof counts them
    (eaq.precision.proof.tensor_dtypes): ``int4`` for torchao's int4, whose ``qdata`` packs eight values into each
    int32, so that the layers' formats and the run's stored dtypes say the same (its scales are far fewer values)."""
    counts = tensor_dtypes(weight)
    return max(counts, key=counts.__getitem__).removeprefix("torch.")


@dataclass
class MixedRequirements:
    """The union of the plan's formats' requirements: each is checked, the first unmet one named."""

    formats: dict[str, Requirements]
    plan_path: str

    def unmet(self, name: str, device: torch.device) -> str | None:
        for fmt, requirements in self.formats.items():
            reason = requirements.unmet(fmt, device)
            if reason:
                return f"precision=mixed with plan {self.plan_path} uses {fmt}, and {reason}"
        return None


@dataclass
class MixedPrecision:
    """A plan as a Precision: applied, proved and kernel-checked per format."""

    plan: Plan
    path: str
    device: torch.device
    name: str = MIXED
    kernels: tuple[str, ...] = ()
    quantized_math: bool = False
    # The model's Linear layers, learned from the model the plan is checked against or applied to (``check``,
    # ``apply``): those the plan does not list run the base, and count in ``matmul``'s vote. None until then.
    linears: tuple[str, ...] | None = None

    @property
    def formats(self) -> dict[str, TorchaoQuant]:
        return _formats(self.plan, self.device)

    @property
    def requirements(self) -> MixedRequirements:
        base = BASES[self.plan.base](self.device)
        return MixedRequirements({self.plan.base: base.requirements} | {f: q.requirements for f, q in self.formats.items()}, self.path)

    @property
    def matmul(self) -> str:
        """The matmul format the roofline compares against: the one most of the model's Linear layers multiply in.

        The layers the plan leaves in the base count too: a plan lowering 1 of DistilBERT's 38 Linear layers to int8
        was compared with int8's peak FLOP/J while 37 multiplied in fp32. Counted by matmul, not by format: int8
        weight-only layers multiply in the base's float GEMMs. A tie goes to the base."""
        if self.linears is None:
            raise EaqError(
                "precision=mixed's roofline matmul format is the one most of the model's Linear layers multiply in, "
                f"and the plan {self.path} lists only those it lowers, not how many run its base {self.plan.base}: "
                "check the plan against the model first (MixedPrecision.check, on the model or "
                "eaq.models.model_skeleton(cfg.model))."
            )
        votes = Counter({BASES[self.plan.base](self.device).matmul: len(set(self.linears) - set(self.plan.layers))})
        formats = self.formats  # built once, not per layer
        votes.update(formats[fmt].matmul for fmt in self.plan.layers.values())
        return votes.most_common(1)[0][0]

    @property
    def float_gemm_dtype(self) -> torch.dtype:
        return BASES[self.plan.base](self.device).dtype

    def check(self, model: nn.Module) -> None:
        """Refuse a plan ``model`` cannot run (``check_plan``), and learn its Linear layers for ``matmul``. The model's
        skeleton (eaq.models.model_skeleton) will do: a run checks its plan before the weights load."""
        check_plan(model, self.plan, self.device)
        self.linears = _linear_names(model)

    def apply(self, model: nn.Module, device: torch.device) -> nn.Module:
        applied = apply_plan(model, device, self.plan)
        self.linears = _linear_names(applied)
        return applied

    @property
    def plan_tags(self) -> dict[str, str]:
        """The plan's file and the hash of the bytes read: known once the plan is read, before any model loads."""
        return {"eaq.precision.plan": self.path, "eaq.precision.plan_sha256": self.plan.sha256[:16],
                "eaq.precision.plan_applies_sha256": self.plan.applies[:16]}

    def tags(self, model: nn.Module) -> dict[str, str]:
        """The run's record of the plan: its file and hash, and how many layers run each format."""
        stored = Counter(layer_formats(model).values())
        return self.plan_tags | {"eaq.precision.layer_formats": ", ".join(f"{fmt}={n}" for fmt, n in sorted(stored.items()))}

    def write_layers(self, model: nn.Module, path: Path) -> Path:
        """CSV: each Linear layer, the format the plan gave it, and what its weight stores."""
        lines = ["layer,planned,stored"]
        for layer, stored in layer_formats(model).items():
            lines.append(f"{layer},{self.plan.layers.get(layer, self.plan.base)},{stored}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
        return path

    def judge(self, model: nn.Module, seen: Profile, baseline_copies: int = 0, calls: Calls = None) -> KernelCheck:
        """The kernel check per format: each format's GEMM ran at least once per layer it holds.

        Float GEMMs may run only for the layers left in the base and the weight-only
        layers whose matmul is a float GEMM (int8_weight_only; int4's is its own kernel, so its
        layers allow none), in all and per Linear shape; more means a quantized-math layer fell back. Every float GEMM must be in the base dtype. Both count float GEMMs shaped
        like a Linear layer only (eaq.precision.kernel_check).
        """
        failures = []
        lowp = 0
        names = _linear_names(model)
        float_layers = len(names) - len(self.plan.layers)
        float_owed = sum(runs(calls, name) for name in names if name not in self.plan.layers)
        for fmt_name, fmt in self.formats.items():
            held = self.plan.by_format()[fmt_name]
            layers, owed = len(held), sum(runs(calls, name) for name in held)
            if fmt.kernels:
                ran = lowp_gemms(seen, fmt.kernels)
                lowp += ran
                if ran < owed:
                    failures.append(f"{layers} {fmt_name} layers{times_run(owed, calls)} but {ran} {'/'.join(fmt.kernels)} GEMMs per forward")
            if _float_gemm(fmt):
                float_layers += layers
                float_owed += owed
        float_gemms = linear_float_gemms(model, seen)
        floats = sum(float_gemms.values())
        if floats > float_owed:
            failures.append(f"{floats} float GEMMs per forward for {float_layers} layers computing in the base dtype"
                            f"{times_run(float_owed, calls)} (a float fallback)")
        else:  # the count holds in all: and shape by shape?
            failures += fallbacks_by_shape(model, seen, lambda name, _: name not in self.plan.layers
                                           or _float_gemm(self.formats[self.plan.layers[name]]), calls)
        expected = PROFILER_DTYPES[self.float_gemm_dtype]
        for dtype, n in sorted(float_gemms.items()):
            if dtype != expected:
                failures.append(f"{n} float GEMMs ran in {dtype} where the plan's base computes in {expected}")
        return KernelCheck(len(self.plan.layers), float_layers, lowp, floats, copies(seen), baseline_copies, failures)


def _float_gemm(fmt: TorchaoQuant) -> bool:
    """Whether a format's layers multiply with a float GEMM: weight-only int8 (its weight converted to the base);
    not int4 (``_weight_int4pack_mm``) nor int8/fp8 (integer and fp8 GEMMs)."""
    return not fmt.quantized_math and not fmt.kernels


def mixed(device: torch.device, plan_path: str | None) -> MixedPrecision:
    """The mixed precision of the plan at ``plan_path`` (precision.plan)."""
    if not plan_path:
        raise ConfigError(NO_PLAN)
    path = str(Path(plan_path).expanduser().resolve())
    return MixedPrecision(load_plan(path), path, device)
