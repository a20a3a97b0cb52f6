"""Each workload's measured windows and the metrics they give; the benchmark task wires them.

``workload=forward``: one window of forward passes (the benchmark runs it, since its warm-up and
CUDA-graph checks are the compiler's); ``forward_metrics`` turns it into latency and energy figures.

``workload=generate``: a prefill window, then a decode window (``measure_generate``, ``generate_metrics``).
The benchmark task loads, applies the precision, computes quality and runs the idle
baseline exactly as for forward passes; only the measured part differs. Prefill and
decode get separate measurement windows, each as long as the protocol's minimum:

- prefill window: the prompt batches prefilled back to back (each into a fresh cache),
  first token picked; per-prefill latency is the time to first token.
- between the windows: one prefill of the first prompt batch, the state decode starts from,
  and the decode warm-up. Over a DynamicCache it first runs one whole sequence, every position
  once: each step meets a key/value length it has not seen, and a library's setup for a new
  shape belongs before the window (cuDNN's attention builds an execution graph per shape,
  reported at tens of ms each; the eager 1.1B bf16 step measured 63-77 ms in the benchmark,
  whose warm-up had seen a few positions, against 22.7 ms after 256 steps in
  docs/results/2026-11-25-h100-diag). A static cache has one shape. Then it warms up until
  settled, as before.
- decode window: decode steps only, cycling over whole sequences of ``new_tokens - 1``
  steps from that same prefilled state, so no prefill work is inside; per-step latency
  from CUDA events on a GPU (no host sync per token) and a wall clock on the CPU, as for
  forward passes. The energy counter is read at the two ends of each window only.

With ``graphs`` (cuda_graphs=true) the whole decode step (the model over its static cache,
the greedy pick, the token's record, the position) is recorded once as one CUDA graph in
warm-up, and every step of the window is one replay: no Python, no dynamo guard, no launch
per kernel between the GPU's steps. A step that cannot be recorded fails the run, naming
cuda_graphs=false: its eager steps must not be measured under a graphed run's name (as
Inductor's skipped graphs fail a forward pass). Without graphs ``decode_graph`` says why
(the tag eaq.decode.cuda_graph).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from eaq.measure.energy import WindowEnergy, energy_metrics, window_energy
from eaq.errors import EaqError
from eaq.measure.graphs import WARMUP_CALLS, as_graph
from eaq.measure.phases import Phases
from eaq.measure.samplers import Sampler
from eaq.measure.stats import latency_metrics
from eaq.measure.timing import run_timed
from eaq.measure.trace import PowerTrace
from eaq.measure.validity import Validity, check
from eaq.measure.warmup import WarmupResult
from eaq.measure.window import MeasurementWindow, WindowResult
from eaq.workloads.generate import Decoder, Generator

# Warm-up of one measured step over its inputs (the benchmark task's settings bound in).
WarmUp = Callable[[Callable[[object], object], Sequence[object]], WarmupResult]


@dataclass(frozen=True)
class GenerateWindows:
    prefill: WindowResult
    prefill_latencies: list[float]
    decode: WindowResult
    decode_latencies: list[float]
    warmups: tuple[WarmupResult, WarmupResult]
    decoder: Decoder
    decode_graph: str | None  # None when every decode step replayed one CUDA graph, else why not (not asked for)

    @property
    def settled(self) -> bool | None:
        """Whether both warm-ups settled (None: settling not asked for): prefill's, straight after the idle baseline,
        is the likelier to stop at trials.warmup_max_s still moving, and decode's alone said nothing of it."""
        asked = [warm.settled for warm in self.warmups if warm.settled is not None]
        return all(asked) if asked else None

    @property
    def start_unix_s(self) -> float:
        """When the run's first window (prefill's) started: the idle baseline both windows are netted of is as old as
        it was then (idle_baseline_age_s), not as at the decode window's start, which the run's window tags give."""
        return self.prefill.start_unix_s


def measure_generate(
    generator: Generator,
    prompts: Sequence[torch.Tensor],
    device: torch.device,
    sampler: Sampler,
    iters: int,
    min_window_s: float,
    warm_up: WarmUp,
    phases: Phases,
    graphs: bool = False,
) -> GenerateWindows:
    """Warm up and measure prefill, then warm up (compiling a compiled decode step) and measure decode.

    ``graphs``: record the decode step as one CUDA graph (the generator's cache must be static);
    an EaqError if it cannot be recorded. The decode warm-up's figures count from the prefill
    the decoder starts from: compiling the step and recording it are part of them.
    """
    prefill = lambda ids: generator.prefill(ids)  # noqa: E731
    with phases("warmup"):
        warm_prefill = warm_up(prefill, prompts)
    with phases("window"), MeasurementWindow(device, sampler) as prefill_window:
        prefill_latencies = run_timed(prefill, prompts, device, iters, min_window_s, label="prefill")
        prefill_window.iterations = len(prefill_latencies)
    with phases("warmup"):
        first = time.perf_counter()
        decoder = Decoder(generator, prompts[0])  # the prefill decode starts from, outside both windows
        # With graphs: a few eager steps (the first compiles a compiled model), then one recorded.
        graph = as_graph(decoder.advance, device, graphs, reset=decoder.restart)
        if graphs:
            if graph.reason is not None:
                raise EaqError(
                    f"cuda_graphs=true records the decode step as one CUDA graph, and that failed: {graph.reason}. Its "
                    "eager steps would be measured under a graphed run's name; measure this configuration with "
                    "cuda_graphs=false."
                )
            decoder.replay_with(graph.run)
        recorded = WARMUP_CALLS if graphs else 0  # the eager steps before the capture (the capture records, runs none)
        lengths = 0 if generator.static else decoder.steps
        for _ in range(lengths):  # every cache length once (module docstring); a static cache has one
            decoder.step()
        settled = warm_up(decoder.step, [None])
        warm_decode = replace(settled, iterations=settled.iterations + lengths + recorded, duration_s=time.perf_counter() - first)
        decoder.restart()
    with phases("window"), MeasurementWindow(device, sampler) as decode_window:
        decode_latencies = run_timed(decoder.step, [None], device, iters, min_window_s, label="decode", whole=decoder.steps,
                                     between=decoder.ready)
        decode_window.iterations = len(decode_latencies)
    assert prefill_window.result is not None and decode_window.result is not None
    return GenerateWindows(
        prefill_window.result, prefill_latencies, decode_window.result, decode_latencies, (warm_prefill, warm_decode), decoder,
        graph.reason,
    )


def forward_metrics(
    window: WindowResult, latencies: list[float], warmed: WarmupResult, batch_size: int, sampler: str, trace: PowerTrace,
    idle_w: float | None, min_window_s: float,
) -> tuple[dict[str, float], WindowEnergy, Validity]:
    """The forward-pass metrics (names in eaq/metrics.py), the window's energy and its validity; a sample is a row."""
    energy = window_energy(sampler, trace, window.t0, window.t1, window.counter_j)
    samples = window.iterations * batch_size
    metrics = {
        **latency_metrics(latencies, window.duration_s, samples),
        "warmup_iterations": warmed.iterations,
        "warmup_duration_s": warmed.duration_s,
        **energy_metrics(energy, idle_w, window.duration_s, samples),
    }
    return metrics, energy, check(window, energy, idle_w, min_window_s)


def _energy(
    window: WindowResult, name: str, sample: str, samples: int, sampler: str, trace: PowerTrace, idle_w: float | None
) -> tuple[WindowEnergy, dict[str, float]]:
    """One window's energy and its figures, named ``<name>_...`` per ``sample`` (a prefill, a token)."""
    energy = window_energy(sampler, trace, window.t0, window.t1, window.counter_j)
    return energy, energy_metrics(energy, idle_w, window.duration_s, samples, prefix=f"{name}_", sample=sample)


def generate_metrics(
    w: GenerateWindows, batch_size: int, sampler: str, trace: PowerTrace, idle_w: float | None, min_window_s: float
) -> tuple[dict[str, float], WindowEnergy, Validity]:
    """The generation metrics (names in eaq/metrics.py), the decode window's energy, and both windows' validity.

    A decode step produces one token per sequence of the batch: tokens = steps x batch_size.
    """
    prompt_tokens = w.prefill.iterations * batch_size * w.decoder.g.seq_len
    tokens = w.decode.iterations * batch_size
    metrics = {
        **latency_metrics(w.prefill_latencies, w.prefill.duration_s, prompt_tokens, "time_to_first_token", "prefill_tokens_per_s", "prefill_"),
        **latency_metrics(w.decode_latencies, w.decode.duration_s, tokens, "time_per_output_token", "decode_tokens_per_s", "decode_"),
        "decode_window_sequences": w.decode.iterations / w.decoder.steps,
        "warmup_iterations": sum(warm.iterations for warm in w.warmups),
        "warmup_duration_s": sum(warm.duration_s for warm in w.warmups),
    }
    prefill_energy, prefill_figures = _energy(w.prefill, "prefill", "prefill", w.prefill.iterations, sampler, trace, idle_w)
    decode_energy, decode_figures = _energy(w.decode, "decode", "token", tokens, sampler, trace, idle_w)
    metrics |= prefill_figures | decode_figures
    prefill_check = check(w.prefill, prefill_energy, idle_w, min_window_s)
    decode_check = check(w.decode, decode_energy, idle_w, min_window_s)
    checks = {"prefill": prefill_check, "decode": decode_check}
    reasons = tuple(f"{name}: {r}" for name, c in checks.items() for r in c.reasons)
    # One window measured and the other not (its counter unreadable, no trace over it): the run's figures are
    # half missing, which check() alone, judging one window, does not call a failure.
    energies = {"prefill": prefill_energy, "decode": decode_energy}
    if any(e.energy_j is not None for e in energies.values()):
        reasons += tuple(f"{name}: energy unavailable ({e.reason})" for name, e in energies.items() if e.energy_j is None)
    notes = tuple(f"{name}: {n}" for name, c in checks.items() for n in c.notes)
    # The run's energy tags (eaq.energy.source, .notes) are the decode window's: the prefill window's own say here.
    # (Its notes beyond the session's, which come with every window.)
    notes += tuple(f"prefill: {n}" for n in prefill_energy.notes if n not in decode_energy.notes)
    if None not in (prefill_energy.energy_j, decode_energy.energy_j) and prefill_energy.source != decode_energy.source:
        notes += (f"prefill: energy from {prefill_energy.source} (the decode window's from {decode_energy.source})",)
    # Both windows must hold; their facts (sensor updates, coverage, clocks) keep the decode window's under the
    # forward pass's names, the prefill window's as prefill_<name>, so a reader sees what each check read.
    facts = decode_check.facts | {f"prefill_{name}": value for name, value in prefill_check.facts.items()}
    return metrics, decode_energy, Validity(reasons, facts, notes)
