#!/usr/bin/env bash
# Session 43, one call on one lent H200 (the GPU image's torch 2.11, transformers 5.17).
# 1. The decode roofline of a mixture of experts now counts the routed experts a step's tokens can choose,
#    min(E, batch x k) per layer (eaq.precision.proof.RoutedExperts): session 42's Mixtral shape (random, 8 experts of
#    2816, top 2) generating at batch 1 and 16, and a Qwen2-MoE shape (8 routed experts of 1408, top 2, a shared
#    expert of 2816 read whole), bf16 compiled with the decode graph, prompt 128, 64 new tokens.
# 2. The generation and mixed-precision tests under the GPU image's transformers (5.17; CI has 5.24), CUDA-only ones
#    included: this session changed how a model's cache argument is found and refuses models that keep no KV cache.
# From the repository root: OUT=<folder> bash docs/results/2026-11-29-h200-session43/check.sh
set -uo pipefail
out=${OUT:?set OUT}
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw,power.limit --format=csv > "$out/gpu.txt"
shape="model=llama_1b_random model.architecture.hidden_size=1024 model.architecture.num_hidden_layers=8
  model.architecture.num_attention_heads=16 model.architecture.num_key_value_heads=4"
run="workload=generate workload.new_tokens=64 dataset=synthetic seq_len=128 precision=bf16 compile=true cuda_graphs=true
  sampler=nvml trials=gpu_energy device=cuda:0 paths.output_dir=/tmp/moe"
python3 -m eaq.run -m $shape $run model.name=mixtral-shape-random model.architecture.model_type=mixtral \
  model.architecture.intermediate_size=2816 +model.architecture.num_local_experts=8 +model.architecture.num_experts_per_tok=2 \
  batch_size=1,16 > "$out/mixtral.txt" 2>&1
echo "exit $?" >> "$out/mixtral.txt"
python3 -m eaq.run -m $shape $run model.name=qwen2-moe-shape-random model.architecture.model_type=qwen2_moe \
  model.architecture.intermediate_size=2816 +model.architecture.num_experts=8 +model.architecture.num_experts_per_tok=2 \
  +model.architecture.moe_intermediate_size=1408 +model.architecture.shared_expert_intermediate_size=2816 \
  batch_size=1 > "$out/qwen2moe.txt" 2>&1
echo "exit $?" >> "$out/qwen2moe.txt"
cp /tmp/moe/mlflow.db "$out/moe-mlflow.db"
grep -hE "ms/token|error|FAILED|sweep:|^exit" "$out/mixtral.txt" "$out/qwen2moe.txt" | cut -c1-300
timeout 240 python3 -m pytest -q -p no:cacheprovider -rs tests/test_generate.py tests/test_mixed_precision.py \
  > "$out/tests.txt" 2>&1
tail -4 "$out/tests.txt"
