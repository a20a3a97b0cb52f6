#!/usr/bin/env bash
# Session 35 on a lent H200 (the kind lent this session), the GPU image's torch 2.11 and transformers 5.17, eaq's
# missing packages from .whl. After the measure review: the timed loop stays at most 50 ms of GPU work ahead of the
# GPU (eaq.measure.timing.QUEUE_S; CUDA-graph steps had queued ~400 iterations ahead, so windows and warm-up chunks ran
# long and compiled warm-up ended unsettled).
# PART=1: the CUDA-only tests (the two new timing tests, a generation run's logged idle_baseline_age_s), the energy and
#   measure tests; the two timing tests again over the previous timing.py (OLD_TIMING, a file carried beside the tree,
#   not committed) to show they fail there; issue 16's goal cells on the 1.1B Llama shape (bf16 and int4_weight_only,
#   compiled with CUDA graphs, batch 1), against session 33's H200 figures.
# PART=2: the 1.1B shape at batch 16, compiled with CUDA graphs, bf16 and int8_weight_only (2.7 and 49 ms steps; on the
#   H100 on 2026-11-25 their decode windows ran 4.1 and 24.9 s for a 3 s minimum, warm-up ended settled=false).
# PART=3: trials 2 and 3 of part 1's goal cells (its single trial read int4/bf16 0.71 where session 33's read 0.66).
# From the repository root: PART=1 OUT=<folder> bash docs/results/2026-11-28-h200-session35/check.sh
set -uo pipefail
out=${OUT:?set OUT}
export PYTHONUNBUFFERED=1
python3 -c "import eaq, torchao, hydra, mlflow" 2>/dev/null || bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw,power.limit,memory.total --format=csv > "$out/gpu.txt"
export WORK=${WORK:-/tmp/eaq-s35}
mkdir -p "$WORK"
timing_tests=("tests/test_measure.py::test_on_cuda_the_timed_loop_ends_near_its_minimum_however_far_the_host_could_run_ahead"
              "tests/test_measure.py::test_on_cuda_short_steps_keep_the_gpu_busy_between_them")
case ${PART:?set PART} in
1)
  timeout 330 python3 -m pytest -q -p no:cacheprovider -rs tests/test_energy.py tests/test_measure.py \
    "tests/test_generate.py::test_on_cuda_the_recorded_decode_step_replays_the_tokens_of_the_step_run_from_python" \
    "tests/test_generate.py::test_a_generation_runs_idle_baseline_age_is_counted_to_its_prefill_window" \
    "tests/test_generate.py::test_prefill_and_decode_windows_are_disjoint_cover_the_work_and_give_consistent_per_token_figures" \
    "tests/test_precision.py::test_int8_on_cuda_makes_no_host_copies_beyond_fp32_and_multiplies_exactly_at_any_rows" \
    "tests/test_sweep_time.py::test_torchs_gpu_uuids_are_nvmls_without_its_prefix" > "$out/tests.txt" 2>&1
  tail -1 "$out/tests.txt"
  if [[ -f ${OLD_TIMING:-old_timing.py} ]]; then
    cp eaq/measure/timing.py "$WORK/timing.py" && cp "${OLD_TIMING:-old_timing.py}" eaq/measure/timing.py
    timeout 60 python3 -m pytest -q -p no:cacheprovider "${timing_tests[@]}" > "$out/tests-old-timing.txt" 2>&1
    cp "$WORK/timing.py" eaq/measure/timing.py
    grep -E "^E  |passed|failed" "$out/tests-old-timing.txt" | head -8
  fi
  WORK="$WORK/gen" timeout 300 bash docs/results/generate-gpu.sh llama_1b_random bf16,int4_weight_only 1 compiled 1 \
    > /dev/null 2>&1
  echo "generate: exit $?"
  ;;
2)
  WORK="$WORK/gen" timeout 480 bash docs/results/generate-gpu.sh llama_1b_random bf16,int8_weight_only 16 compiled 1 \
    > /dev/null 2>&1
  echo "generate: exit $?"
  ;;
3)
  WORK="$WORK/gen" timeout 540 bash docs/results/generate-gpu.sh llama_1b_random bf16,int4_weight_only 1 compiled 2,3 \
    > /dev/null 2>&1
  echo "generate: exit $?"
  ;;
esac
python3 - "$WORK/gen" > "$out/records-part$PART.txt" 2>&1 <<'PY'
import sys
from mlflow.tracking import MlflowClient
client = MlflowClient(tracking_uri=f"sqlite:///{sys.argv[1]}/mlflow.db")
runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
print("run | status | valid | ms/token | mJ/token (net) | prefill s | decode s | decode iterations | warm-up s | settled")
for r in sorted(runs, key=lambda r: r.info.start_time):
    m, t = r.data.metrics, r.data.tags
    if t.get("eaq.kind") != "benchmark":
        continue
    print(r.info.run_name, r.info.status, t.get("eaq.valid"), m.get("time_per_output_token_mean_ms"),
          m.get("decode_energy_per_token_mj"), m.get("decode_energy_net_per_token_mj"), m.get("prefill_window_duration_s"),
          m.get("decode_window_duration_s"), m.get("decode_window_iterations"), m.get("phase_warmup_s"),
          t.get("eaq.warmup.settled"), sep=" | ")
PY
cat "$out/records-part$PART.txt"
cp "$WORK/gen/mlflow.db" "$out/generate-part$PART.db" 2>/dev/null
ls "$out"
