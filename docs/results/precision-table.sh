#!/usr/bin/env bash
# Issue 4's table on the lent H100, one part per device call (each under 10 minutes):
#   bash docs/results/precision-table.sh MODEL SEQ_LEN PRECISION[,PRECISION...]
# e.g. bash docs/results/precision-table.sh gpt2_medium_random 256 bf16,fp8
# Each precision runs in its own process (torchao changes process-wide compiler settings);
# inside it, batch sizes 1, 32, 256 x eager/compiled run one after another (isolate=false).
# Each part writes its own store to $OUT; the table is read from all of them at once:
#   python -m eaq.report.table --preset precision --uri sqlite:///PART1.db sqlite:///PART2.db ...
set -uo pipefail
export PYTHONUNBUFFERED=1
MODEL=$1 SEQ=$2 PRECISIONS=$3
python3 -c "import eaq" 2>/dev/null || bash docs/results/gpu-install.sh
P=/tmp/eaq-table-$MODEL-${PRECISIONS//,/-}; rm -rf $P
for precision in ${PRECISIONS//,/ }; do
  python3 -m eaq.run -m model=$MODEL seq_len=$SEQ precision=$precision batch_size=1,32,256 compile=false,true \
    isolate=false precision.kernel_check=true dataset=synthetic sampler=nvml trials=gpu_table \
    paths.output_dir=$P paths.cache_dir=/tmp/eaq-cache 2>&1 | grep -v "it/s" | tee -a $OUT/log-$MODEL-${PRECISIONS//,/-}.txt
  cp $P/mlflow.db $OUT/$MODEL-${PRECISIONS//,/-}.db
done
python3 -m eaq.report.table --preset precision --uri sqlite:///$P/mlflow.db
