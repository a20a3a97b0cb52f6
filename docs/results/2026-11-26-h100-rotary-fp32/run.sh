#!/usr/bin/env bash
# Rotary frequencies kept in fp32 by a cast (eaq.precision.base.cast) on the lent GPU, from the repository root:
#  1. the CUDA-only generation tests (the recorded decode step replays the Python step's tokens, GPT-2 and the Llama
#     shape, eager and compiled: a bf16 model with fp32 inv_freq buffers under torch.compile and a CUDA graph);
#  2. the runs of docs/results/2026-11-26-h100-review-fixes (1.1B Llama shape, random weights, generation, synthetic
#     ids with fidelity, prompt 32, 16 new tokens, batch 1): fp32, then bf16 eager, against its fp32 reference; there,
#     with inv_freq rounded to bf16, bf16 matched 0.25 of the tokens and 0.906 of the top-1 predictions;
#  3. bf16 and int4_weight_only compiled with the decode step as one CUDA graph, same settings.
set -uo pipefail
export PYTHONUNBUFFERED=1
bash docs/results/gpu-install.sh > $OUT/install.txt 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt
python3 -m pytest -q -p no:cacheprovider tests/test_generate.py -k "on_cuda" > $OUT/cuda-tests.txt 2>&1; tail -1 $OUT/cuda-tests.txt
P=/tmp/eaq-rotary; rm -rf $P
GEN="model=llama_1b_random workload=generate dataset=synthetic trials=quick trials.fidelity_on_synthetic=true batch_size=1 seq_len=32 workload.new_tokens=16 paths.output_dir=$P"
{ python3 -m eaq.run $GEN precision=fp32
  python3 -m eaq.run $GEN precision=bf16
  python3 -m eaq.run -m $GEN precision=bf16,int4_weight_only compile=true cuda_graphs=true
} 2>&1 | grep -v "it/s" > $OUT/log.txt
python3 - <<'PY' | tee $OUT/summary.txt
from mlflow.tracking import MlflowClient
c = MlflowClient(tracking_uri="sqlite:////tmp/eaq-rotary/mlflow.db")
for r in sorted(c.search_runs([e.experiment_id for e in c.search_experiments()]), key=lambda r: r.info.start_time):
    m, t = r.data.metrics, r.data.tags
    if t.get("eaq.kind") != "benchmark":
        continue
    print(r.info.run_name, r.info.status, "| match rate:", m.get("quality_generated_match_rate"), "| top-1:",
          m.get("quality_top1_agreement_with_fp32"), "| first divergence:", m.get("quality_first_divergence_mean_tokens"),
          "| ms/token:", m.get("time_per_output_token_mean_ms"), "|", t.get("eaq.decode.cuda_graph"), t.get("eaq.error", "")[:300])
PY
