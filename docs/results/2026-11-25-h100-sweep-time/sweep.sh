#!/usr/bin/env bash
# Issue 13's H100 goal, in one device call (about 3-4 minutes with the install): the README's
# sweep on the DistilBERT-base shape from an empty output folder and an empty device cache
# (calibrations ahead of the runs, eaq/tasks/ahead.py; trace margins of one sample), then the
# same sweep again into a fresh output folder with the device cache kept (calibrations and
# the idle baseline as a repeated sweep on this machine finds them), and a summary of both
# beside the 2026-11-24 sweep's runs (../2026-11-24-h100-sweep-time/new-runs.csv, 102.8 s).
#   bash docs/results/2026-11-25-h100-sweep-time/sweep.sh [extra overrides for both sweeps...]
#   (env: TRIALS=1,2  MODEL=distilbert_base_random  OUT=folder for the results;
#    AHEAD=true forces the calibrations ahead on a CPU, for a dry run)
# Writes $OUT/first.log, $OUT/repeat.log (each line prefixed with its epoch seconds, so the
# time from the last run to the report and to the sweep's end can be read), $OUT/first-runs.csv,
# $OUT/repeat-runs.csv, $OUT/calibrate_ahead.log (both sweeps' process ahead of the runs), $OUT/summary.md and
# $OUT/idle-context.txt (idle power with and without a CUDA context; IDLE_CONTEXT=0 skips it).
set -uo pipefail
here=$(dirname "$0")
python3 -c "import eaq, hydra, torchao" 2>/dev/null || bash docs/results/gpu-install.sh
# Both sweeps start with the packages in the page cache: else the first pays the disk reads.
python3 -c "import eaq.tasks.preload, eaq.run, mlflow" >/dev/null 2>&1
cache=/tmp/eaq-device-cache  # calibrations, idle baseline: shared by both sweeps, fresh for the first
rm -rf "$cache"
# Idle power with and without a CUDA context in the measuring process (about 40 s): the idle baseline taken
# ahead of the repeat's runs reads NVML alone, without a context (eaq/tasks/idle.py).
[[ ${IDLE_CONTEXT:-1} == 1 ]] && python3 "$here/idle_context.py" > "$OUT/idle-context.txt" 2>&1

sweep() {  # LABEL [overrides...]: one sweep from an empty output folder; prints START:END epoch seconds
  local label=$1; shift
  local out=/tmp/eaq-$label
  rm -rf "$out"
  local start end
  start=$(date +%s.%N)
  PYTHONUNBUFFERED=1 python3 -m eaq.run -m model=${MODEL:-distilbert_base_random} dataset=synthetic \
    precision=fp32,fp16,int8 trial=${TRIALS:-1,2} paths.output_dir="$out" paths.cache_dir="$cache" "$@" 2>&1 \
    | grep --line-buffered -v "Warning\|warn(" | while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done > "$OUT/$label.log"
  end=$(date +%s.%N)
  echo "$start:$end"
}

first=$(sweep first calibrate_ahead=${AHEAD:-null} "$@")
repeat=$(sweep repeat calibrate_ahead=${AHEAD:-null} "$@")
for label in first repeat; do  # what each sweep's process ahead of the runs did (calibrations, or the idle baseline)
  echo "== $label" >> "$OUT/calibrate_ahead.log"
  cat /tmp/eaq-$label/multirun/*/calibrate_ahead.log >> "$OUT/calibrate_ahead.log" 2>/dev/null || echo "(nothing done ahead)" >> "$OUT/calibrate_ahead.log"
done
python3 "$here/summarize.py" "first=/tmp/eaq-first/mlflow.db:$first" "repeat=/tmp/eaq-repeat/mlflow.db:$repeat" \
  "2026-11-24=$here/../2026-11-24-h100-sweep-time/new-runs.csv:102.8" \
  --settings "first: empty output folder and device cache (calibrations ahead, default); repeat: the same sweep again, fresh output folder, device cache kept; 2026-11-24: that day's new-runs.csv" \
  --csv-dir "$OUT" | tee "$OUT/summary.md"
