#!/usr/bin/env bash
# Sampler overhead on the lent GPU, batch 1 (Python dispatch dominates, so a poller thread
# holding the GIL would show): in one process per model, 40 ABBA pairs of 200-pass blocks
# with the nvml sampler off and on (trials.overhead_pairs), after a normal energy run.
set -uo pipefail
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh
O=/tmp/eaq-overhead; rm -rf $O
python3 -m eaq.run -m model=distilbert_base_random,gpt2_small_random precision=bf16 batch_size=1 \
  dataset=synthetic seq_len=128 sampler=nvml trials=gpu_energy trials.roofline=false \
  trials.overhead_pairs=40 trials.overhead_iters=200 paths.output_dir=$O 2>&1 | grep -v "it/s"
cols="params.model.name params.precision.name params.batch_size metrics.latency_sampler_off_ms metrics.latency_sampler_on_ms metrics.sampler_overhead_pct metrics.sampler_overhead_spread_pct metrics.latency_mean_ms metrics.poll_coverage"
python3 -m eaq.report.table --uri sqlite:///$O/mlflow.db --columns $cols > $OUT/overhead_table.md
python3 -m eaq.report.table --uri sqlite:///$O/mlflow.db --columns $cols --csv > $OUT/overhead_runs.csv
cat $OUT/overhead_table.md
