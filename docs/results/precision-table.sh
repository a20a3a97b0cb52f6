#!/usr/bin/env bash
# Issue 4's table on the lent H100, one part per device call (each under 10 minutes):
#   bash docs/results/precision-table.sh MODEL SEQ_LEN PRECISION[,PRECISION...]
# e.g. bash docs/results/precision-table.sh gpt2_medium_random 256 bf16,fp8
# Each precision runs in its own process (torchao changes process-wide settings); inside it,
# batch sizes 1, 32, 256 x eager/compiled run one after another (isolate=false). The kernel
# check runs in a second, unmetered pass (trials=quick), so no profiler session precedes an
# energy window. COMPILE_TUNING (default false: Inductor's defaults for every precision, several
# times faster to compile than torchao's tuned settings) is recorded with each run.
# BATCHES, SAMPLER and TRIALS default to 1,32,256, nvml and gpu_table; a dry run on a CPU:
#   OUT=/tmp/out BATCHES=1,4 SAMPLER=none TRIALS=quick bash docs/results/precision-table.sh gpt2_tiny_random 32 fp32,int8
# Each part writes its own store to $OUT; the table reads them all at once:
#   python -m eaq.report.table --preset precision --uri sqlite:///PART1.db sqlite:///PART2.db ...
set -uo pipefail
export PYTHONUNBUFFERED=1
MODEL=$1 SEQ=$2 PRECISIONS=$3
PART=$MODEL-${PRECISIONS//,/-}
python3 -c "import eaq, torchao" 2>/dev/null || bash docs/results/gpu-install.sh
P=/tmp/eaq-table-$PART; rm -rf $P
for precision in ${PRECISIONS//,/ }; do
  SWEEP="model=$MODEL seq_len=$SEQ precision=$precision batch_size=${BATCHES:-1,32,256} compile=false,true compile_tuning=${COMPILE_TUNING:-false} isolate=false dataset=synthetic paths.cache_dir=/tmp/eaq-cache"
  python3 -m eaq.run -m $SWEEP sampler=${SAMPLER:-nvml} trials=${TRIALS:-gpu_table} paths.output_dir=$P 2>&1 | grep -v "it/s" | tee -a $OUT/log-$PART.txt
  python3 -m eaq.run -m $SWEEP precision.kernel_check=true sampler=none trials=quick paths.output_dir=$P/kernel-check 2>&1 | grep -v "it/s" | tee -a $OUT/log-$PART.txt
  cp $P/mlflow.db $OUT/$PART.db; cp $P/kernel-check/mlflow.db $OUT/$PART-kernel-check.db
done
python3 -m eaq.report.table --preset precision --uri sqlite:///$P/mlflow.db sqlite:///$P/kernel-check/mlflow.db
