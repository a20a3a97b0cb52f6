"""Hydra callback: one MLflow parent run per multirun, closed with a summary of its children.

The parent's id is written into the sweep folder, where every job (in this process or,
with another launcher, in its own) finds it. If the sweep dies before Hydra's end hook,
an exit hook still closes the parent, so no run is left RUNNING.
"""

from __future__ import annotations

import atexit
import logging
import sys
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from mlflow.entities import RunStatus
from omegaconf import DictConfig

from eaq.tracking.run_logger import PARENT_TAG, TrackedRun
from eaq.tracking.store import open_store

log = logging.getLogger(__name__)
PARENT_ID_FILE = "mlflow_parent_run_id.txt"
SKIPPED_FILE = "skipped_runs.txt"


def record_skip(sweep_dir: str, run_id: str) -> None:
    """A job that resume skipped leaves the id of the run it matched, for the sweep's summary."""
    with (Path(sweep_dir) / SKIPPED_FILE).open("a") as handle:
        handle.write(run_id + "\n")


def parent_run_id(sweep_dir: str) -> str | None:
    path = Path(sweep_dir) / PARENT_ID_FILE
    return path.read_text().strip() if path.exists() else None


class MlflowSweepCallback(Callback):
    def __init__(self) -> None:
        self.parent: TrackedRun | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # Hydra sets its runtime config only per job; the paths here interpolate ${hydra:...}.
        HydraConfig.instance().set_config(config)
        tracking = config.tracking
        client, experiment_id = open_store(tracking.uri, tracking.experiment, tracking.artifact_location)
        sweep_dir = Path(HydraConfig.get().sweep.dir)
        self.parent = TrackedRun(
            client,
            experiment_id,
            run_name=f"sweep-{sweep_dir.name}",
            tags={"eaq.sweep_dir": str(sweep_dir.resolve()), "eaq.kind": "sweep"},
        )
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / PARENT_ID_FILE).write_text(self.parent.run_id)
        atexit.register(self._close_unfinished)
        log.info("MLflow parent run %s (%s)", self.parent.run_id, tracking.uri)

    def _close_unfinished(self) -> None:
        if self.parent is not None:
            self.parent.end(RunStatus.to_string(RunStatus.FAILED), RuntimeError("the sweep stopped before its end"))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.parent is None:
            return
        client = self.parent.client
        children = client.search_runs(
            [self.parent.run.info.experiment_id], filter_string=f"tags.`{PARENT_TAG}` = '{self.parent.run_id}'"
        )
        failed = [r for r in children if r.info.status != "FINISHED"]
        self.parent.log_metrics({"sweep_runs": len(children), "sweep_runs_failed": len(failed)})
        self.parent.end("FAILED" if failed else "FINISHED")
        skipped_file = Path(HydraConfig.get().sweep.dir) / SKIPPED_FILE
        skipped = len(skipped_file.read_text().split()) if skipped_file.exists() else 0
        print(
            f"sweep: {len(children) - len(failed)} of {len(children)} runs finished (parent run {self.parent.run_id})"
            + (f"; {skipped} skipped, already FINISHED with the same config (resume=false to rerun them)" if skipped else "")
        )
        if failed:
            for r in failed:
                print(f"  {r.info.status}: {r.info.run_name}: {r.data.tags.get('eaq.error', 'no error recorded')}", file=sys.stderr)
            sys.exit(1)
