#!/usr/bin/env bash
# Sampler overhead on the lent GPU: batch 1, where Python dispatch dominates, sampler off
# and on interleaved trial by trial in one sweep, with the window fixed by iterations.
set -uo pipefail
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh
O=/tmp/eaq-overhead
python3 -m eaq.run -m trial=1,2,3,4 sampler=none,nvml model=distilbert_base_random precision=bf16 batch_size=1 \
  dataset=synthetic seq_len=128 trials=gpu_energy trials.idle_s=0 trials.roofline=false trials.iters=1500 \
  trials.min_duration_s=0 trials.warmup_settle=true paths.output_dir=$O 2>&1 | grep -v "it/s"
python3 -m eaq.report.table --uri sqlite:///$O/mlflow.db --preset overhead > $OUT/overhead_table.md
python3 -m eaq.report.table --uri sqlite:///$O/mlflow.db --preset overhead --csv > $OUT/overhead_runs.csv
cat $OUT/overhead_table.md
