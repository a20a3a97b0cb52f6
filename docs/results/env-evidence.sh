#!/usr/bin/env bash
# Environment capture on the lent GPU: one quick run, then the device part of its env.json.
set -uo pipefail
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh
V=/tmp/eaq-env; rm -rf $V
python3 -m eaq.run model=bert_tiny_random dataset=synthetic trials=quick batch_size=8 seq_len=64 paths.output_dir=$V 2>&1 | grep -v "it/s" | tail -2
python3 - <<'PY' > $OUT/env_device.json
import glob, json
env = json.load(open(glob.glob("/tmp/eaq-env/runs/*/env.json")[0]))
print(json.dumps({k: env[k] for k in ("device", "packages", "git", "python")}, indent=2))
PY
cat $OUT/env_device.json
