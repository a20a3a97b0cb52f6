#!/usr/bin/env bash
# The roofline calibration judged by the device's checks (eaq.measure.validity.check_device) on the lent GPU: every
# matmul format eaq calibrates, measured with task=calibrate (no cache reuse), must still give its peak. From the
# repository root; $OUT receives the log and a summary.
set -uo pipefail
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > $OUT/install.txt 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt
P=/tmp/eaq-calibration-checks; rm -rf $P
for precision in fp32 tf32 fp16 bf16 fp8 int8; do
  python3 -m eaq.run task=calibrate precision=$precision paths.output_dir=$P 2>&1 | grep -v "it/s" >> $OUT/log.txt
  echo "$precision rc=${PIPESTATUS[0]}"
done
python3 - <<'PY' | tee $OUT/summary.txt
from mlflow.tracking import MlflowClient
c = MlflowClient(tracking_uri="sqlite:////tmp/eaq-calibration-checks/mlflow.db")
for r in sorted(c.search_runs([e.experiment_id for e in c.search_experiments()]), key=lambda r: r.info.start_time):
    m, t = r.data.metrics, r.data.tags
    print(r.info.run_name, r.info.status, "| matmul", t.get("eaq.calibration.matmul"), "| TFLOP/J", round(m.get("peak_flop_per_j", 0) / 1e12, 4),
          "| TFLOP/s", round(m.get("peak_tflops", 0), 1), "| W", round(m.get("power_mean_w", 0), 1), "|", t.get("eaq.error", "")[:300])
PY
