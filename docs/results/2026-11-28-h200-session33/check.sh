#!/usr/bin/env bash
# Session 33 on a lent H200 (the kind lent this session; every earlier single-GPU folder is an H100's), with the GPU
# image's packages (torch 2.11, transformers 5.17) and eaq's missing ones from .whl. Does the product hold on a
# second Hopper part, and do issue 16's goal cells and issue 11's capture read there as on the H100?
# PART=1 (about 7 min):
# - the tests that run only on CUDA, and the energy, timing and generation-window tests;
# - a sweep as a user runs one: DistilBERT-base shape (random weights), bf16, fp8 and int8, two trials each,
#   synthetic batch 32 x 128, sampler=nvml, the default protocol (roofline calibrated ahead);
# - task=calibrate precision=bf16 into a fresh cache (FLOP/J peak and bandwidth);
# - issue 16's goal cells on the 1.1B Llama shape: bf16 and int4_weight_only, compiled (CUDA graphs), batch 1,
#   prompt 256, 128 new tokens, one trial (generate-gpu.sh's protocol).
# PART=2 (about 6 min): issue 11's energy part on DistilBERT-base and GPT-2-small shapes, bf16, 3 trials
#   (layers-gpu.sh's PARTS=energy).
# PART=3 (about 2 min): after the session's later changes, a GPT-2-medium-shape generation run and forward run with
#   sampler=nvml, their power_trace.png (the generation's shades its prefill and decode windows) and window tags.
# PART=4 (about 2 min): after the layers review's fixes, a DistilBERT-base-shape bf16 task=layers run, valid and unflagged.
# From the repository root: PART=1 OUT=<folder> bash docs/results/2026-11-28-h200-session33/check.sh
set -uo pipefail
out=${OUT:?set OUT}
export PYTHONUNBUFFERED=1
python3 -c "import eaq, torchao, hydra, mlflow" 2>/dev/null || bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw,power.limit,memory.total --format=csv > "$out/gpu.txt"
export WORK=${WORK:-/tmp/eaq-s33}
mkdir -p "$WORK"
case ${PART:?set PART} in
1)
  timeout 300 python3 -m pytest -q -p no:cacheprovider -rs tests/test_energy.py tests/test_measure.py \
    "tests/test_generate.py::test_on_cuda_the_recorded_decode_step_replays_the_tokens_of_the_step_run_from_python" \
    "tests/test_precision.py::test_int8_on_cuda_makes_no_host_copies_beyond_fp32_and_multiplies_exactly_at_any_rows" \
    "tests/test_sweep_time.py::test_torchs_gpu_uuids_are_nvmls_without_its_prefix" \
    "tests/test_generate.py::test_prefill_and_decode_windows_are_disjoint_cover_the_work_and_give_consistent_per_token_figures" \
    > "$out/tests.txt" 2>&1
  tail -1 "$out/tests.txt"
  start=$(date +%s)
  timeout 300 python3 -m eaq.run -m model=distilbert_base_random precision=bf16,fp8,int8 trial=1,2 batch_size=32 \
    seq_len=128 dataset=synthetic sampler=nvml paths.output_dir="$WORK" > "$out/sweep.txt" 2>&1
  echo "sweep: exit $? in $(( $(date +%s) - start )) s" >> "$out/sweep.txt"
  tail -14 "$out/sweep.txt"
  timeout 120 python3 -m eaq.run task=calibrate precision=bf16 sampler=nvml paths.output_dir="$WORK" \
    paths.cache_dir="$WORK/fresh-cache" > "$out/calibrate.txt" 2>&1
  echo "calibrate: exit $?" >> "$out/calibrate.txt"
  WORK="$WORK/gen" timeout 240 bash docs/results/generate-gpu.sh llama_1b_random bf16,int4_weight_only 1 compiled 1 \
    > /dev/null 2>&1
  echo "generate: exit $?" >> "$out/calibrate.txt"
  python3 - "$WORK" > "$out/records.txt" 2>&1 <<'PY'
import sys
from mlflow.tracking import MlflowClient
client = MlflowClient(tracking_uri=f"sqlite:///{sys.argv[1]}/mlflow.db")
runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
for r in sorted(runs, key=lambda r: r.info.start_time):
    m, t = r.data.metrics, r.data.tags
    if t.get("eaq.kind") == "benchmark":
        print(r.info.run_name, r.info.status, "| mJ/sample", m.get("energy_per_sample_mj"), "| W", m.get("power_mean_w"),
              "| ms", m.get("latency_mean_ms"), "| source", t.get("eaq.energy.source"), "| sensor updates",
              m.get("sensor_updates"), "| coverage", m.get("poll_coverage"), "| roofline", m.get("roofline_efficiency"),
              "| valid", t.get("eaq.valid"), "| reasons", t.get("eaq.valid.reasons", "none"))
    elif t.get("eaq.kind") == "calibrate":
        print(r.info.run_name, r.info.status, "| TFLOP/J", (m.get("peak_flop_per_j") or 0) / 1e12, "| GB/s",
              m.get("peak_bandwidth_gb_per_s"), "| W", m.get("power_mean_w"))
PY
  cat "$out/records.txt"
  cat "$out"/table-generate-*.txt 2>/dev/null
  ;;
2)
  PARTS=energy LIMIT_S=540 TRIALS_LIST=1,2,3 bash docs/results/layers-gpu.sh distilbert_base_random,gpt2_small_random bf16 \
    > "$out/layers-log.txt" 2>&1
  echo "layers: exit $?" >> "$out/layers-log.txt"
  cat "$out"/layers-summary.txt 2>/dev/null | head -60
  ;;
3)
  # After this session's later changes (the power trace of a generation run shades its prefill window too, and the
  # prefill window's place is tagged; models refused before load by type and head): a generation run and a forward
  # run as a user runs them, sampler=nvml, their power_trace.png brought back.
  for args in "workload=generate workload.new_tokens=64 seq_len=128 batch_size=1" "batch_size=32 seq_len=128"; do
    timeout 200 python3 -m eaq.run model=gpt2_medium_random precision=bf16 dataset=synthetic sampler=nvml $args \
      paths.output_dir="$WORK/p3" >> "$out/part3.txt" 2>&1
    echo "run: exit $? ($args)" >> "$out/part3.txt"
  done
  python3 - "$WORK/p3" "$out" >> "$out/part3.txt" 2>&1 <<'PY'
import shutil, sys
from mlflow.tracking import MlflowClient
client = MlflowClient(tracking_uri=f"sqlite:///{sys.argv[1]}/mlflow.db")
runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
for r in sorted(runs, key=lambda r: r.info.start_time):
    t, m = r.data.tags, r.data.metrics
    print(r.info.run_name, r.info.status, "| valid", t.get("eaq.valid"), "| prefill window", t.get("eaq.prefill_window.start_unix_s"),
          t.get("eaq.prefill_window.end_unix_s"), "| window", t.get("eaq.window.start_unix_s"), t.get("eaq.window.end_unix_s"),
          "| prefill s", m.get("prefill_window_duration_s"), "| decode s", m.get("decode_window_duration_s"), "| window s",
          m.get("window_duration_s"))
    png = client.download_artifacts(r.info.run_id, "power_trace.png", sys.argv[1])
    shutil.copy(png, f"{sys.argv[2]}/power_trace-{t.get('eaq.workload')}.png")
PY
  cat "$out/part3.txt" | grep -v "^\[" | tail -8
  ;;
4)
  # After the layers review's fixes (the blocks' stubbed outputs fingerprinted before and after their replay, a
  # change in place flagging the run): a DistilBERT-base-shape bf16 task=layers run must stay valid and unflagged on
  # CUDA (its blocks add out of place), with its capture ratios as in part 2.
  timeout 300 python3 -m eaq.run task=layers model=distilbert_base_random precision=bf16 batch_size=64 seq_len=128 \
    dataset=synthetic sampler=nvml trials=gpu_table layers.impact=false paths.output_dir="$WORK/p4" > "$out/part4.txt" 2>&1
  echo "layers: exit $?" >> "$out/part4.txt"
  python3 - "$WORK/p4" >> "$out/part4.txt" 2>&1 <<'PY'
import sys
from mlflow.tracking import MlflowClient
client = MlflowClient(tracking_uri=f"sqlite:///{sys.argv[1]}/mlflow.db")
for e in client.search_experiments():
    for r in client.search_runs([e.experiment_id]):
        t, m = r.data.tags, r.data.metrics
        print(r.info.run_name, r.info.status, "| valid", t.get("eaq.valid"), "| reasons", t.get("eaq.valid.reasons", "none"),
              "| capture replay", m.get("layers_capture_ratio_replay"), "| attribution", m.get("layers_capture_ratio_attribution"),
              "| with blocks", m.get("layers_capture_ratio_replay_with_blocks"), m.get("layers_capture_ratio_attribution_with_blocks"))
PY
  tail -3 "$out/part4.txt"
  ;;
esac
ls "$out"
