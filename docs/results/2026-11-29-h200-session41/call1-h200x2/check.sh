#!/usr/bin/env bash
# Session 41 on a lent host with two GPUs (nvidia-h200-x2), the GPU image's packages (torch 2.11, transformers 5.17).
# Sessions 27-40 changed what runs around the windows of a hydra/launcher=gpus sweep (slot checks before the sweep's
# parent run and in each job, one job per configuration at a time, no fork server in the sweep's own process when
# its jobs run in workers, neighbours held at take), tested on the CPU with faked slots. On two real GPUs:
# 1. docs/results/multi-gpu.sh unchanged: the same 12-run sweep on one GPU and on two (wall ratio, energy per sample
#    per configuration, slots and neighbours per run), as on 2026-11-26 with that day's code;
# 2. a configuration given twice (compile_tuning is not read by an eager run) on two GPU slots: measured once, the
#    other job skipped, and the sweep's own process never a fork server's parent;
# 3. gpu_slots.count=3 on this two-GPU host: refused once, before any run or store.
# From the repository root: OUT=<folder> bash docs/results/2026-11-29-h200-session41/call1-h200x2/check.sh
set -uo pipefail
out=${OUT:?set OUT}
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
# hydra/launcher=gpus is Hydra's joblib launcher: `../shared/tools/gpu-wheelhouse .whl hydra-joblib-launcher joblib`
python3 -m pip install -q --no-index --find-links .whl hydra-joblib-launcher joblib >> "$out/install.txt" 2>&1
{ nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,temperature.gpu,power.draw,power.limit --format=csv
  nvidia-smi topo -m; nproc; git rev-parse HEAD 2>/dev/null; } > "$out/machine-start.txt" 2>&1
export WORK=${WORK:-/tmp/eaq-s41}
rm -rf "$WORK" && mkdir -p "$WORK" "$out/multi-gpu"

OUT="$out/multi-gpu" WORK="$WORK/multi" bash docs/results/multi-gpu.sh > "$out/multi-gpu/run.log" 2>&1
echo "multi-gpu.sh exit $?" >> "$out/multi-gpu/run.log"
tail -25 "$out/multi-gpu/run.log"

common="model=distilbert_base_random precision=bf16 dataset=synthetic batch_size=32 seq_len=128 sampler=nvml"
python3 -m eaq.run -m hydra/launcher=gpus gpu_slots.count=2 gpu_slots.dir="$WORK/slots" $common compile_tuning=true,false \
  paths.output_dir="$WORK/twice" > "$out/twice.txt" 2>&1 &
sweep=$!
servers=0
while kill -0 $sweep 2>/dev/null; do
  for child in $(pgrep -P $sweep); do
    if tr '\0' ' ' < /proc/$child/cmdline 2>/dev/null | grep -q forkserver; then servers=$((servers + 1)); fi
  done
  sleep 0.5
done
wait $sweep
echo "twice sweep exit $?; fork servers seen as the sweep process's children: $servers" >> "$out/twice.txt"
grep -rh --include="*.log" "same configuration" "$WORK/twice" 2>/dev/null | head -3 >> "$out/twice.txt"
tail -4 "$out/twice.txt"

python3 -m eaq.run -m hydra/launcher=gpus gpu_slots.count=3 gpu_slots.dir="$WORK/slots" $common trial=1,2 \
  paths.output_dir="$WORK/three" > "$out/three.txt" 2>&1
echo "count=3 exit $?; store created: $(test -e "$WORK/three/mlflow.db" && echo yes || echo no)" >> "$out/three.txt"
tail -3 "$out/three.txt"

python3 - "$WORK/twice/mlflow.db" > "$out/twice-runs.txt" 2>&1 <<'PY'
import sys
from mlflow.tracking import MlflowClient
client = MlflowClient(tracking_uri=f"sqlite:///{sys.argv[1]}")
runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
for r in sorted(runs, key=lambda r: r.info.run_name):
    m, t = r.data.metrics, r.data.tags
    keys = ("energy_per_sample_mj", "latency_mean_ms", "run_wall_s", "phase_same_config_s", "sweep_runs")
    print(r.info.run_name, t.get("eaq.kind"), r.info.status, "valid=" + t.get("eaq.valid", "?"),
          {k: round(m[k], 4) for k in keys if k in m}, "| slot:", t.get("eaq.gpu_slot"), "| gpu:", t.get("eaq.env.gpu_uuid"),
          "| neighbours:", t.get("eaq.neighbours"))
PY
cat "$out/twice-runs.txt"
{ nvidia-smi --query-gpu=index,temperature.gpu,power.draw,clocks_throttle_reasons.active --format=csv; } > "$out/machine-end.txt" 2>&1
