"""The timed loop: per-iteration latency without a host sync after every forward pass.

On CUDA each iteration is bracketed by CUDA events and read once at the end, so the
GPU queue stays full; on the CPU every op is synchronous and a wall clock is exact.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tqdm.auto import tqdm

# GPU work the host may queue ahead of the GPU, in seconds of the step's own time. The loop ends by the host's clock:
# unbounded, a CUDA-graph step (one launch) queued ~400 iterations ahead, and a 3 s decode window of 256.7 ms steps
# ran 97.8 s on the H100 (warm-up's 0.25 s chunks as long: it ran out of time before it could settle). 50 ms keeps
# the GPU fed through a host pause of that length (a garbage collection) and ends a loop that much past its time.
QUEUE_S = 0.05


def run_timed(
    step: Callable[[Any], object],
    inputs: Sequence[Any],
    device: torch.device,
    iters: int,
    min_duration_s: float,
    label: str = "measure",
    whole: int = 1,
    between: Callable[[], object] | None = None,
    progress: bool = False,
) -> list[float]:
    """Run ``step`` over ``inputs`` cyclically, ``iters`` times at least and for ``min_duration_s`` at least.

    The loop ends only after a multiple of ``whole`` iterations: a decode window covers
    whole sequences, so early and late positions (short and long KV caches) weigh equally.
    ``between``: work before each iteration that is not the step's (a decode window going back to the prefilled
    cache after each whole sequence): outside every iteration's time, inside the window that encloses the loop.
    ``progress``: a bar on a terminal, for loops outside windows only (the warm-up): inside a window its redraws
    would be I/O, which no window does (../shared/DESIGN.md).
    On CUDA the host stays at most ``QUEUE_S`` of the step's GPU time ahead (at least two iterations), waiting on
    an iteration's end event before it queues more: the loop then ends within that much of ``min_duration_s``.
    Returns per-iteration latencies in seconds.
    """
    use_events = device.type == "cuda"
    marks: list[tuple[Any, Any]] = []
    ahead = 2  # iterations queued past the one waited for: from the last waited one's time, once one is known
    latencies: list[float] = []
    start = time.perf_counter()
    # disable=None: no bar when stderr is not a terminal (CI logs, files).
    bar = tqdm(desc=label, unit="it", total=iters, leave=False, mininterval=0.5, disable=None if progress else True)
    i = 0
    while i < iters or time.perf_counter() - start < min_duration_s or i % whole:
        batch = inputs[i % len(inputs)]
        if between is not None:
            between()
        if use_events:
            if i >= ahead:
                done_begin, done_end = marks[i - ahead]
                done_end.synchronize()
                ahead = max(2, math.ceil(QUEUE_S / max(done_begin.elapsed_time(done_end) / 1e3, 1e-6)))
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            step(batch)
            end.record()
            marks.append((begin, end))
        else:
            t0 = time.perf_counter()
            step(batch)
            latencies.append(time.perf_counter() - t0)
        i += 1
        bar.update()
    bar.close()
    if use_events:
        torch.cuda.synchronize(device)
        latencies = [b.elapsed_time(e) / 1e3 for b, e in marks]
    return latencies
