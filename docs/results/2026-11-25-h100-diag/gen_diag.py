"""Why a compiled decode step takes 1.90 ms (bf16) and 5.43 ms (int4_weight_only) on the 1.1B shape.

2026-11-25 afternoon: the step is built as the benchmark now builds it (eaq/tasks/generate.py):
compile_model with Inductor's defaults (tuning=False: the coordinate-descent tuning took over
130 s in the morning's call and this script never printed), then the whole step recorded as one
CUDA graph (as_graph over Decoder.advance) and replayed by Decoder.step.

2026-11-24 (docs/results/2026-11-24-h100-generate): bf16 compiled with CUDA graphs ran at 0.39 of
the measured memory bandwidth, int4_weight_only at 0.043. A step launched kernel by kernel is
bound by the host (22 layers, ~15 kernels each, ~5 us a launch ~ 1.6 ms), so the first
question is whether the step really replays a CUDA graph. This script builds the decode step
exactly as the benchmark does (eaq's Generator over a StaticCache, eaq's compile_model with
triton.cudagraphs) and prints:

  inductor counters      cudagraph skips (and their reasons, with TORCH_LOGS=perf_hints)
  wall per step          200 steps between two events (no host sync inside)
  per step, profiled     kernels launched, their device time, cudaGraphLaunch vs cudaLaunchKernel calls
  top kernels            device time per step

From the repository root on the GPU machine:
  TORCH_LOGS=perf_hints python3 docs/results/2026-11-25-h100-diag/gen_diag.py [PRESET] [PRECISION] [BATCH]
  EAGER=1 python3 docs/results/2026-11-25-h100-diag/gen_diag.py llama_1b_random bf16 1
  NO_WOQ=1 python3 docs/results/2026-11-25-h100-diag/gen_diag.py llama_1b_random int8_weight_only 1
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from pathlib import Path

import torch
from omegaconf import OmegaConf
from torch._dynamo.utils import counters
from torch.profiler import ProfilerActivity, profile

from eaq.config import ModelConfig
from eaq.models import load_model
from eaq.precision import get_precision
from eaq.precision.base import set_tf32
from eaq.precision.shapes import linear_rows
from eaq.measure.graphs import as_graph
from eaq.tasks.compile import compile_model
from eaq.workloads.generate import Decoder, Generator

PRESET = sys.argv[1] if len(sys.argv) > 1 else "llama_1b_random"
PRECISION = sys.argv[2] if len(sys.argv) > 2 else "bf16"
BATCH = int(sys.argv[3]) if len(sys.argv) > 3 else 1
SEQ, NEW, STEPS = int(os.environ.get("SEQ", 256)), int(os.environ.get("NEW", 128)), 200
# EAGER=1: the eager step (2026-11-25: 76.7 ms a token on the 1.1B shape with the GPU at idle power,
# 3x its whole 256-token prefill), with the prefill timed beside it.
EAGER = os.environ.get("EAGER") == "1"
# NO_WOQ=1: Inductor's pattern matcher off. 2026-11-25 evening: compiled int8_weight_only spent 14.9 of
# its 16.5 ms of kernels a step in aten._weight_int8pack_mm's CUDA kernel (fp32 inputs), to which
# Inductor rewrites the dequantize-and-matmul since pytorch/pytorch#161680 (woq_matcher_count 155);
# before that, CUDA kept the fused mul-sum. This compiles the step without the rewrite, for the comparison.
if os.environ.get("NO_WOQ") == "1":
    import torch._inductor.config as inductor_config

    inductor_config.pattern_matcher = False
CONF = Path(__file__).resolve().parents[3] / "conf" / "model" / f"{PRESET}.yaml"


@torch.inference_mode()
def main() -> None:
    device = torch.device(os.environ.get("DEVICE", "cuda"))  # DEVICE=cpu: a smoke test of the script itself
    set_tf32(False)
    model = load_model(ModelConfig(**OmegaConf.to_container(OmegaConf.load(CONF))), with_tokenizer=False, device=device).model.to(device)
    config = model.config
    prompt = torch.randint(0, config.vocab_size, (BATCH, SEQ), device=device)
    probe = Generator(model, model, config, SEQ, NEW, device)
    precision = get_precision(PRECISION, device)
    rows = linear_rows(model, lambda: Decoder(probe, prompt).step()) if precision.requirements.min_rows > 1 else None
    model = precision.apply(model, device, rows)
    if EAGER:  # as compile=false runs it: the model itself over a DynamicCache, step by step from Python
        decoder = Decoder(Generator(model, model, config, SEQ, NEW, device), prompt)
    else:
        # As eaq/tasks/benchmark.py: no Inductor graphs inside the whole step's (the 14:38 call passed
        # cuda_graphs=True here, so its whole-step capture failed and Inductor's graph ran instead).
        runner = compile_model(model, cuda_graphs=False, tuning=False)
        decoder = Decoder(Generator(model, runner, config, SEQ, NEW, device, static=True), prompt)
        graph = as_graph(decoder.advance, device, device.type == "cuda", reset=decoder.restart)
        if device.type == "cuda":
            decoder.replay_with(graph.run)
        print("whole-step graph:", graph.reason)
    decoder.restart()
    for _ in range(2 * NEW):  # pass a restart
        decoder.step()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda device: None)
    sync(device)
    start = time.perf_counter()
    for _ in range(5):
        decoder.g.prefill(prompt)
    sync(device)
    print(f"prefill {1e3 * (time.perf_counter() - start) / 5:.3f} ms (eager model, fresh DynamicCache, 5 passes)")
    print(f"{PRESET} {PRECISION} batch {BATCH}{' eager' if EAGER else ''}, torch {torch.__version__}, {torch.cuda.get_device_name(device) if device.type == 'cuda' else device}")
    print("inductor counters:", dict(counters["inductor"]))
    print("stats counters:", {k: v for k, v in counters["stats"].items()})
    start = time.perf_counter()
    for _ in range(STEPS):
        decoder.step()
    sync(device)
    print(f"wall per step {1e3 * (time.perf_counter() - start) / STEPS:.3f} ms over {STEPS} steps (host clock, one sync at the end)")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            decoder.step()
        sync(device)
    kernels: Counter = Counter()
    launches: Counter = Counter()
    cpu_ops: Counter = Counter()
    launched = 0
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            kernels[event.name] += event.device_time_total / 20
            launched += 1
        elif event.name.startswith("cuda") or event.name.startswith("cu"):
            launches[event.name] += 1 / 20
        else:
            cpu_ops[event.name] += event.cpu_time_total / 20
    print(f"per step: {sum(kernels.values()) / 1e3:.3f} ms of kernels, {len(kernels)} kernel names, {launched / 20:.0f} kernels; runtime calls {dict(launches)}")
    for name, us in kernels.most_common(20):
        print(f"  {us:8.1f} us  {name[:120]}")
    print("host ops per step (us, top 12):")
    for name, us in cpu_ops.most_common(12):
        print(f"  {us:8.1f} us  {name[:100]}")


if __name__ == "__main__":
    main()
