"""Hydra callback: at the end of a sweep, its aggregates and report onto the parent run, and a table on screen.

Registered in conf/config.yaml after ``mlflow_sweep`` and before ``progress``. Hydra 1.3 calls
``on_multirun_end`` in reverse registration order (hydra/_internal/callbacks.py:
``reverse=True``), so this runs after ``progress`` has closed its bars and given stdout back,
and before ``mlflow_sweep`` closes the parent run: the aggregates land on a run still open,
and the parent's FINISHED/FAILED status still comes from its children alone.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from eaq.errors import EaqError
from eaq.tracking.callbacks import fail_loudly, parent_run_id, sweep_dir
from eaq.tracking.redact import redact, redacted_traceback


def _report_api() -> tuple[Any, ...]:
    """The report's modules (MLflow, pandas, scipy: 1.7 s of imports on the CPU machine), imported on first use.

    Not with this module: Hydra instantiates every callback before the sweep's first start
    hook, and these imports would delay the process that works ahead of the runs
    (eaq/tasks/ahead.py). Not first at the end either, where they add to the sweep's wall time
    (1.7 s more after the last run on the H100, docs/results/2026-11-25-h100-sweep-time):
    ``on_multirun_start`` imports them, while the first run waits for the fork server's imports.
    """
    from mlflow.tracking import MlflowClient

    from eaq.report.build import build, log, report_command, screen

    return MlflowClient, screen, build, log, report_command


class SweepReportCallback(Callback):
    """The sweep's answer where users look: on screen at its end, and on its parent run in MLflow."""

    @fail_loudly("importing the report's modules")
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _report_api()

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Build the report of the sweep's runs, log it onto the parent, print the compact table and the command.

        A report that cannot be built says why and stops nothing: the runs are measured and
        logged, and the sweep's summary and its parent's status (mlflow_sweep, after this) must
        still come; ``python -m eaq.report`` builds it again from the store.
        """
        MlflowClient, screen, build, log, report_command = _report_api()  # noqa: N806
        folder = sweep_dir(HydraConfig.get())
        parent = parent_run_id(folder)
        if parent is None:  # the sweep never opened a parent run (mlflow_sweep not registered): nothing to report on
            return
        if config.get("task") == "calibrate":  # every job a calibration (a task swept over values reads as its default)
            from eaq.report.frame import CALIBRATIONS_ONLY

            print(f"sweep report: none for task=calibrate: {CALIBRATIONS_ONLY}", file=sys.stderr)
            return
        uri = config.tracking.uri
        try:
            # Every job has returned: a run still marked under way was killed (its worker), not running.
            report = build(uri, folder / "report", sweep=parent, ended=frozenset({parent}))
            log(MlflowClient(tracking_uri=uri), parent, report)
        except Exception as error:  # EaqError: no run finished, the summary says why; anything else: a report bug
            if config.get("debug") and not isinstance(error, EaqError):
                print(redacted_traceback(error), end="", file=sys.stderr)  # MLflow's quote URLs
            print(f"sweep report: not built: {redact(str(error))}", file=sys.stderr)
            return
        if shown := screen(report):
            print(shown)
        print(f"sweep report: {report.html} (also on the parent run's artifacts, report/report.html)")
        print(f"full report again: {report_command(uri, parent, None, Path(config.paths.output_dir) / 'report')}")
