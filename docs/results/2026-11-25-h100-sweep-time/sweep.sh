#!/usr/bin/env bash
# Issue 13's H100 goal, in one device call (about 5 minutes with the install): the README's
# sweep on the DistilBERT-base shape from an empty output folder and an empty device cache
# (calibrations ahead of the runs, eaq/tasks/ahead.py; trace margins of one sample), then the
# same sweep with the per-run protocol as the control (every run measures its own idle baseline
# and its own peaks: trials.idle_reuse=false calibrate_ahead=false, a device cache of its own),
# then the first sweep again into a fresh output folder with the device cache kept (calibrations
# as a repeated sweep on this machine finds them), and a summary of the three beside the
# 2026-11-24 sweep's runs (../2026-11-24-h100-sweep-time/new-runs.csv, 102.8 s). The control runs
# on the same GPU between the two, so energy per configuration is compared within one call: across
# calls (other machines, other temperatures) fp16 read 28.6-37.3 mJ in sweeps of the same protocol.
#   bash docs/results/2026-11-25-h100-sweep-time/sweep.sh [extra overrides for every sweep...]
#   (env: TRIALS=1,2  MODEL=distilbert_base_random  OUT=folder for the results;
#    AHEAD=true forces the calibrations ahead on a CPU, for a dry run; CONTROL=0 skips the control;
#    SEQUENCE='control1 first control2 repeat' runs the sweeps in that order, labels starting with
#    'control' with the per-run protocol, 'noreuse' with the default one but an idle baseline measured
#    by every run (trials.idle_reuse=false, peaks from the shared cache), 'cool' with the default one and
#    a 5 s pause after every run (trials.cooldown_s=5: the GPU idles between runs as under the per-run
#    protocol, but each run's process reaches its warm-up as soon as under the default), the others
#    with the default one;
#    PRECISIONS=fp32,fp16,int8 the precisions each sweep runs;
#    IDLE_CONTEXT=1 measures idle power with and without a CUDA context first, ~40 s: answered on
#    the night of 2026-11-25, 76.1 against 130.8 W)
# Writes $OUT/<label>.log per sweep (each line prefixed with its epoch seconds,
# so the time from the last run to the report and to the sweep's end can be read), $OUT/<label>-runs.csv,
# $OUT/calibrate_ahead.log (the sweeps' processes ahead of the runs), $OUT/top.txt.gz (the busy processes of the host every
# 0.5 s), $OUT/traces.tgz (every run's power_trace.csv), $OUT/summary.md and, with
# IDLE_CONTEXT=1, $OUT/idle-context.txt.
set -uo pipefail
here=$(dirname "$0")
python3 -c "import eaq, hydra, torchao" 2>/dev/null || bash docs/results/gpu-install.sh
# Every sweep starts with the packages in the page cache: else the first pays the disk reads.
python3 -c "import eaq.tasks.preload, eaq.run, mlflow" >/dev/null 2>&1
cache=/tmp/eaq-device-cache  # calibrations, idle baseline: shared by first and repeat, fresh for the first
rm -rf "$cache"
# Idle power with and without a CUDA context in the measuring process (about 40 s).
[[ ${IDLE_CONTEXT:-0} == 1 ]] && python3 "$here/idle_context.py" > "$OUT/idle-context.txt" 2>&1

sweep() {  # LABEL CACHE [overrides...]: one sweep from an empty output folder; prints START:END epoch seconds
  local label=$1 cache=$2; shift 2
  local out=/tmp/eaq-$label
  rm -rf "$out"
  local start end
  start=$(date +%s.%N)
  PYTHONUNBUFFERED=1 python3 -m eaq.run -m model=${MODEL:-distilbert_base_random} dataset=synthetic \
    precision=${PRECISIONS:-fp32,fp16,int8} trial=${TRIALS:-1,2} paths.output_dir="$out" paths.cache_dir="$cache" "$@" 2>&1 \
    | grep --line-buffered -v "Warning\|warn(" | while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done > "$OUT/$label.log"
  end=$(date +%s.%N)
  echo "$start:$end"
}

# What holds the host's CPUs while the sweeps run (host-bound configurations read the host as much as the GPU:
# 2026-11-26-h100-sweep-agreement), every half second; each frame's header has the time of day, to the second.
# top's own cost (a few % of one core) falls on every sweep of the call alike.
top -b -c -i -d 0.5 -w 250 > "$OUT/top.txt" 2>&1 &
top_pid=$!
sweeps=()
for label in ${SEQUENCE:-first control repeat}; do  # control*: today's per-run protocol, each with a fresh cache of its own
  if [[ $label == control* ]]; then
    [[ ${CONTROL:-1} == 1 ]] || continue
    rm -rf /tmp/eaq-$label-cache
    span=$(sweep $label /tmp/eaq-$label-cache trials.idle_reuse=false calibrate_ahead=false "$@")
  else
    variant=()
    case $label in
      noreuse*) variant=(trials.idle_reuse=false) ;;
      cool*) variant=(trials.cooldown_s=5) ;;
    esac
    span=$(sweep $label $cache calibrate_ahead=${AHEAD:-null} "${variant[@]}" "$@")
    # what this sweep's process ahead of the runs did (calibrations, or nothing with the cache filled)
    echo "== $label" >> "$OUT/calibrate_ahead.log"
    cat /tmp/eaq-$label/multirun/*/calibrate_ahead.log >> "$OUT/calibrate_ahead.log" 2>/dev/null || echo "(nothing done ahead)" >> "$OUT/calibrate_ahead.log"
  fi
  sweeps+=("$label=/tmp/eaq-$label/mlflow.db:$span")
done
kill $top_pid 2>/dev/null; gzip -f "$OUT/top.txt"
# Every run's power trace (window and margins), to see whether a slow run's window dips throughout or in bursts.
(cd /tmp && find $(printf 'eaq-%s ' ${SEQUENCE:-first control repeat}) -name power_trace.csv 2>/dev/null | tar czf "$OUT/traces.tgz" -T -)
python3 "$here/summarize.py" "${sweeps[@]}" "2026-11-24=$here/../2026-11-24-h100-sweep-time/new-runs.csv:102.8" \
  --settings "in this order on one GPU: ${SEQUENCE:-first control repeat}. control*: the per-run protocol, every run its own idle baseline and peaks (trials.idle_reuse=false calibrate_ahead=false, a fresh cache of its own); noreuse*: the default protocol with trials.idle_reuse=false; cool*: the default protocol with trials.cooldown_s=5; the others: the default protocol, the first of them from an empty device cache (calibrations ahead), the later ones with that cache kept, each from a fresh output folder; 2026-11-24: that day's new-runs.csv" \
  --csv-dir "$OUT" | tee "$OUT/summary.md"
