"""Issue 13's energy criterion, per device call: the default protocol's sweeps against the per-run protocol's.

    python docs/results/2026-11-26-h100-sweep-agreement/agreement.py > docs/results/2026-11-26-h100-sweep-agreement/agreement.md

Every sub-folder is one device call; its ``<label>-runs.csv`` are that call's sweeps, in the order its folder name
gives. A label starting with ``control`` ran the per-run protocol (``trials.idle_reuse=false calibrate_ahead=false``);
``noreuse`` the default protocol with ``trials.idle_reuse=false``; ``cool`` the default protocol with
``trials.cooldown_s=5``; the others the default protocol. Per call and
precision: energy per sample, mean (min-max) over each protocol's runs, the ratio of the means, whether the ranges
overlap; mean latency and the mean of the runs' latency standard deviations, because a host-bound configuration's
energy follows its latency (a slower host stretches the same GPU work over more idle-power time).

Below it, every call pooled per configuration: machines differ by a few % (fp32 read 205.7-211.6 mJ in the
controls of three calls), so each valid run's energy is divided by its own call's control mean, and the default
protocol's ratios are set against the control's with Welch's t-test. The trial-to-trial spread is the standard
deviation of the control's ratios (runs of one protocol in one call, on one GPU); "within the spread" means the
default protocol's mean ratio is closer to 1 than that. Runs of one call are not independent (a host's slow spell
lasts minutes), so the same test is made with each call's mean ratio as one observation ("per-call p").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

HERE = Path(__file__).resolve().parent
# sweep.sh's labels: how a sweep's name says which protocol it ran
VARIANTS = ("control", "noreuse", "cool")


def protocol(label: str) -> str:
    return next((p for p in VARIANTS if label.startswith(p)), "default")


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


def by_call() -> pd.DataFrame:
    frame = runs()
    rows = []
    for (call, model, precision), mine in frame.groupby(["call", "params.model.name", "params.precision.name"]):
        valid = (mine["tags.eaq.valid"].astype(str).str.lower() == "true").sum()
        row = {"call": call, "model": model, "precision": precision, "valid": f"{valid}/{len(mine)}"}
        energy = {p: g["metrics.energy_per_sample_mj"] for p, g in mine.groupby("protocol")}
        for p in ("default", *VARIANTS[::-1]):
            g = mine[mine["protocol"] == p]
            row[f"{p} mJ/sample"] = span(g["metrics.energy_per_sample_mj"]) if len(g) else ""
            row[f"{p} ms (std)"] = (f"{g['metrics.latency_mean_ms'].mean():.2f} ({g['metrics.latency_std_ms'].mean():.2f})"
                                   if len(g) else "")
        if "default" in energy and "control" in energy:
            d, c = energy["default"], energy["control"]
            row["default / control"] = f"{d.mean() / c.mean():.3f}"
            row["ranges overlap"] = "yes" if d.min() <= c.max() and c.min() <= d.max() else "no"
        rows.append(row)
    return pd.DataFrame(rows).fillna("")


def control_idle_s(frame: pd.DataFrame) -> pd.Series:
    """Per call, the idle baseline its control runs measured (s, rounded): 5 before the 2 s default of
    ``8568f33``, 2 since. The shipped protocol is the one with 2."""
    control = frame[frame["protocol"] == "control"]
    return control.groupby("call")["metrics.phase_idle_s"].max().round()


def pooled(idle_s: float | None = None) -> pd.DataFrame:
    """Every call's valid runs, each divided by its call's valid control mean; per configuration and protocol.
    With ``idle_s``, only the calls whose control measured an idle baseline of that length."""
    frame = runs()
    if idle_s is not None:
        idle = control_idle_s(frame)
        frame = frame[frame["call"].isin(idle[idle == idle_s].index)]
    frame = frame[frame["tags.eaq.valid"].astype(str).str.lower() == "true"]
    keys = ["call", "params.model.name", "params.precision.name"]
    control_mean = frame[frame["protocol"] == "control"].groupby(keys)["metrics.energy_per_sample_mj"].mean()
    frame = frame.join(control_mean.rename("control_mean"), on=keys).dropna(subset=["control_mean"]).copy()
    frame = frame.assign(ratio=frame["metrics.energy_per_sample_mj"] / frame["control_mean"])
    rows = []
    for (model, precision), mine in frame.groupby(["params.model.name", "params.precision.name"]):
        control = mine.loc[mine["protocol"] == "control", "ratio"]
        spread = control.std()
        for protocol_ in ("default", *VARIANTS[1:]):
            theirs = mine.loc[mine["protocol"] == protocol_, "ratio"]
            if len(theirs) < 2:
                continue
            low, high = stats.t.interval(0.95, len(theirs) - 1, loc=theirs.mean(), scale=stats.sem(theirs))
            rows.append({
                "model": model, "precision": precision, "protocol": protocol_,
                "calls": mine.loc[mine["protocol"] == protocol_, "call"].nunique(),
                "runs": f"{len(theirs)} vs {len(control)} control",
                "mean ratio (95% CI)": f"{theirs.mean():.3f} ({low:.3f}-{high:.3f})",
                "ratio min-max": f"{theirs.min():.3f}-{theirs.max():.3f}",
                "control spread (std of ratios)": f"{spread:.3f}",
                "within the spread": "yes" if abs(theirs.mean() - 1) <= spread else "no",
                "Welch p": f"{stats.ttest_ind(theirs, control, equal_var=False).pvalue:.3f}",
                **per_call(mine[mine["protocol"] == protocol_]),
            })
    return pd.DataFrame(rows)


def per_call(theirs: pd.DataFrame) -> dict[str, str]:
    """The same comparison with calls as the unit: runs of one call share a host's state for minutes, so the
    run-level test counts correlated runs as independent; here each call gives one ratio (its mean), tested
    against 1 with a one-sample t-test on the logarithms."""
    ratios = theirs.groupby("call")["ratio"].mean()
    if len(ratios) < 2:
        return {"per-call ratios": ", ".join(f"{r:.3f}" for r in ratios), "per-call p": ""}
    return {"per-call ratios": ", ".join(f"{r:.3f}" for r in ratios),
            "per-call p": f"{stats.ttest_1samp(np.log(ratios), 0.0).pvalue:.3f}"}


def main() -> None:
    print(by_call().to_markdown(index=False))
    print("\nPooled over the calls (valid runs only; each run's energy over its call's control mean):\n")
    print(pooled().to_markdown(index=False))
    print("\nThe same, only the calls under the shipped protocol (the control's idle baseline 2 s, since `8568f33`):\n")
    print(pooled(idle_s=2.0).to_markdown(index=False))


if __name__ == "__main__":
    main()
