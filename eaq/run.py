"""``python -m eaq.run``: compose the config from ``conf/`` and run one benchmark job.

``-m`` sweeps: ``python -m eaq.run -m precision=fp32,int8 trial=1,2,3``.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from eaq.config import register_schemas
from eaq.group_choices import unknown_choice
from eaq.tasks.job import run_job

register_schemas()


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> str:
    return run_job(cfg)


if __name__ == "__main__":
    if error := unknown_choice(sys.argv[1:]):
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    main()
