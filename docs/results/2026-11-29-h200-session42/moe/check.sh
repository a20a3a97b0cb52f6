#!/usr/bin/env bash
# Session 42, call 2, one lent H200: a causal mixture of experts (Mixtral's architecture, random weights) loads with
# model.head=causal_lm since this session (its routing moved the first token's logits by rounding with the last one,
# and exact equality had refused it as "not causal"), and generates, measured per output token, on the GPU:
# bf16 eager and compiled, batch 1, prompt 128, 64 new tokens; int8 refused naming the stacked experts.
# From the repository root: OUT=<folder> bash docs/results/2026-11-29-h200-session42/moe/check.sh
set -uo pipefail
out=${OUT:?set OUT}
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
moe="model=llama_1b_random model.name=mixtral-shape-random model.architecture.model_type=mixtral
  model.architecture.hidden_size=1024 model.architecture.intermediate_size=2816 model.architecture.num_hidden_layers=8
  model.architecture.num_attention_heads=16 model.architecture.num_key_value_heads=4
  +model.architecture.num_local_experts=8 +model.architecture.num_experts_per_tok=2"
python3 -m eaq.run -m $moe precision=bf16,int8 compile=false,true workload=generate workload.new_tokens=64 \
  dataset=synthetic seq_len=128 batch_size=1 sampler=nvml trials=gpu_energy device=cuda:0 \
  paths.output_dir=/tmp/moe > "$out/sweep.txt" 2>&1
echo "exit $?" >> "$out/sweep.txt"
cp /tmp/moe/mlflow.db "$out/moe-mlflow.db"
grep -E "ms/token|error|FAILED|sweep:" "$out/sweep.txt" | cut -c1-400
