#!/usr/bin/env bash
# Issue 4 groundwork on the lent GPU: do fp16 and int8 (torchao, with the shape rule and
# GPT-2's Conv1D converted) run for real on CUDA? Eager only, one batch size.
set -uo pipefail
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh
P=/tmp/eaq-precision; rm -rf $P
python3 -m eaq.run -m model=distilbert_base_random,gpt2_small_random precision=fp16,int8 batch_size=32 \
  dataset=synthetic seq_len=128 sampler=nvml trials=gpu_energy paths.output_dir=$P 2>&1 | grep -v "it/s"
cols="params.model.name params.precision.name params.batch_size metrics.latency_mean_ms metrics.energy_per_sample_mj metrics.power_mean_w metrics.model_size_mb metrics.quantized_linear_layers metrics.linear_layers tags.eaq.proof.stored_dtypes metrics.roofline_efficiency tags.eaq.valid"
python3 -m eaq.report.table --uri sqlite:///$P/mlflow.db --columns $cols > $OUT/precision_smoke.md
cat $OUT/precision_smoke.md
