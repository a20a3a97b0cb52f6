#!/usr/bin/env bash
# Issue 11's H100 evidence: where the energy goes per component, by replay and attribution.
#   OUT=... bash docs/results/layers-gpu.sh [MODELS] [PRECISIONS]
# defaults: MODELS=distilbert_base_random,gpt2_small_random PRECISIONS=bf16,fp8
# 1. Energy per component: task=layers, 3 trials of every model x precision at batch 64,
#    seq 128, synthetic token ids (no tokenizer needed there), sampler=nvml, the gpu_energy
#    protocol (5 s idle baseline, 5 s whole-model window) and 3 s replay windows per type.
#    Capture ratios (layers_capture_ratio_*) and the per-type tables land in $OUT/layers;
#    the summary at the end prints each type's share, both methods and the trial-to-trial
#    spread (max-min over mean) of each method per model x precision x type.
# 2. The mixed plan: one task=layers run per model in bf16 choosing which components to
#    lower to fp8 within a drift budget (KL <= PLAN_KL on synthetic ids: random weights have no
#    task quality), then task=benchmark of that plan against uniform bf16, fp8 and int8,
#    3 trials each, compiled as the precision table was (COMPILE, default true).
# Environment: TRIALS_LIST=1,2,3 BATCH=64 SEQ=128 PLAN_KL=0.01 COMPILE=true PARTS="energy plan"
# (run only some parts) WORK=/tmp/eaq-layers (stores and artifacts; $OUT gets each store and a
# tarball of its artifacts, since a device call brings back files two folders deep at most). A CPU dry run:
#   OUT=/tmp/out SAMPLER=none PROTOCOL=quick BATCH=2 SEQ=16 COMPILE=false TRIALS_LIST=1 \
#     bash docs/results/layers-gpu.sh bert_tiny_random,gpt2_tiny_random fp32
set -uo pipefail
export PYTHONUNBUFFERED=1
MODELS=${1:-distilbert_base_random,gpt2_small_random} PRECISIONS=${2:-bf16,fp8}
SAMPLER=${SAMPLER:-nvml} PROTOCOL=${PROTOCOL:-gpu_energy} BATCH=${BATCH:-64} SEQ=${SEQ:-128} TRIALS_LIST=${TRIALS_LIST:-1,2,3}
python3 -c "import eaq, torchao, scipy" 2>/dev/null || bash docs/results/gpu-install.sh
COMMON="batch_size=$BATCH seq_len=$SEQ dataset=synthetic sampler=$SAMPLER trials=$PROTOCOL paths.cache_dir=/tmp/eaq-cache"
PARTS=${PARTS:-energy plan} WORK=${WORK:-/tmp/eaq-layers}
mkdir -p $WORK
keep() {  # a store and its artifacts, into $OUT
  cp $WORK/$1/mlflow.db $OUT/$1-mlflow.db && tar czf $OUT/$1-artifacts.tgz -C $WORK/$1 mlartifacts
}

# 1. Energy per component (impact off: it is the CPU evidence's part, and random weights have none).
if [[ $PARTS == *energy* ]]; then
# LIMIT_S: stop part 1's sweep after that many seconds (0: never), so a device call keeps time to copy back what ran.
timeout -s INT ${LIMIT_S:-0} python3 -m eaq.run -m task=layers model=$MODELS precision=$PRECISIONS trial=$TRIALS_LIST layers.impact=false $COMMON \
  paths.output_dir=$WORK/layers 2>&1 | grep -v "it/s" | tee -a $OUT/log-layers.txt
keep layers
fi

# 2. The plan per model, then the plan against uniform precisions.
for model in ${MODELS//,/ }; do
  [[ $PARTS == *plan* ]] || break
  P=$WORK/plan-$model
  if [[ ${PRECISIONS} == *fp8* ]]; then TARGET=fp8; BASE=bf16; else TARGET=int8; BASE=; fi
  python3 -m eaq.run task=layers model=$model precision=${BASE:-${PRECISIONS%%,*}} layers.target=$TARGET layers.ablation=false \
    layers.budget=impact layers.budget_limit=${PLAN_KL:-0.01} $COMMON paths.output_dir=$P 2>&1 | grep -v "it/s" | tee -a $OUT/log-plan.txt
  PLAN=$(find $P/mlartifacts -name plan.yaml | head -1)
  [[ -n $PLAN ]] || { echo "no plan for $model"; continue; }
  cp $PLAN $OUT/plan-$model.yaml
  UNIFORM=$([[ $TARGET == fp8 ]] && echo bf16,fp8,int8 || echo ${PRECISIONS%%,*},int8)
  python3 -m eaq.run -m model=$model precision=$UNIFORM trial=$TRIALS_LIST compile=${COMPILE:-true} $COMMON \
    paths.output_dir=$P-bench 2>&1 | grep -v "it/s" | tee -a $OUT/log-plan.txt
  python3 -m eaq.run -m model=$model precision=mixed precision.plan=$OUT/plan-$model.yaml trial=$TRIALS_LIST compile=${COMPILE:-true} \
    $COMMON paths.output_dir=$P-bench 2>&1 | grep -v "it/s" | tee -a $OUT/log-plan.txt
  python3 -m eaq.report.table --uri sqlite:///$P-bench/mlflow.db --preset energy | tee $OUT/plan-$model-vs-uniform.txt
  keep plan-$model-bench
done

# Summary of part 1 from the store alone (MLflow artifacts), as the report would read it.
[[ $PARTS == *energy* ]] && python3 - "$WORK/layers" <<'EOF' | tee $OUT/layers-summary.txt
import csv, statistics, sys, tempfile
from collections import defaultdict
from mlflow.tracking import MlflowClient
out = sys.argv[1]
client = MlflowClient(tracking_uri=f"sqlite:///{out}/mlflow.db")
runs = client.search_runs([e.experiment_id for e in client.search_experiments()], "tags.`eaq.kind` = 'layers'")
by_config = defaultdict(list)
for run in runs:
    if run.info.status != "FINISHED":
        continue
    rows = list(csv.DictReader(open(client.download_artifacts(run.info.run_id, "layers/component_types.csv", tempfile.mkdtemp()))))
    key = (run.data.params["model.name"], run.data.params["precision.name"])
    by_config[key].append((run.data.metrics, {r["type"]: r for r in rows}))
print("model precision type trials share replay_mj attribution_mj replay_spread_pct attribution_spread_pct capture_replay/attribution per trial")
spread = lambda xs: 100 * (max(xs) - min(xs)) / statistics.mean(xs) if len(xs) > 1 else float("nan")  # noqa: E731
mean = lambda xs: statistics.mean(xs) if xs else float("nan")  # noqa: E731
for (model, precision), trials in sorted(by_config.items()):
    captures = [(m.get("layers_capture_ratio_replay"), m.get("layers_capture_ratio_attribution")) for m, _ in trials]
    for kind in trials[0][1]:
        def values(column):
            return [float(t[kind][column]) for _, t in trials if t.get(kind) and t[kind][column] != ""]
        replay, attribution, share = values("energy_replay_mj_per_pass"), values("energy_attribution_mj_per_pass"), values("energy_share")
        print(model, precision, kind, len(trials), f"{mean(share):.3f}", f"{mean(replay):.3f}", f"{mean(attribution):.3f}",
              f"{spread(replay):.1f}", f"{spread(attribution):.1f}",
              " ".join(f"{c[0]:.3f}/{c[1]:.3f}" if None not in c else "-" for c in captures))
EOF
