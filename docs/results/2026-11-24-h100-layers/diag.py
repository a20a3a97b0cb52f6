"""Why DistilBERT's graphed whole pass took 5.18 ms (bf16) / 9.45 ms (fp8) while its kernels sum to 1.87 / 6.12 ms.

task=layers measures ``layers_whole_model_time_ms`` on a CUDA graph of ``model(**batch)`` (window
wall time / passes) and ``layers_kernel_time_ms`` on eager passes under the profiler (sum of the
kernels' device time). This script times the same model four ways and lists the kernels of both
passes, so what decides it is printed, not guessed:

  eager wall          passes back to back, eager (2026-11-23: 2.9-3.5 ms)
  eager kernels       sum of kernel time of one eager pass (the task's layers_kernel_time_ms)
  graph wall          the graph replayed back to back, two events around N replays
  graph in window     the graph through eaq's window loop (run_timed: an event pair per pass)
  graph kernels       sum of kernel time of one replay (CUPTI sees the graph's kernels)

Reading it: graph kernels ~ graph wall > eager kernels -> the graph runs other or more kernels
(the diff below names them); graph kernels ~ eager kernels < graph wall -> gaps inside the
replay; graph wall ~ eager kernels < graph in window -> eaq's window loop. The SDPA backend line
says whether PyTorch picks another attention kernel while a graph is being captured.

From the repository root on an H100 (about a minute with the model load):
  python3 docs/results/2026-11-24-h100-layers/diag.py [MODEL_PRESET] [PRECISION]
  (defaults distilbert_base_random bf16; gpt2_small_random is the control that was fine)
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import torch
from omegaconf import OmegaConf
from torch.profiler import ProfilerActivity, profile

from eaq.config import ModelConfig
from eaq.measure.graphs import as_graph
from eaq.measure.timing import run_timed
from eaq.models import load_model
from eaq.precision import get_precision
from eaq.precision.base import set_tf32
from eaq.precision.shapes import linear_rows

PRESET = sys.argv[1] if len(sys.argv) > 1 else "distilbert_base_random"
PRECISION = sys.argv[2] if len(sys.argv) > 2 else "bf16"
BATCH, SEQ, PASSES = 64, 128, 200
CONF = Path(__file__).resolve().parents[3] / "conf" / "model" / f"{PRESET}.yaml"


def kernels(step, device: torch.device, passes: int = 5) -> Counter:
    """Kernel name -> device microseconds per pass, over ``passes`` calls of ``step``."""
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(passes):
            step()
        torch.cuda.synchronize(device)
    found: Counter = Counter()
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            found[event.name] += event.device_time_total / passes
    return found


def wall_ms(step, device: torch.device) -> float:
    """Milliseconds per call of ``step``, ``PASSES`` calls back to back between two events."""
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(PASSES):
        step()
    end.record()
    torch.cuda.synchronize(device)
    return begin.elapsed_time(end) / PASSES


def sdpa_choice(device: torch.device, capturing: bool) -> int:
    """The backend PyTorch's SDPA dispatcher picks for DistilBERT-base's attention shape (no mask, not causal)."""
    q = torch.randn(BATCH, 12, SEQ, 64, device=device, dtype=torch.bfloat16)
    if not capturing:
        return torch._fused_sdp_choice(q, q, q)
    graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream(device)
    with torch.cuda.stream(side):
        graph.capture_begin()
        try:
            return torch._fused_sdp_choice(q, q, q)
        finally:
            graph.capture_end()


@torch.inference_mode()
def main() -> None:
    device = torch.device("cuda")
    set_tf32(False)
    model = load_model(ModelConfig(**OmegaConf.to_container(OmegaConf.load(CONF))), with_tokenizer=False).model.to(device)
    # As task=layers on synthetic ids: a mask of ones is dropped (eaq.layers.energy.without_full_mask).
    batch = {"input_ids": torch.randint(0, model.config.vocab_size, (BATCH, SEQ), device=device)}
    forward = lambda: model(**batch)  # noqa: E731  (model is rebound below)
    model = get_precision(PRECISION, device).apply(model, device, linear_rows(model, forward))
    for _ in range(10):
        forward()
    eager_k = kernels(forward, device)
    eager_wall = wall_ms(forward, device)
    step = as_graph(forward, device, True)
    print(f"{PRESET} {PRECISION}, batch {BATCH}, seq {SEQ}, torch {torch.__version__}, {torch.cuda.get_device_name(device)}")
    print(f"graphed: {step.reason is None} {step.reason or ''}; attn_implementation {model.config._attn_implementation}")
    graph_k = kernels(step.run, device)
    graph_wall = wall_ms(step.run, device)
    window = run_timed(lambda _: step.run(), [None], device, PASSES, 0.0)
    print(f"eager wall {eager_wall:.3f} ms | eager kernels {sum(eager_k.values()) / 1e3:.3f} ms ({len(eager_k)} names)")
    print(f"graph wall {graph_wall:.3f} ms | graph in window {1e3 * sum(window) / len(window):.3f} ms | "
          f"graph kernels {sum(graph_k.values()) / 1e3:.3f} ms ({len(graph_k)} names)")
    print(f"SDPA backend choice (0 math, 1 flash, 2 efficient, 3 cudnn): eager {sdpa_choice(device, False)}, "
          f"while capturing {sdpa_choice(device, True)}")
    print("kernels differing by > 5 us per pass (graph minus eager, us per pass):")
    names = set(eager_k) | set(graph_k)
    diffs = sorted(((graph_k[n] - eager_k[n], n) for n in names), reverse=True)
    for diff, name in [d for d in diffs if abs(d[0]) > 5][:15]:
        print(f"  {diff:+9.1f}  eager {eager_k[name]:8.1f}  graph {graph_k[name]:8.1f}  {name[:110]}")


if __name__ == "__main__":
    main()
