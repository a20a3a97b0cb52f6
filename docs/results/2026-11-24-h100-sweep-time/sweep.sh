#!/usr/bin/env bash
# Issue 13's H100 side by side, in one device call (about 4-5 minutes with the install):
# the README's sweep on the DistilBERT-base shape from an empty output folder, with the
# new protocol, then the same sweep with today's protocol settings (the settle rule and
# calibration window before 2026-11-24), and a summary of both.
#   bash docs/results/2026-11-24-h100-sweep-time/sweep.sh [extra overrides for both sweeps...]
#   (env: TRIALS=1,2  MODEL=distilbert_base_random  OUT=folder for the results)
# Writes $OUT/new.log, $OUT/today.log, $OUT/new-runs.csv, $OUT/today-runs.csv, $OUT/summary.md.
set -uo pipefail
here=$(dirname "$0")
python3 -c "import eaq, hydra, torchao" 2>/dev/null || bash docs/results/gpu-install.sh
# Both sweeps start with the packages in the page cache: else the first pays the disk reads.
python3 -c "import eaq.tasks.preload, eaq.run, mlflow" >/dev/null 2>&1
TODAY="trials.warmup_rule=pairs trials.roofline_window_s=5"

sweep() {  # LABEL [overrides...]: one sweep from an empty output folder; prints its wall seconds
  local label=$1; shift
  local out=/tmp/eaq-$label
  rm -rf "$out"
  local start end
  start=$(date +%s.%N)
  PYTHONUNBUFFERED=1 python3 -m eaq.run -m model=${MODEL:-distilbert_base_random} dataset=synthetic \
    precision=fp32,fp16,int8 trial=${TRIALS:-1,2} paths.output_dir="$out" "$@" \
    2>&1 | grep -v "Warning\|warn(" > "$OUT/$label.log"
  end=$(date +%s.%N)
  python3 -c "print($end - $start)"
}

new_wall=$(sweep new "$@")
# shellcheck disable=SC2086
today_wall=$(sweep today $TODAY "$@")
python3 "$here/summarize.py" "new=/tmp/eaq-new/mlflow.db:$new_wall" "today=/tmp/eaq-today/mlflow.db:$today_wall" \
  --settings "today: $TODAY" --csv-dir "$OUT" | tee "$OUT/summary.md"
