#!/usr/bin/env bash
# precision=mixed with the kernel check (its per-shape float-GEMM rule, kernel_check.fallbacks_by_shape through
# MixedPrecision.judge) on the lent GPU: the plan beside this script, GPT-2-small, eager and compiled, batch 1 and 32;
# then the same sweep again, which resume must skip whole (the device's name read ahead from NVML).
set -uo pipefail
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > $OUT/install.txt 2>&1
P=/tmp/eaq-mixed-kernel-check; rm -rf $P
SWEEP="-m model=gpt2_small_random precision=mixed precision.plan=$PWD/docs/results/2026-11-26-h100-mixed-kernel-check/plan.yaml precision.kernel_check=true dataset=synthetic sampler=none trials=quick seq_len=128 compile=false,true batch_size=1,32 paths.output_dir=$P"
python3 -m eaq.run $SWEEP 2>&1 | grep -v "it/s" > $OUT/log.txt
python3 -m eaq.run $SWEEP 2>&1 | grep -v "it/s" > $OUT/again.txt
COLS="params.model.name params.precision.name params.compile params.batch_size metrics.quantized_linear_layers metrics.linear_layers metrics.kernel_lowp_gemms metrics.kernel_float_gemms tags.eaq.precision.layer_formats tags.eaq.kernel_check tags.eaq.env.device_name"
python3 -m eaq.report.table --uri sqlite:///$P/mlflow.db --columns $COLS > $OUT/table.md
cat $OUT/table.md; grep -h "^sweep:\|error" $OUT/log.txt $OUT/again.txt
