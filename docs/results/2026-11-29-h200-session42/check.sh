#!/usr/bin/env bash
# Session 42, one call on one lent H200 (the GPU image's torch 2.11, transformers 5.17).
# 1. layers.saving=measured now reads each lowerable component's saving against the unchanged components' (embeddings,
#    layer norms: no Linear layer the target takes) and lowers none within it (layers/plan_saving.csv, column valid):
#    the night-saving command of docs/results/2026-11-25-h100-layers (DistilBERT-base and GPT-2-small shapes, bf16 base,
#    fp8 target, by profiled time) on the GPU, to see how large that noise is there against the components' differences.
# 2. The tests that run only where CUDA is (skipped on the CPU machines), with the energy and measurement tests.
# From the repository root: OUT=<folder> bash docs/results/2026-11-29-h200-session42/check.sh
set -uo pipefail
out=${OUT:?set OUT}
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw,power.limit --format=csv > "$out/gpu.txt"
for spec in gpt2_small_random:7e-4 distilbert_base_random:1.5e-5; do m=${spec%%:*}; kl=${spec##*:}
  python3 -m eaq.run task=layers model=$m precision=bf16 layers.target=fp8 layers.ablation=false layers.budget=impact \
    layers.budget_limit=$kl layers.saving=measured batch_size=64 seq_len=128 dataset=synthetic trials=gpu_table \
    sampler=none device=cuda:0 paths.output_dir=/tmp/pc/$m paths.cache_dir=/tmp/pc/cache > "$out/layers-$m.txt" 2>&1
  echo "exit $?" >> "$out/layers-$m.txt"
  find /tmp/pc/$m -path '*artifacts*' -name plan_saving.csv -exec cp {} "$out/plan_saving-$m.csv" \;
  find /tmp/pc/$m -path '*artifacts*' -name plan.yaml -exec cp {} "$out/plan-$m.yaml" \;
  tail -2 "$out/layers-$m.txt"
done
timeout 330 python3 -m pytest -q -p no:cacheprovider -rs tests/test_energy.py tests/test_measure.py tests/test_generate_idle.py \
  tests/test_sweep_time.py::test_torchs_gpu_uuids_are_nvmls_without_its_prefix \
  tests/test_precision.py::test_int8_on_cuda_makes_no_host_copies_beyond_fp32_and_multiplies_exactly_at_any_rows \
  tests/test_generate.py::test_on_cuda_the_recorded_decode_step_replays_the_tokens_of_the_step_run_from_python \
  > "$out/tests.txt" 2>&1
tail -3 "$out/tests.txt"
