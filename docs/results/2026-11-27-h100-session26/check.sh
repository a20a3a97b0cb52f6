#!/usr/bin/env bash
# Session 26 on a lent GPU: this session's changes on CUDA with the GPU image's packages (transformers 5.17).
# - generation passes the KV cache by the name the model's forward takes (`cache` in transformers 5.2x, where
#   `past_key_values` warns; `past_key_values` before): the CUDA-graph tests and a compiled, graphed generate run;
# - task=layers counts each profiler range's own time (a block's range less its components', kept as a stack per
#   root): on CUDA the components' and blocks' own ops must come out as before, so one trial of DistilBERT-base and
#   GPT-2-small in bf16 is set against the committed 3-trial figures (docs/results/2026-11-25-h100-layers).
# From the repository root: OUT=<folder> bash docs/results/2026-11-27-h100-session26/check.sh
set -uo pipefail
out=${OUT:?set OUT}
repo=$PWD
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > "$out/gpu.txt"
tok="$repo/.whl/minilm-tokenizer"
work=${WORK:-/tmp/eaq-s26}
rm -rf "$work" && mkdir -p "$work"
python3 - > "$out/cache-arg.txt" 2>&1 <<'PY'
import inspect, transformers
from transformers import GPT2LMHeadModel, LlamaForCausalLM
for model in (GPT2LMHeadModel, LlamaForCausalLM):
    names = inspect.signature(model.forward).parameters
    print(transformers.__version__, model.__name__, "cache" if "cache" in names else "past_key_values")
PY
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_generate.py -k "on_cuda or recordable" > "$out/cuda-tests.txt" 2>&1
tail -1 "$out/cuda-tests.txt"
python3 -m eaq.run model=gpt2_tiny_random model.name_or_path="$tok" workload=generate workload.new_tokens=16 dataset=synthetic \
  trials=quick batch_size=1 seq_len=32 device=cuda compile=true cuda_graphs=true sampler=none \
  paths.output_dir="$work/generate" > "$out/generate.txt" 2>&1
echo "rc=$?" >> "$out/generate.txt"
grep -c "deprecated" "$out/generate.txt" | sed 's/^/deprecation warnings: /' >> "$out/generate.txt"
PARTS=energy TRIALS_LIST=1 LIMIT_S=330 WORK="$work/layers-work" bash docs/results/layers-gpu.sh distilbert_base_random,gpt2_small_random bf16 \
  > "$out/layers-log.txt" 2>&1
rm -f "$out"/*.db "$out"/*.tgz  # the stores stay on the device: a call returns a few files
