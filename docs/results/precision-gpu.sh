#!/usr/bin/env bash
# Issue 4 on the lent H100, within what was left of the session's device time (~8 min held):
#  A. every GPU precision, eager, with the kernel check, on a GPT-2-small shape (b32 s128),
#     one process for the sweep (isolate=false) and short windows, to show each runs for real;
#  B. the brief's goal shape, GPT-2-medium b64 s256: bf16 vs fp8, both compiled, each in its own process;
#  C. int8 and int4_weight_only compiled on that shape, if time remains.
# Every part writes its table to $OUT as soon as it ends, so a cut-off run still returns the earlier parts.
set -uo pipefail
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh
P=/tmp/eaq-precision-gpu; rm -rf $P
SHORT="dataset=synthetic sampler=nvml trials.roofline=false trials.idle_s=2 trials.min_duration_s=2.5 trials.warmup_max_s=4 trials.cooldown_s=0"
COLS="params.model.name params.precision.name params.compile params.batch_size params.seq_len metrics.latency_mean_ms metrics.throughput_samples_per_s metrics.energy_per_sample_mj metrics.energy_net_per_sample_mj metrics.power_mean_w metrics.quantized_linear_layers metrics.linear_layers metrics.model_size_mb metrics.kernel_lowp_gemms metrics.kernel_float_gemms tags.eaq.proof.stored_dtypes tags.eaq.valid"

echo "== A: every precision, eager, kernel check"
python3 -m eaq.run -m model=gpt2_small_random batch_size=32 seq_len=128 isolate=false precision.kernel_check=true \
  precision=fp32,tf32,fp16,bf16,amp_fp16,amp_bf16,int8,int8_weight_only,fp8,int4_weight_only \
  $SHORT paths.output_dir=$P 2>&1 | grep -v "it/s" | tee $OUT/log.txt
python3 -m eaq.report.table --uri sqlite:///$P/mlflow.db --columns $COLS > $OUT/a_eager_all_precisions.md; cat $OUT/a_eager_all_precisions.md
cp $P/mlflow.db $OUT/mlflow.db

echo "== B: GPT-2-medium b64 s256, bf16 vs fp8, compiled, fresh process each"
python3 -m eaq.run -m model=gpt2_medium_random batch_size=64 seq_len=256 compile=true precision=bf16,fp8 \
  $SHORT trials.min_duration_s=4 trials.warmup_max_s=6 paths.output_dir=$P 2>&1 | grep -v "it/s" | tee -a $OUT/log.txt
python3 -m eaq.report.table --uri sqlite:///$P/mlflow.db --columns $COLS > $OUT/all_runs.md; cat $OUT/all_runs.md
cp $P/mlflow.db $OUT/mlflow.db

echo "== C: int8 and int4_weight_only compiled on that shape"
python3 -m eaq.run -m model=gpt2_medium_random batch_size=64 seq_len=256 compile=true precision=int8,int4_weight_only \
  $SHORT trials.min_duration_s=4 trials.warmup_max_s=6 paths.output_dir=$P 2>&1 | grep -v "it/s" | tee -a $OUT/log.txt
python3 -m eaq.report.table --uri sqlite:///$P/mlflow.db --columns $COLS > $OUT/all_runs.md; cat $OUT/all_runs.md
cp $P/mlflow.db $OUT/mlflow.db
