"""``python -m eaq.run``: compose the config from ``conf/`` and run one benchmark job.

``-m`` sweeps: ``python -m eaq.run -m precision=fp32,int8 trial=1,2,3``.
"""

from __future__ import annotations

import os
import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from eaq.config import register_schemas
from eaq.group_choices import unknown_choice
from eaq.slots import slot_count
from eaq.tasks.job import run_job

register_schemas()
# Job and sweep folders are named by the second and the process (conf/config.yaml): two
# launches in the same second must not share a folder, and with it a sweep's parent run.
OmegaConf.register_new_resolver("eaq.pid", os.getpid, use_cache=True, replace=True)
# hydra/launcher=gpus runs as many jobs at once as there are GPU slots (eaq/slots.py).
OmegaConf.register_new_resolver("eaq.gpu_slots", slot_count, replace=True)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> str:
    return run_job(cfg)


if __name__ == "__main__":
    if error := unknown_choice(sys.argv[1:]):
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    main()
