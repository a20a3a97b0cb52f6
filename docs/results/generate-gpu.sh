#!/usr/bin/env bash
# Issue 16's H100 evidence: generation with prefill and decode measured apart, per output token.
#   OUT=... bash docs/results/generate-gpu.sh MODEL PRECISIONS BATCHES MODE [TRIALS]
# e.g. bash docs/results/generate-gpu.sh llama_1b_random bf16,int4_weight_only 1 compiled 1
# One part: every precision x batch size x trial of MODEL in MODE, with workload=generate:
# prompts of SEQ=256 synthetic token ids, NEW_TOKENS=128 greedy new tokens, sampler=nvml and the
# gpu_table protocol (2 s idle baseline, 3 s prefill and 3 s decode windows, settling warm-up).
# MODE eager: the model as it is (DynamicCache); compiled: the decode step through torch.compile
# over a static KV cache, with CUDA graphs (GRAPHS=true) and Inductor's defaults
# (COMPILE_TUNING=false), the same for every precision. Each run measures in its own process.
# All parts append to one store in WORK (default /tmp/eaq-gen); a configuration already
# FINISHED there is skipped. After each part $OUT gets three files, named by the id of this
# machine's store (a fresh machine starts a new one): generate-ID.db (the store),
# log-generate-ID.txt and table-generate-ID.txt (eaq.report.table --preset generate).
# EXTRA: more overrides for every run (e.g. the kernel check part).
# The queue of parts, most important first: docs/results/2026-11-24-h100-generate/queue.txt
#   bash docs/results/gpu-queue.sh docs/results/2026-11-24-h100-generate/queue.txt
# A CPU dry run:
#   OUT=/tmp/out SAMPLER=none PROTOCOL=quick SEQ=16 NEW_TOKENS=6 GRAPHS=false \
#     bash docs/results/generate-gpu.sh gpt2_tiny_random fp32,int8_weight_only 1,2 compiled
set -uo pipefail
export PYTHONUNBUFFERED=1
MODEL=$1 PRECISIONS=$2 BATCHES=$3 MODE=$4 TRIALS_LIST=${5:-1}
case $MODE in
  compiled) COMPILE="compile=true cuda_graphs=${GRAPHS:-true} compile_tuning=${COMPILE_TUNING:-false}" ;;
  eager) COMPILE="compile=false" ;;
  *) echo "MODE is eager or compiled, not $MODE" >&2; exit 2 ;;
esac
python3 -c "import eaq, torchao" 2>/dev/null || bash docs/results/gpu-install.sh
WORK=${WORK:-/tmp/eaq-gen}
mkdir -p $WORK
ID=$(cat $WORK/id 2>/dev/null || date -u +%Y%m%dT%H%M%S | tee $WORK/id)
echo "== $MODEL $PRECISIONS b$BATCHES $MODE t$TRIALS_LIST ${EXTRA:-}" | tee -a $OUT/log-generate-$ID.txt
python3 -m eaq.run -m trial=$TRIALS_LIST model=$MODEL precision=$PRECISIONS batch_size=$BATCHES $COMPILE \
  workload=generate workload.new_tokens=${NEW_TOKENS:-128} seq_len=${SEQ:-256} dataset=synthetic \
  sampler=${SAMPLER:-nvml} trials=${PROTOCOL:-gpu_table} ${EXTRA:-} paths.output_dir=$WORK paths.cache_dir=$WORK/cache \
  2>&1 | grep -v "it/s" | tee -a $OUT/log-generate-$ID.txt
cp $WORK/mlflow.db $OUT/generate-$ID.db
python3 -m eaq.report.table --preset generate --uri sqlite:///$WORK/mlflow.db > $OUT/table-generate-$ID.txt
