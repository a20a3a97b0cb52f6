#!/usr/bin/env bash
# Issue 3 evidence on the lent GPU: one sweep whose every run records the NVML counter,
# the instant-power integral, the averaged-power integral and nvidia-smi's power.draw
# integral over the same window; then the tables and one power trace into $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh
E=/tmp/eaq-energy; rm -rf $E
python3 -m eaq.run -m model=distilbert_base_random,gpt2_small_random precision=fp32,bf16 batch_size=8,64 \
  dataset=synthetic seq_len=128 sampler=nvml_vs_smi trials=gpu_energy paths.output_dir=$E 2>&1 | grep -v "it/s"
python3 -m eaq.report.table --uri sqlite:///$E/mlflow.db --preset energy > $OUT/energy_table.md
python3 -m eaq.report.table --uri sqlite:///$E/mlflow.db --preset energy --csv > $OUT/energy_runs.csv
cp $E/cache/roofline-*.json $OUT/ 2>/dev/null
run=$(ls -d $E/multirun/*/*gpt2-small-random-bf16-b64* | head -1)
cp $run/power_trace.png $OUT/power_trace_gpt2-small_bf16_b64.png
cp $run/power_trace.csv $OUT/power_trace_gpt2-small_bf16_b64.csv
cat $OUT/energy_table.md
