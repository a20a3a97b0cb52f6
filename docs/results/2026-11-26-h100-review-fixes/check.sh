#!/usr/bin/env bash
# The session-19 review fixes where a GPU is what they touch, on the lent GPU, from the repository root:
#  1. the CUDA-only tests (a recorded decode step, eager int8's host copies, torch's and NVML's GPU UUIDs) and the
#     generation tests (end-of-sequence ids of the generation config, non-attention layers refused);
#  2. generation on the 1.1B Llama shape, fp32 then bf16: the fp32 reference keyed by a fingerprint of weights drawn
#     on the GPU (fp32 must agree with itself: match rate 1), the bf16 run finding that reference in the cache;
#  3. task=layers on the DistilBERT-base shape in bf16 with a budget nothing fits (impact at most 0): the run must
#     finish with its tables and a plan that lowers nothing and says why, and the per-type impact metrics.
set -uo pipefail
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > $OUT/install.txt 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt
{ python3 -m pytest -q -p no:cacheprovider tests/test_generate.py -k "on_cuda or end_of_sequence or not_attention or equals_transformers"
  python3 -m pytest -q -p no:cacheprovider tests/test_sweep_time.py::test_torchs_gpu_uuids_are_nvmls_without_its_prefix \
      tests/test_precision.py::test_int8_on_cuda_makes_no_host_copies_beyond_fp32_and_multiplies_exactly_at_any_rows
} > $OUT/cuda-tests.txt 2>&1; grep -E "passed|failed|error" $OUT/cuda-tests.txt
P=/tmp/eaq-review; rm -rf $P
GEN="model=llama_1b_random workload=generate dataset=synthetic trials=quick trials.fidelity_on_synthetic=true batch_size=1 seq_len=32 workload.new_tokens=16 paths.output_dir=$P"
python3 -m eaq.run $GEN precision=fp32 2>&1 | grep -v "it/s" > $OUT/generate-fp32.txt
python3 -m eaq.run $GEN precision=bf16 2>&1 | grep -v "it/s" > $OUT/generate-bf16.txt
python3 -m eaq.run task=layers model=distilbert_base_random precision=bf16 dataset=synthetic trials=quick batch_size=8 seq_len=64 \
    layers.budget=impact layers.budget_limit=0 paths.output_dir=$P 2>&1 | grep -v "it/s" > $OUT/layers.txt
python3 - <<'PY' | tee $OUT/summary.txt
import glob
from mlflow.tracking import MlflowClient
client = MlflowClient(tracking_uri="sqlite:////tmp/eaq-review/mlflow.db")
runs = sorted(client.search_runs([e.experiment_id for e in client.search_experiments()]), key=lambda r: r.info.start_time)
for r in runs:
    m, t = r.data.metrics, r.data.tags
    print(r.info.run_name, r.info.status, "| quality source:", t.get("eaq.quality.source"),
          "| match rate:", m.get("quality_generated_match_rate"), "| ms/token:", m.get("time_per_output_token_mean_ms"),
          "| valid:", t.get("eaq.valid"), t.get("eaq.valid.reasons", ""))
    if t.get("eaq.kind") == "layers":
        print("  plan:", t.get("eaq.layers.plan"))
        print("  impact metrics:", {k: round(v, 6) for k, v in sorted(m.items()) if "impact_" in k})
        print("  capture (replay, attribution):", m.get("layers_capture_ratio_replay"), m.get("layers_capture_ratio_attribution"))
print("cached references:", sorted(p.rsplit("/", 1)[1] for p in glob.glob("/tmp/eaq-review/cache/fp32-reference-*")))
PY
grep -h "fp32 reference from cache" $OUT/generate-*.txt | sed 's/^.*INFO\] - //'
find $P -name plan.yaml | head -1 | xargs cat > $OUT/plan.yaml
