#!/usr/bin/env bash
# Session 38 on a lent GPU, with the GPU image's packages (torch 2.11, transformers 5.17). Sessions 37-38 changed how a
# stopped job ends the process measuring its run: that process now ignores SIGINT, and its job SIGKILLs it on any
# exception while it waits (Ctrl-C, SIGTERM, SLURM's time-limit signal). On the real GPU, where that process holds a
# CUDA context:
# - the tests that run only on CUDA (the CPU CI skips them), and the energy and measurement tests;
# - a run stopped mid-window, twice: SIGTERM to the job's process alone (as kill, timeout or a scheduler sends), and
#   SIGINT to its whole process group (Ctrl-C); each started from this script's background (SIGINT inherited ignored).
#   Recorded: the exit code, seconds from the signal to the job's exit and to the GPU listing no process of it, the
#   run's status in the store, and whether a traceback was printed.
# From the repository root: OUT=<folder> bash docs/results/2026-11-29-h200-session38/check.sh (STOPS_ONLY=1: the stops alone)
set -uo pipefail
out=${OUT:?set OUT}
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > "$out/gpu.txt"
export WORK=${WORK:-/tmp/eaq-s38}
rm -rf "$WORK" && mkdir -p "$WORK"
[[ -n ${STOPS_ONLY:-} ]] || timeout 330 python3 -m pytest -q -p no:cacheprovider -rs tests/test_energy.py tests/test_measure.py tests/test_generate_idle.py \
  "tests/test_generate.py::test_on_cuda_the_recorded_decode_step_replays_the_tokens_of_the_step_run_from_python" \
  "tests/test_precision.py::test_int8_on_cuda_makes_no_host_copies_beyond_fp32_and_multiplies_exactly_at_any_rows" \
  "tests/test_sweep_time.py::test_torchs_gpu_uuids_are_nvmls_without_its_prefix" \
  "tests/test_generate.py::test_prefill_and_decode_windows_are_disjoint_cover_the_work_and_give_consistent_per_token_figures" \
  > "$out/tests.txt" 2>&1
[[ -n ${STOPS_ONLY:-} ]] || tail -1 "$out/tests.txt"

gpu_pids() { nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr -d ' '; }
for stop in TERM INT; do
  dir="$WORK/$stop"
  : > "$out/stop-$stop.txt"
  # setsid: a group of its own, which SIGINT reaches whole as Ctrl-C does; started in the background, SIGINT ignored.
  setsid python3 -m eaq.run model=gpt2_small_random precision=bf16 dataset=synthetic batch_size=16 seq_len=128 \
    sampler=nvml trials.min_duration_s=120 paths.output_dir="$dir" >> "$out/stop-$stop.txt" 2>&1 &  # appended: lines below too
  job=$!
  for _ in $(seq 240); do [[ -n $(gpu_pids) ]] && break; sleep 0.5; done
  sleep 20  # into warm-up or the window
  echo "before: job $job, on the GPU: $(gpu_pids | paste -sd,)" >> "$out/stop-$stop.txt"
  t0=$(date +%s.%N)
  if [[ $stop == TERM ]]; then kill -TERM "$job"; else kill -INT -- "-$job"; fi
  wait "$job"; rc=$?
  t1=$(date +%s.%N)
  for _ in $(seq 600); do [[ -z $(gpu_pids) ]] && break; sleep 0.1; done
  t2=$(date +%s.%N)
  python3 - "$stop" "$rc" "$t0" "$t1" "$t2" "$(gpu_pids | paste -sd,)" "$dir" >> "$out/stop-$stop.txt" <<'PY'
import sys
from mlflow.tracking import MlflowClient
stop, rc, t0, t1, t2, left, folder = sys.argv[1:]
client = MlflowClient(tracking_uri=f"sqlite:///{folder}/mlflow.db")
runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
print(f"SIG{stop}: exit {rc}; job ended {float(t1) - float(t0):.1f} s after the signal; GPU free of it "
      f"{float(t2) - float(t0):.1f} s after (left on the GPU: {left or 'none'})")
print("runs:", [(r.info.run_name, r.info.status) for r in runs])
PY
  grep -c Traceback "$out/stop-$stop.txt" | sed 's/^/tracebacks: /' >> "$out/stop-$stop.txt"
  grep -c "leaked semaphore" "$out/stop-$stop.txt" | sed "s/^/leaked-semaphore warnings: /" >> "$out/stop-$stop.txt"
  tail -5 "$out/stop-$stop.txt"
done
ls "$out"
