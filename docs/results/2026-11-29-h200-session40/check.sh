#!/usr/bin/env bash
# Session 40 on a lent GPU, with the GPU image's packages (torch 2.11, transformers 5.17). This session changed no
# measurement window; it changed what runs around them on a GPU host. On the real GPU:
# 1. the energy and measurement tests (NVML's nvidia-smi companion is now kept across sessions of one sampler);
# 2. NVML with its nvidia-smi companion over two sessions of one sampler, as task=layers runs them: the companion
#    must trace the second session too (it was dropped after the first);
# 3. a hydra/launcher=gpus sweep on this host's GPU (DistilBERT-base shape, bf16, 2 trials): it must finish, with no
#    fork server in the sweep's own process (its worker starts its own), the runs on cuda:0 with their slot tags;
# 4. the same sweep with device=cuda:0: refused once, before any run or store (each run refused it as it took its slot);
# 5. task=layers (DistilBERT-base shape, bf16, sampler=nvml_vs_smi, impact off): finishes with energy by both methods.
# From the repository root: OUT=<folder> bash docs/results/2026-11-29-h200-session40/check.sh
set -uo pipefail
out=${OUT:?set OUT}
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
# hydra/launcher=gpus is Hydra's joblib launcher: `../shared/tools/gpu-wheelhouse .whl hydra-joblib-launcher joblib`
python3 -m pip install -q --no-index --find-links .whl hydra-joblib-launcher joblib >> "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw,power.limit --format=csv > "$out/gpu.txt"
export WORK=${WORK:-/tmp/eaq-s40}
rm -rf "$WORK" && mkdir -p "$WORK"

timeout 300 python3 -m pytest -q -p no:cacheprovider -rs tests/test_energy.py tests/test_measure.py > "$out/tests.txt" 2>&1
tail -1 "$out/tests.txt"

python3 - > "$out/companion.txt" 2>&1 <<'PY'
import time
import torch
from eaq.measure.nvidia_smi import NvidiaSmiSampler
from eaq.measure.nvml import NvmlSampler
uuid = str(torch.cuda.get_device_properties(0).uuid)
companion = NvidiaSmiSampler(uuid, 0.02)
sampler = NvmlSampler(uuid, 0.015, companion=companion)
spans = []
for session in range(2):
    sampler.start()
    t0 = time.perf_counter()
    time.sleep(1.5)
    t1 = time.perf_counter()
    trace = sampler.stop()
    spans.append((t0, t1))
    time.sleep(0.5)
smi = trace.companions[0] if trace.companions else None
print("companions:", len(trace.companions), "notes:", trace.notes)
for i, (t0, t1) in enumerate(spans):
    own = sum(t0 <= t <= t1 for t in trace.times)
    theirs = sum(t0 <= t <= t1 for t in smi.times) if smi else 0
    print(f"session {i + 1}: nvml samples {own}, nvidia-smi samples {theirs}")
PY
cat "$out/companion.txt"

common="model=distilbert_base_random precision=bf16 dataset=synthetic batch_size=32 seq_len=128 sampler=nvml"
python3 -m eaq.run -m hydra/launcher=gpus $common trial=1,2 paths.output_dir="$WORK/gpus" > "$out/gpus.txt" 2>&1 &
sweep=$!
servers=0
while kill -0 $sweep 2>/dev/null; do
  for child in $(pgrep -P $sweep); do
    if tr '\0' ' ' < /proc/$child/cmdline 2>/dev/null | grep -q forkserver; then servers=$((servers + 1)); fi
  done
  sleep 0.5
done
wait $sweep
echo "gpus sweep exit $?; fork servers seen as the sweep process's children: $servers" >> "$out/gpus.txt"
tail -3 "$out/gpus.txt"

python3 -m eaq.run -m hydra/launcher=gpus $common device=cuda:0 trial=1,2 paths.output_dir="$WORK/refused" > "$out/refused.txt" 2>&1
echo "refused exit $?; store created: $(test -e "$WORK/refused/mlflow.db" && echo yes || echo no)" >> "$out/refused.txt"
tail -2 "$out/refused.txt"

python3 -m eaq.run task=layers model=distilbert_base_random precision=bf16 dataset=synthetic batch_size=32 seq_len=128 \
  sampler=nvml_vs_smi layers.impact=false paths.output_dir="$WORK/layers" > "$out/layers.txt" 2>&1
echo "layers exit $?" >> "$out/layers.txt"
tail -2 "$out/layers.txt"

python3 - "$WORK" > "$out/runs.txt" 2>&1 <<'PY'
import sys
from mlflow.tracking import MlflowClient
for store in ("gpus", "layers"):
    client = MlflowClient(tracking_uri=f"sqlite:///{sys.argv[1]}/{store}/mlflow.db")
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    for r in sorted(runs, key=lambda r: r.info.run_name):
        m, t = r.data.metrics, r.data.tags
        keys = ("energy_per_sample_mj", "latency_mean_ms", "layers_capture_ratio_replay", "layers_capture_ratio_attribution",
                "layers_capture_ratio_replay_with_blocks", "run_wall_s")
        print(store, r.info.run_name, t.get("eaq.kind"), r.info.status, "valid=" + t.get("eaq.valid", "?"),
              {k: round(m[k], 4) for k in keys if k in m})
        print("   device:", t.get("eaq.device"), "| slot:", t.get("eaq.gpu_slot"), "| neighbours:", t.get("eaq.neighbours"),
              "| energy:", t.get("eaq.energy"), "| notes:", t.get("eaq.energy.notes", ""))
PY
cat "$out/runs.txt"
