#!/usr/bin/env bash
# Session 39 on a lent GPU, with the GPU image's packages (torch 2.11, transformers 5.17). This session changed the
# FLOP counter (the CPU's fused attention kernel now has SDPA's formula), the idle baseline (none where no energy is
# measured), sampler=auto's RAPL interval and the unavailable-energy reason, and the store's checks. On the real GPU:
# 1. the tests that run only on CUDA, the energy and measurement tests, and the FLOP-count tests;
# 2. FLOPs of one forward pass, counted on CUDA (flash / efficient / cuDNN SDPA kernels, which torch counts) and on the
#    CPU (the kernel eaq now counts), with SDPA and with eager attention: all four must agree;
# 3. a DistilBERT-base shape sweep (bf16, fp8; 2 trials; NVML): energy, idle baseline and roofline figures as before;
# 4. sampler=none under trials=gpu_energy (idle_s 5): no idle window is spent (phase_idle_s), eaq.idle says why.
# From the repository root: OUT=<folder> bash docs/results/2026-11-29-h200-session39/check.sh
set -uo pipefail
out=${OUT:?set OUT}
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw,power.limit --format=csv > "$out/gpu.txt"
export WORK=${WORK:-/tmp/eaq-s39}
rm -rf "$WORK" && mkdir -p "$WORK"

timeout 330 python3 -m pytest -q -p no:cacheprovider -rs tests/test_energy.py tests/test_measure.py tests/test_generate_idle.py \
  "tests/test_generate.py::test_on_cuda_the_recorded_decode_step_replays_the_tokens_of_the_step_run_from_python" \
  "tests/test_precision.py::test_int8_on_cuda_makes_no_host_copies_beyond_fp32_and_multiplies_exactly_at_any_rows" \
  "tests/test_generate.py::test_prefill_and_decode_windows_are_disjoint_cover_the_work_and_give_consistent_per_token_figures" \
  > "$out/tests.txt" 2>&1
tail -1 "$out/tests.txt"
timeout 120 python3 -m pytest -q -p no:cacheprovider -rs tests/test_sweep_time.py -k "uuids or flop or sdpa or idle" \
  > "$out/tests-flops-idle.txt" 2>&1
tail -1 "$out/tests-flops-idle.txt"

python3 - > "$out/flops.txt" 2>&1 <<'PY'
import sys
import torch
sys.path.insert(0, "tests")
from test_generate import preset
from eaq.measure.roofline import forward_flops
for name in ("distilbert_base_random", "gpt2_small_random"):
    model = preset(name)
    ids = torch.randint(0, 1000, (32, 128))
    counts = {}
    for device in ("cuda", "cpu"):
        model.to(device)
        batch = {"input_ids": ids.to(device), "attention_mask": torch.ones_like(ids, device=device)}
        for attention in ("sdpa", "eager"):
            model.set_attn_implementation(attention)
            with torch.inference_mode():
                counts[f"{device}/{attention}"] = forward_flops(lambda: model(**batch))
    print(name, counts, "agree" if len(set(counts.values())) == 1 else "DIFFER")
PY
cat "$out/flops.txt"

python3 -m eaq.run -m model=distilbert_base_random precision=bf16,fp8 dataset=synthetic batch_size=32 seq_len=128 \
  sampler=nvml trial=1,2 paths.output_dir="$WORK/sweep" > "$out/sweep.txt" 2>&1
echo "sweep exit $?" >> "$out/sweep.txt"
python3 -m eaq.run model=distilbert_base_random precision=bf16 dataset=synthetic batch_size=32 seq_len=128 \
  sampler=none trials=gpu_energy paths.output_dir="$WORK/none" > "$out/none.txt" 2>&1
echo "none exit $?" >> "$out/none.txt"
python3 - "$WORK" > "$out/runs.txt" 2>&1 <<'PY'
import sys
from mlflow.tracking import MlflowClient
for store in ("sweep", "none"):
    client = MlflowClient(tracking_uri=f"sqlite:///{sys.argv[1]}/{store}/mlflow.db")
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    for r in sorted(runs, key=lambda r: r.info.run_name):
        if r.data.tags.get("eaq.kind") != "benchmark":
            continue
        m, t = r.data.metrics, r.data.tags
        keys = ("energy_per_sample_mj", "energy_net_per_sample_mj", "idle_power_w", "latency_mean_ms", "forward_flops_per_batch",
                "achieved_flop_per_j", "roofline_efficiency", "phase_idle_s", "sensor_updates", "poll_coverage")
        print(store, r.info.run_name, r.info.status, "valid=" + t.get("eaq.valid", "?"),
              {k: round(m[k], 4) for k in keys if k in m})
        print("   eaq.idle:", t.get("eaq.idle"), "| energy:", t.get("eaq.energy"), t.get("eaq.energy.reason", ""),
              "| notes:", t.get("eaq.energy.notes", ""))
PY
cat "$out/runs.txt"
