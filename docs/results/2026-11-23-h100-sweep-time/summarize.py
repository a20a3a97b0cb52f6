"""Wall time of a sweep against the time its runs spent inside measurement windows.

    python summarize.py STORE.db WALL_SECONDS
"""

import sys

import mlflow
import pandas as pd

store, wall = sys.argv[1], float(sys.argv[2])
mlflow.set_tracking_uri(f"sqlite:///{store}")
runs = mlflow.search_runs(experiment_names=["eaq"], filter_string="tags.`eaq.kind` = 'benchmark'")
runs = runs[runs["status"] == "FINISHED"]
window = runs["metrics.window_duration_s"].sum()
print(f"wall {wall:.1f} s for {len(runs)} runs, {window:.1f} s inside windows: {window / wall * 100:.1f}%\n")
phases = [c for c in runs.columns if c.startswith("metrics.") and (c.endswith("_s") and ("phase" in c or c in (
    "metrics.window_duration_s", "metrics.warmup_duration_s", "metrics.isolation_overhead_s")))]
cols = ["tags.mlflow.runName", "metrics.energy_per_sample_mj", "tags.eaq.valid", *phases]
print(runs[[c for c in cols if c in runs]].sort_values("tags.mlflow.runName").to_markdown(index=False, floatfmt=".2f"))
per = runs.groupby("params.precision.name")["metrics.energy_per_sample_mj"].agg(["mean", "min", "max", "count"])
print("\nenergy per sample by precision (mJ):\n")
print(per.to_markdown(floatfmt=".2f"))
