#!/usr/bin/env bash
# Issue 11's H100 evidence, in two device calls of at most 9.5 minutes each (LIMIT_S stops a part at
# its deadline, counted from the script's start, the install included, so the call keeps time to copy
# back what ran; 0: no deadline):
#   PARTS=energy LIMIT_S=555 OUT=... bash docs/results/layers-gpu.sh    # about 8.5 min
#   PARTS=plan   LIMIT_S=555 OUT=... bash docs/results/layers-gpu.sh distilbert_base_random   # one model, 6.5-8.5 min
# Arguments: [MODELS] [PRECISIONS], defaults distilbert_base_random,gpt2_small_random and bf16,fp8.
#
# energy: task=layers, 3 trials of every model x precision at batch 64, seq 128, synthetic token ids
#   (no tokenizer needed there), sampler=nvml, trials=gpu_table (3 s whole-model window, 3 s replay
#   window per component type and one for the blocks replayed whole; the idle baseline, 2 s, is
#   measured once and reused while it holds: trials.idle_reuse), layers.cuda_graphs on (the
#   default: every window replays CUDA graphs; the tag eaq.layers.cuda_graphs says what fell back).
#   Measured on 2026-11-24 (the same part, one call): 12 runs in 493 s from Hydra's start, 34-40 s
#   per DistilBERT run and 41-44 s per GPT-2 run; ~40 s of install before. The windows are fixed in
#   seconds, so faster passes (the mask and KV-cache fixes of 2026-11-25) do not shorten it.
#   Summary: $OUT/layers-summary.txt (per type: share, both methods, trial-to-trial spread; per trial:
#   capture ratios, components only and with the blocks' own ops, the graphed whole pass against
#   the eager kernels, whether the run is valid and why not).
# plan: one launch per model, then two for all models (each launch costs a start-up, ~20-30 s):
#   1. per model, a task=layers run in bf16 choosing which components to lower to fp8 within a drift
#      budget (KL against bf16 <= the model's PLAN_KL entry, on synthetic ids: random weights have no
#      task quality). PLAN_SAMPLER=none
#      by default: the plan ranks components by their share of the pass's time, not of measured energy
#      (replay), which saves the energy windows (~30 s per model); PLAN_SAMPLER=nvml ranks by energy.
#      The plan's own energy is measured in step 2 either way. PLAN_SAVING=compiled (the default since
#      the night of 2026-11-25): the run also measures the whole pass compiled (COMPILE_TUNING, as the
#      bench) in bf16 and with each component type's layers in fp8, one window each (with PLAN_SAMPLER=none:
#      time), and lowers only components of types that came out cheaper; one compilation more per component type with a lowerable layer, plus two (the base first and last):
#      the whole plan run took 162 s (GPT-2) and 61 s (DistilBERT) on 2026-11-25 (late). Its passes take the bench's inputs (mask, KV cache) and, with
#      layers.cuda_graphs (default on), Inductor's CUDA graphs as the bench's CUDA_GRAPHS: that call had
#      neither, and DistilBERT's base pass took 2.97 ms there against 1.95 in the bench (plan-vs-uniform.txt
#      now ends with this comparison). `assumed`: ranks by bf16 cost share as if lowering saved it (GPT-2's plan
#      came out off the front twice); `measured`: eager components in fp8 too, but every fp8 component took
#      1.9-4.6x bf16's time eagerly (docs/results/2026-11-25-h100-layers/night-saving), so it lowers nothing.
#      The budgets (PLAN_KL, "preset=limit,...,fallback") are per model because the drifts differ 46x.
#      On 2026-11-25 (docs/results/2026-11-25-h100-layers) KL 0.01 never bound: the plans lowered all
#      that fp8 takes (= uniform fp8) at KL 1.38e-3 (GPT-2-small) and 3.0e-5 (DistilBERT-base), the
#      single components measured 1.3e-5 (block 11 attention) to 3.4e-4 (block 0 FFN) on GPT-2 (sum
#      1.8e-3) and 5e-7 (attention) to 6e-6 (FFN), head 1.5e-5 on DistilBERT (sum 4.4e-5). The defaults,
#      about half the all-lowered drift (gpt2_small_random=7e-4, distilbert_base_random=1.5e-5), make
#      the plan choose: it keeps the components with the most drift per unit of cost in bf16 (GPT-2's
#      block 0 FFN alone is a quarter of its drift) and lowers the rest. The target stays fp8, not int8:
#      uniform int8, compiled, cost 1.7x (DistilBERT) and 1.3x (GPT-2) bf16's energy per sample at this
#      shape, so lowering to int8 only moves away from the front (and the plan ranks components by the
#      base precision's cost share, as if lowering saved it). Caveat from the same run: fp8 did not beat
#      bf16 on energy either (21.36 vs 21.30, 57.57 vs 57.23 mJ/sample, ranges overlapping), so a
#      binding fp8 plan lies between bf16 and fp8 in drift and, within the noise, in energy.
#   2. the plans (precision=mixed) and 3. uniform bf16, fp8 and int8, TRIALS_LIST (1,2,3) trials each,
#      interleaved: per trial a launch of the plans and one of the uniform precisions, the order of the
#      two launches and of the precisions within the uniform one alternating from trial to trial (on
#      2026-11-25 the plans ran first and the uniform runs after,
#      and the order of bf16 and fp8 flipped between two calls by 5-10%: device state was confounded
#      with precision). 2 x 3 launches of ~15-20 s start-up each: one model per call.
#   Steps 2 and 3 log fidelity to fp32 (trials.fidelity_on_synthetic, on ids of one fixed seed,
#   computed once per configuration), the drift axis of the front: DistilBERT's classifier logs
#   agreement and KL, GPT-2's LM head top-1 next-token agreement only (the reference keeps token ids,
#   not 50257-wide logits); the plan's budget is KL against bf16, on the plan run's ids.
#   Steps 2 and 3 run trial by trial, so a deadline cuts the last trials, never all of a configuration's;
#   they are compiled with Inductor's defaults for every precision (COMPILE_TUNING=false, as the
#   precision table's compiled runs: 15-26 s a run there; tuned, GPT-2-medium fp8 took 3 minutes to
#   compile). On 2026-11-25 (evening) both models, uniform 2 trials, launched apart: 541 s, the last
#   uniform run cut. Estimate for one model, interleaved: 40 s install + 45-115 s plan + 12 compiled runs
#   x 15-20 s + 7 start-ups x 15-20 s = 6.5-8.5 min. Table: $OUT/plan-vs-uniform.txt (eaq.report.table
#   --preset front: energy per sample, drift from fp32, layers lowered, validity).
# Environment: TRIALS_LIST=1,2,3 BATCH=64 SEQ=128 PLAN_KL=distilbert_base_random=1.5e-5,gpt2_small_random=7e-4,0.01
# COMPILE=true COMPILE_TUNING=false
# PROTOCOL=gpu_table SAMPLER=nvml PLAN_SAMPLER=none
# WORK=/tmp/eaq-layers. $OUT gets at most 6 files per part (stores, and a tarball of each store's
# artifacts: a device call brings back files two folders deep at most; the plans are in the
# plan-choice tarball).
# A CPU dry run of each part:
#   OUT=/tmp/out SAMPLER=none PROTOCOL=quick BATCH=2 SEQ=16 COMPILE=false TRIALS_LIST=1,2 PARTS=energy \
#     bash docs/results/layers-gpu.sh bert_tiny_random,gpt2_tiny_random fp32
#   (the same with PARTS=plan)
set -uo pipefail
export PYTHONUNBUFFERED=1
MODELS=${1:-distilbert_base_random,gpt2_small_random} PRECISIONS=${2:-bf16,fp8}
SAMPLER=${SAMPLER:-nvml} PROTOCOL=${PROTOCOL:-gpu_table} BATCH=${BATCH:-64} SEQ=${SEQ:-128} TRIALS_LIST=${TRIALS_LIST:-1,2,3}
PARTS=${PARTS:-energy} WORK=${WORK:-/tmp/eaq-layers} LIMIT_S=${LIMIT_S:-0}
DEADLINE=$((SECONDS + LIMIT_S))
python3 -c "import eaq, torchao, scipy" 2>/dev/null || bash docs/results/gpu-install.sh
COMMON="batch_size=$BATCH seq_len=$SEQ dataset=synthetic trials=$PROTOCOL paths.cache_dir=$WORK/cache"
mkdir -p $WORK
left() {  # seconds to the deadline for `timeout` (0: none); fails when the deadline has passed
  ((LIMIT_S == 0)) && { echo 0; return 0; }
  local s=$((DEADLINE - SECONDS - 20))  # 20 s kept for the copies into $OUT
  ((s > 0)) && echo $s
}
run_eaq() {  # LOG ARGS...: python -m eaq.run ARGS until the deadline (SIGINT: the run in progress ends KILLED)
  local log=$1 limit; shift
  limit=$(left) || { echo "deadline reached, skipped: $*" | tee -a $OUT/$log; return 1; }
  timeout -s INT $limit python3 -m eaq.run "$@" 2>&1 | grep -v "it/s" | tee -a $OUT/$log
}
budget_of() {  # MODEL: its entry in PLAN_KL ("preset=limit,...,fallback"), else the fallback, else 0.01
  local entry fallback=0.01
  for entry in ${PLAN_KL//,/ }; do
    [[ $entry == "$1="* ]] && { echo "${entry#*=}"; return 0; }
    [[ $entry == *=* ]] || fallback=$entry
  done
  echo $fallback
}
keep() {  # a store and its artifacts, into $OUT
  cp $WORK/$1/mlflow.db $OUT/$1-mlflow.db && tar czf $OUT/$1-artifacts.tgz -C $WORK/$1 mlartifacts
}

if [[ $PARTS == *energy* ]]; then
  # Impact off: it is the CPU evidence's part, and random weights have none.
  run_eaq log-layers.txt -m task=layers model=$MODELS precision=$PRECISIONS trial=$TRIALS_LIST layers.impact=false $COMMON \
    sampler=$SAMPLER paths.output_dir=$WORK/layers
  keep layers
  # The summary from the store alone (MLflow artifacts), as the report would read it.
  python3 - "$WORK/layers" <<'EOF' | tee $OUT/layers-summary.txt
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
    tables = {}
    for name in ("component_types", "outside"):
        path = client.download_artifacts(run.info.run_id, f"layers/{name}.csv", tempfile.mkdtemp())
        tables[name] = list(csv.DictReader(open(path)))
    types = {r["type"]: r for r in tables["component_types"]} | {f"outside:{r['entry']}": r for r in tables["outside"]}
    key = (run.data.params["model.name"], run.data.params["precision.name"])
    by_config[key].append((run.data.metrics, run.data.tags, types))
spread = lambda xs: 100 * (max(xs) - min(xs)) / statistics.mean(xs) if len(xs) > 1 else float("nan")  # noqa: E731
mean = lambda xs: statistics.mean(xs) if xs else float("nan")  # noqa: E731

def values_of(trials, kind, column):
    """One column of one type's row, per trial (empty cells left out: not measured)."""
    return [float(t[kind][column]) for _, _, t in trials if t.get(kind) and t[kind].get(column, "") != ""]

for (model, precision), trials in sorted(by_config.items()):
    print(f"== {model} {precision}: {len(trials)} trials; CUDA graphs: {trials[0][1].get('eaq.layers.cuda_graphs')}")
    print("type share time_ms replay_mj attribution_mj replay_spread_pct attribution_spread_pct")
    for kind in trials[0][2]:
        values = lambda column: values_of(trials, kind, column)  # noqa: E731
        replay, attribution = values("energy_replay_mj_per_pass"), values("energy_attribution_mj_per_pass")
        print(kind, f"{mean(values('energy_share')):.3f}", f"{mean(values('time_ms_per_pass')):.3f}", f"{mean(replay):.3f}", f"{mean(attribution):.3f}",
              f"{spread(replay):.1f}", f"{spread(attribution):.1f}")
    # The issue's bar: every type above 5% of the energy within 5% spread (both methods), and every
    # trial's capture ratio, components only and with the blocks' own ops, within 0.95-1.05.
    wide = [f"{k} {method}" for k in trials[0][2] if not k.startswith("outside:")
            for method, column in (("replay", "energy_replay_mj_per_pass"), ("attribution", "energy_attribution_mj_per_pass"))
            if mean(values_of(trials, k, "energy_share")) > 0.05 and not spread(values_of(trials, k, column)) <= 5]
    print("bar, spread <= 5% for types above 5%:", "met" if not wide else "missed by " + ", ".join(wide))
    for ratio in ("layers_capture_ratio_replay", "layers_capture_ratio_attribution"):
        for suffix in ("", "_with_blocks"):
            found = [m.get(ratio + suffix, float("nan")) for m, _, _ in trials]
            print(f"bar, {ratio + suffix} in 0.95-1.05:", "met" if all(0.95 <= r <= 1.05 for r in found) else "missed",
                  " ".join(f"{r:.3f}" for r in found))
    # The graphed whole pass against the eager pass's kernels (diag.py's question, from the run's own
    # metrics): near 1 when the graph runs the eager computation; above 1.3 the run is invalid.
    print("per trial: whole_ms kernel_ms whole/kernels energy_per_sample_mj | capture replay, attribution, time | "
          "with blocks: replay, attribution, time | valid")
    for m, tags, _ in trials:
        get = lambda k: m.get(k, float("nan"))  # noqa: E731
        print(f"{get('layers_whole_model_time_ms'):.3f} {get('layers_kernel_time_ms'):.3f} "
              f"{get('layers_whole_model_time_ms') / get('layers_kernel_time_ms'):.2f} {get('energy_per_sample_mj'):.2f} | "
              f"{get('layers_capture_ratio_replay'):.3f} {get('layers_capture_ratio_attribution'):.3f} "
              f"{get('layers_time_capture_ratio'):.3f} | {get('layers_capture_ratio_replay_with_blocks'):.3f} "
              f"{get('layers_capture_ratio_attribution_with_blocks'):.3f} {get('layers_time_capture_ratio_with_blocks'):.3f} | "
              f"{tags.get('eaq.valid', 'n/a')} {tags.get('eaq.valid.reasons', '')}")
EOF
fi

if [[ $PARTS == *plan* ]]; then
  if [[ $PRECISIONS == *fp8* ]]; then TARGET=fp8 BASE=bf16 UNIFORM=bf16,fp8,int8; else TARGET=int8 BASE=${PRECISIONS%%,*} UNIFORM=${PRECISIONS%%,*},int8; fi
  BENCH="compile=${COMPILE:-true} compile_tuning=${COMPILE_TUNING:-false} cuda_graphs=${CUDA_GRAPHS:-true} trials.fidelity_on_synthetic=true $COMMON"
  BENCH="$BENCH sampler=$SAMPLER paths.output_dir=$WORK/plan-bench"
  PLANS=$WORK/plans PLAN_KL=${PLAN_KL:-distilbert_base_random=1.5e-5,gpt2_small_random=7e-4,0.01}
  # 1. Each model's plan, within its own budget.
  for model in ${MODELS//,/ }; do
    run_eaq log-plan.txt -m task=layers model=$model precision=$BASE layers.target=$TARGET layers.ablation=false \
      layers.budget=impact layers.budget_limit=$(budget_of $model) layers.saving=${PLAN_SAVING:-compiled} compile_tuning=${COMPILE_TUNING:-false} $COMMON \
      sampler=${PLAN_SAMPLER:-none} paths.output_dir=$WORK/plan-choice
  done
  # Each model's newest plan, as $PLANS/plan-<model.name>.yaml; prints the presets that have one.
  PLANNED=$(python3 - "$WORK/plan-choice" "$PLANS" "$MODELS" 2>>$OUT/log-plan.txt <<'EOF'
import shutil, sys, tempfile
from pathlib import Path
from mlflow.tracking import MlflowClient
store, plans, models = sys.argv[1], Path(sys.argv[2]), sys.argv[3].split(",")
plans.mkdir(parents=True, exist_ok=True)
client = MlflowClient(tracking_uri=f"sqlite:///{store}/mlflow.db")
experiments = [e.experiment_id for e in client.search_experiments()]
runs = client.search_runs(experiments, "tags.`eaq.kind` = 'layers' and attributes.status = 'FINISHED'",
                          order_by=["attributes.start_time DESC"]) if experiments else []
planned = {}
for run in runs:  # newest first: an earlier call's plan in the same WORK is not taken
    preset, name = run.data.tags.get("eaq.group.model"), run.data.params.get("model.name")
    if preset in planned or preset not in models or "eaq.layers.plan" not in run.data.tags:  # this call's models only
        continue
    shutil.copy(client.download_artifacts(run.info.run_id, "layers/plan.yaml", tempfile.mkdtemp()), plans / f"plan-{name}.yaml")
    planned[preset] = name
    print(f"plan for {preset}: {run.data.tags['eaq.layers.plan']}", file=sys.stderr)
print(",".join(planned))
EOF
)
  [[ -n $PLANNED ]] || echo "no plan for any of $MODELS" | tee -a $OUT/log-plan.txt
  # 2. The plans and 3. the uniform precisions, interleaved: per trial one launch of each, their order
  # alternating, so that neither side always runs on a device the other has just warmed (on 2026-11-25 the
  # mixed runs all ran first, and bf16's and fp8's order flipped between two calls by 5-10%). One launch
  # cannot hold both: precision.plan is refused for a uniform precision. A deadline cuts the last trials.
  mixed() { [[ -n $PLANNED ]] && run_eaq log-plan.txt -m trial=$1 model=$PLANNED precision=mixed "precision.plan=$PLANS/plan-\${model.name}.yaml" $BENCH; }
  uniform() { run_eaq log-plan.txt -m trial=$1 model=$MODELS precision=$2 $BENCH; }
  REVERSED=$(tr ',' '\n' <<< "$UNIFORM" | tac | paste -sd, -)  # the uniform precisions' own order alternates too
  n=0
  for trial in ${TRIALS_LIST//,/ }; do
    if ((n++ % 2 == 0)); then mixed $trial; uniform $trial $UNIFORM; else uniform $trial $REVERSED; mixed $trial; fi
  done
  python3 -m eaq.report.table --uri sqlite:///$WORK/plan-bench/mlflow.db --preset front | tee $OUT/plan-vs-uniform.txt
  # Each configuration's place on the front, and whether the trials separate it (eaq/report/front.py).
  python3 -m eaq.report.front --uri sqlite:///$WORK/plan-bench/mlflow.db | tee -a $OUT/plan-vs-uniform.txt
  # Did the plan run's compiled savings measure the pass the bench runs? Its compiled base pass against the
  # bench's base-precision runs (on 2026-11-25, late, without the bench's mask and graphs: 2.97 against 1.95 ms).
  python3 - "$WORK" "$BASE" <<'EOF' | tee -a $OUT/plan-vs-uniform.txt
import csv, sys, tempfile
from mlflow.tracking import MlflowClient
work, base = sys.argv[1], sys.argv[2]
def runs(store, query):
    client = MlflowClient(tracking_uri=f"sqlite:///{work}/{store}/mlflow.db")
    return client, client.search_runs([e.experiment_id for e in client.search_experiments()], query)
choice, planned = runs("plan-choice", "tags.`eaq.kind` = 'layers' and attributes.status = 'FINISHED'")
_, bench = runs("plan-bench", f"params.`precision.name` = '{base}' and attributes.status = 'FINISHED'")
for run in planned:
    if "eaq.layers.saving.pass" not in run.data.tags:
        continue
    model = run.data.params["model.name"]
    rows = list(csv.DictReader(open(choice.download_artifacts(run.info.run_id, "layers/plan_saving_by_type.csv", tempfile.mkdtemp()))))
    benched = [r.data.metrics.get("latency_mean_ms") for r in bench if r.data.params.get("model.name") == model]
    print(f"{model}: plan run's compiled {base} pass ({run.data.tags['eaq.layers.saving.pass']}): "
          f"{float(rows[0]['base_per_pass']):.3f} {rows[0]['unit']} (basis {rows[0]['basis']}); bench {base} latency_mean_ms: "
          + " ".join(f"{x:.3f}" for x in benched if x is not None))
EOF
  keep plan-choice
  keep plan-bench
fi
