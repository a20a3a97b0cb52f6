"""Replay: a component run alone on its real inputs, many times, so the sensor can see it.

One component's forward pass lasts micro- to milliseconds; an H100's energy counter
updates about every 100 ms. CLEAR's answer ("amplification", arXiv 2510.02810): capture
each component's inputs from one real forward pass (forward pre-hooks on its roots, args
and kwargs such as attention masks, at the run's shape and precision), then call the
component on them back to back inside a measurement window lasting seconds, and divide
by the number of calls.

To keep the number of windows small, all components of one type are replayed in one
window (one replay pass = every component of the type once, i.e. what one forward pass
runs of that type); the type's energy per pass is then split among its components by
each one's replay time, measured alone just before (which also warms the replay up).

With ``graphs`` on a GPU, each replay sequence (a type's, a component's alone) is captured
as a CUDA graph outside the window and the window replays the graph (eaq.measure.graphs):
a component replayed alone launches few, short kernels, so eagerly it measures the host's
launch rate more than the GPU (attention of DistilBERT-base at batch 64 on an H100: 1.1-1.4 ms
replayed eagerly vs 0.54 ms inside the model). What cannot be captured replays eagerly, and says why.

A block's own ops (the residual adds between its components) belong to no component's roots. They
are replayed directly: the block is called on its captured inputs with each of its components'
roots ``stubbed`` to return the output it returned in the captured pass, so the replay runs the
block's own ops and nothing else. (Measured as the block replayed whole minus its components, the
difference of two windows, they spread 16-22% between trials on the H100 in bf16 and 96-994% in fp8,
at times below zero: 2026-11-25-h100-layers.)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils._pytree import tree_leaves, tree_map
from transformers.cache_utils import Cache

from eaq.layers.components import Component, around_roots
from eaq.measure.graphs import Step, as_graph
from eaq.measure.samplers import Sampler
from eaq.measure.stats import LatencyStats
from eaq.measure.timing import run_timed
from eaq.measure.window import MeasurementWindow, WindowResult
from eaq.models.masks import eager_mask_decisions


@dataclass(frozen=True)
class Call:
    """One call of a component's root in the captured forward pass."""

    root: str
    args: tuple
    kwargs: dict


def _detach(value: object) -> object:
    """Inputs are cloned: a later module may change a tensor in place after the root read it.
    A KV cache becomes None: replaying must not grow it, and one full-sequence pass never reads it
    (task=layers runs its passes without one, so that the pass measured whole does the same work:
    eaq.layers.energy.without_cache)."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    return None if isinstance(value, Cache) else value


def capture(model: nn.Module, components: list[Component], forward: Callable[[], object]) -> dict[str, list[Call]]:
    """Component name -> its root calls, in order, from one real pass of ``forward``."""
    calls: dict[str, list[Call]] = {c.name: [] for c in components}

    def record(component: Component, root: str, args: tuple, kwargs: dict) -> None:
        calls[component.name].append(Call(root, tree_map(_detach, args), tree_map(_detach, kwargs)))

    with torch.inference_mode(), around_roots(model, components, record):
        forward()
    return calls


@contextmanager
def recording_outputs(model: nn.Module, components: list[Component], outputs: dict[str, list[object]]) -> Iterator[None]:
    """While open, append every output of the components' roots to ``outputs[root]``, in call order
    (cloned, as ``capture``'s inputs): what ``stubbed`` returns in their place. A module reached by
    two root names (a layer shared between blocks) is recorded once, under the first."""
    handles = []
    hooked: set[int] = set()
    for root in dict.fromkeys(r for c in components for r in c.roots):
        module = model.get_submodule(root)
        if id(module) in hooked:
            continue
        hooked.add(id(module))
        outputs[root] = []
        handles.append(module.register_forward_hook(lambda _m, _a, out, r=root: outputs[r].append(tree_map(_detach, out))))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def stubbed(model: nn.Module, outputs: dict[str, list[object]]) -> Iterator[None]:
    """While open, each root in ``outputs`` computes nothing and returns its recorded outputs in turn.
    A module called several times per pass returns its outputs in the order it returned them.

    The same tensors come back at every call, so the ops around a stub must not change them in place
    (``h += residual``): their values would drift over thousands of replays, and power depends on the
    data. The blocks of BERT, DistilBERT, GPT-2 and Llama add out of place; Falcon's parallel-attention block does
    not, and its run is flagged (``fingerprints``, eaq.layers.energy). A ``forward`` set on the instance before (a
    wrapper's) is put back on exit."""
    saved = {}
    try:
        for root, values in outputs.items():
            module = model.get_submodule(root)
            saved[root] = (module, module.__dict__.get("forward"))
            turns = itertools.cycle(values)
            module.forward = lambda *_args, _turns=turns, **_kwargs: next(_turns)
        yield
    finally:
        for module, before in reversed(list(saved.values())):
            if before is None:
                del module.forward
            else:
                module.forward = before


def fingerprints(outputs: dict[str, list[object]]) -> list[str]:
    """Each tensor the stubs return, summed in float64 (as text, so that a NaN reads equal to itself): whether replaying
    the blocks around them changed one in place, as Falcon's parallel-attention block adds its attention output into
    its MLP's (``stubbed``). Read outside every window: each sum waits for the device."""
    return [repr(float(t.detach().double().sum())) for values in outputs.values() for value in values
            for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


def replay(model: nn.Module, calls: Sequence[Call]) -> list[object]:
    """Run the captured calls once, in order; their outputs (what the test compares)."""
    return [model.get_submodule(call.root)(*call.args, **call.kwargs) for call in calls]


def graphed(fn: Callable[[], object], device: torch.device, enabled: bool) -> Step:
    """``fn`` as a CUDA graph (eaq.measure.graphs) that runs what ``fn`` runs eagerly.

    Every energy here is compared with eager passes (the captured inputs, attribution's
    profile), so the graph must record the eager computation: transformers up to 5.17 builds
    an attention mask while a stream is capturing, and none eagerly (eaq.models.masks)."""
    with eager_mask_decisions():
        return as_graph(fn, device, enabled)


def time_alone(
    model: nn.Module, calls: Sequence[Call], device: torch.device, iters: int, min_s: float, graphs: bool = False
) -> tuple[float, str | None]:
    """Median seconds of one replay pass of ``calls``, outside any window (no energy read), and
    why it ran eagerly (None: graphed)."""
    step = graphed(lambda: replay(model, calls), device, graphs)
    latencies = run_timed(lambda _: step.run(), [None], device, iters, min_s, label="replay timing")
    return LatencyStats.from_seconds(latencies).p50_ms / 1e3, step.reason


def metered(step: Callable[[], object], device: torch.device, sampler: Sampler, iters: int, min_s: float) -> WindowResult:
    """``step`` repeated inside one measurement window (at least ``iters`` times and ``min_s`` seconds)."""
    with MeasurementWindow(device, sampler) as window:
        window.iterations = len(run_timed(lambda _: step(), [None], device, iters, min_s, label="window"))
    assert window.result is not None
    return window.result


@dataclass(frozen=True)
class TypeReplay:
    """One type's replay window and its components' replay times (seconds per pass, alone)."""

    type: str
    window: WindowResult
    seconds_alone: dict[str, float]
    # What replayed eagerly, and why: "replay <type>" or "<component> alone" -> reason.
    eager: dict[str, str] = field(default_factory=dict)


def replay_by_type(
    model: nn.Module,
    components: list[Component],
    calls: dict[str, list[Call]],
    device: torch.device,
    sampler: Sampler,
    iters: int,
    min_s: float,
    graphs: bool = False,
) -> list[TypeReplay]:
    """Per type present: time each component's replay alone, then replay them all in one window.

    The sampler must be running; graphs are captured between windows, never inside one.
    Components with no captured call (a root the forward pass never ran) are left out and
    get no replay figure.
    """
    results = []
    types = dict.fromkeys(c.type for c in components if calls.get(c.name))
    for kind in types:
        members = [c for c in components if c.type == kind and calls.get(c.name)]
        alone: dict[str, float] = {}
        eager: dict[str, str] = {}
        for c in members:
            # A thirtieth of a replay window (0.1 s of 3 s): hundreds of passes of one component, enough
            # for a stable median; it only splits the type's measured energy among its components.
            alone[c.name], reason = time_alone(model, calls[c.name], device, iters, min_s / 30, graphs)
            eager |= {f"{c.name} alone": reason} if reason else {}
        together = [call for c in members for call in calls[c.name]]
        step = graphed(lambda: replay(model, together), device, graphs)
        eager |= {f"replay {kind}": step.reason} if step.reason else {}
        window = metered(step.run, device, sampler, iters, min_s)
        results.append(TypeReplay(kind, window, alone, eager))
    return results


__all__ = ["Call", "TypeReplay", "capture", "graphed", "metered", "recording_outputs", "replay", "replay_by_type", "stubbed",
           "time_alone"]
