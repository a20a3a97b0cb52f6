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
    no spread, or measured none), or where a side counted no run, why (``uncounted``'s word: failed, flagged invalid,
    running)."""
    tables, why, workload = {}, {}, {}
    for name, frame in (("one", one), ("two", two)):
        table = aggregate(frame, metrics=metrics)
        labels = [config_label(row) for _, row in table.iterrows()]
        # Per configuration, whatever the metric (a side's failed runs sit under the first figure any of its runs
        # logged, maybe not the one the other side measured): its counts are alike in each of its rows.
        why[name] = {label: uncounted(row["running"], row["invalid"])
                     if row["runs"] and row["runs"] == row["failed"] + row["running"] + row["invalid"] else ""
                     for label, (_, row) in zip(labels, table.iterrows())}
        workload |= {label: kind for label, kind in zip(labels, table["workload"])}
        table.index = pd.MultiIndex.from_arrays([labels, table["metric"]])
        tables[name] = table[["n", "mean", "std"]].add_prefix(f"{name}_")
    joined = tables["one"].join(tables["two"], how="outer")
    measured = joined[["one_mean", "two_mean"]].notna().any(axis=1)
    rows = {label: [m for m in metrics if (label, m) in measured.index] for label in dict.fromkeys(joined.index.get_level_values(0))}
    # Each configuration's figure: the first either side measured; else one row of it, named by its own workload's
    # figure (a failed generation read as a forward pass's energy per sample).
    chosen = {label: next((m for m in found if measured[(label, m)]), None) for label, found in rows.items()}
    joined = joined[[chosen[label] == metric if chosen[label] else metric == rows[label][0] for label, metric in joined.index]]
    labels = list(joined.index.get_level_values(0))
    joined.index = labels
    joined.insert(0, "metric", [chosen[label] or OWN_ENERGY[workload_kind(workload[label])] for label in labels])
    for side in ("one", "two"):  # a side that ran the configuration counted n runs of its figure, 0 if none
        joined[f"{side}_n"] = [0 if math.isnan(n) and label in why[side] else n for label, n in zip(labels, joined[f"{side}_n"])]
    spread = joined[["one_std", "two_std"]].max(axis=1, skipna=False)  # a side of one trial has no spread: n/a
    joined["difference_pct"] = (joined["two_mean"] / joined["one_mean"] - 1) * 100
    joined["agree"] = [
        _why(why["one"].get(label), why["two"].get(label))
        or ("n/a" if math.isnan(d) or math.isnan(s) else ("yes" if abs(d) <= s else "no"))
        for label, d, s in zip(labels, joined["two_mean"] - joined["one_mean"], spread)
    ]
    return joined


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
    unmeasured = table[["one_mean", "two_mean"]].isna().all().all()
    if unmeasured and (table["agree"] == "n/a").all():
        # Every run counted on both sides, and none logged energy.
        print("energy: not measured (no energy sensor in these runs)")
        return 0
    print("energy per configuration (energy_per_sample_mj; a generation run's decode_energy_per_token_mj; mean and "
          "sample std over trials; agree: |two - one| <= the larger std; n/a: a side measured fewer than two trials; "
          "else the side whose runs did not count, and why):")
    print(table.to_markdown(floatfmt=".4g"))
    judged = table[table["agree"].isin(("yes", "no"))]
    if unmeasured:  # no run that counted logged energy; some did not count (said per configuration)
        print("energy: not measured in any run that counted (no energy sensor in them)")
        return 0
    if judged.empty:
        print("energy: agreement not judged: no configuration was measured on both sides with two trials or more on each")
        return 0
    print(f"energy: {(judged['agree'] == 'yes').sum()} of {len(judged)} configurations agree within their trial spread")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
