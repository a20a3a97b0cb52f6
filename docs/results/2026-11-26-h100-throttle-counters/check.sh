#!/usr/bin/env bash
# The clock-event times and the idle check on the lent GPU, from the repository root (OUT: where results go):
#  1. check.py: eaq's idle_baseline on a quiet GPU and with another process busy in the window's middle; a 6 s
#     power-capped matmul window judged by check();
#  2. one benchmark run (DistilBERT-base shape, random weights, bf16, batch 64, seq 128, synthetic ids, the default
#     protocol: 5 s window, 2 s idle) to see the clock-event shares logged to MLflow beside the run's validity;
#  3. one task=layers run (same shape, batch 8, seq 64, trials=quick but a 2 s idle baseline), whose idle window
#     follows its profiling passes: its baseline must be used (the sample straddling the window's start is not its).
set -uo pipefail
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > $OUT/install.txt 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt
python3 docs/results/2026-11-26-h100-throttle-counters/check.py > $OUT/check.json 2> $OUT/check.err; echo "check.py rc=$?"
P=/tmp/eaq-throttle; rm -rf $P
python3 -m eaq.run model=distilbert_base_random precision=bf16 dataset=synthetic batch_size=64 seq_len=128 \
    paths.output_dir=$P 2>&1 | grep -v "it/s" > $OUT/benchmark.txt; echo "benchmark rc=${PIPESTATUS[0]}"
python3 -m eaq.run task=layers model=distilbert_base_random precision=bf16 dataset=synthetic trials=quick trials.idle_s=2 \
    trials.idle_reuse=false batch_size=8 seq_len=64 paths.output_dir=$P 2>&1 | grep -v "it/s" > $OUT/layers.txt; echo "layers rc=${PIPESTATUS[0]}"
python3 - <<'PY' | tee $OUT/summary.txt
from mlflow.tracking import MlflowClient
client = MlflowClient(tracking_uri="sqlite:////tmp/eaq-throttle/mlflow.db")
for r in client.search_runs([e.experiment_id for e in client.search_experiments()]):
    m, t = r.data.metrics, r.data.tags
    print(r.info.run_name, r.info.status, "| valid:", t.get("eaq.valid"), t.get("eaq.valid.reasons", ""), "| notes:", t.get("eaq.valid.notes", ""))
    print("  idle:", t.get("eaq.idle"), "| idle_power_w:", m.get("idle_power_w"), "| mean power:", m.get("power_mean_w"))
    print("  ", {k: round(v, 4) for k, v in sorted(m.items()) if k.startswith("clock_event_share_")})
PY
