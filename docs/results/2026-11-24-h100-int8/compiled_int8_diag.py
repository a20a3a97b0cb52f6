"""Where compiled int8's time goes at GPT-2-medium width, against bf16 and fp8 (issue 15).

A diagnostic, not eaq's measurement protocol: the blocks of a GPT-2-medium-shaped model
(GPT2Model, width 1024, N_LAYER layers, no LM head: the head stays bf16 in every format),
batch BATCH x seq SEQ, random weights. Each variant is a precision applied by eaq plus
torch.compile options (eaq's tuned set, optionally max-autotune or without the int_mm+mul
fusion). Per variant: ms per pass (CUDA events, median of 20), energy per pass from the
NVML counter over >= 2 s of passes, and the top kernels of one profiled pass.
    python3 docs/results/2026-11-24-h100-int8/compiled_int8_diag.py VARIANT...
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections import defaultdict

import pynvml
import torch
from torch.profiler import ProfilerActivity, profile
from transformers import GPT2Config, GPT2Model

from eaq.models.conv1d import convert_conv1d
from eaq.precision import get_precision
from eaq.precision.shapes import linear_rows
from eaq.tasks.compile import TUNED

N_LAYER, BATCH, SEQ = int(os.environ.get("N_LAYER", 4)), int(os.environ.get("BATCH", 256)), int(os.environ.get("SEQ", 256))
VARIANTS = {
    "bf16": ("bf16", {}),
    "fp8": ("fp8", {}),
    "int8": ("int8", {}),
    "int8-nofuse": ("int8", {"force_fuse_int_mm_with_mul": False}),
    "int8-maxat": ("int8", {"max_autotune": True}),
    "bf16-maxat": ("bf16", {"max_autotune": True}),
    "fp8-maxat": ("fp8", {"max_autotune": True}),
}


def run(name: str) -> dict:
    precision_name, extra = VARIANTS[name]
    device = torch.device("cuda")
    torch.manual_seed(0)
    model = GPT2Model(GPT2Config(n_embd=1024, n_layer=N_LAYER, n_head=16, n_positions=1024)).eval()
    convert_conv1d(model)  # as eaq loads GPT-2: Conv1D -> Linear
    model = model.to(device)
    ids = torch.randint(0, 50257, (BATCH, SEQ), device=device)
    precision = get_precision(precision_name, device)
    with torch.no_grad():
        rows = linear_rows(model, lambda: model(input_ids=ids)) if precision.requirements.min_rows > 1 else None
        model = precision.apply(model, device, rows)
        torch._dynamo.reset()
        compiled = torch.compile(model, options=TUNED | extra)
        t0 = time.perf_counter()
        compiled(input_ids=ids)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        for _ in range(5):
            compiled(input_ids=ids)
        times = []
        for _ in range(20):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); compiled(input_ids=ids); b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        n = max(10, int(2.0 / (statistics.median(times) / 1000)))
        torch.cuda.synchronize()
        e0, t0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle), time.perf_counter()
        for _ in range(n):
            compiled(input_ids=ids)
        torch.cuda.synchronize()
        e1, t1 = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle), time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            compiled(input_ids=ids)
            torch.cuda.synchronize()
    kernels: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for e in prof.profiler.kineto_results.events():
        if e.device_type() == torch.autograd.DeviceType.CUDA:
            k = kernels[e.name()[:90]]
            k[0] += e.duration_ns() / 1e6
            k[1] += 1
    total = sum(v[0] for v in kernels.values())
    top = sorted(kernels.items(), key=lambda kv: -kv[1][0])[:14]
    result = {
        "variant": name, "compile_s": round(compile_s, 1), "ms_per_pass": round(statistics.median(times), 3),
        "ms_p10_p90": [round(sorted(times)[2], 3), round(sorted(times)[17], 3)],
        "mj_per_pass": round((e1 - e0) / n, 1), "watts": round((e1 - e0) / 1000 / (t1 - t0), 1), "passes": n,
        "kernel_ms": round(total, 3), "top": [(k, round(v[0], 3), v[1]) for k, v in top],
    }
    del compiled, model
    torch.cuda.empty_cache()
    return result


if __name__ == "__main__":
    pynvml.nvmlInit()
    out = os.environ.get("OUT", "/tmp")
    deadline = float(os.environ.get("DEADLINE_S", 1e9))
    start = time.perf_counter()
    for name in sys.argv[1:]:
        if time.perf_counter() - start > deadline:
            print(f"{name}: not started (deadline)", flush=True)
            continue
        r = run(name)
        with open(f"{out}/compiled-int8-diag.jsonl", "a") as f:
            f.write(json.dumps(r) + "\n")
        print(f"\n== {name}: {r['ms_per_pass']} ms/pass ({r['ms_p10_p90']}), {r['mj_per_pass']} mJ/pass, {r['watts']} W, "
              f"kernels {r['kernel_ms']} ms, compile {r['compile_s']} s", flush=True)
        for k, ms, c in r["top"]:
            print(f"   {ms:8.3f} ms {c:4d}x  {k}", flush=True)
