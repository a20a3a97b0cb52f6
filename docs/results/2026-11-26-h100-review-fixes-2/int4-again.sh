#!/usr/bin/env bash
# int4's stored-dtypes proof again after it counts the logical weights, not the tile layout's padding (16:58 UTC).
set -uo pipefail
bash docs/results/gpu-install.sh > $OUT/install-again.txt 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader > $OUT/gpu-again.txt
P=/tmp/eaq-int4; rm -rf $P
python3 -m eaq.run model=distilbert_base_random dataset=synthetic trials=quick batch_size=32 seq_len=128 sampler=none \
    precision=int4_weight_only paths.output_dir=$P 2>&1 | grep -v "it/s" > $OUT/int4-again.txt
python3 -c "
from mlflow.tracking import MlflowClient
c = MlflowClient(tracking_uri='sqlite:///$P/mlflow.db')
(r,) = c.search_runs([e.experiment_id for e in c.search_experiments()])
print(r.info.run_name, r.info.status, '| stored:', r.data.tags.get('eaq.proof.stored_dtypes'), '| model_size_mb:', r.data.metrics.get('model_size_mb'),
      '| quantized:', r.data.metrics.get('quantized_linear_layers'), '/', r.data.metrics.get('linear_layers'))
" | tee $OUT/int4-again-summary.txt
