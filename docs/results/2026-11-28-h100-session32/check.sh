#!/usr/bin/env bash
# Session 32 on a lent GPU, with the GPU image's packages (torch 2.11, transformers 5.17): this session changed
# how the NVML sampler is waited on (a sampler whose polling process did not start is no longer waited on; a
# started one still is), what a counter-only window's verdict says, the warm-up's and windows' progress bar, and
# task=calibrate (bandwidth measured whatever the sensor). On the real GPU:
# - the tests that run only on CUDA, and the energy, timing and generation-window tests;
# - a sweep as a user runs one: DistilBERT-base shape (random weights), bf16 and fp8, two trials each, synthetic
#   batch 32 x 128, sampler=nvml, the default protocol with the roofline (calibrated ahead of the runs): each
#   run's energy must come from the counter with a trace covering the window (no coverage note), valid, and the
#   sampler's waits (phase_sampler_s) short;
# - task=calibrate precision=bf16 into a fresh cache: FLOP/J peak and bandwidth both measured.
# From the repository root: OUT=<folder> bash docs/results/2026-11-28-h100-session32/check.sh
set -uo pipefail
out=${OUT:?set OUT}
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > "$out/gpu.txt"
export WORK=${WORK:-/tmp/eaq-s32}
rm -rf "$WORK" && mkdir -p "$WORK"
timeout 300 python3 -m pytest -q -p no:cacheprovider -rs tests/test_energy.py tests/test_measure.py \
  "tests/test_generate.py::test_on_cuda_the_recorded_decode_step_replays_the_tokens_of_the_step_run_from_python" \
  "tests/test_precision.py::test_int8_on_cuda_makes_no_host_copies_beyond_fp32_and_multiplies_exactly_at_any_rows" \
  "tests/test_sweep_time.py::test_torchs_gpu_uuids_are_nvmls_without_its_prefix" \
  "tests/test_generate.py::test_prefill_and_decode_windows_are_disjoint_cover_the_work_and_give_consistent_per_token_figures" \
  > "$out/tests.txt" 2>&1
tail -1 "$out/tests.txt"
start=$(date +%s)
timeout 420 python3 -m eaq.run -m model=distilbert_base_random precision=bf16,fp8 trial=1,2 batch_size=32 seq_len=128 \
  dataset=synthetic sampler=nvml paths.output_dir="$WORK" > "$out/sweep.txt" 2>&1
echo "sweep: exit $? in $(( $(date +%s) - start )) s" >> "$out/sweep.txt"
timeout 120 python3 -m eaq.run task=calibrate precision=bf16 sampler=nvml paths.output_dir="$WORK" \
  paths.cache_dir="$WORK/fresh-cache" > "$out/calibrate.txt" 2>&1
echo "calibrate: exit $?" >> "$out/calibrate.txt"
python3 - "$WORK" > "$out/records.txt" 2>&1 <<'PY'
import sys
from mlflow.tracking import MlflowClient
client = MlflowClient(tracking_uri=f"sqlite:///{sys.argv[1]}/mlflow.db")
runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
for r in sorted(runs, key=lambda r: r.info.start_time):
    m, t = r.data.metrics, r.data.tags
    if t.get("eaq.kind") == "benchmark":
        print(r.info.run_name, r.info.status, "| mJ/sample", m.get("energy_per_sample_mj"), "| W", m.get("power_mean_w"),
              "| source", t.get("eaq.energy.source"), "| sensor updates", m.get("sensor_updates"), "| coverage",
              m.get("poll_coverage"), "| phase_sampler_s", m.get("phase_sampler_s"), "| phase_ahead_s",
              m.get("phase_ahead_s"), "| roofline", m.get("roofline_efficiency"), "| valid", t.get("eaq.valid"),
              "| reasons", t.get("eaq.valid.reasons", "none"), "| notes", t.get("eaq.valid.notes", "none"),
              "| energy notes", t.get("eaq.energy.notes", "none"))
    elif t.get("eaq.kind") == "calibrate":
        print(r.info.run_name, r.info.status, "| TFLOP/J", (m.get("peak_flop_per_j") or 0) / 1e12, "| GB/s",
              m.get("peak_bandwidth_gb_per_s"), "| W", m.get("power_mean_w"))
PY
cat "$out/records.txt"
ls "$out"
