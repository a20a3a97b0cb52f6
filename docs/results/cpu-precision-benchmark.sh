#!/usr/bin/env bash
# Issue 4's CPU benchmark: DistilBERT-base shape (random weights), batch 8, seq 128,
# eager and torch.compile, on this project's 2-core CPU machine.
# PRECISIONS (default fp32,int8) picks the precisions, e.g. every CPU one:
#   PRECISIONS=fp32,fp16,bf16,amp_bf16,int8,int8_weight_only bash docs/results/cpu-precision-benchmark.sh
set -uo pipefail
C=/tmp/eaq-cpu-precision; rm -rf $C
python -m eaq.run -m precision=${PRECISIONS:-fp32,int8} compile=false,true model=distilbert_base_random dataset=synthetic \
  batch_size=8 seq_len=128 trials.warmup_iters=3 trials.iters=10 paths.output_dir=$C 2>&1 | grep -v "it/s"
python -m eaq.report.table --uri sqlite:///$C/mlflow.db --columns params.model.name params.precision.name params.compile \
  metrics.latency_mean_ms metrics.latency_p50_ms metrics.throughput_samples_per_s metrics.model_size_mb \
  metrics.quantized_linear_layers metrics.linear_layers metrics.warmup_duration_s
