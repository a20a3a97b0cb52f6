#!/usr/bin/env bash
# Session 19's second round of review fixes, where a GPU is what they touch; on the lent GPU, from the repository root:
#  1. packed int4 weights counted as int4 values in the stored-dtypes proof (torchao's int4 is CUDA-only);
#  2. an idle baseline measured with nvidia-smi, a sampler without an energy counter (it never was);
#  3. the same with NVML (the counter), for comparison, and sampler.compare_nvidia_smi's companion starting.
set -uo pipefail
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > $OUT/install.txt 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt
P=/tmp/eaq-review2; rm -rf $P
COMMON="model=distilbert_base_random dataset=synthetic trials=quick trials.idle_s=2 trials.idle_reuse=false trials.min_duration_s=3 batch_size=32 seq_len=128 paths.output_dir=$P"
python3 -m eaq.run $COMMON precision=int4_weight_only sampler=nvml 2>&1 | grep -v "it/s" > $OUT/int4-nvml.txt
python3 -m eaq.run $COMMON precision=bf16 sampler=nvidia_smi 2>&1 | grep -v "it/s" > $OUT/bf16-nvidia-smi.txt
python3 -m eaq.run $COMMON precision=bf16 sampler=nvml sampler.compare_nvidia_smi=true 2>&1 | grep -v "it/s" > $OUT/bf16-nvml-compare.txt
python3 - <<'PY' > $OUT/summary.txt 2>&1
from mlflow.tracking import MlflowClient
client = MlflowClient(tracking_uri="sqlite:////tmp/eaq-review2/mlflow.db")
runs = sorted(client.search_runs([e.experiment_id for e in client.search_experiments()]), key=lambda r: r.info.start_time)
for r in runs:
    m, t = r.data.metrics, r.data.tags
    print(r.info.run_name, r.info.status, "| sampler:", r.data.params.get("sampler.name"), "| stored:", t.get("eaq.proof.stored_dtypes"),
          "| quantized:", m.get("quantized_linear_layers"), "/", m.get("linear_layers"))
    print("   idle:", t.get("eaq.idle"), "| idle_power_w:", m.get("idle_power_w"), "| energy/sample mJ:", m.get("energy_per_sample_mj"),
          "net:", m.get("energy_net_per_sample_mj"), "| energy source:", t.get("eaq.energy.source"))
    print("   valid:", t.get("eaq.valid"), t.get("eaq.valid.reasons", ""), "| notes:", t.get("eaq.energy.notes", ""))
PY
cat $OUT/summary.txt
