#!/usr/bin/env bash
# What the validity checks and the averaged field do when the protocol is cut short: no
# settling warm-up (one pass), windows of 1 s and 5 s, on the lent GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh
T=/tmp/eaq-transient; rm -rf $T
python3 -m eaq.run -m trials.min_duration_s=1,5 model=gpt2_small_random precision=bf16 batch_size=64 \
  dataset=synthetic seq_len=128 sampler=nvml_vs_smi trials=gpu_energy trials.warmup_settle=false trials.warmup_iters=1 \
  trials.iters=1 paths.output_dir=$T 2>&1 | grep -v "it/s"
cols="params.trials.min_duration_s metrics.window_duration_s metrics.energy_total_j metrics.energy_instant_integral_j metrics.energy_average_integral_j metrics.energy_smi_integral_j metrics.sensor_updates metrics.counter_vs_instant_disagreement tags.eaq.valid tags.eaq.valid.reasons"
python3 -m eaq.report.table --uri sqlite:///$T/mlflow.db --columns $cols > $OUT/transient_table.md
for d in $T/multirun/*/*; do cp $d/power_trace.png $OUT/power_trace_no_settle_$(basename $d).png; done
cat $OUT/transient_table.md
