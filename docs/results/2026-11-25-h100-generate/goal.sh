#!/usr/bin/env bash
# Issue 16's goals once the decode step replays as one CUDA graph (2026-11-25): bf16 and
# int4_weight_only compiled with cuda_graphs=true at batch 1, prompt 256, 128 new tokens, on the
# 1.1B Llama shape, then, if the time left allows, on Llama-2-7B's shape. One device call:
#   bash docs/results/2026-11-25-h100-generate/goal.sh          (repository root, .whl carried)
# Before the runs, the CUDA test that a replayed decode step gives the tokens of the step run
# from Python (pytest from .whl: ../shared/tools/gpu-wheelhouse .whl pytest adds it).
# Compiled with Inductor's defaults (compile_tuning=false): the coordinate-descent tuning took
# over 130 s to compile the 1.1B model. Protocol gpu_table: 2 s idle baseline, 3 s windows.
# $OUT gets: install.txt, cuda-test.txt, log-generate-ID.txt, generate-ID.db (the MLflow store),
# table-generate-ID.txt (eaq.report.table --preset generate; the tag eaq.decode.cuda_graph says
# whether decode replayed the graph), and skipped.txt when the 7B shape did not fit.
# Knobs (environment): DEADLINE_S (270: the script's own budget), LARGE_NEEDS_S (150: the least
# time left to start the 7B part), TRIALS (1, or 1,2), SMALL / LARGE (the two presets),
# PRECISIONS, and generate-gpu.sh's own (SAMPLER, PROTOCOL, SEQ, NEW_TOKENS, GRAPHS).
# CPU dry run (no install, no GPU):
#   OUT=/tmp/out SMALL=gpt2_tiny_random LARGE=gpt2_tiny_random PRECISIONS=fp32,int8_weight_only \
#     SAMPLER=none PROTOCOL=quick SEQ=16 NEW_TOKENS=6 GRAPHS=false bash docs/results/2026-11-25-h100-generate/goal.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
DEADLINE_S=${DEADLINE_S:-270} LARGE_NEEDS_S=${LARGE_NEEDS_S:-150} TRIALS=${TRIALS:-1}
SMALL=${SMALL:-llama_1b_random} LARGE=${LARGE:-llama_7b_random} PRECISIONS=${PRECISIONS:-bf16,int4_weight_only}
export WORK=${WORK:-/tmp/eaq-goal}
left() { local s=$((DEADLINE_S - SECONDS)); echo $((s > 1 ? s : 1)); }  # timeout 0 would mean none

python3 -c "import eaq, torchao, hydra, mlflow" 2>/dev/null || bash docs/results/gpu-install.sh > $OUT/install.txt 2>&1
python3 -c "import pytest" 2>/dev/null || python3 -m pip install -q --no-index --find-links .whl pytest >> $OUT/install.txt 2>&1
if python3 -c "import pytest" 2>/dev/null; then
  timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_generate.py -k "on_cuda and llama" -rs > $OUT/cuda-test.txt 2>&1
else
  echo "pytest is neither here nor in .whl: ../shared/tools/gpu-wheelhouse .whl pytest adds it" > $OUT/cuda-test.txt
fi
tail -3 $OUT/cuda-test.txt

# GRAPHS=false on a CPU (cuda_graphs needs a GPU); generate-gpu.sh copies the store and the table after each part.
part() { timeout $(left) bash docs/results/generate-gpu.sh $1 $PRECISIONS 1 compiled $TRIALS; }
part $SMALL
if [ $(left) -ge $LARGE_NEEDS_S ]; then
  part $LARGE
else
  echo "$LARGE not run: $(left) s of DEADLINE_S=$DEADLINE_S left, it needs about $LARGE_NEEDS_S s" | tee $OUT/skipped.txt
fi
# A part stopped by its timeout never copied its store: copy what every finished run left.
ID=$(cat $WORK/id)
cp $WORK/mlflow.db $OUT/generate-$ID.db
python3 -m eaq.report.table --preset generate --uri sqlite:///$WORK/mlflow.db > $OUT/table-generate-$ID.txt
cat $OUT/table-generate-$ID.txt
echo "goal.sh took $SECONDS s"
