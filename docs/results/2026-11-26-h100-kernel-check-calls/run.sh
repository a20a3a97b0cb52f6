#!/usr/bin/env bash
# The kernel check counting each Linear's calls (kernel_check.linear_calls on the eager pass) on the lent GPU, from the
# repository root ($OUT receives the logs and the table): the runs it judges must still pass where every layer runs
# once. GPT-2-small (random weights, batch 1, seq 128, synthetic ids, no sampler): int8 / fp8 / int8_weight_only /
# int4_weight_only, eager and compiled; the mixed plan of docs/results/2026-11-26-h100-mixed-kernel-check eager and
# compiled; generation's decode step (prompt 128, 8 new tokens) in int8, eager and compiled.
set -uo pipefail
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > $OUT/install.txt 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt
P=/tmp/eaq-kernel-check-calls; rm -rf $P
COMMON="model=gpt2_small_random dataset=synthetic sampler=none trials=quick precision.kernel_check=true seq_len=128 batch_size=1 paths.output_dir=$P"
PLAN=$PWD/docs/results/2026-11-26-h100-mixed-kernel-check/plan.yaml
# PART=a: the CUDA-only tests (generation's windows moved to eaq/workloads/windows.py) and the plain precisions;
# PART=b: the mixed plan and generation. The store persists in $P between the calls only on a warm machine, so each
# part writes its own table.
if [[ ${PART:-a} == a ]]; then
  python3 -m pytest -q -p no:cacheprovider tests/test_generate.py tests/test_precision.py -k "on_cuda or host_copies" > $OUT/cuda-tests.txt 2>&1
  tail -3 $OUT/cuda-tests.txt
  python3 -m eaq.run -m precision=int8,fp8,int8_weight_only,int4_weight_only compile=false,true $COMMON 2>&1 | grep -v "it/s" > $OUT/log-a.txt
else
  { python3 -m eaq.run -m precision=mixed precision.plan=$PLAN compile=false,true $COMMON
    python3 -m eaq.run -m precision=int8 workload=generate workload.new_tokens=8 compile=false,true $COMMON
  } 2>&1 | grep -v "it/s" > $OUT/log-b.txt
fi
COLS="params.precision.name params.workload.name params.compile metrics.quantized_linear_layers metrics.linear_layers metrics.kernel_lowp_gemms metrics.kernel_float_gemms tags.eaq.kernel_check"
python3 -m eaq.report.table --uri sqlite:///$P/mlflow.db --columns $COLS > $OUT/table-${PART:-a}.md
python3 - > $OUT/failures-${PART:-a}.txt <<'PY'
from mlflow.tracking import MlflowClient
c = MlflowClient(tracking_uri="sqlite:////tmp/eaq-kernel-check-calls/mlflow.db")
for r in c.search_runs([e.experiment_id for e in c.search_experiments()]):
    if r.data.tags.get("eaq.kind") == "benchmark" and r.info.status != "FINISHED":
        print(r.info.run_name, r.data.params.get("compile"), r.info.status, r.data.tags.get("eaq.error", "")[:600])
PY
cat $OUT/table-${PART:-a}.md; echo "failures:"; cat $OUT/failures-${PART:-a}.txt; grep -h "^sweep:" $OUT/log-*.txt
