#!/usr/bin/env bash
# One device call (2026-11-25): the diagnostics issue 11 and issue 16 wait on, and where the
# fork server's import time goes (issue 13). Each writes $OUT/<name>.txt.
set -uo pipefail
here=docs/results/2026-11-25-h100-diag
bash docs/results/gpu-install.sh > $OUT/install.txt 2>&1
python3 -c "import eaq.tasks.preload, eaq.run, mlflow" >/dev/null 2>&1   # warm page cache and .pyc
python3 -X importtime -c "import eaq.tasks.preload" 2> $OUT/importtime.txt
( time python3 -c "import eaq.tasks.preload" ) 2>> $OUT/importtime.txt
export PYTHONUNBUFFERED=1
run() { local name=$1 limit=$2; shift 2; echo "== $name" ; timeout $limit "$@" 2>&1 | grep -v "Warning\|warn(\|deprecated\|output = func" > $OUT/$name.txt; tail -25 $OUT/$name.txt; }
TORCH_LOGS=perf_hints run gen-llama-bf16-b1 130 python3 $here/gen_diag.py llama_1b_random bf16 1
TORCH_LOGS=perf_hints run gen-llama-int4-b1 150 python3 $here/gen_diag.py llama_1b_random int4_weight_only 1
run layers-distilbert-bf16 80 python3 docs/results/2026-11-24-h100-layers/diag.py distilbert_base_random bf16
run layers-distilbert-fp8 80 python3 docs/results/2026-11-24-h100-layers/diag.py distilbert_base_random fp8
run layers-gpt2-bf16 80 python3 docs/results/2026-11-24-h100-layers/diag.py gpt2_small_random bf16
