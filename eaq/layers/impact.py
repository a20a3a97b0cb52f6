"""What each component is worth to the predictions: sensitivity and ablation, on real data.

Two questions per component (or per group of components, e.g. all FFNs at once):

- **sensitivity**: lower only its Linear layers to a target precision (int8 by default)
  and keep everything else as it was. Quantized targets go through the mixed precision's
  ``apply_plan`` (the same torchao configs and shape rule as every run); a float target
  (fp16, bf16) casts the component's Linear layers and casts at each one's boundary, so the
  rest of the model keeps computing in the base dtype.
- **ablation**: the component's residual branch contributes nothing. The module whose output
  is the branch (``branch_outputs``: BERT ``attention.output.dense`` and ``output.dense``,
  DistilBERT ``attention`` and ``ffn``, GPT-2 ``attn`` and ``mlp``, a mixture of experts'
  whole block) has its output, bias included, replaced by zeros. In post-LN blocks
  (BERT, DistilBERT, MiniLM) the block then computes ``LayerNorm(x + 0)``: the layer norm
  still runs on the residual alone. In pre-LN blocks (GPT-2) it computes ``x + 0``: the
  branch's ``ln_1``/``ln_2`` output is discarded. Other types (embeddings, layer norm,
  head) have no residual branch to skip and are not ablated.

Each is compared with the unchanged model on the same batches (``compare``):

- ``kl``: KL(reference || changed) of the output distributions, nats, averaged over
  examples (over scored token positions for a causal LM); None for embedding models.
- ``agreement``: fraction of examples (token positions) whose top-1 prediction is unchanged.
- ``accuracy_delta_points``: change in accuracy, percentage points (labelled classifiers).
- ``perplexity_delta_pct``: change in perplexity, percent (causal LMs on raw text).
- ``impact``: **the impact score**, the KL divergence above; for embedding models, which
  have no distribution, ``1 - mean cosine`` of the pooled embeddings. Zero when the
  outputs are unchanged, growing with how far predictions move; unlike accuracy it does
  not saturate or hide changes that happen not to flip a label on a small data set.

A change whose outputs are not finite (NaN or infinite: a float16 overflow) broke the model: its ``kl`` and ``impact``
are infinite, and so is its ``perplexity_delta_pct`` where its perplexity came out NaN. NaN would read as "not measured"
(an empty cell, no metric) and drop out of the correlation unsaid. Outputs of the unchanged model that are not finite
leave nothing to measure a change against: ``compare`` refuses them.
"""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from eaq.errors import ConfigError, EaqError
from eaq.evaluate import accuracy, fidelity
from eaq.evaluate.outputs import model_outputs
from eaq.evaluate.perplexity import perplexity
from eaq.layers.components import Component
from eaq.precision.mixed import BASES, LAYER_FORMATS, Plan, apply_plan
from eaq.precision.proof import tied_linears

# Types whose component is a residual branch (or several) ablation can zero.
BRANCH_TYPES = ("attention", "ffn")


@dataclass
class EvalData:
    """The real data impact is measured on, already tokenized and on the model's device."""

    head: str
    batches: list[dict[str, torch.Tensor]]
    labels: torch.Tensor | None = None
    # Causal LMs: the token stream perplexity is computed on, its window and stride.
    stream: torch.Tensor | None = None
    seq_len: int = 0
    stride: int = 0

    def examples(self) -> str:
        """What the figures rest on, in words (a plan's meta): a budget of 0.5 accuracy points is below one
        example's flip on fewer than 200 examples, and the plan file should let its reader see that."""
        rows = sum(b["input_ids"].shape[0] for b in self.batches)
        text = f"{rows} examples"
        if self.labels is not None and self.head == "sequence_classification":
            text += f" (one changed prediction moves accuracy by {100 / rows:.3g} points)"
        if self.stream is not None and self.head == "causal_lm":
            text += f" and {self.stream.numel()} tokens of text for perplexity"
        return text


@dataclass
class Outputs:
    """What one model produced on the data: the outputs compared, and its task quality."""

    # Class logits, token logits at scored positions (causal LM), or pooled embeddings.
    values: torch.Tensor
    accuracy: float | None = None
    perplexity: float | None = None


@dataclass
class Impact:
    """One component (or group) changed one way, against the unchanged model."""

    name: str
    method: str  # "sensitivity" or "ablation"
    kl: float | None
    agreement: float | None
    accuracy_delta_points: float | None
    perplexity_delta_pct: float | None
    impact: float
    # The Linear layers lowered (sensitivity) or zeroed (ablation).
    layers: tuple[str, ...] = ()


@torch.inference_mode()
def run_outputs(model: nn.Module, data: EvalData) -> Outputs:
    """The model's outputs and quality on ``data`` (eaq.evaluate for accuracy and perplexity)."""
    parts = []
    for batch in data.batches:
        if data.head == "causal_lm":
            # Each scored position is one distribution over the vocabulary.
            logits = model(**batch).logits.float()
            parts.append(logits[batch["attention_mask"].bool()].cpu())
        else:
            parts.append(model_outputs(model, data.head, batch))
    values = torch.cat(parts)
    found = Outputs(values)
    if data.labels is not None and data.head == "sequence_classification":
        found.accuracy = accuracy(data.head, values, data.labels)["quality_accuracy"]
    if data.stream is not None and data.head == "causal_lm":
        found.perplexity = perplexity(model, data.stream, data.seq_len, data.stride).perplexity
    return found


def compare(name: str, method: str, reference: Outputs, changed: Outputs, head: str, layers: tuple[str, ...] = ()) -> Impact:
    """The changed model against the reference; see the module docstring for each figure."""
    not_finite = (~torch.isfinite(reference.values)).sum().item()
    if not_finite:
        raise ConfigError(
            f"the unchanged model's outputs are not finite ({not_finite} of {reference.values.numel()} values NaN or "
            "infinite: its float format overflows on this model and data), so no change can be measured against them; "
            "set layers.base=fp32 (or bf16, which has fp32's range)."
        )
    if reference.perplexity is not None and not math.isfinite(reference.perplexity):
        # Scored over the whole text, beyond the batches above: each change's percentage of it would be NaN, and a
        # perplexity budget would call every candidate over it.
        raise ConfigError(
            f"the unchanged model's perplexity on the text is not finite ({reference.perplexity}: its float format "
            "overflows somewhere in the text), so no change can be measured against it; set layers.base=fp32 (or bf16, "
            "which has fp32's range)."
        )
    broken = not torch.isfinite(changed.values).all().item()
    if head == "embedding":
        cosine = fidelity(head, changed.values, reference.values)["quality_cosine_to_fp32_mean"]
        kl, agreement, impact = None, None, max(1.0 - cosine, 0.0)
    else:
        # Class logits and a causal LM's token logits are both rows of distributions.
        drift = fidelity("sequence_classification", changed.values, reference.values)
        # KL is never negative; float rounding can give -1e-9 for identical outputs.
        kl, agreement = max(drift["quality_kl_from_fp32"], 0.0), drift["quality_agreement_with_fp32"]
        impact = kl
    if broken:  # the KL or cosine of a NaN row is NaN: "not measured", where the change broke the model
        kl, impact = (None if kl is None else math.inf), math.inf
    acc = None
    if reference.accuracy is not None and changed.accuracy is not None:
        acc = 100.0 * (changed.accuracy - reference.accuracy)
    ppl = None
    if reference.perplexity is not None and changed.perplexity is not None:
        ppl = math.inf if math.isnan(changed.perplexity) else 100.0 * (changed.perplexity / reference.perplexity - 1.0)
    return Impact(name, method, kl, agreement, acc, ppl, impact, layers)


def linears(model: nn.Module, components: list[Component]) -> list[str]:
    """The Linear layers the components own, in module order."""
    owned = {m for c in components for m in c.modules}
    return [n for n, m in model.named_modules() if n in owned and isinstance(m, nn.Linear)]


def lowerable(model: nn.Module, components: list[Component], target: str, device: torch.device) -> list[str]:
    """The components' Linear layers ``target``'s kernel takes (the shape rule) and that are no tied LM head; the rest
    stay."""
    if target not in LAYER_FORMATS:
        return linears(model, components)
    fmt = LAYER_FORMATS[target](device)
    modules, tied = dict(model.named_modules()), tied_linears(model)  # a tied LM head stays, as in uniform precisions
    return [n for n in linears(model, components) if fmt.eligible(modules[n]) and n not in tied]


def _cast_floats(value: object, dtype: torch.dtype) -> object:
    """Float tensors in ``value`` (a tensor or tuple of them) cast to ``dtype``; the rest as is."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, tuple):
        return tuple(_cast_floats(v, dtype) for v in value)
    return value


def _cast_layers(model: nn.Module, layers: list[str], dtype: torch.dtype, back: torch.dtype) -> None:
    """Cast these modules' weights to ``dtype``, with casts of their inputs in and outputs back.

    Each parameter is replaced by a cast copy, not cast in place: a weight shared with a module outside
    ``layers`` (GPT-2's LM head is its token table) would otherwise be lowered there too.
    """
    for name in layers:
        module = model.get_submodule(name)
        for owner in module.modules():
            for key, param in list(owner.named_parameters(recurse=False)):
                setattr(owner, key, nn.Parameter(param.detach().to(dtype), requires_grad=param.requires_grad))
        module.to(dtype)  # its buffers
        module.register_forward_pre_hook(lambda m, args: _cast_floats(args, dtype))
        module.register_forward_hook(lambda m, args, out: _cast_floats(out, back))


def lowered(model: nn.Module, layers: list[str], target: str, base: str, device: torch.device) -> nn.Module:
    """A copy of the (base-format) model with only ``layers`` lowered to ``target``, for real."""
    changed = copy.deepcopy(model)
    if target in LAYER_FORMATS:
        return apply_plan(changed, device, Plan(base, {n: target for n in layers}))
    if target not in BASES:
        raise ConfigError(
            f"sensitivity target {target!r} cannot lower one component; use a quantized format "
            f"({', '.join(LAYER_FORMATS)}) or a float cast ({', '.join(BASES)})."
        )
    _cast_layers(changed, layers, BASES[target](device).dtype, BASES[base](device).dtype)
    return changed


def sensitivity(model: nn.Module, groups: dict[str, list[Component]], data: EvalData, device: torch.device,
                target: str = "int8", base: str = "fp32",
                reference: Outputs | None = None) -> dict[str, Impact]:
    """Each group lowered alone to ``target``; groups with no Linear the target takes are left out.

    ``model`` is in the base format and is never changed (each group lowers a copy).
    """
    reference = reference or run_outputs(model, data)
    found = {}
    for name, components in groups.items():
        layers = lowerable(model, components, target, device)
        if layers:
            changed = lowered(model, layers, target, base, device)
            found[name] = compare(name, "sensitivity", reference, run_outputs(changed, data), data.head, tuple(layers))
            del changed
    return found


def branch_outputs(model: nn.Module, component: Component) -> list[str]:
    """The modules whose outputs are the component's residual branches (none for types that are no branch).

    Each root that no later root of the component continues. A branch split over roots ends in a bare Linear under the
    same parent that carries the earlier roots' output on (BERT's ``attention.self`` into ``attention.output.dense``,
    OPT's ``fc1`` into ``fc2``), so of those only that Linear writes the branch back. A whole branch in one root (GPT-2's
    ``attn``, Llama's ``mlp``, a mixture of experts' block) is zeroed whole, router and shared experts included; a
    component holding several branches (T5's block 0 attention: the encoder's, the decoder's and its cross-attention;
    BART's decoder self-attention beside its cross-attention, siblings) has each zeroed.
    """
    if component.type not in BRANCH_TYPES:
        return []
    roots = component.roots

    def continued(i: int) -> bool:
        parent = roots[i].rpartition(".")[0] + "."
        return any(later.startswith(parent) and isinstance(model.get_submodule(later), nn.Linear) for later in roots[i + 1:])

    return [root for i, root in enumerate(roots) if not continued(i)]


def _zero_branch(module: nn.Module, args: object, out: object) -> object:
    """A forward hook: the module's output zeroed; of a tuple (an attention's output and weights), the first."""
    if isinstance(out, tuple):
        return (torch.zeros_like(out[0]), *out[1:])
    return torch.zeros_like(out)


def _residual_only(module: nn.Module, args: tuple, kwargs: dict, out: object) -> object:
    """A forward hook (with kwargs) for a module that adds the residual it is given to its branch itself: its output
    is that residual alone, the branch skipped."""
    residual = inspect.signature(module.forward).bind(*args, **kwargs).arguments["residual"]
    return (residual, *out[1:]) if isinstance(out, tuple) else residual


def _skip_hook(model: nn.Module, name: str) -> Callable[..., object]:
    """How a branch module is skipped: its output zeroed, or, where its forward adds the residual itself (BLOOM's
    attention and MLP, MPT's MLP: zeroed, they zeroed the residual stream with the branch), its output the residual.
    An EaqError for one that takes its residual under another name (``residual_tensor``: which tensor it adds where is
    its own)."""
    module = model.get_submodule(name)
    taken = [p for p in inspect.signature(module.forward).parameters if p.startswith("residual")]
    if taken == ["residual"]:
        return _residual_only
    if taken:
        raise EaqError(
            f"{name} ({type(module).__name__}) adds its residual inside its forward ({', '.join(taken)}): zeroing its "
            "output would zero the residual stream, and eaq cannot skip its branch alone; run this model with "
            "layers.ablation=false (sensitivity still measures it).")
    return _zero_branch


@contextmanager
def ablated(model: nn.Module, components: list[Component]) -> Iterator[list[str]]:
    """Inside: the components' residual branches skipped (``_skip_hook``). On exit the hooks are removed,
    leaving the model exactly as before (no weight is touched). Yields the skipped modules."""
    zeroed = [module for c in components for module in branch_outputs(model, c)]
    hooks = {module: _skip_hook(model, module) for module in zeroed}
    handles = [model.get_submodule(module).register_forward_hook(hook, with_kwargs=hook is _residual_only)
               for module, hook in hooks.items()]
    try:
        yield zeroed
    finally:
        for handle in handles:
            handle.remove()


def ablation(model: nn.Module, groups: dict[str, list[Component]], data: EvalData,
             reference: Outputs | None = None) -> dict[str, Impact]:
    """Each group's residual branches skipped; groups with none to skip are left out."""
    reference = reference or run_outputs(model, data)
    found = {}
    for name, components in groups.items():
        with ablated(model, components) as zeroed:
            if zeroed:
                found[name] = compare(name, "ablation", reference, run_outputs(model, data), data.head, tuple(zeroed))
    return found


def each(components: list[Component]) -> dict[str, list[Component]]:
    """One group per component."""
    return {c.name: [c] for c in components}


def by_type(components: list[Component]) -> dict[str, list[Component]]:
    """One group per component type: impacts of lowering or ablating the whole type at once."""
    groups: dict[str, list[Component]] = {}
    for c in components:
        groups.setdefault(c.type, []).append(c)
    return groups


__all__ = [
    "BRANCH_TYPES", "EvalData", "Impact", "Outputs", "ablated", "ablation", "branch_outputs", "by_type",
    "compare", "each", "linears", "lowerable", "lowered", "run_outputs", "sensitivity",
]
