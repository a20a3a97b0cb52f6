#!/usr/bin/env bash
# Issue 13's H100 goal, in one device call (about 4 minutes with the install): the README's
# sweep on the DistilBERT-base shape from an empty output folder with calibrations measured
# ahead of the runs (eaq/tasks/ahead.py), then the same sweep with calibrate_ahead=false
# (the protocol of 2026-11-24 on this machine), and a summary of both beside the
# 2026-11-24 sweep's runs (../2026-11-24-h100-sweep-time/new-runs.csv, 102.8 s).
#   bash docs/results/2026-11-25-h100-sweep-time/sweep.sh [extra overrides for both sweeps...]
#   (env: TRIALS=1,2  MODEL=distilbert_base_random  OUT=folder for the results;
#    AHEAD=true forces the first sweep's calibrations ahead on a CPU, for a dry run)
# Writes $OUT/ahead.log, $OUT/before.log, $OUT/ahead-runs.csv, $OUT/before-runs.csv,
# $OUT/calibrate_ahead.log (the ahead process's own log) and $OUT/summary.md.
set -uo pipefail
here=$(dirname "$0")
python3 -c "import eaq, hydra, torchao" 2>/dev/null || bash docs/results/gpu-install.sh
# Both sweeps start with the packages in the page cache: else the first pays the disk reads.
python3 -c "import eaq.tasks.preload, eaq.run, mlflow" >/dev/null 2>&1

sweep() {  # LABEL [overrides...]: one sweep from an empty output folder; prints START:END epoch seconds
  local label=$1; shift
  local out=/tmp/eaq-$label
  rm -rf "$out"
  local start end
  start=$(date +%s.%N)
  PYTHONUNBUFFERED=1 python3 -m eaq.run -m model=${MODEL:-distilbert_base_random} dataset=synthetic \
    precision=fp32,fp16,int8 trial=${TRIALS:-1,2} paths.output_dir="$out" "$@" \
    2>&1 | grep -v "Warning\|warn(" > "$OUT/$label.log"
  end=$(date +%s.%N)
  echo "$start:$end"
}

ahead=$(sweep ahead calibrate_ahead=${AHEAD:-null} "$@")
before=$(sweep before calibrate_ahead=false "$@")
cp /tmp/eaq-ahead/multirun/*/calibrate_ahead.log "$OUT/" 2>/dev/null || echo "no calibrate_ahead.log: nothing was calibrated ahead" >&2
python3 "$here/summarize.py" "ahead=/tmp/eaq-ahead/mlflow.db:$ahead" "before=/tmp/eaq-before/mlflow.db:$before" \
  "2026-11-24=$here/../2026-11-24-h100-sweep-time/new-runs.csv:102.8" \
  --settings "ahead: calibrations ahead of the runs (default); before: calibrate_ahead=false; 2026-11-24: that day's new-runs.csv" \
  --csv-dir "$OUT" | tee "$OUT/summary.md"
