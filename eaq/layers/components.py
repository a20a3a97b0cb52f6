"""A model's components: every parameterised module assigned to exactly one (type, block).

Energy and impact are reported per component, so the grouping must cover the whole
model and never count a module twice; whatever no rule recognises lands in ``other``
and is reported, never dropped. The rules read module names (lower-cased dotted path
segments) and classes, so they work on any Hugging Face model whose names follow the
usual conventions, checked in this order:

1. ``head``: a module under a top-level segment in ``HEAD_SEGMENTS`` (``classifier``,
   ``pre_classifier``, ``lm_head``, ``pooler``, ``score``, ``classification_head``; the LM heads of XLNet
   ``lm_loss``, GPT-NeoX-Japanese ``embed_out``, BioGPT and TrOCR ``output_projection``, Whisper ``proj_out``, XLM
   ``pred_layer``, ELECTRA ``generator_lm_head``; the summaries XLM, FlauBERT and XLNet classify with,
   ``sequence_summary``, ...) or under a ``pooler`` anywhere (eaq's MiniLM + linear classifier keeps BERT's pooler at
   ``encoder.pooler``), or a ``project_out`` outside every block (OPT-350m's projection of the last hidden state to
   its LM head's width). First, since ``embed_out`` names the head.
2. ``embeddings``: an ``nn.Embedding`` outside any attention module, or a module under a
   segment containing ``embed`` (``embeddings``, ``embed_tokens``) or named ``wte``/``wpe``
   (GPT-2), or a ``project_in`` outside every block (OPT-350m's projection of the embeddings to the blocks' width).
   A layer norm inside the embeddings module (BERT, DistilBERT) is part of the
   embeddings' forward, so it is embeddings too. An embedding table inside an attention module
   (T5's ``relative_attention_bias``) is looked up by that attention's ``forward``: attention.
3. ``layer_norm``: a class whose name contains ``LayerNorm``/``RMSNorm``/``GroupNorm``,
   or a last segment like ``layer_norm``, ``LayerNorm``, ``ln_1``, ``ln_f``, ``norm``; but a
   norm inside an attention or FFN module (below a segment rule 4 or 5 names; the nearest such
   segment says which) is part of that branch's own ``forward``, so it is that attention or FFN:
   a query/key norm (``q_norm``, ``k_layernorm``: Qwen3, Gemma3, OLMo2; StableLM-2's per-head
   ``q_layernorm.norms.0``), a low-rank projection's norm (``q_a_layernorm``: DeepSeek-V2/V3), a
   sub-norm before the output projection (BitNet's ``attn_sub_norm``, ``ffn_sub_norm``). As a layer
   norm it would leave the attention (FFN) module two owners, and its roots only the projections,
   with the rotary embedding and attention product (activation) outside every component. Except
   a norm named bare, ``LayerNorm``, ``layer_norm``, ``norm`` or ``ln`` (BERT's
   ``attention.output.LayerNorm``, ALBERT's ``attention.LayerNorm``, XLNet's ``ff.layer_norm``):
   that is the sub-layer's norm of the residual stream, run after the residual add its module
   also holds, and stays a layer norm, so that the branch's roots stop before the residual add.
   A gated norm (its class's name holds ``Gated``: Qwen3.5's and Qwen3-Next's linear attention,
   Mamba-2 mixers) is never that, whatever its name: it gates its module's output before that
   module's output projection, so it is that module's (attention, FFN, or ``other`` for a mixer).
4. ``attention``: a segment containing ``attn`` or ``attention``.
5. ``ffn``: a segment containing ``mlp``, ``ffn``, ``intermediate``, ``feed_forward``,
   ``DenseReluDense`` or ``DenseGatedActDense`` (T5), ``moe`` or ``expert`` (a mixture of experts'
   block, GraniteMoE's ``block_sparse_moe``: its router and experts), a segment named ``ff`` or
   ending in ``_ff`` (XLNet's ``ff.layer_1``, Transformer-XL's ``pos_ff``), or ``output``
   inside a block (BERT's ``output.dense``, after rule 4 took ``attention.output``), or a block's
   ``fc1``/``fc2`` (OPT keeps its feed-forward layers in the block itself); but a module under a
   block's ``bottleneck`` (MobileBERT's projections into and out of its narrow sub-layers, which add
   the whole stack back onto the block's input) is ``other``: as FFN, its ablation removed the
   attention's contribution too.
6. ``other``: everything else.

The block is the first all-digit segment of the name (``encoder.layer.3...``,
``transformer.h.3...``) whose module holds modules of its own, as a stack's blocks do; a numbered
bare layer is no block (Gemma 3n's ``altup_projections.0``, a list of projections outside every
block, read as block 0) unless its list stands beside a list of as many attention modules (XLM and
FlauBERT keep their stack as parallel lists: ``attentions``, ``layer_norm1``, ``ffns``,
``layer_norm2``; ``layer_norm1.3`` is block 3's), and modules outside numbered blocks have none. A component is
named ``block.<i>.<type>``, or ``<type>`` without a block (``embeddings``, ``head``, the
final ``layer_norm`` of GPT-2).

Each component also has its *roots*: the largest submodules all of whose parameterised
modules belong to it (``attention.self`` and ``attention.output.dense`` for a BERT block,
``attn`` for GPT-2). Replay calls the roots; attribution hooks them. Work done outside
every root (residual adds, activations between modules) belongs to no component, and the
capture ratio shows how much that is. To measure that work rather than infer it, each
numbered block is also a *block* (``find_blocks``): the module that holds the block (the
name up to its index, ``transformer.h.3``), replayed with its components stubbed
(eaq.layers.replay.stubbed), which runs the block's own work alone (residual adds, masks
prepared in the block's ``forward``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from torch import nn

TYPES = ("embeddings", "attention", "ffn", "layer_norm", "head", "other")
HEAD_SEGMENTS = frozenset({"classifier", "pre_classifier", "lm_head", "pooler", "score", "qa_outputs", "cls", "head",
                           "classification_head", "lm_loss", "embed_out", "output_projection", "proj_out", "pred_layer",
                           "generator_lm_head", "generator_predictions", "discriminator_predictions",
                           "sequence_summary", "logits_proj"})
_NORM_CLASS = re.compile(r"(LayerNorm|RMSNorm|GroupNorm)")
_NORM_NAME = re.compile(r"^(.*layer_?norm.*|ln_?\w*|.*_ln|norm\w*|.*_norm)$")
# Matched within a segment; "ff" only as a whole segment or its "_ff" end, since "ff" inside a word ("offset") is no FFN.
_FFN_SEGMENT = re.compile(r"(mlp|ffn|intermediate|feed_forward|densereludense|densegatedactdense|moe|expert|^ff$|_ff$)")
# A norm inside an attention or FFN module named only as a norm: the sub-layer's norm of the residual stream (rule 3).
_RESIDUAL_NORM = frozenset({"layernorm", "layer_norm", "norm", "ln"})
_FFN_LAYER = re.compile(r"^fc_?[12]$")


@dataclass(frozen=True)
class Component:
    name: str  # "block.3.attention", "embeddings", "head"
    type: str  # one of TYPES
    block: int | None
    # Names (as model.named_modules() gives them) of the parameterised modules it owns.
    modules: tuple[str, ...]
    # The submodules replay calls and attribution hooks; see the module docstring.
    roots: tuple[str, ...]


def _block_end(model: nn.Module, name: str) -> int | None:
    """How many of ``name``'s segments name its block's module (the name up to the block's number), or None outside
    every block: see the module docstring."""
    segments = name.split(".")
    for i, segment in enumerate(segments):
        if segment.isdigit() and (next(model.get_submodule(".".join(segments[: i + 1])).children(), None) is not None
                                  or _beside_attentions(model, segments[:i])):
            return i + 1
    return None


def _beside_attentions(model: nn.Module, held_by: list[str]) -> bool:
    """Whether the list ``held_by`` names stands beside a list of as many attention modules: a stack kept as parallel
    lists, one entry per block (XLM's and FlauBERT's ``layer_norm1`` beside ``attentions``), whose bare layers are
    their blocks'. Their norms were one block-less layer norm of every block's."""
    if not held_by:
        return False
    holder = model.get_submodule(".".join(held_by[:-1]))
    own = holder.get_submodule(held_by[-1])
    return isinstance(own, nn.ModuleList) and any(
        isinstance(other, nn.ModuleList) and len(other) == len(own) and _names_attention(name.lower())
        for name, other in holder.named_children() if name != held_by[-1]
    )


def _names_attention(segment: str) -> bool:
    return "attn" in segment or "attention" in segment


def _branch_holding(segments: list[str], residual: bool = True) -> str | None:
    """"attention" or "ffn": the type of the nearest module above this one that rule 4 or 5 names by its segment,
    if that holds it as part of its branch, not as its norm of the residual stream (rule 3; ``residual`` false: a
    gated norm, which is never that); else None."""
    for i in range(len(segments) - 2, -1, -1):
        kind = "attention" if _names_attention(segments[i]) else "ffn" if _FFN_SEGMENT.search(segments[i]) else None
        if kind is not None:
            return None if residual and _RESIDUAL_NORM.intersection(segments[i + 1:]) else kind
    return None


def classify(name: str, module: nn.Module, in_block: bool) -> str:
    """The type of one parameterised module, by the rules in this module's docstring; ``in_block``: whether it sits
    in a numbered block (``_block_end``), which rules 1, 2 and 5 read."""
    segments = name.lower().split(".")
    attention = any(_names_attention(s) for s in segments)
    # A table inside an attention module is its own (T5's bias, under SelfAttention); one named for attention outside
    # any (MPNet's encoder.relative_attention_bias, looked up once for every block) is an embedding, not a branch.
    inside_attention = any(_names_attention(s) for s in segments[:-1])
    if segments[0] in HEAD_SEGMENTS or "pooler" in segments or (segments[-1] == "project_out" and not in_block):
        return "head"
    if (isinstance(module, nn.Embedding) and not inside_attention) or any("embed" in s or s in ("wte", "wpe") for s in segments) \
            or (segments[-1] == "project_in" and not in_block):
        return "embeddings"
    if _NORM_CLASS.search(type(module).__name__) or _NORM_NAME.match(segments[-1]):
        if "Gated" in type(module).__name__:  # inside its module's forward, before the output projection
            return _branch_holding(segments, residual=False) or "other"
        return _branch_holding(segments) or "layer_norm"
    if attention:
        return "attention"
    if in_block and "bottleneck" in segments:  # the block's own projections around its sub-layers (MobileBERT)
        return "other"
    if any(_FFN_SEGMENT.search(s) for s in segments) or (in_block and ("output" in segments or _FFN_LAYER.match(segments[-1]))):
        return "ffn"
    return "other"


def _parameterised(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(n, m) for n, m in model.named_modules() if next(m.parameters(recurse=False), None) is not None]


def _roots(model: nn.Module, owner: dict[str, str]) -> dict[str, list[str]]:
    """Component name -> its roots, found top-down: the first module whose parameterised
    descendants (itself included) all belong to one component is that component's root."""
    roots: dict[str, list[str]] = {}

    def visit(name: str, module: nn.Module) -> None:
        owners = {owner[".".join(p for p in (name, n) if p)] for n, m in _parameterised(module)}
        if not owners:
            return
        # A ModuleList or ModuleDict is never called (its holder iterates it): as a root its hooks never fired, and its
        # component's work went unmeasured and unsaid (Gemma 3n's altup projections); its members are the roots.
        if len(owners) == 1 and not isinstance(module, (nn.ModuleList, nn.ModuleDict)):
            roots.setdefault(owners.pop(), []).append(name)
            return
        for child, sub in module.named_children():
            visit(f"{name}.{child}" if name else child, sub)

    visit("", model)
    return roots


def find_components(model: nn.Module) -> list[Component]:
    """Every parameterised module of ``model`` in exactly one component, in module order.

    A module with parameters of its own and children of other components (rare: a custom
    block holding a bare ``nn.Parameter``) is listed in its component but is no root,
    since calling it would run the others too; its own work is then in no component's time.
    """
    owner: dict[str, str] = {}
    members: dict[str, tuple[str, int | None, list[str]]] = {}
    for name, module in _parameterised(model):
        end = _block_end(model, name)
        kind = classify(name, module, end is not None)
        block = int(name.split(".")[end - 1]) if end is not None and kind not in ("embeddings", "head") else None
        component = f"block.{block}.{kind}" if block is not None else kind
        owner[name] = component
        members.setdefault(component, (kind, block, []))[2].append(name)
    roots = _roots(model, owner)
    return [
        Component(name=c, type=kind, block=block, modules=tuple(names), roots=tuple(roots.get(c, ())))
        for c, (kind, block, names) in members.items()
    ]


def unmeasured(components: list[Component]) -> dict[str, str]:
    """Component name -> why part of its work is measured by no hook: no root at all (every cell of it is empty), or
    members with parameters of their own under none of its roots (a module that also holds another component's
    module: its own work runs in no root, so the component's time and energy miss it and its block's own ops hold
    it)."""
    said: dict[str, str] = {}
    for c in components:
        if not c.roots:
            said[c.name] = "no root: its FLOPs, time, energy and share are empty"
        elif outside := [m for m in c.modules if not any(m == r or m.startswith(f"{r}.") for r in c.roots)]:
            said[c.name] = f"{', '.join(outside)} under none of its roots: its figures leave out their own work"
    return said


def _holders(components: list[Component], model: nn.Module) -> Iterator[tuple[int, str]]:
    """(block, the module holding it: its name up to its block's number) for each numbered component's module."""
    for component in components:
        if component.block is None:
            continue
        for name in component.modules:
            if (end := _block_end(model, name)) is not None:
                yield component.block, ".".join(name.split(".")[:end])


def _container(model: nn.Module, name: str) -> bool:
    return isinstance(model.get_submodule(name), (nn.ModuleList, nn.ModuleDict))


def find_blocks(components: list[Component], model: nn.Module) -> list[Component]:
    """Each numbered block as a component of type ``block`` whose roots are the modules holding
    it (each module name up to its block's number; two stacks sharing an index, as an
    encoder and a decoder, give a block two roots). Calling them runs the block's components and
    the block's own ops between them, which no component's roots run.

    A module holding a block that is itself a component's root (a block of one component: each
    holding one layer of its own) runs no ops of its own beside that component's, so it is no
    block root: replayed with its components stubbed it would run the stub alone, and profiled it
    would open a second range on the component's module. Nor is a ``ModuleList`` or ``ModuleDict``
    holding it (Funnel's blocks of layers), which no forward calls (``uncalled_blocks``). A block
    left with no root is no block."""
    component_roots = {root for c in components for root in c.roots}
    roots: dict[int, dict[str, None]] = {}
    for block, holder in _holders(components, model):
        if holder not in component_roots and not _container(model, holder):
            roots.setdefault(block, {})[holder] = None
    return [
        Component(f"block.{b}", "block", b, tuple(m for c in components if c.block == b for m in c.modules), tuple(r))
        for b, r in roots.items()
    ]


def uncalled_blocks(components: list[Component], model: nn.Module) -> list[int]:
    """The numbered blocks held by a ``ModuleList`` or ``ModuleDict``, which no forward calls: their own ops (residual
    adds) cannot be measured apart, and read as not measured, never as 0."""
    return sorted({block for block, holder in _holders(components, model) if _container(model, holder)})


def component_params(model: nn.Module, component: Component) -> int:
    """Parameters the component's modules hold; a weight tied to another component (GPT-2's
    LM head and token embedding) counts in both, since both run it."""
    seen: dict[int, int] = {}
    for name in component.modules:
        for p in model.get_submodule(name).parameters(recurse=False):
            seen[id(p)] = p.numel()
    return sum(seen.values())




@contextmanager
def around_roots(
    model: nn.Module,
    components: list[Component],
    enter: Callable[[Component, str, tuple, dict], None],
    leave: Callable[[Component, str], None] | None = None,
) -> Iterator[None]:
    """Call ``enter(component, root, args, kwargs)`` before and ``leave(component, root)`` after
    every call of every root while the context is open: how capture, the profiler ranges
    and the FLOP counter see one component at a time. Hooks are removed on exit."""
    handles = []
    for component in components:
        for root in component.roots:
            module = model.get_submodule(root)

            def pre(_: nn.Module, args: tuple, kwargs: dict, c: Component = component, r: str = root) -> None:
                enter(c, r, args, kwargs)

            handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
            if leave is not None:
                handles.append(module.register_forward_hook(lambda *_, c=component, r=root: leave(c, r)))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


__all__ = ["TYPES", "Component", "around_roots", "classify", "component_params", "find_blocks", "find_components"]
