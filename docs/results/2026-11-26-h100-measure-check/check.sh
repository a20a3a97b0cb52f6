#!/usr/bin/env bash
# The measurement changes of 2026-11-26 (eaq/measure: pollers leave a stall as a gap, a counter that did not move
# is no reading, trace channels padded, calibration waits for samples) checked on a real GPU:
# 1. the CUDA-only tests and the measure tests; 2. the default protocol's sweep of
# docs/results/2026-11-26-h100-sweep-agreement (DistilBERT-base shape, fp32 and fp16, 2 trials each), every run's
# validity, poll coverage and energy per sample printed by summary.py.
#   OUT=... bash docs/results/2026-11-26-h100-measure-check/check.sh
set -uo pipefail
: "${OUT:?set OUT}"
mkdir -p "$OUT"
bash docs/results/gpu-install.sh > "$OUT/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,clocks.current.sm,power.draw,clocks_event_reasons.active --format=csv > "$OUT/gpu.txt"
python3 -m pytest -q -rs -p no:cacheprovider \
  "tests/test_generate.py::test_on_cuda_the_recorded_decode_step_replays_the_tokens_of_the_step_run_from_python" \
  "tests/test_precision.py::test_int8_on_cuda_makes_no_host_copies_beyond_fp32_and_multiplies_exactly_at_any_rows" \
  "tests/test_sweep_time.py::test_torchs_gpu_uuids_are_nvmls_without_its_prefix" \
  tests/test_energy.py tests/test_measure.py > "$OUT/tests.txt" 2>&1
python3 -m eaq.run -m model=distilbert_base_random dataset=synthetic precision=fp32,fp16 trial=1,2 \
  paths.output_dir=/tmp/eaq-measure-check > "$OUT/sweep.log" 2>&1
python3 docs/results/2026-11-26-h100-measure-check/summary.py /tmp/eaq-measure-check/mlflow.db | tee "$OUT/summary.md"
