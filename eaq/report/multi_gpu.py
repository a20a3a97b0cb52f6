"""``python -m eaq.report.multi_gpu``: the same sweep on one GPU and on two, side by side.

Issue 17 asks two things of running a sweep on two GPUs of one host at once
(docs/results/multi-gpu.sh): that it pays (wall time on two at most ``--max-ratio`` of that
on one), and that it does not change what is measured (each configuration's energy per
sample, or per output token for generation, on two GPUs within the trial-to-trial spread of
the runs themselves: the two means differ by no more than the larger of the two sample
standard deviations). A neighbour shares the host's CPU, PCIe and power budget, so the
second is not a given. This prints both per configuration from the two stores (MLflow only)
and a verdict line for each.
"""

from __future__ import annotations

import argparse
import math

import pandas as pd

from eaq.report.aggregate import ENERGY, aggregate, config_label
from eaq.report.frame import load
from eaq.tracking.failures import reported


def side_by_side(one: pd.DataFrame, two: pd.DataFrame, metrics: tuple[str, ...] = ENERGY) -> pd.DataFrame:
    """Per configuration: its energy figure (the first of ``metrics`` either side measured), n, mean and std of it on
    one and on two GPUs, and whether they agree."""
    tables = {}
    for name, frame in (("one", one), ("two", two)):
        table = aggregate(frame, metrics=metrics)
        table.index = pd.MultiIndex.from_arrays([[config_label(row) for _, row in table.iterrows()], table["metric"]])
        tables[name] = table[["n", "mean", "std"]].add_prefix(f"{name}_")
    joined = tables["one"].join(tables["two"], how="outer")
    measured = joined[["one_mean", "two_mean"]].notna().any(axis=1)
    rows = {label: [m for m in metrics if (label, m) in measured.index] for label in joined.index.get_level_values(0)}
    # Each configuration's figure: the first either side measured, else the first any run logged.
    chosen = {label: next((m for m in found if measured[(label, m)]), found[0]) for label, found in rows.items()}
    joined = joined[[chosen[label] == metric for label, metric in joined.index]]
    joined.index, joined["metric"] = joined.index.get_level_values(0), joined.index.get_level_values(1)
    joined = joined[["metric", *(c for c in joined.columns if c != "metric")]]
    spread = joined[["one_std", "two_std"]].max(axis=1, skipna=False)  # a side of one trial has no spread: n/a
    joined["difference_pct"] = (joined["two_mean"] / joined["one_mean"] - 1) * 100
    joined["agree"] = [
        "n/a" if math.isnan(d) or math.isnan(s) else ("yes" if abs(d) <= s else "no")
        for d, s in zip(joined["two_mean"] - joined["one_mean"], spread)
    ]
    return joined


def _seconds(text: str) -> float:
    """A wall time: a finite positive number of seconds (0 divided the ratio by zero, a negative or infinite one "met"
    the bar)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text} is no wall time: give the sweep's seconds, a number more than 0")
    return value


@reported()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].replace("``", ""))
    parser.add_argument("--one", required=True, help="MLflow URI of the sweep on one GPU")
    parser.add_argument("--two", required=True, help="MLflow URI of the same sweep on two GPUs")
    parser.add_argument("--one-wall-s", type=_seconds, required=True, help="wall time of the sweep on one GPU, seconds")
    parser.add_argument("--two-wall-s", type=_seconds, required=True, help="wall time of the sweep on two GPUs, seconds")
    parser.add_argument("--max-ratio", type=float, default=0.55, help="the wall-time ratio two/one to meet (default 0.55)")
    parser.add_argument("--experiment", default="eaq", help="the experiment of both stores' runs (default eaq)")
    args = parser.parse_args(argv)
    ratio = args.two_wall_s / args.one_wall_s
    print(f"wall time: one GPU {args.one_wall_s:.1f} s, two GPUs {args.two_wall_s:.1f} s, ratio {ratio:.3f} "
          f"({'meets' if ratio <= args.max_ratio else 'misses'} <= {args.max_ratio})")
    table = side_by_side(load(args.one, args.experiment, option="--one"), load(args.two, args.experiment, option="--two"))
    if table[["one_mean", "two_mean"]].isna().all().all():
        print("energy: not measured (no energy sensor in these runs)")
        return 0
    print("energy per configuration (energy_per_sample_mj; a generation run's decode_energy_per_token_mj; mean and "
          "sample std over trials; agree: |two - one| <= the larger std):")
    print(table.to_markdown(floatfmt=".4g"))
    judged = table[table["agree"] != "n/a"]
    if judged.empty:  # measured, but a side of one trial has no spread to judge the difference by
        print("energy: agreement not judged: no configuration was measured on both sides with two trials or more on each")
        return 0
    print(f"energy: {(judged['agree'] == 'yes').sum()} of {len(judged)} configurations agree within their trial spread")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
