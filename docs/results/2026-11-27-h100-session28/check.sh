#!/usr/bin/env bash
# Session 28 on a lent GPU: this session's review fixes that touch CUDA, with the GPU image's packages.
# - a causal LM is checked causal when it loads (two 4-token passes, logits at the first position exactly equal):
#   GPT-2-medium and the 1.1B Llama shape load on the GPU, a random BERT as head=causal_lm is refused;
# - generation logs its prefill window's checks (prefill_sensor_updates, ...) and records a verdict;
# - a roofline peak is kept per sampler (roofline-<GPU>-<format>-nvml.json);
# - the CUDA-graph generation and measurement tests.
# From the repository root: OUT=<folder> bash docs/results/2026-11-27-h100-session28/check.sh
set -uo pipefail
out=${OUT:?set OUT}
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > "$out/gpu.txt"
work=${WORK:-/tmp/eaq-s28}
rm -rf "$work" && mkdir -p "$work"
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_generate.py tests/test_measure.py \
  -k "on_cuda or recordable or between_steps or disjoint" > "$out/tests.txt" 2>&1
tail -1 "$out/tests.txt"
python3 - > "$out/models.txt" 2>&1 <<'PY'
import time
import torch
from omegaconf import OmegaConf
from eaq.config import ModelConfig
from eaq.errors import ModelLoadError
from eaq.models import load_model
device = torch.device("cuda")
for preset in ("gpt2_medium_random", "llama_1b_random"):
    cfg = ModelConfig(**OmegaConf.to_container(OmegaConf.load(f"conf/model/{preset}.yaml")))
    started = time.monotonic()
    model = load_model(cfg, with_tokenizer=False, device=device).model
    print(f"{preset}: loaded as {type(model).__name__} on {next(model.parameters()).device} in {time.monotonic() - started:.1f} s (causal check passed)")
    del model
    torch.cuda.empty_cache()
bert = ModelConfig(name="bert-as-causal", weights="random", head="causal_lm",
                   architecture={"model_type": "bert", "vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2,
                                 "num_attention_heads": 2, "intermediate_size": 128})
try:
    load_model(bert, with_tokenizer=False, device=device)
    print("bert as causal_lm: LOADED (expected a refusal)")
except ModelLoadError as error:
    print("bert as causal_lm refused:", error)
PY
WORK="$work/gen" bash docs/results/generate-gpu.sh gpt2_medium_random bf16 1 compiled 1 > /dev/null 2>&1
python3 -m eaq.run model=gpt2_small_random precision=bf16 dataset=synthetic batch_size=8 seq_len=128 trials=gpu_table \
  trials.roofline=true sampler=nvml paths.output_dir="$work/fwd" > "$out/forward-log.txt" 2>&1
python3 - "$work" > "$out/records.txt" 2>&1 <<'PY'
import sys
from pathlib import Path
from mlflow.tracking import MlflowClient
work = Path(sys.argv[1])
for store in ("gen", "fwd"):
    client = MlflowClient(tracking_uri=f"sqlite:///{work / store / 'mlflow.db'}")
    for r in [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])
              if r.data.tags.get("eaq.kind") == "benchmark"]:
        m = r.data.metrics
        print(r.info.run_name, r.info.status, "valid:", r.data.tags.get("eaq.valid"), "reasons:", r.data.tags.get("eaq.valid.reasons", "none"))
        for key in sorted(k for k in m if k.startswith(("prefill_sensor", "prefill_poll", "prefill_sm_clock", "sensor_updates",
                                                           "poll_coverage", "time_per_output_token_mean", "decode_energy_per_token",
                                                           "peak_flop_per_j", "roofline_efficiency", "latency_mean", "energy_per_sample"))):
            print(f"  {key} = {m[key]:.6g}")
        print("  eaq.roofline.calibration:", r.data.tags.get("eaq.roofline.calibration", "-"))
print("peak files:", sorted(p.name for p in (work / "fwd" / "cache").glob("roofline-*.json")))
PY
cat "$out"/log-generate-*.txt > "$out/logs.txt" 2>/dev/null && rm -f "$out"/log-generate-*.txt
rm -f "$out"/*.db "$out"/*.tgz  # the stores stay on the device: a call returns a few files (8 at most)
