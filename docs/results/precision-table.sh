#!/usr/bin/env bash
# Issue 4's table on the lent H100, one part per call of this script:
#   bash docs/results/precision-table.sh MODEL[,MODEL...] SEQ_LEN PRECISION[,PRECISION...]
# e.g. bash docs/results/precision-table.sh gpt2_medium_random 256 bf16,fp8
# Each precision runs in its own process (nothing it leaves behind reaches the next); inside it,
# models x batch sizes x eager/compiled run one after another (isolate=false). The kernel
# check runs in a second, unmetered process (trials=quick) at CHECK_BATCHES, so no profiler
# session precedes an energy window. COMPILE_TUNING (default false: Inductor's defaults for
# every precision, several times faster to compile than torchao's tuned settings) is
# recorded with each run.
# Environment, with defaults: BATCHES=1,32,256 COMPILES=false,true CHECK_BATCHES=32 (empty:
# no kernel check) SAMPLER=nvml TRIALS=gpu_table COMPILE_TUNING=false, and TAG (appended to
# the part's name, so one precision can run as two parts, e.g. eager and compiled with
# different batch sizes). A dry run on a CPU:
#   OUT=/tmp/out BATCHES=1,4 CHECK_BATCHES=4 SAMPLER=none TRIALS=quick bash docs/results/precision-table.sh gpt2_tiny_random 32 fp32,int8
# Each precision writes its own stores under $OUT/runs; the table reads them all at once:
#   python -m eaq.report.table --preset precision --uri sqlite:///PART1/mlflow.db sqlite:///PART2/mlflow.db ...
set -uo pipefail
export PYTHONUNBUFFERED=1
MODELS=$1 SEQ=$2 PRECISIONS=$3
python3 -c "import eaq, torchao" 2>/dev/null || bash docs/results/gpu-install.sh
for precision in ${PRECISIONS//,/ }; do
  PART=${MODELS//,/-}-$precision${TAG:+-$TAG}
  P=$OUT/runs/$PART; rm -rf $P $P-kernel-check  # under $OUT: a call cut by its time limit still returns every finished run
  COMMON="model=$MODELS seq_len=$SEQ precision=$precision compile=${COMPILES:-false,true} compile_tuning=${COMPILE_TUNING:-false} isolate=false dataset=synthetic paths.cache_dir=/tmp/eaq-cache"
  python3 -m eaq.run -m $COMMON batch_size=${BATCHES:-1,32,256} sampler=${SAMPLER:-nvml} trials=${TRIALS:-gpu_table} paths.output_dir=$P 2>&1 | grep -v "it/s" | tee -a $OUT/log-$PART.txt
  if [[ -n ${CHECK_BATCHES-32} ]]; then
    python3 -m eaq.run -m $COMMON batch_size=${CHECK_BATCHES-32} precision.kernel_check=true sampler=none trials=quick paths.output_dir=$P-kernel-check 2>&1 | grep -v "it/s" | tee -a $OUT/log-$PART.txt
  fi
  python3 -m eaq.report.table --preset precision --uri sqlite:///$P/mlflow.db $( [[ -n ${CHECK_BATCHES-32} ]] && echo sqlite:///$P-kernel-check/mlflow.db )
done
