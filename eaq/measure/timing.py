"""The timed loop: per-iteration latency without a host sync after every forward pass.

On CUDA each iteration is bracketed by CUDA events and read once at the end, so the
GPU queue stays full; on the CPU every op is synchronous and a wall clock is exact.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tqdm.auto import tqdm


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
    Returns per-iteration latencies in seconds.
    """
    use_events = device.type == "cuda"
    marks: list[tuple[Any, Any]] = []
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
