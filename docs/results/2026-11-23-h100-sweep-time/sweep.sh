#!/usr/bin/env bash
# Issue 13's H100 measurement: the README's sweep on the DistilBERT-base shape, its wall
# time and the share of it inside measurement windows.
#   [TRIALS=1,2] bash docs/results/2026-11-23-h100-sweep-time/sweep.sh LABEL [extra overrides...]
# Writes $OUT/LABEL.log, $OUT/LABEL-mlflow.db, $OUT/LABEL-artifacts.tgz (the runs' artifacts)
# and $OUT/LABEL-summary.md.
set -uo pipefail
label=$1; shift
here=$(dirname "$0")
python3 -c "import eaq, hydra, torchao" 2>/dev/null || bash docs/results/gpu-install.sh
out=/tmp/eaq-$label
rm -rf "$out"
start=$(date +%s.%N)
PYTHONUNBUFFERED=1 python3 -m eaq.run -m model=distilbert_base_random dataset=synthetic precision=fp32,fp16,int8 trial=${TRIALS:-1,2} \
  paths.output_dir="$out" "$@" 2>&1 | grep -v "Warning\|warn(" | tee "$OUT/$label.log"
end=$(date +%s.%N)
cp "$out/mlflow.db" "$OUT/$label-mlflow.db"
tar czf "$OUT/$label-artifacts.tgz" -C "$out" mlartifacts
python3 "$here/summarize.py" "$out/mlflow.db" "$(python3 -c "print($end - $start)")" | tee "$OUT/$label-summary.md"
