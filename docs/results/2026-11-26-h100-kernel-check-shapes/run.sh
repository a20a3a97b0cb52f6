#!/usr/bin/env bash
# The kernel check with its per-shape fallback rule (kernel_check.fallbacks_by_shape) on the lent H100: every
# quantized precision, eager and compiled, at one row (batch 1: the shapes cuBLAS refuses most) and at 32, on a
# GPT-2-small and the 1.1B Llama shape. No energy (sampler=none): a run passes or fails its kernel check.
# Run from the repository root; $OUT receives the log and the table. PART=a|b picks a half (default both); each sweep
# stops (Ctrl-C) after SWEEP_S seconds (default 420), and the next call's sweep resumes it (resume skips FINISHED runs).
set -uo pipefail
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > $OUT/install.txt 2>&1
P=/tmp/eaq-kernel-check
COMMON="dataset=synthetic sampler=none trials=quick precision.kernel_check=true seq_len=128 paths.output_dir=$P"
COLS="params.model.name params.precision.name params.compile params.batch_size metrics.quantized_linear_layers metrics.linear_layers metrics.kernel_lowp_gemms metrics.kernel_float_gemms tags.eaq.kernel_check"
if [[ ${PART:-a} == a || -z ${PART:-} ]]; then
  timeout -s INT ${SWEEP_S:-420} python3 -m eaq.run -m model=gpt2_small_random,llama_1b_random precision=int8,fp8,int8_weight_only,int4_weight_only \
    compile=false batch_size=1,32 $COMMON 2>&1 | grep -v "it/s" | tee -a $OUT/log.txt
fi
if [[ ${PART:-b} == b || -z ${PART:-} ]]; then
  timeout -s INT ${SWEEP_S:-420} python3 -m eaq.run -m model=gpt2_small_random,llama_1b_random precision=int8,fp8,int8_weight_only,int4_weight_only \
    compile=true batch_size=1,32 $COMMON 2>&1 | grep -v "it/s" | tee -a $OUT/log.txt
fi
python3 -m eaq.report.table --uri sqlite:///$P/mlflow.db --columns $COLS > $OUT/table.md
python3 - > $OUT/failures.txt <<'PY'
from mlflow.tracking import MlflowClient
c = MlflowClient(tracking_uri="sqlite:////tmp/eaq-kernel-check/mlflow.db")
for r in c.search_runs([e.experiment_id for e in c.search_experiments()]):
    if r.data.tags.get("eaq.kind") == "benchmark" and r.info.status != "FINISHED":
        print(r.info.run_name, r.data.params.get("compile"), r.info.status, r.data.tags.get("eaq.error", "")[:600])
PY
cp $P/mlflow.db $OUT/mlflow.db
cat $OUT/table.md $OUT/failures.txt
