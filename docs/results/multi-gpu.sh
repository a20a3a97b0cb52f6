#!/usr/bin/env bash
# Issue 17's GPU evidence: the same sweep on one GPU and on two GPUs of one host.
#   OUT=... bash docs/results/multi-gpu.sh
# 1. One GPU: the sweep one job after another on cuda:0 (Hydra's basic launcher).
# 2. Two GPUs: the same sweep with hydra/launcher=gpus, one job per GPU at a time, each on its
#    own GPU slot (eaq/slots.py), neighbours recorded (tag eaq.neighbours).
# 3. The comparison (python -m eaq.report.multi_gpu): each sweep's wall time and their ratio
#    (done when two <= 0.55 x one), and per configuration the energy per sample of each
#    sweep, mean +- sample std over its trials, and whether the two means agree within the
#    runs' own trial-to-trial spread (|mean one - mean two| <= the larger std).
# Both sweeps write their own store (no resume across them) under $WORK; $OUT gets the
# stores, the logs and the comparison (comparison.txt).
# Environment: MODELS=gpt2_small_random PRECISIONS=fp32,bf16 BATCHES=8,64 TRIALS_LIST=1,2,3
# SAMPLER=nvml PROTOCOL=gpu_energy DEVICE=cuda (one GPU: $DEVICE:0; two: the slots pick)
# SLOTS=2 (the second sweep's GPUs) WORK=/tmp/eaq-multi-gpu ORDER="one two" (which sweep runs
# first: "two one" shows whether the second sweep's GPUs, already warm, read differently). A CPU dry run (slots without
# GPUs, both sweeps on the CPU, energy not measured):
#   OUT=/tmp/out DEVICE=cpu SAMPLER=none PROTOCOL=quick MODELS=bert_tiny_random \
#     PRECISIONS=fp32 BATCHES=4 TRIALS_LIST=1,2 bash docs/results/multi-gpu.sh
set -euo pipefail
export PYTHONUNBUFFERED=1
: "${OUT:?set OUT to the folder the evidence goes to}"
MODELS=${MODELS:-gpt2_small_random} PRECISIONS=${PRECISIONS:-fp32,bf16} BATCHES=${BATCHES:-8,64}
TRIALS_LIST=${TRIALS_LIST:-1,2,3} SAMPLER=${SAMPLER:-nvml} PROTOCOL=${PROTOCOL:-gpu_energy}
DEVICE=${DEVICE:-cuda} SLOTS=${SLOTS:-2} WORK=${WORK:-/tmp/eaq-multi-gpu} ORDER=${ORDER:-one two}
# The GPU image lacks Hydra's joblib launcher: fill the wheelhouse with
# `../shared/tools/gpu-wheelhouse .whl hydra-joblib-launcher joblib` before the device call.
python3 -c "import eaq, torchao" 2>/dev/null || bash docs/results/gpu-install.sh
python3 -c "import hydra_plugins.hydra_joblib_launcher" 2>/dev/null \
  || python3 -m pip install -q --no-index --find-links .whl hydra-joblib-launcher joblib
rm -rf "$WORK" && mkdir -p "$WORK" "$OUT"
SWEEP="model=$MODELS precision=$PRECISIONS batch_size=$BATCHES trial=$TRIALS_LIST seq_len=128 dataset=synthetic sampler=$SAMPLER trials=$PROTOCOL"
ONE_DEVICE=$DEVICE; [[ $DEVICE == cuda ]] && ONE_DEVICE=cuda:0
nvidia-smi -L > "$OUT/gpus.txt" 2>&1 || echo "no nvidia-smi" > "$OUT/gpus.txt"

sweep() {  # NAME OVERRIDES...: one timed sweep into $WORK/NAME; its wall time into $WORK/NAME.wall_s
  local name=$1; shift
  local start; start=$(date +%s.%N)
  python3 -m eaq.run -m $SWEEP "$@" paths.output_dir="$WORK/$name" gpu_slots.dir="$WORK/slots" 2>&1 \
    | grep -v "it/s" | tee "$OUT/log-$name.txt"
  python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$start" > "$WORK/$name.wall_s"
  cp "$WORK/$name/mlflow.db" "$OUT/$name-mlflow.db"
}

for name in $ORDER; do
  case $name in
    one) sweep one device="$ONE_DEVICE" ;;
    two) sweep two hydra/launcher=gpus gpu_slots.count="$SLOTS" device="$DEVICE" ;;
    *) echo "ORDER names the sweeps one and two, not '$name'" >&2; exit 2 ;;
  esac
done

python3 -m eaq.report.multi_gpu \
  --one "sqlite:///$WORK/one/mlflow.db" --one-wall-s "$(cat "$WORK/one.wall_s")" \
  --two "sqlite:///$WORK/two/mlflow.db" --two-wall-s "$(cat "$WORK/two.wall_s")" | tee "$OUT/comparison.txt"
