"""Which configurations are on the energy-quality front, and whether the trials separate them.

The Pareto figure draws the front through the means. A reader choosing what to deploy (a
mixed-precision plan against uniform bf16 or fp8, say) also needs to know whether the means' order
holds beyond the trials' spread: on an H100, two trials of one bf16 run differed by 18%, and a plan
0.6% below bf16 on the means was below it in one of three trials. Within one model, batch size,
sequence length and workload (every precision and way of running), each configuration gets a verdict:

- ``dominated``: another configuration is at least as good in quality and cheaper on the means (or
  better at the same cost), and the 95% interval of their cost ratio (delta method on its log, Welch;
  ``aggregate.ratio_interval``) lies above 1;
- ``dominated on the means only``: the same, but the interval reaches 1 (or one of them has a single
  trial, so there is no interval): the trials do not separate them;
- ``on the front``: nothing at least as good in quality is cheaper on the means. Beside it, the
  cheapest configuration of strictly better quality (what the saving is paid against) and the ratio
  to it: ``beyond it`` when the interval lies below 1, ``not separated from it`` otherwise;
- ``not judged``: its counted runs lack the scope's cost or quality figure (said, not left out).

The cost is energy per sample (decode energy per output token for generation, prefill excluded),
else time where no sensor measured energy, as the report's summary ranks configurations; quality is
the first of ``aggregate.QUALITY`` the scope's runs logged a value of, taken as its mean with no
interval (on fixed synthetic ids it is the same in every trial). Without one there is no front to
judge. Several mixed plans in one store are several points (``mixed-<plan hash>``, eaq.report.frame).

    python -m eaq.report.front --uri sqlite:///outputs/mlflow.db [--experiment eaq | --sweep PARENT]
"""

from __future__ import annotations

import argparse
import math
import sys

import pandas as pd

from eaq.report.aggregate import (
    COSTS, QUALITY, QUALITY_DIGITS, aggregate, benchmark_runs, counted, config_label, first_measured, quality_metric,
    none_counted, ratio_interval, wide,
)
from eaq.report.frame import CONFIG_KEYS, LOWER_IS_BETTER, SCOPE_KEYS, load
from eaq.tracking.failures import reported

COLUMNS = ("configuration", "cost", "cost_mean", "quality", "quality_mean", "verdict", "versus", "ratio", "ratio_ci_low",
           "ratio_ci_high")


def verdicts(frame: pd.DataFrame) -> pd.DataFrame | str:
    """One row per configuration (COLUMNS), or why there is no front to judge."""
    table = aggregate(frame)
    if not (frame["kind"] == "benchmark").any():  # layer analyses alone: each counted, none a point of a front
        return "no benchmark run in these runs (a layer analysis is no point of a front): no front to judge."
    runs = counted(benchmark_runs(frame))
    if runs.empty:  # every run failed, was flagged invalid or is under way: it logged no quality, whatever its data
        return "no run counted (each failed, was flagged invalid or is still running): no front to judge."
    if quality_metric(table) is None:
        return "no quality metric in these runs (synthetic ids without trials.fidelity_on_synthetic): no front to judge."
    configs = wide(table)
    rows = []
    configs = configs.dropna(subset=list(CONFIG_KEYS))  # a run logged without a shape is no point of any front
    for _, group in configs.groupby(list(SCOPE_KEYS), sort=True):  # precision and how it ran vary along a front
        # Each scope on its own figures: a classifier logs agreement, a causal LM top-1 agreement.
        cost, quality = first_measured(group, COSTS), first_measured(group, QUALITY)
        judged = group[group[quality].notna() & group[cost].notna()] if cost and quality else group.iloc[0:0]
        for _, point in group.drop(judged.index).iterrows():  # said, not dropped: "absent" and "not judged" differ
            rows.append({"configuration": config_label(point), "cost": cost or "", "cost_mean": point[cost] if cost else math.nan,
                         "quality": quality or "", "quality_mean": point[quality] if quality else math.nan,
                         "verdict": _unjudged(point, cost, quality),
                         "versus": "", "ratio": math.nan, "ratio_ci_low": math.nan, "ratio_ci_high": math.nan})
        if judged.empty:
            continue
        better = (lambda a, b: a <= b) if quality in LOWER_IS_BETTER else (lambda a, b: a >= b)
        trials = {config_label(p): _trials(runs, p, cost) for _, p in judged.iterrows()}
        for _, point in judged.iterrows():
            rows.append(_verdict(point, judged, trials, cost, quality, better))
    return pd.DataFrame(rows, columns=COLUMNS)


def _unjudged(point: pd.Series, cost: str | None, quality: str | None) -> str:
    """Why a configuration is not judged: no counted run (in the words every table uses), or the figure its counted
    runs lack (named alone: "no energy or perplexity" beside the perplexity it showed read as both missing)."""
    if why := none_counted(point):
        return f"not judged: no run counted ({why})"
    lacking = [name or figure for name, figure in ((cost, "cost"), (quality, "quality figure"))
               if name is None or pd.isna(point.get(name))]
    return f"not judged: no {' or '.join(lacking)} in its counted runs"


def _trials(runs: pd.DataFrame, point: pd.Series, cost: str) -> pd.Series:
    """The counted runs' ``cost`` of the configuration ``point`` is the mean of."""
    same = pd.Series(True, index=runs.index)
    for key in CONFIG_KEYS:
        same &= runs[key] == point[key]
    return runs.loc[same, cost]


def _verdict(point: pd.Series, points: pd.DataFrame, trials: dict[str, pd.Series], cost: str, quality: str,
             better) -> dict[str, object]:
    """One configuration's verdict against the others of its scope."""
    name = config_label(point)
    row = {"configuration": name, "cost": cost, "cost_mean": point[cost], "quality": quality, "quality_mean": point[quality]}
    others = points[points.apply(config_label, axis=1) != name]
    finer = others[better(others[quality], point[quality]) & (others[quality] != point[quality])]
    # Pareto dominance: at least as good and cheaper, or better at the same cost.
    dominators = others[better(others[quality], point[quality]) & (others[cost] < point[cost])
                        | others.index.isin(finer.index) & (others[cost] == point[cost])]
    if not dominators.empty:
        # Against the dominator the trials separate best (the highest lower bound of the cost ratio; with one
        # trial, no bound: the cheapest).
        ratios = {config_label(d): ratio_interval(trials[name], trials[config_label(d)]) for _, d in dominators.iterrows()}
        versus, (ratio, low, high) = max(ratios.items(), key=lambda item: (-math.inf if math.isnan(item[1][1]) else item[1][1], item[1][0]))
        verdict = "dominated" if low > 1 else "dominated on the means only"
        return row | {"verdict": verdict, "versus": versus, "ratio": ratio, "ratio_ci_low": low, "ratio_ci_high": high}
    if finer.empty:
        return row | {"verdict": "on the front", "versus": "", "ratio": math.nan, "ratio_ci_low": math.nan,
                      "ratio_ci_high": math.nan}
    nearest = config_label(finer.loc[finer[cost].idxmin()])
    ratio, low, high = ratio_interval(trials[name], trials[nearest])
    verdict = "on the front, beyond it" if high < 1 else "on the front, not separated from it"
    return row | {"verdict": verdict, "versus": nearest, "ratio": ratio, "ratio_ci_low": low, "ratio_ci_high": high}


def shown(found: pd.DataFrame) -> pd.DataFrame:
    """The verdicts for reading: quality to ten significant digits (an int8 cosine of 0.99999992 read "1" beside fp32's
    1 at four, under a verdict that fp32's quality is strictly better), the rest as they are."""
    return found.assign(quality_mean=[f"{v:.{QUALITY_DIGITS}g}" if v == v else "" for v in found["quality_mean"]])


def markdown(found: pd.DataFrame) -> str:
    """The verdicts as a Markdown table, quality as ``shown`` writes it (tabulate would read its digits back as a
    number and round them to four); a figure not there is a blank cell, as in front.csv and the HTML, not "nan"."""
    table = shown(found)
    table = table.astype(object).where(table.notna(), None)
    return table.to_markdown(index=False, missingval="",
                             floatfmt=[f".{QUALITY_DIGITS}g" if c == "quality_mean" else ".4g" for c in found.columns])


@reported()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eaq.report.front", description=__doc__.split("\n\n")[0])
    parser.add_argument("--uri", default="sqlite:///outputs/mlflow.db")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--sweep", help="a sweep's parent run id")
    scope.add_argument("--experiment", help="an experiment's name (default: eaq)")
    args = parser.parse_args(argv)
    found = verdicts(load(args.uri, args.experiment, args.sweep))
    print(found if isinstance(found, str) else markdown(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
