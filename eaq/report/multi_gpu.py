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
from collections.abc import Callable

import pandas as pd

from eaq.report.aggregate import ENERGY, aggregate, config_label, uncounted, workload_kind
from eaq.report.frame import load
from eaq.tracking.failures import reported


# A configuration's own energy figure, where no run of it on either side measured one (each failed, or was flagged).
OWN_ENERGY = {"forward": "energy_per_sample_mj", "generate": "decode_energy_per_token_mj"}


def side_by_side(one: pd.DataFrame, two: pd.DataFrame, metrics: tuple[str, ...] = ENERGY) -> pd.DataFrame:
    """Per configuration: its energy figure (the first of ``metrics`` either side measured, else its workload's own),
    n, mean and std of it on one and on two GPUs, and whether they agree: "yes", "no", "n/a" (a side of one trial has
    no spread), or where a side counted no run, why (``uncounted``'s word: failed, flagged invalid, running)."""
    tables = {}
    for name, frame in (("one", one), ("two", two)):
        table = aggregate(frame, metrics=metrics)
        table["why"] = [uncounted(row["running"], row["invalid"])
                        if row["runs"] and row["runs"] == row["failed"] + row["running"] + row["invalid"] else ""
                        for _, row in table.iterrows()]
        table.index = pd.MultiIndex.from_arrays([[config_label(row) for _, row in table.iterrows()], table["metric"]])
        tables[name] = table[["n", "mean", "std", "why", "workload"]].add_prefix(f"{name}_")
    joined = tables["one"].join(tables["two"], how="outer")
    measured = joined[["one_mean", "two_mean"]].notna().any(axis=1)
    labels = dict.fromkeys(joined.index.get_level_values(0))
    rows = {label: [m for m in metrics if (label, m) in measured.index] for label in labels}
    # Each configuration's figure: the first either side measured; else one row of it (its counts alike in every
    # row), named by its own workload's figure (a failed generation read as a forward pass's energy per sample).
    chosen = {label: next((m for m in found if measured[(label, m)]), None) for label, found in rows.items()}
    picked = [chosen[label] == metric if chosen[label] else metric == rows[label][0] for label, metric in joined.index]
    joined = joined[picked]
    workload = joined["one_workload"].fillna(joined["two_workload"])
    joined.index, joined["metric"] = joined.index.get_level_values(0), [
        metric if chosen[label] else OWN_ENERGY[workload_kind(kind)]
        for (label, metric), kind in zip(joined.index, workload)]
    joined = joined[["metric", *(c for c in joined.columns if c != "metric" and not c.endswith(("_why", "_workload")))]
                    ].assign(why=[_why(one, two) for one, two in zip(joined["one_why"], joined["two_why"])])
    spread = joined[["one_std", "two_std"]].max(axis=1, skipna=False)  # a side of one trial has no spread: n/a
    joined["difference_pct"] = (joined["two_mean"] / joined["one_mean"] - 1) * 100
    joined["agree"] = [
        why or ("n/a" if math.isnan(d) or math.isnan(s) else ("yes" if abs(d) <= s else "no"))
        for d, s, why in zip(joined["two_mean"] - joined["one_mean"], spread, joined["why"])
    ]
    return joined.drop(columns="why")


def _why(one: object, two: object) -> str:
    """The sides that counted no run of a configuration and why ("one GPU: failed"), "" where both counted some."""
    said = [f"{side}: {word}" for side, word in (("one GPU", one), ("two GPUs", two)) if isinstance(word, str) and word]
    return "; ".join(said)


def _positive(what: str) -> Callable[[str], float]:
    """An argument's parser: a finite number more than 0 (a wall time of 0 divided the ratio by zero; a negative or
    infinite one, or such a ratio, "met" the bar)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{text} is no {what}, a number more than 0")
        return value
    return parse


@reported()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].replace("``", ""))
    parser.add_argument("--one", required=True, help="MLflow URI of the sweep on one GPU")
    parser.add_argument("--two", required=True, help="MLflow URI of the same sweep on two GPUs")
    seconds = _positive("wall time: give the sweep's seconds,")
    parser.add_argument("--one-wall-s", type=seconds, required=True, help="wall time of the sweep on one GPU, seconds")
    parser.add_argument("--two-wall-s", type=seconds, required=True, help="wall time of the sweep on two GPUs, seconds")
    parser.add_argument("--max-ratio", type=_positive("ratio of wall times"), default=0.55,
                        help="the wall-time ratio two/one to meet (default 0.55)")
    parser.add_argument("--experiment", default="eaq", help="the experiment of both stores' runs (default eaq)")
    args = parser.parse_args(argv)
    # Both stores read first: a wrong --experiment or store is said before any verdict.
    table = side_by_side(load(args.one, args.experiment, option="--one"), load(args.two, args.experiment, option="--two"))
    ratio = args.two_wall_s / args.one_wall_s
    print(f"wall time: one GPU {args.one_wall_s:.1f} s, two GPUs {args.two_wall_s:.1f} s, ratio {ratio:.3f} "
          f"({'meets' if ratio <= args.max_ratio else 'misses'} <= {args.max_ratio})")
    if table[["one_mean", "two_mean"]].isna().all().all() and (table["agree"] == "n/a").all():
        # Every run counted on both sides, and none logged energy (a failed or flagged run is said in the table).
        print("energy: not measured (no energy sensor in these runs)")
        return 0
    print("energy per configuration (energy_per_sample_mj; a generation run's decode_energy_per_token_mj; mean and "
          "sample std over trials; agree: |two - one| <= the larger std):")
    print(table.to_markdown(floatfmt=".4g"))
    judged = table[table["agree"].isin(("yes", "no"))]
    if judged.empty:  # measured, but a side of one trial has no spread to judge the difference by, or counted no run
        print("energy: agreement not judged: no configuration was measured on both sides with two trials or more on each"
              " (agree says why for each)")
        return 0
    print(f"energy: {(judged['agree'] == 'yes').sum()} of {len(judged)} configurations agree within their trial spread")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
