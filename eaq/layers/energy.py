"""Energy per component by both methods, from one sampler session.

Order: capture the components' inputs and profile their in-situ times (no sampler
reads: both perturb nothing measured); then, with the sampler running, the idle
baseline (the benchmark's, reused while it stands: eaq.measure.idle), a warm-up (with a
sensor, until latency and power settle, as the benchmark's), the whole-model window
(attribution's energy), and one replay window per component type. Every window's energy is read from the trace after the sampler stops. Energy
figures are per forward pass, total and net of the idle baseline (its power times the
time per pass); where no sensor exists they are None, never 0.

Work outside every component is its own entry (``OutsideWork``), by both methods:

- ``block_ops``, measured: each numbered block (eaq.layers.components.find_blocks) replayed with
  its components stubbed (eaq.layers.replay.stubbed), so the window runs the block's own ops
  alone; for attribution, the profiled time inside blocks but outside their components. The
  residual adds and masks a block's own ``forward`` runs.
- ``model_glue``, a remainder: the whole pass minus every component minus the block ops. Not a
  measurement of its own: it holds the model's own ops (mask preparation) and whatever the other
  figures miss.

So the capture ratio comes twice: components only (``layers_capture_ratio_<method>``), and
with the blocks' own ops (``..._with_blocks`` = (components + block ops) / whole pass = 1 - glue
/ whole). Both are measurements; adding the glue would give 1 by construction, so no ratio
includes it.

With ``Settings.cuda_graphs`` on a GPU, the whole-model pass and every replay sequence run as
CUDA graphs captured outside the windows (eaq.measure.graphs), so the GPU, not the host's
launch rate, sets their time; attribution's profiled pass stays eager (the same kernels: while
capturing, transformers' mask helpers decide as in an eager pass, eaq.models.masks). A graphed
whole pass far slower than the eager kernels makes the run invalid (``_graph_mismatch``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from eaq.layers.attribution import OUTSIDE, PassTimes, profile_times, split
from eaq.layers.components import Component, find_blocks, uncalled_blocks
from eaq.layers.replay import capture, fingerprints, graphed, metered, recording_outputs, replay_by_type, stubbed
from eaq.measure.energy import PRIMARY_CHANNELS, WindowEnergy, energy_metrics, window_energy
from eaq.measure.idle import ReusePolicy, idle_baseline
from eaq.measure.samplers import Sampler, measures_energy, wait_for_sample
from eaq.measure.validity import check
from eaq.measure.warmup import WarmupResult, warm_up
from eaq.measure.window import WindowResult

log = logging.getLogger(__name__)

# A graphed whole pass slower than this times its eager kernels' time runs other work (see _graph_mismatch).
GRAPH_SLOWER_LIMIT = 1.3


@dataclass(frozen=True)
class Settings:
    iters: int  # passes in the whole-model window, at least
    min_window_s: float  # seconds of the whole-model window, at least
    idle_s: float  # idle baseline; 0 for none
    warmup_iters: int
    replay_iters: int  # passes per replay window, at least
    replay_min_s: float  # seconds per replay window, at least (the sensor needs seconds to see a component)
    profile_passes: int = 3
    warmup_max_s: float = 10.0  # settling stops after this long, settled or not
    cuda_graphs: bool = False  # replay CUDA graphs of the whole pass and the replay sequences (GPU only)
    warmup_rule: str = "trend"  # how settled is judged (eaq.measure.warmup.RULES)
    # Where the device's idle baseline is kept and when it still stands, shared with the
    # benchmark's runs (eaq.measure.idle); None: measure one, keep nothing.
    idle_store: tuple[Path, ReusePolicy] | None = None


BLOCK_OPS, MODEL_GLUE = "block_ops", "model_glue"
# How each entry of OutsideWork is obtained (layers/outside.csv's basis column).
OUTSIDE_BASIS = {
    BLOCK_OPS: "measured: blocks replayed with their components stubbed (their own ops alone); attribution: "
               "profiled time inside blocks outside their components",
    MODEL_GLUE: "remainder: whole pass minus every component minus the block ops; not a measurement of its own",
}


@dataclass(frozen=True)
class OutsideWork:
    """Per pass, for BLOCK_OPS and MODEL_GLUE: seconds and joules by each method (None: not measured)."""

    time_s: dict[str, float | None]
    replay_j: dict[str, float | None]
    replay_net_j: dict[str, float | None]
    attribution_j: dict[str, float | None]
    attribution_net_j: dict[str, float | None]


def _outside(parts: dict[str, float | None], block_ops: float | None, whole: float | None) -> dict[str, float | None]:
    """{BLOCK_OPS, MODEL_GLUE} from per-component figures, the blocks' own ops and the whole pass's.

    ``parts`` may carry attribution's OUTSIDE entry (``split`` with a total adds it: the whole pass's
    energy beyond the parts): it is the block ops and the glue together, so it is left out here."""
    values = [v for k, v in parts.items() if k != OUTSIDE]
    if whole is None or block_ops is None or any(v is None for v in values):
        return {BLOCK_OPS: None, MODEL_GLUE: None}
    return {BLOCK_OPS: block_ops, MODEL_GLUE: whole - block_ops - sum(values)}  # type: ignore[arg-type]


def _summed(values: dict[str, float | None]) -> float | None:
    return None if any(v is None for v in values.values()) else sum(values.values())  # type: ignore[arg-type]


@dataclass
class ComponentEnergy:
    """Per component (by name): in-situ time, and energy per pass by each method (J, or None)."""

    times: PassTimes
    whole_s_per_pass: float
    # The whole-model window's joules per pass, total and net of idle (None: not measured).
    whole_j: float | None = None
    whole_net_j: float | None = None
    # Seconds per pass of each component replayed alone (the split within its type).
    replay_alone_s: dict[str, float] = field(default_factory=dict)
    replay_j: dict[str, float | None] = field(default_factory=dict)
    replay_net_j: dict[str, float | None] = field(default_factory=dict)
    attribution_j: dict[str, float | None] = field(default_factory=dict)
    attribution_net_j: dict[str, float | None] = field(default_factory=dict)
    outside: OutsideWork | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)


def _per_pass(energy: WindowEnergy, result: WindowResult, idle_w: float | None) -> tuple[float | None, float | None]:
    """(Total, net of idle) joules per pass of a window; None where not measured."""
    if energy.energy_j is None:
        return None, None
    net = energy.energy_j - idle_w * result.duration_s if idle_w is not None else None
    return energy.energy_j / result.iterations, net / result.iterations if net is not None else None


def _split_or_none(joules: float | None, seconds: dict[str, float], total_s: float | None = None) -> dict[str, float | None]:
    return split(joules, seconds, total_s) if joules is not None else dict.fromkeys(seconds)


def _ratio(parts: dict[str, float | None], whole: float | None) -> float | None:
    values = [v for k, v in parts.items() if k != OUTSIDE]
    if whole is None or not values or any(v is None for v in values):
        return None
    return sum(values) / whole  # type: ignore[arg-type]


def _mean_power(sampler: Sampler, t0: float, t1: float) -> float | None:
    trace = sampler.trace  # drains the polling process once, outside any window
    channel = next((ch for ch in PRIMARY_CHANNELS if ch in trace.channels), None)
    return trace.stats_w(channel, t0, t1).get("mean") if channel else None


def without_full_mask(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``batch`` without its attention mask when the mask masks nothing (all ones: no padding).

    Hugging Face models check such a mask's values on the host to skip it (and run the flash
    kernel), but not while a CUDA graph is being captured (the check would sync): given the
    mask, the graphed pass would build it and run another attention kernel than the eager
    passes that capture replay inputs and profile attribution. Without it, every pass takes
    the same path. The check runs here once, outside every window."""
    mask = batch.get("attention_mask")
    if mask is None or not bool(mask.all()):
        return batch
    return {k: v for k, v in batch.items() if k != "attention_mask"}


def without_cache(model: nn.Module, batch: dict[str, torch.Tensor]) -> dict[str, object]:
    """``batch`` with ``use_cache=False`` where the model's forward takes it and its config turns it on.

    A causal LM keeps a KV cache by default: each attention copies its keys and values into it,
    and one full-sequence pass never reads them. Replay gives every component no cache (it must
    not grow one: eaq.layers.replay), so with the cache on, attention in the whole pass and in
    attribution's profile runs copies that its replay does not: on the 2026-11-24 H100 run,
    GPT-2-small's attention took 1.98 ms per pass in situ against 1.09 ms replayed (bf16) and
    3.73 vs 2.91 ms (fp8), about 0.85 ms of the 14.4 and 20.8 ms of kernels (on a CPU, the cache's
    two copies are the only operations attention runs in situ and not replayed), and fp8's replay
    capture came out at 0.92. Without the cache, every pass runs the components' work only.
    Encoders that take the flag (BERT) build no cache either way; models whose forward does not
    take it are left as they are."""
    takes = "use_cache" in inspect.signature(model.forward).parameters
    if not (takes and getattr(getattr(model, "config", None), "use_cache", False)):
        return batch
    return batch | {"use_cache": False}


def _graph_mismatch(graphed: bool, graph_s: float, kernels_s: float) -> list[str]:
    """Why the whole-model window may not measure the eager computation: its graph far slower than
    the eager pass's kernels.

    A graph replays the kernels back to back, so its time per pass is the kernels' and small
    launch gaps; attribution's profile and the replays' inputs come from eager passes. A graph
    much slower than those kernels recorded other work: on the 2026-11-24 H100 run, DistilBERT's
    graph took 5.18 ms against 1.87 ms of eager kernels (transformers 5.17 built an attention mask
    only while capturing: eaq.models.masks), which went unnoticed for a day behind a replay capture
    of 0.39. Passes of a few microsecond-long kernels (tiny models, batch 1) can come near the
    limit on launch gaps alone; the reason gives both times so that a reader can judge."""
    if not graphed or kernels_s <= 0 or graph_s <= GRAPH_SLOWER_LIMIT * kernels_s:
        return []
    reason = (f"whole model: its CUDA graph took {graph_s * 1e3:.3f} ms per pass against {kernels_s * 1e3:.3f} ms of the "
              f"eager pass's kernels ({graph_s / kernels_s:.2f}x, above {GRAPH_SLOWER_LIMIT}x): the graph runs other work "
              "than the eager passes that replay and attribution measure (compare their kernels: "
              "docs/results/2026-11-24-h100-layers/diag.py), so the capture ratios compare different computations")
    log.warning(reason)
    return [reason]


def _profile_slowing(device: torch.device, times: PassTimes, window_s: float) -> list[str]:
    """On a CPU, where the profiled pass ran slower than the window's: how much, since attribution's split is that pass's.

    A CPU's profiler does its bookkeeping on the host that runs the ops, with every op, which weighs most on short
    ops: the components' times and the shares split by them lean towards components of many short ops (bert-tiny-random
    at 2x8 tokens, one thread: passes of 0.9-1.1 ms profiled against 0.65 ms unprofiled). And the profiled passes are
    few, so a busy host's delays weigh on them whole: with two intra-op threads on two cores at a load average of 5-7,
    a 4x8 layer norm took 10 ms a call instead of 13 us with one thread (waiting for its other thread, descheduled),
    and bert-tiny-random's embeddings (batch 32 x 128) 13.5 ms a pass in a profile against 0.28 ms replayed alone (a
    median). The warning goes to the log, and with energy measured to eaq.valid.notes. A GPU's kernel times hold none
    of it, and a graphed window is checked against them instead (``_graph_mismatch``)."""
    if device.type == "cuda" or times.host_s <= window_s:
        return []
    note = (f"attribution: the profiled pass took {times.host_s * 1e3:.3f} ms against {window_s * 1e3:.3f} ms per pass in the "
            f"window ({times.host_s / window_s:.2f}x): on a CPU the profiler's bookkeeping with every op (short ones the most) "
            "or other work on the host slowed it, so the components' times and the shares split by them are approximate")
    log.warning(note)
    return [note]


def _graphs_tag(enabled: bool, eager: dict[str, str], total: int) -> str:
    """What ran as CUDA graphs, and what ran eagerly with the reason, for the tag eaq.layers.cuda_graphs."""
    if not enabled:
        return "off (layers.cuda_graphs=false): every window ran eagerly"
    if not eager:
        return "on: the whole-model pass, every type's replay and every component alone ran as CUDA graphs"
    by_reason: dict[str, list[str]] = {}
    for label, reason in eager.items():
        by_reason.setdefault(reason, []).append(label)
    return "eager where not graphed: " + "; ".join(
        f"{reason} ({len(labels)} of {total}: {', '.join(labels[:3])}{', ...' if len(labels) > 3 else ''})"
        for reason, labels in by_reason.items())


def measure_components(
    model: nn.Module,
    components: list[Component],
    forward: Callable[[], object],
    device: torch.device,
    sampler: Sampler,
    settings: Settings,
    samples_per_pass: int,
) -> ComponentEnergy:
    """Both methods for every component, on the model as it is (the run's precision applied)."""
    blocks = find_blocks(components, model)
    uncalled = uncalled_blocks(components, model)
    outputs: dict[str, list[object]] = {}  # what the blocks' components return, for their stubs
    with recording_outputs(model, [c for c in components if c.block is not None], outputs):
        calls = capture(model, [*components, *blocks], forward)
    times = profile_times(model, components, forward, device, settings.profile_passes, blocks)
    whole_step = graphed(forward, device, settings.cuda_graphs)
    recorded = fingerprints(outputs)
    measuring = measures_energy(sampler)
    sampler.start()
    try:
        wait_for_sample(sampler)  # the trace starts before the idle window
        idle, _, idle_tags = idle_baseline(device, sampler, settings.idle_s, settings.idle_store)
        warm = _warm_up(whole_step.run, device, sampler, settings, measuring)
        whole = metered(whole_step.run, device, sampler, settings.iters, settings.min_window_s)
        replays = replay_by_type(model, components, calls, device, sampler, settings.replay_iters,
                                 settings.replay_min_s, settings.cuda_graphs)
        with stubbed(model, outputs):  # the blocks' own ops alone
            replays += replay_by_type(model, blocks, calls, device, sampler, settings.replay_iters,
                                      settings.replay_min_s, settings.cuda_graphs)
        wait_for_sample(sampler)  # ... and ends after the last window
    finally:
        trace = sampler.stop()

    def energy_of(result: WindowResult) -> WindowEnergy:
        return window_energy(sampler.name, trace, result.t0, result.t1, result.counter_j)

    whole_energy = energy_of(whole)
    idle_w = idle.power_w if idle is not None else None
    whole_j, whole_net_j = _per_pass(whole_energy, whole, idle_w)
    found = ComponentEnergy(times, whole.duration_s / whole.iterations, whole_j, whole_net_j)
    found.attribution_j = _split_or_none(whole_j, times.components, times.whole_s)
    found.attribution_net_j = _split_or_none(whole_net_j, times.components, times.whole_s)
    whole_check = check(whole, whole_energy, idle_w, settings.min_window_s)
    reasons = [f"whole model: {r}" for r in whole_check.reasons]
    notes = [f"whole model: {n}" for n in whole_check.notes]
    reasons += _graph_mismatch(whole_step.reason is None, found.whole_s_per_pass, times.whole_s)
    if fingerprints(outputs) != recorded:  # the stubs hand out the same tensors: the blocks' ops drifted their values
        reasons.append("replay block: a block changed its components' recorded outputs in place while replayed with "
                       "them stubbed (an in-place add into a component's output, as Falcon's parallel attention makes): "
                       "the blocks' own ops ran on drifting values")
    block_j: dict[str, float | None] = {}
    block_net_j: dict[str, float | None] = {}
    eager = {"whole model": whole_step.reason} if whole_step.reason else {}
    for replayed in replays:
        energy = energy_of(replayed.window)
        total, net = _per_pass(energy, replayed.window, idle_w)
        is_block = replayed.type == "block"
        if not is_block:
            found.replay_alone_s |= replayed.seconds_alone
        (block_j if is_block else found.replay_j).update(_split_or_none(total, replayed.seconds_alone))
        (block_net_j if is_block else found.replay_net_j).update(_split_or_none(net, replayed.seconds_alone))
        eager |= replayed.eager
        replay_check = check(replayed.window, energy, idle_w, settings.replay_min_s)
        reasons += [f"replay {replayed.type}: {r}" for r in replay_check.reasons]
        notes += [f"replay {replayed.type}: {n}" for n in replay_check.notes]
    notes += _profile_slowing(device, times, found.whole_s_per_pass)
    # The blocks' own ops (each block's range less its components'); not measured where a block has no callable holder.
    block_s = None if uncalled else sum(times.blocks.values())

    def profiled(parts: dict[str, float | None], joules: float | None) -> dict[str, float | None]:
        return _outside(parts, joules * block_s / times.whole_s if joules is not None and block_s is not None else None, joules)

    found.outside = OutsideWork(
        time_s=_outside(times.components, block_s, times.whole_s),
        replay_j=_outside(found.replay_j, None if uncalled else _summed(block_j), whole_j),
        replay_net_j=_outside(found.replay_net_j, None if uncalled else _summed(block_net_j), whole_net_j),
        attribution_j=profiled(found.attribution_j, whole_j),
        attribution_net_j=profiled(found.attribution_net_j, whole_net_j),
    )
    found.metrics = {
        "layers_whole_model_time_ms": found.whole_s_per_pass * 1e3,
        "layers_kernel_time_ms": times.whole_s * 1e3,
        "layers_time_capture_ratio": times.captured,
        **energy_metrics(whole_energy, idle_w, whole.duration_s, whole.iterations * samples_per_pass),
    }
    glue = found.outside
    ratios = {
        "layers_capture_ratio_replay": _ratio(found.replay_j, whole_j),
        "layers_capture_ratio_attribution": _ratio(found.attribution_j, whole_j),
        "layers_capture_ratio_replay_net": _ratio(found.replay_net_j, whole_net_j),
        "layers_capture_ratio_attribution_net": _ratio(found.attribution_net_j, whole_net_j),
        "layers_time_capture_ratio_with_blocks": _with_blocks(glue.time_s, times.whole_s),
        "layers_capture_ratio_replay_with_blocks": _with_blocks(glue.replay_j, whole_j),
        "layers_capture_ratio_attribution_with_blocks": _with_blocks(glue.attribution_j, whole_j),
        "layers_block_ops_time_ms": milli(glue.time_s[BLOCK_OPS]),
        "layers_model_glue_time_ms": milli(glue.time_s[MODEL_GLUE]),
        "layers_block_ops_replay_mj": milli(glue.replay_j[BLOCK_OPS]),
        "layers_model_glue_replay_mj": milli(glue.replay_j[MODEL_GLUE]),
        "layers_block_ops_attribution_mj": milli(glue.attribution_j[BLOCK_OPS]),
        "layers_model_glue_attribution_mj": milli(glue.attribution_j[MODEL_GLUE]),
    }
    found.metrics |= {k: v for k, v in ratios.items() if v is not None}
    found.metrics |= {"warmup_iterations": warm.iterations, "warmup_duration_s": warm.duration_s}
    found.tags = {
        "eaq.energy": whole_energy.status,
        "eaq.energy.sampler": whole_energy.sampler,
        "eaq.warmup.settled": str(warm.settled).lower() if warm.settled is not None else "not asked",
        "eaq.layers.cuda_graphs": _graphs_tag(settings.cuda_graphs, eager,
                                              1 + len(replays) + sum(len(r.seconds_alone) for r in replays)),
        **idle_tags,
        **({"eaq.layers.block_ops": f"not measured: block(s) {', '.join(map(str, uncalled))} are held by a ModuleList "
                                    "or ModuleDict, which no forward calls"} if uncalled else {}),
    }
    if whole_energy.energy_j is None:
        found.tags["eaq.energy.reason"] = whole_energy.reason
    else:
        found.tags["eaq.energy.source"] = whole_energy.source
    # Without energy the windows' checks give no reasons, but a graph that ran other work than the eager passes
    # still makes the times (and the time capture ratio) compare different computations: a verdict, as the
    # benchmark records one wherever a reason was found (eaq.tasks.benchmark.energy_record).
    if whole_energy.energy_j is not None or reasons:
        found.tags["eaq.valid"] = str(not reasons).lower()
        found.tags |= {"eaq.valid.reasons": "; ".join(reasons)} if reasons else {}
        found.tags |= {"eaq.valid.notes": "; ".join(notes)} if notes else {}
    return found


@dataclass(frozen=True)
class PassCost:
    """One whole pass measured in its own window: seconds and joules per pass (None without a sensor)."""

    seconds: float
    joules: float | None
    # Why the window is not to be trusted (eaq.measure.validity); empty: valid or no energy.
    reasons: tuple[str, ...] = ()
    # What the validity check judged benign (eaq.measure.validity.Validity.notes).
    notes: tuple[str, ...] = ()


def _warm_up(step: Callable[[], object], device: torch.device, sampler: Sampler, settings: Settings, measuring: bool) -> WarmupResult:
    """As the benchmark's: fixed passes, then (with a sensor) until latency and power settle."""
    return warm_up(lambda _: step(), [None], device, settings.warmup_iters, measuring,
                   lambda t0, t1: _mean_power(sampler, t0, t1), settings.warmup_max_s, settings.warmup_rule)


def _built_and_metered(
    build: Callable[[], Callable[[], object]], device: torch.device, sampler: Sampler, settings: Settings, measuring: bool,
) -> tuple[WindowResult, bool | None]:
    """One pass built, warmed up and measured, and whether its warm-up settled; the pass (and the model it
    holds) dies on return, before the next is built."""
    step = build()
    warm = _warm_up(step, device, sampler, settings, measuring)
    return metered(step, device, sampler, settings.iters, settings.min_window_s), warm.settled


def measure_passes(
    builders: dict[str, Callable[[], Callable[[], object]]], device: torch.device, sampler: Sampler, settings: Settings,
) -> dict[str, PassCost]:
    """Each named pass in its own window, one after another in one sampler session.

    A builder returns the pass to measure, ready to run (a model it has compiled and run once,
    say), and is called right before that pass's warm-up, outside every window, so one built
    model at a time is alive: a compiler that resets its caches per model (eaq.tasks.compile)
    then never recompiles one measured earlier. Each warm-up runs the pass until latency and,
    with a sensor, power settle, as the benchmark's; one that does not settle makes the
    pass's figures invalid.
    """
    measuring = measures_energy(sampler)
    windows: dict[str, tuple[WindowResult, bool | None]] = {}
    sampler.start()
    try:
        wait_for_sample(sampler)
        idle, _, idle_tags = idle_baseline(device, sampler, settings.idle_s, settings.idle_store)
        log.info("idle baseline of the passes: %s", idle_tags["eaq.idle"])  # a refused one leaves them no net figures
        for name, build in builders.items():
            windows[name] = _built_and_metered(build, device, sampler, settings, measuring)
        wait_for_sample(sampler)
    finally:
        trace = sampler.stop()
    idle_w = idle.power_w if idle is not None else None
    found = {}
    for name, (window, settled) in windows.items():
        energy = window_energy(sampler.name, trace, window.t0, window.t1, window.counter_j)
        validity = check(window, energy, idle_w, settings.min_window_s)
        found[name] = PassCost(window.duration_s / window.iterations, _per_pass(energy, window, idle_w)[0],
                               (*validity.reasons, *(["warm-up did not settle"] if settled is False else [])), validity.notes)
    return found


def _with_blocks(outside: dict[str, float | None], whole: float | None) -> float | None:
    """(Components + the blocks' own ops) / whole = 1 - glue / whole."""
    glue = outside[MODEL_GLUE]
    return 1 - glue / whole if glue is not None and whole else None


def milli(value: float | None) -> float | None:
    """Seconds or joules as ms or mJ; None stays None (not measured)."""
    return value * 1e3 if value is not None else None


__all__ = ["milli", "without_cache", "without_full_mask", "BLOCK_OPS", "MODEL_GLUE", "OUTSIDE_BASIS", "ComponentEnergy", "OutsideWork", "PassCost", "Settings", "measure_components", "measure_passes"]
