#!/usr/bin/env bash
# Resume on a GPU matches the device's name: the name eaq reads ahead of a run from NVML (no CUDA context:
# eaq.tracking.environment.device_name) must be the one the run logs (eaq.env.device_name, from torch), or a
# sweep launched again would measure every configuration anew. Run from the repository root on the lent GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > $OUT/install.txt 2>&1
P=/tmp/eaq-resume-device; rm -rf $P
SWEEP="-m model=bert_tiny_random dataset=synthetic sampler=none trials=quick batch_size=8 seq_len=64 trial=1,2 paths.output_dir=$P"
python3 -m eaq.run $SWEEP 2>&1 | grep -v "it/s" > $OUT/first.txt
python3 -m eaq.run $SWEEP 2>&1 | grep -v "it/s" > $OUT/again.txt
python3 - <<'PY' | tee $OUT/names.txt
from mlflow.tracking import MlflowClient
from eaq.tracking.environment import device_name
client = MlflowClient(tracking_uri="sqlite:////tmp/eaq-resume-device/mlflow.db")
runs = [r for r in client.search_runs([e.experiment_id for e in client.search_experiments()]) if r.data.tags.get("eaq.kind") == "benchmark"]
logged = sorted({r.data.tags.get("eaq.env.device_name") for r in runs})
print("benchmark runs:", len(runs), "| logged eaq.env.device_name:", logged)
print("device_name('auto'):", repr(device_name("auto")), "| device_name('cuda:0'):", repr(device_name("cuda:0")))
print("match:", logged == [device_name("auto")])
PY
grep -h "^sweep:" $OUT/first.txt $OUT/again.txt
