#!/usr/bin/env bash
# Session 30, second call (the machine still warm, packages installed by check.sh): does the kernel check count each
# low-precision GEMM once on the GPU image's torch 2.11? A review asked whether the profiler shows a nested op per
# fp8 GEMM (counted twice, a missing one could hide). DistilBERT-base shape, random weights, synthetic ids, batch 32,
# seq 128, fp8 / int8 / int4_weight_only with precision.kernel_check=true: kernel_lowp_gemms against the quantized
# Linear layers the run reports (each runs once a pass).
# From the repository root: OUT=<folder> bash docs/results/2026-11-28-h100-session30/check2.sh
set -uo pipefail
out=${OUT:?set OUT}
work=${WORK:-/tmp/eaq-s30}
timeout 400 python3 -m eaq.run -m model=distilbert_base_random dataset=synthetic precision=fp8,int8,int4_weight_only \
  precision.kernel_check=true sampler=none trials=quick paths.output_dir="$work/kc" paths.cache_dir="$work/cache" \
  > "$out/kernel-log.txt" 2>&1
echo "sweep exit: $?" >> "$out/kernel-log.txt"
python3 - "$work/kc" > "$out/kernel-records.txt" 2>&1 <<'PY'
import sys
from mlflow.tracking import MlflowClient
client = MlflowClient(tracking_uri=f"sqlite:///{sys.argv[1]}/mlflow.db")
for r in [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])
          if r.data.tags.get("eaq.kind") == "benchmark"]:
    m, t = r.data.metrics, r.data.tags
    print(r.info.run_name, r.info.status, "| kernel_check:", t.get("eaq.kernel_check"), "| lowp:", m.get("kernel_lowp_gemms"),
          "float:", m.get("kernel_float_gemms"), "copies:", m.get("kernel_host_copies"))
    print("   ", {k: v for k, v in t.items() if k.startswith("eaq.precision") or k.startswith("eaq.layer")})
PY
