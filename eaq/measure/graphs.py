"""A callable captured as a CUDA graph, so that a window measures the GPU, not the host.

An eager forward pass launches one kernel at a time from Python; where kernels are
short (DistilBERT-base at batch 64 on an H100: 1.9 ms of kernels in a 2.9-3.5 ms pass),
the GPU waits for the host between them, and how long depends on the host: the energy
per pass then varies from machine to machine and trial to trial. A CUDA graph records
the kernels once and replays them with one launch, so the window sees the GPU's work.

Capture happens here, outside any window: a few eager calls on a side stream (lazy
initialisation, cuBLAS workspaces), then one call recorded into the graph. A callable
that cannot be captured (one that syncs with the host, e.g. ``.item()``, a tensor's
``repr``, a copy to the CPU) falls back to eager, and the reason says why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from eaq.errors import first_line

# Eager calls before the capture: what the first calls allocate or initialise must not be recorded.
WARMUP_CALLS = 3


@dataclass(frozen=True)
class Step:
    """What a window calls: a graph's replay, or the eager callable with the reason it is not graphed."""

    run: Callable[[], object]
    reason: str | None = None  # None when graphed


def as_graph(
    fn: Callable[[], object], device: torch.device, enabled: bool, reset: Callable[[], object] | None = None
) -> Step:
    """``fn`` captured as a CUDA graph on ``device`` when ``enabled``, else ``fn`` itself and why.

    ``reset``, when given, runs eagerly before each of those calls: for an ``fn`` that moves
    its state on (a decode step advances its position), so that every call, the recorded
    one too, starts from the same state. The caller resets again before replaying.
    """
    if not enabled:
        return Step(fn, "not asked for")
    if device.type != "cuda":
        return Step(fn, f"CUDA graphs need a CUDA device and this run is on {device.type}")
    reset = reset or (lambda: None)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        for _ in range(WARMUP_CALLS):  # eagerly: an error here is the callable's own, and propagates
            reset()
            fn()
        reset()
        side.synchronize()
        try:
            # capture_begin/end, not torch.cuda.graph(): that one also runs gc.collect() per capture,
            # 0.57 s each on this project's CPU in a process holding GPT-2-small and eaq's imports, and
            # a run captures dozens (one per component, type and block, and the whole pass).
            graph.capture_begin()
            try:
                fn()
            finally:
                graph.capture_end()
        except Exception as error:  # an operation not permitted while capturing (a host sync), raised by torch or a library
            torch.cuda.synchronize(device)
            return Step(fn, f"capture failed ({first_line(error)})")
    torch.cuda.current_stream(device).wait_stream(side)
    return Step(graph.replay)


__all__ = ["Step", "as_graph"]
