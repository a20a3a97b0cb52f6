"""The ``compile`` axis: the model through torch.compile, the same way for every precision.

By default every compiled run gets the Inductor settings torchao recommends for quantized
models (torchao.quantization.utils.recommended_inductor_config_setter): coordinate-descent
tuning of the generated kernels, and the flag asking Inductor to fuse the int8 matmul with
its rescale (``force_fuse_int_mm_with_mul``: torch 2.13's Inductor registers no pattern for
it, so there it does nothing; the flag is kept as torchao sets it). Applied only
to the quantized runs, as torchao's configs do, a comparison with bf16 would mix the
precision with the compiler's tuning. ``compile_tuning=false`` gives every run Inductor's
defaults instead, which compile several times faster (a table of many compiled runs).

The settings go to this one compilation (``torch.compile(options=...)``), not to the
process, so runs sharing a process (isolate=false) cannot inherit another run's.
"""

from __future__ import annotations

import torch
from torch import nn
from torch._dynamo.utils import counters

from eaq.errors import EaqError

# torchao 0.18's recommended_inductor_config_setter, as per-compilation options.
TUNED = {
    "coordinate_descent_tuning": True,
    "coordinate_descent_check_all_directions": True,
    "force_fuse_int_mm_with_mul": True,
    "fx_graph_cache": True,
    "triton.unique_kernel_names": True,
}


def inductor_settings(tuning: bool, pattern_matcher: bool = True) -> str:
    """The tag ``eaq.compile.inductor``: which settings a compiled run had."""
    chosen = "torchao recommended (coordinate-descent tuning)" if tuning else "inductor defaults"
    return chosen if pattern_matcher else f"{chosen}, pattern matcher off"


def compile_model(model: nn.Module, cuda_graphs: bool, tuning: bool = True, pattern_matcher: bool = True) -> nn.Module:
    """The compiled model; it compiles on its first call (in warm-up, outside the window).

    ``cuda_graphs``: Inductor records and replays its own CUDA graphs (cudagraph trees). A
    generated token's decode step is recorded whole by eaq instead (eaq.workloads.windows):
    Inductor's graph covers the model alone, and every call still ran dynamo's guards and the
    Python around the graph on the host: 3.7 ms a step on an H100 for 1.25 ms of kernels
    (docs/results/2026-11-25-h100-diag). ``pattern_matcher`` False: none of Inductor's graph
    rewrites (``compile_pattern_matcher``).
    """
    # Runs that share a process would share dynamo's caches and its recompile limit,
    # past which it runs the model eagerly with only a warning.
    torch._dynamo.reset()
    # mode="reduce-overhead" is these options plus CUDA graphs; torch.compile takes one or the other.
    options = ((TUNED if tuning else {}) | ({"triton.cudagraphs": True} if cuda_graphs else {})
               | ({} if pattern_matcher else {"pattern_matcher": False}))
    return torch.compile(model, options=options)


def graph_skips() -> int:
    """Compiled graphs Inductor has run without the CUDA graphs it was asked for, so far in this process.

    Inductor decides per compiled graph, when it compiles or first records one (in warm-up, or in a
    window when warm-up ran it only once), and where a graph holds what a CUDA graph cannot replay (a
    mutated input, a graph on no CUDA device, too many re-recordings, ...) it only logs "skipping
    cudagraphs due to ..." and bumps this counter: the run would then measure kernel launches, not the
    graphs its configuration names. (Ops it can split off, graph partitions, and dynamo's graph breaks
    are not counted: they leave the rest graphed.) Reading it is a dictionary lookup, so callers read it
    around a compilation and again after the window.
    """
    return counters["inductor"]["cudagraph_skips"]


def require_graphs(skips_before: int, what: str, fix: str) -> None:
    """Fail when Inductor skipped CUDA graphs since ``skips_before`` (``graph_skips()`` before compiling)."""
    skipped = graph_skips() - skips_before
    if skipped > 0:
        raise EaqError(
            f"{what} asks for CUDA graphs, and Inductor ran {skipped} compiled graph(s) without them (its reasons: "
            f"run again with TORCH_LOGS=cudagraphs), so the windows would measure the model's kernel launches instead "
            f"of graphs. {fix}"
        )
