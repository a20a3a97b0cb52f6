"""``python -m eaq.report.table --uri sqlite:///outputs/mlflow.db [--columns ...]``: runs as a table.

Reads MLflow only. Prints Markdown (or CSV with ``--csv``) with one row per finished
benchmark run: its config choices and the chosen metrics.
"""

from __future__ import annotations

import argparse
import sys

import mlflow
import pandas as pd

DEFAULT_COLUMNS = (
    "params.model.name", "params.precision.name", "params.batch_size", "params.seq_len", "params.trial",
    "metrics.latency_mean_ms", "metrics.throughput_samples_per_s", "metrics.energy_per_sample_mj",
    "metrics.power_mean_w", "metrics.idle_power_w", "tags.eaq.valid",
)


def runs_table(uri: str, experiment: str = "eaq", columns: tuple[str, ...] = DEFAULT_COLUMNS) -> pd.DataFrame:
    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=[experiment], filter_string="tags.`eaq.kind` = 'benchmark'")
    if runs.empty:
        return runs
    runs = runs[runs["status"] == "FINISHED"]
    present = [c for c in columns if c in runs.columns]
    table = runs[present].rename(columns=lambda c: c.split(".", 1)[1])
    return table.sort_values([c for c in ("model.name", "precision.name", "batch_size", "trial") if c in table.columns])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", default="sqlite:///outputs/mlflow.db")
    parser.add_argument("--experiment", default="eaq")
    parser.add_argument("--columns", nargs="*", default=list(DEFAULT_COLUMNS))
    parser.add_argument("--csv", action="store_true")
    args = parser.parse_args(argv)
    table = runs_table(args.uri, args.experiment, tuple(args.columns))
    if table.empty:
        print(f"no finished benchmark runs in experiment {args.experiment!r} at {args.uri}", file=sys.stderr)
        return 1
    print(table.to_csv(index=False) if args.csv else table.to_markdown(index=False, floatfmt=".4g"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
