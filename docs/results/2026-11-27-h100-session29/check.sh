#!/usr/bin/env bash
# Session 29 on a lent GPU, with the GPU image's packages (transformers 5.17, where the CPU machines have 5.24):
# - generation's dynamic cache is built from the model's config (sliding-window layers hold their window) and
#   restarted from the prompt's state: tests/test_generate.py whole (its CUDA-graph tests run only here);
# - the effect on a sliding-window model: the 1.1B Llama shape as a Mistral (model_type=mistral) with
#   sliding_window=256 against the same shape with full attention (sliding_window=null), eager bf16 decode
#   (compile=false, a dynamic cache), batch 16, prompts of 2048 synthetic ids, 64 new tokens, gpu_table protocol,
#   roofline on (decode_bytes_per_step_mb counts the KV a step reads).
# From the repository root: OUT=<folder> bash docs/results/2026-11-27-h100-session29/check.sh
set -uo pipefail
out=${OUT:?set OUT}
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > "$out/gpu.txt"
work=${WORK:-/tmp/eaq-s29}
rm -rf "$work" && mkdir -p "$work"
timeout 400 python3 -m pytest -q -p no:cacheprovider tests/test_generate.py > "$out/tests.txt" 2>&1
tail -1 "$out/tests.txt"
shape="model=llama_1b_random model.architecture.model_type=mistral model.architecture.max_position_embeddings=4096"
timeout 900 python3 -m eaq.run -m $shape '+model.architecture.sliding_window=256,null' precision=bf16 compile=false \
  workload=generate workload.new_tokens=64 seq_len=2048 batch_size=16 dataset=synthetic sampler=nvml trials=gpu_table \
  trials.roofline=true paths.output_dir="$work/slide" paths.cache_dir="$work/cache" > "$out/sliding-log.txt" 2>&1
python3 - "$work/slide" > "$out/records.txt" 2>&1 <<'PY'
import sys
from mlflow.tracking import MlflowClient
client = MlflowClient(tracking_uri=f"sqlite:///{sys.argv[1]}/mlflow.db")
for r in [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])
          if r.data.tags.get("eaq.kind") == "benchmark"]:
    m = r.data.metrics
    print(r.info.run_name, r.info.status, "sliding_window:", r.data.params.get("model.architecture.sliding_window"),
          "valid:", r.data.tags.get("eaq.valid"), "reasons:", r.data.tags.get("eaq.valid.reasons", "none"))
    for key in ("time_per_output_token_mean_ms", "time_per_output_token_p99_ms", "decode_energy_per_token_mj",
                "decode_bytes_per_step_mb", "decode_bandwidth_fraction", "time_to_first_token_mean_ms",
                "memory_peak_gpu_mb", "quality_generated_match_rate", "sensor_updates", "prefill_sensor_updates"):
        print(f"  {key} = {m[key]:.6g}" if key in m else f"  {key}: not logged")
PY
rm -f "$out"/*.db "$out"/*.tgz  # the stores stay on the device: a call returns a few files (8 at most)
