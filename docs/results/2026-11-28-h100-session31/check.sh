#!/usr/bin/env bash
# Session 31 on a lent GPU, with the GPU image's packages (torch 2.11, transformers 5.17):
# - the tests that run only on CUDA (a recorded decode step, eager int8's host copies, torch's GPU UUIDs against
#   NVML's), and the generation windows' test (prefill timed into a fresh dynamic cache, compiled or not);
# - time to first token on the 1.1B Llama shape (random weights, synthetic prompt of 256 tokens, 128 new tokens,
#   batch 1, bf16), eager and compiled with the decode step as one CUDA graph, two trials each: since this session
#   every run's prefill window runs into a fresh dynamic cache, so eager and compiled TTFT measure the same eager
#   prefill and should agree within their trial spread (2026-11-25's compiled rows prefilled into a fresh static cache).
# From the repository root: OUT=<folder> bash docs/results/2026-11-28-h100-session31/check.sh
set -uo pipefail
out=${OUT:?set OUT}
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > "$out/gpu.txt"
export WORK=${WORK:-/tmp/eaq-s31}
rm -rf "$WORK" && mkdir -p "$WORK"
timeout 240 python3 -m pytest -q -p no:cacheprovider -rs \
  "tests/test_generate.py::test_on_cuda_the_recorded_decode_step_replays_the_tokens_of_the_step_run_from_python" \
  "tests/test_precision.py::test_int8_on_cuda_makes_no_host_copies_beyond_fp32_and_multiplies_exactly_at_any_rows" \
  "tests/test_sweep_time.py::test_torchs_gpu_uuids_are_nvmls_without_its_prefix" \
  "tests/test_generate.py::test_prefill_and_decode_windows_are_disjoint_cover_the_work_and_give_consistent_per_token_figures" \
  > "$out/tests.txt" 2>&1
tail -1 "$out/tests.txt"
for mode in eager compiled; do
  timeout 200 bash docs/results/generate-gpu.sh llama_1b_random bf16 1 $mode 1,2 > /dev/null 2>&1
  echo "$mode: exit $?" >> "$out/modes.txt"
done
python3 - "$WORK" > "$out/records.txt" 2>&1 <<'PY'
import sys
from mlflow.tracking import MlflowClient
client = MlflowClient(tracking_uri=f"sqlite:///{sys.argv[1]}/mlflow.db")
runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
for r in sorted((r for r in runs if r.data.tags.get("eaq.kind") == "benchmark"), key=lambda r: r.info.start_time):
    m, t = r.data.metrics, r.data.tags
    print(r.info.run_name, r.info.status, "compile", t.get("eaq.compile"), "| TTFT mean/p50 ms",
          m.get("time_to_first_token_mean_ms"), m.get("time_to_first_token_p50_ms"), "| prefill mJ",
          m.get("prefill_energy_per_prefill_mj"), "| ms/token", m.get("time_per_output_token_mean_ms"), "| mJ/token",
          m.get("decode_energy_per_token_mj"), "| settled", t.get("eaq.warmup.settled"), "| valid", t.get("eaq.valid"),
          "| notes", t.get("eaq.valid.notes", "none"), "| graph", t.get("eaq.decode.cuda_graph"))
PY
rm -f "$out"/*.db "$out"/*.tgz  # the stores stay on the device: a call returns a few files (8 at most)
ls "$out"
