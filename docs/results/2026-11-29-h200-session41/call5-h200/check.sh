#!/usr/bin/env bash
# Session 41, call 5, on one lent H200 (the GPU image's torch 2.11, transformers 5.17): this session's two changes
# to what runs around the windows, on the real GPU.
# 1. Calibrations ahead of a sweep's runs are measured in a fork of the sweep's server, not in an interpreter of
#    their own (call 4: that interpreter's imports took 13 s, the first run waited 14.3 s at the device gate): the
#    same fresh-cache sweep as call 4 (GPT-2-small shape, fp32 and bf16, batch 8, one trial), its calibrate_ahead.log,
#    the first run's phase_ahead_s and the sweep's wall time.
# 2. The roofline calibration runs products for 0.25 s right before its window (the counter read at the window's
#    start stood for the idle stretch while the sampler started): task=calibrate precision=bf16 three times, beside
#    call 4's 0.9735 TFLOP/J measured the old way.
# 3. The energy and measurement tests on the real GPU.
# From the repository root: OUT=<folder> bash docs/results/2026-11-29-h200-session41/call5-h200/check.sh
set -uo pipefail
out=${OUT:?set OUT}
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw,power.limit --format=csv > "$out/gpu.txt"
start=$(date +%s.%N)
python3 -m eaq.run -m model=gpt2_small_random precision=fp32,bf16 batch_size=8 trial=1 seq_len=128 dataset=synthetic \
  sampler=nvml trials=gpu_energy device=cuda:0 paths.output_dir=/tmp/c > "$out/sweep.txt" 2>&1
echo "sweep exit $? wall $(python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$start") s" >> "$out/sweep.txt"
find /tmp/c -name calibrate_ahead.log -exec cp {} "$out/" \;
cp /tmp/c/mlflow.db "$out/sweep-mlflow.db"
tail -1 "$out/sweep.txt"; cat "$out/calibrate_ahead.log"
python3 - /tmp/c/mlflow.db >> "$out/sweep.txt" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for name, key, value in c.execute("select r.name, m.key, m.value from metrics m join runs r on r.run_uuid = m.run_uuid "
                                  "where m.key in ('phase_ahead_s', 'run_wall_s', 'energy_per_sample_mj') order by r.start_time, m.key"):
    print(name, key, round(value, 3))
PY
grep "phase_ahead_s\|run_wall_s" "$out/sweep.txt"
for i in 1 2 3; do
  python3 -m eaq.run task=calibrate precision=bf16 sampler=nvml device=cuda:0 paths.output_dir=/tmp/cal 2>&1 \
    | grep -i "calibration:" >> "$out/calibrate.txt"
done
python3 - /tmp/cal/mlflow.db >> "$out/calibrate.txt" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for name, key, value in c.execute("select r.name, m.key, m.value from metrics m join runs r on r.run_uuid = m.run_uuid "
                                  "where m.key in ('peak_flop_per_j', 'peak_tflops', 'power_mean_w') order by r.start_time, m.key"):
    print(name, key, value)
PY
cat "$out/calibrate.txt"
timeout 240 python3 -m pytest -q -p no:cacheprovider -rs tests/test_energy.py tests/test_measure.py > "$out/tests.txt" 2>&1
tail -1 "$out/tests.txt"
