"""``python -m eaq.report --uri sqlite:///outputs/mlflow.db [--sweep PARENT | --experiment NAME] --out DIR``.

Reads MLflow only and writes, under ``--out``: ``runs.csv``/``runs.parquet`` (one row per
run), ``aggregates.csv`` (mean, std, 95% CI, CV, counts per configuration and metric),
``ratios.csv`` (each precision over ``--baseline``), ``figures/`` (PNG + SVG) and
``report.html``. ``--log`` also logs them to MLflow: onto the sweep's parent run with
``--sweep``, else onto a new summary run (tag ``eaq.kind=report``) of the experiment.
"""

from __future__ import annotations

import argparse
from pathlib import Path
import sys

from mlflow.tracking import MlflowClient

from eaq.report.build import build, log, screen
from eaq.tracking.failures import reported
from eaq.tracking.find import find_sweep
from eaq.tracking.redact import redact, remember
from eaq.tracking.run_logger import TrackedRun


@reported(status=1)
def main(argv: list[str] | None = None) -> int:
    """Build the report; exit 1 with one sentence when there is nothing to report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].replace("``", ""))
    parser.add_argument("--uri", default="sqlite:///outputs/mlflow.db", help="the MLflow store")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--sweep", help="a sweep's parent run id, its name (sweep-<date>_<time>_<pid>) or its folder: report its runs")
    scope.add_argument("--experiment", default=None, help="report every run of this experiment (default eaq)")
    parser.add_argument("--out", type=Path, default=Path("outputs/report"), help="folder for the report's files")
    parser.add_argument("--baseline", default=None, help="precision the others are compared with (default fp32 if run)")
    parser.add_argument("--trace-run", help="run id whose power trace is drawn (default: the last run that measured energy)")
    parser.add_argument("--log", action="store_true", help="log the report to MLflow as well")
    args = parser.parse_args(argv)
    remember(args.uri)  # its password is redacted from what the report writes and logs, whatever its characters
    report = build(args.uri, args.out, args.sweep, args.experiment, args.baseline, args.trace_run)
    if shown := screen(report):
        print(shown)
    for figure in report.figures:
        if figure.note:
            print(f"left out: {figure.title}: {figure.note}")
    if args.log:
        client = MlflowClient(tracking_uri=args.uri)
        if args.sweep:  # its name or folder too, as build took it
            run_id = find_sweep(client, args.sweep).info.run_id
            log(client, run_id, report)
        else:
            experiment = client.get_experiment_by_name(args.experiment or "eaq")
            summary = TrackedRun(client, experiment.experiment_id, run_name="report", tags={"eaq.kind": "report"})
            run_id = summary.run_id
            try:
                log(client, run_id, report)
            except BaseException as error:  # a summary run left RUNNING reads as a report still being logged
                summary.end("FAILED", error)
                raise
            summary.end("FINISHED")
        print(logged_where(client, run_id))
    print(f"report: {report.html}")
    return 0


def logged_where(client: MlflowClient, run_id: str) -> str:
    """Where ``--log`` put the report, as a user finds it: the run's name and id and its experiment (in the MLflow UI,
    the run list; a new ``report`` run each time without ``--sweep``), and the report's place among its artifacts."""
    run = client.get_run(run_id)
    experiment = client.get_experiment(run.info.experiment_id).name
    return (f"logged onto run {run.info.run_name!r} ({run_id}) of experiment {experiment!r}: in the MLflow UI, its "
            f"Artifacts tab, report/report.html ({redact(run.info.artifact_uri)}/report)")


if __name__ == "__main__":
    sys.exit(main())
