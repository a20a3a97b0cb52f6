"""Where eager int8's wall time goes on CUDA: host syncs and copies, host vs device time (issue 15).

DistilBERT-base shape (random weights) at batch 32, seq 128, as eaq builds it, in fp32, bf16 and
int8. Per precision: wall ms per pass with one sync at the end of 20 passes, device kernel ms
per pass, and the CUDA runtime calls that copy or synchronize in one profiled pass, with the
Python line that made each (with_stack).
    python3 docs/results/2026-11-24-h100-int8/eager_int8_diag.py
"""
from __future__ import annotations

import time
from collections import Counter

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import AutoModelForSequenceClassification, DistilBertConfig

from eaq.precision import get_precision
from eaq.precision.shapes import linear_rows

SYNCS = ("cudaMemcpy", "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpyAsync")

device = torch.device("cuda")
for name in ("fp32", "bf16", "int8"):
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(DistilBertConfig(num_labels=2)).eval().to(device)
    ids = torch.randint(0, 30522, (32, 128), device=device)
    mask = torch.ones_like(ids)
    precision = get_precision(name, device)
    with torch.inference_mode():
        rows = linear_rows(model, lambda: model(input_ids=ids, attention_mask=mask)) if precision.requirements.min_rows > 1 else None
        model = precision.apply(model, device, rows)
        for _ in range(5):
            model(input_ids=ids, attention_mask=mask)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            model(input_ids=ids, attention_mask=mask)
        t_launch = time.perf_counter() - t0
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / 20 * 1000
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=True) as prof:
            model(input_ids=ids, attention_mask=mask)
            torch.cuda.synchronize()
    per_kernel: Counter[str] = Counter()
    for e in prof.profiler.kineto_results.events():
        if e.device_type() == torch.autograd.DeviceType.CUDA:
            per_kernel[e.name()[:90]] += e.duration_ns() / 1e6
    kernel_ms = sum(per_kernel.values())
    runtime = Counter()
    where = Counter()
    for e in prof.events():
        if any(e.name.startswith(s) for s in SYNCS):
            runtime[e.name] += 1
            caller = e
            while caller is not None and not caller.stack:
                caller = caller.cpu_parent
            frames = [f for f in (caller.stack if caller else []) if "site-packages" in f or "eaq/" in f]
            where[(e.name, frames[0] if frames else "?")] += 1
    print(f"\n== {name}: wall {wall:.2f} ms/pass (host launch {t_launch / 20 * 1000:.2f} ms/pass), "
          f"device kernel time {kernel_ms:.2f} ms/pass", flush=True)
    print("   runtime sync/copy calls:", dict(runtime))
    for (call, frame), n in where.most_common(8):
        print(f"   {n:4d}x {call} <- {frame}")
    for k, ms in per_kernel.most_common(8):
        print(f"   {ms:7.3f} ms  {k}")
