"""Summarize sweeps side by side: wall time against time inside windows, per-phase sums, energy per sample.

    python summarize.py LABEL=STORE.db:START_UNIX_S:END_UNIX_S [LABEL=RUNS.csv:WALL_SECONDS ...] [--settings TEXT] [--csv-dir DIR]

A sweep is its MLflow store with the epoch seconds it started and ended (then the time
before its first run and after its last is shown too), or an earlier sweep's runs CSV
(written by --csv-dir) with its wall seconds. Per sweep: the share of wall time inside measurement windows (sum of window_duration_s),
where the rest went (sums over runs of each phase_*_s and isolation_overhead_s, and the
time outside runs: wall minus the sum of run_wall_s), warm-up settled or capped, the
roofline peaks calibrated; per configuration and sweep: energy per sample, mean (min-max)
over trials. With --csv-dir, every run's metrics, params and tags go to LABEL-runs.csv.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import mlflow
import pandas as pd


def runs_of(source: str) -> pd.DataFrame:
    if source.endswith(".csv"):
        runs = pd.read_csv(source)
    else:
        mlflow.set_tracking_uri(f"sqlite:///{source}")
        runs = mlflow.search_runs(experiment_names=["eaq"], filter_string="tags.`eaq.kind` = 'benchmark'")
    runs["start_time"], runs["end_time"] = pd.to_datetime(runs["start_time"], utc=True), pd.to_datetime(runs["end_time"], utc=True)
    return runs[runs["status"] == "FINISHED"].sort_values("tags.mlflow.runName")


def edges(runs: pd.DataFrame, start: float | None, end: float | None) -> tuple[str, str]:
    """Seconds from the sweep's start to its first run's MLflow run, and from its last run's end to the sweep's end."""
    if start is None or end is None:
        return "n/a", "n/a"
    first, last = runs["start_time"].min().timestamp(), runs["end_time"].max().timestamp()
    return f"{first - start:.1f}", f"{end - last:.1f}"


def col(runs: pd.DataFrame, name: str) -> pd.Series:
    return runs[name] if name in runs else pd.Series(dtype=float)


def flag(runs: pd.DataFrame, name: str, value: str) -> int:
    """How many runs have tag ``name`` = ``value`` (a CSV reads "true" back as a bool)."""
    return int((col(runs, name).astype(str).str.lower() == value).sum())


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sweeps", nargs="+", help="LABEL=STORE.db:WALL_SECONDS")
    parser.add_argument("--settings", default="")
    parser.add_argument("--csv-dir")
    args = parser.parse_args()
    sweeps: dict[str, tuple[pd.DataFrame, float]] = {}
    bounds: dict[str, tuple[str, str]] = {}
    for spec in args.sweeps:
        label, rest = spec.split("=", 1)
        source, *times = rest.split(":")
        runs = runs_of(source)
        start, end = (float(times[0]), float(times[1])) if len(times) == 2 else (None, None)
        sweeps[label] = (runs, end - start if start is not None else float(times[0]))
        bounds[label] = edges(runs, start, end)
        if args.csv_dir and not source.endswith(".csv"):
            sweeps[label][0].to_csv(Path(args.csv_dir) / f"{label}-runs.csv", index=False)
    if args.settings:
        print(f"settings: {args.settings}\n")

    print("## Wall time and windows\n")
    rows = []
    for label, (runs, wall) in sweeps.items():
        window = col(runs, "metrics.window_duration_s").sum()
        rows.append([label, str(len(runs)), f"{wall:.1f} s", f"{window:.1f} s", f"**{window / wall:.1%}**"])
    print(table(["sweep", "runs", "wall", "inside windows", "share"], rows))

    print("\n## Where the time went (sums over runs, s)\n")
    phases = sorted({c for runs, _ in sweeps.values() for c in runs.columns if c.startswith("metrics.phase_")})
    names = [*phases, "metrics.isolation_overhead_s"]
    rows = []
    for name in names:
        rows.append([name.removeprefix("metrics."), *(f"{col(runs, name).sum():.1f}" for runs, _ in sweeps.values())])
    rows.append(["untimed in runs (run_wall_s - phases - isolation)", *(
        f"{(col(runs, 'metrics.run_wall_s') - runs[[c for c in names if c in runs]].sum(axis=1)).sum():.1f}"
        for runs, _ in sweeps.values())])
    rows.append(["before the first run (interpreter, Hydra, store)", *(bounds[label][0] for label in sweeps)])
    rows.append(["after the last run (report, parent run)", *(bounds[label][1] for label in sweeps)])
    rows.append(["outside runs (wall - sum of run_wall_s)", *(f"{wall - col(runs, 'metrics.run_wall_s').sum():.1f}" for runs, wall in sweeps.values())])
    rows.append(["warm-up settled / capped", *(
        f"{flag(runs, 'tags.eaq.warmup.settled', 'true')} / {flag(runs, 'tags.eaq.warmup.settled', 'false')}"
        for runs, _ in sweeps.values())])
    rows.append(["warm-up per run, min-max", *(
        f"{col(runs, 'metrics.warmup_duration_s').min():.2f}-{col(runs, 'metrics.warmup_duration_s').max():.2f}" for runs, _ in sweeps.values())])
    print(table(["phase", *sweeps], rows))

    print("\n## Energy per sample per configuration (mJ, mean (min-max) over trials)\n")
    configs = sorted({p for runs, _ in sweeps.values() for p in col(runs, "params.precision.name").dropna()})
    rows = []
    for config in configs:
        cells = []
        for runs, _ in sweeps.values():
            mine = runs[col(runs, "params.precision.name") == config]
            e = col(mine, "metrics.energy_per_sample_mj").dropna()
            valid = flag(mine, "tags.eaq.valid", "true")
            cells.append(f"{e.mean():.2f} ({e.min():.2f}-{e.max():.2f}), {valid}/{len(mine)} valid" if len(e) else "not measured")
        rows.append([config, *cells])
    print(table(["precision", *sweeps], rows))

    print("\n## Roofline peak per format (TFLOP/J, from each sweep's own calibration)\n")
    rows = []
    for config in configs:
        cells = []
        for runs, _ in sweeps.values():
            peak = col(runs[col(runs, "params.precision.name") == config], "metrics.peak_flop_per_j").dropna()
            cells.append(f"{peak.iloc[0] / 1e12:.4f}" if len(peak) else "none")
        rows.append([config, *cells])
    print(table(["precision", *sweeps], rows))


if __name__ == "__main__":
    main()
