#!/usr/bin/env bash
# Session 30 on a lent GPU, with the GPU image's packages (torch 2.11, transformers 5.17):
# - the tests that run only on CUDA (a recorded decode step, eager int8's host copies, torch's GPU UUIDs against
#   NVML's) and this session's tests of the power-polling process and the roofline peaks, on the GPU image;
# - a real device out-of-memory through the entrypoint: a sweep of the GPT-2-medium shape (random weights, synthetic
#   ids, seq_len 1024) at batch 4, which fits, and batch 4096, whose attention does not fit 80 GB: the second run must
#   end in one sentence naming the model, batch size, sequence length and precision (no traceback), FAILED in the
#   store, the first FINISHED, the sweep exit 1 and its summary line.
# From the repository root: OUT=<folder> bash docs/results/2026-11-28-h100-session30/check.sh
set -uo pipefail
out=${OUT:?set OUT}
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > "$out/gpu.txt"
work=${WORK:-/tmp/eaq-s30}
rm -rf "$work" && mkdir -p "$work"
timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  "tests/test_generate.py::test_on_cuda_the_recorded_decode_step_replays_the_tokens_of_the_step_run_from_python" \
  "tests/test_precision.py::test_int8_on_cuda_makes_no_host_copies_beyond_fp32_and_multiplies_exactly_at_any_rows" \
  "tests/test_sweep_time.py::test_torchs_gpu_uuids_are_nvmls_without_its_prefix" \
  "tests/test_energy.py::test_a_polling_process_whose_read_hangs_is_stopped_at_the_limit_and_said" \
  "tests/test_sweep_time.py::test_a_peak_or_bandwidth_with_no_room_beside_the_runs_model_costs_the_run_that_figure_not_its_measurement" \
  "tests/test_hardening.py::test_a_device_out_of_memory_is_one_sentence_naming_what_sets_the_memory_a_run_needs" \
  > "$out/tests.txt" 2>&1
tail -1 "$out/tests.txt"
timeout 400 python3 -m eaq.run -m model=gpt2_medium_random dataset=synthetic seq_len=1024 batch_size=4,4096 precision=bf16 \
  sampler=nvml trials=quick paths.output_dir="$work/oom" paths.cache_dir="$work/cache" > "$out/oom-log.txt" 2>&1
echo "sweep exit: $?" >> "$out/oom-log.txt"
python3 - "$work/oom" > "$out/records.txt" 2>&1 <<'PY'
import sys
from mlflow.tracking import MlflowClient
client = MlflowClient(tracking_uri=f"sqlite:///{sys.argv[1]}/mlflow.db")
for r in [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]:
    print(r.info.run_name, r.data.tags.get("eaq.kind"), r.info.status, "|", r.data.tags.get("eaq.error", "no error"),
          "| latency_mean_ms:", r.data.metrics.get("latency_mean_ms"))
PY
rm -f "$out"/*.db "$out"/*.tgz  # the stores stay on the device: a call returns a few files (8 at most)
