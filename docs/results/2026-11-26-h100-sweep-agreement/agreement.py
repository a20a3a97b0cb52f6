"""Issue 13's energy criterion, per device call: the default protocol's sweeps against the per-run protocol's.

    python docs/results/2026-11-26-h100-sweep-agreement/agreement.py > docs/results/2026-11-26-h100-sweep-agreement/agreement.md

Every sub-folder is one device call; its ``<label>-runs.csv`` are that call's sweeps, in the order its folder name
gives. A label starting with ``control`` ran the per-run protocol (``trials.idle_reuse=false calibrate_ahead=false``);
``noreuse`` the default protocol with ``trials.idle_reuse=false``; the others the default protocol. Per call and
precision: energy per sample, mean (min-max) over each protocol's runs, the ratio of the means, whether the ranges
overlap; mean latency and the mean of the runs' latency standard deviations, because a host-bound configuration's
energy follows its latency (a slower host stretches the same GPU work over more idle-power time).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent


def protocol(label: str) -> str:
    return "control" if label.startswith("control") else ("noreuse" if label.startswith("noreuse") else "default")


def runs() -> pd.DataFrame:
    frames = []
    for csv in sorted(HERE.glob("*/*-runs.csv")):
        label = csv.name.removesuffix("-runs.csv")
        sweep = pd.read_csv(csv)
        where = pd.DataFrame({"call": csv.parent.name, "sweep": label, "protocol": protocol(label)}, index=sweep.index)
        frames.append(pd.concat([sweep, where], axis=1))
    return pd.concat(frames, ignore_index=True)


def span(values: pd.Series) -> str:
    return f"{values.mean():.2f} ({values.min():.2f}-{values.max():.2f})"


def main() -> None:
    frame = runs()
    rows = []
    for (call, precision), mine in frame.groupby(["call", "params.precision.name"]):
        valid = (mine["tags.eaq.valid"].astype(str).str.lower() == "true").sum()
        row = {"call": call, "precision": precision, "valid": f"{valid}/{len(mine)}"}
        energy = {p: g["metrics.energy_per_sample_mj"] for p, g in mine.groupby("protocol")}
        for p in ("default", "noreuse", "control"):
            g = mine[mine["protocol"] == p]
            row[f"{p} mJ/sample"] = span(g["metrics.energy_per_sample_mj"]) if len(g) else ""
            row[f"{p} ms (std)"] = (f"{g['metrics.latency_mean_ms'].mean():.2f} ({g['metrics.latency_std_ms'].mean():.2f})"
                                   if len(g) else "")
        if "default" in energy and "control" in energy:
            d, c = energy["default"], energy["control"]
            row["default / control"] = f"{d.mean() / c.mean():.3f}"
            row["ranges overlap"] = "yes" if d.min() <= c.max() and c.min() <= d.max() else "no"
        rows.append(row)
    print(pd.DataFrame(rows).fillna("").to_markdown(index=False))


if __name__ == "__main__":
    main()
