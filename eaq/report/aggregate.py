"""Trials -> one row per configuration and metric: mean, spread and a 95% confidence interval.

Two trials of the same bf16 run on an H100 differed by 18% in energy per sample: a single
number misleads, so every figure and table of the report carries the spread computed here.
Only FINISHED benchmark runs not flagged invalid (tag ``eaq.valid=false``) enter the
statistics; the invalid, failed and still running runs of each configuration are counted beside them, so
a mean over 3 of 5 trials says so.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
from scipy import stats

from eaq.report.frame import CONFIG_KEYS, REPORTED, SCOPE_KEYS
from eaq.tracking.flatten import COMPILER_DEFAULTS

LEVEL = 0.95
# What the report aggregates; a metric absent from every run (energy on a CPU) is "not measured", not 0.
METRICS = (*REPORTED, "quality_accuracy", "quality_perplexity", "quality_cosine_to_fp32_mean", "quality_agreement_with_fp32",
           "quality_top1_agreement_with_fp32", "quality_kl_from_fp32", "quality_generated_match_rate")
# The quality figure a configuration is judged by: the first of these its runs logged.
QUALITY = ("quality_accuracy", "quality_perplexity", "quality_cosine_to_fp32_mean", "quality_agreement_with_fp32",
           "quality_top1_agreement_with_fp32", "quality_generated_match_rate")
# A generation run's figures, where a forward run has latency and energy per sample.
GENERATION = ("time_to_first_token_mean_ms", "time_per_output_token_mean_ms", "decode_tokens_per_s",
              "decode_energy_per_token_mj", "prefill_energy_per_prefill_mj")
# The figures of one workload alone (per batch and sample for a forward pass, per prefill and output token for
# generation), and the one a configuration whose runs logged nothing (every one failed before its window) is still a
# row of, with its counts: a failed generation read "failed" under a forward pass's latency.
WORKLOAD_FIGURES = {"forward": ("latency_mean_ms", "throughput_samples_per_s", "energy_per_sample_mj",
                                "energy_net_per_sample_mj"),
                    "generate": (*GENERATION, "decode_energy_net_per_token_mj")}
HEADLINE = {"forward": "latency_mean_ms", "generate": "time_per_output_token_mean_ms"}
# n: the valid finished trials the figures are of; logged: the runs that logged the metric at all, whatever their
# verdict (0: a figure the configuration's workload does not give, or every run failed before its window).
STATS = ("n", "mean", "std", "ci_low", "ci_high", "cv", "runs", "invalid", "failed", "running", "logged")


def t_interval(values: pd.Series, level: float = LEVEL) -> tuple[int, float, float, float, float]:
    """(n, mean, sample std, lower, upper): Student t interval of the mean; NaN bounds for one value.

    Student t, not the normal: with 2-5 trials the normal quantile (1.96) would understate
    the interval by up to a factor of 6.5 (t at 1 degree of freedom is 12.7).
    """
    values = values.dropna().astype(float)
    n = len(values)
    if n == 0:
        return 0, math.nan, math.nan, math.nan, math.nan
    if values.nunique() == 1:  # one figure n times (a reused quality): itself, no spread; 0.7 averaged thrice is
        # 0.6999999999999998 with a spread of 1e-16, which ranked it below 0.7 (one trial fewer) on the front
        value = float(values.iloc[0])
        return (1, value, math.nan, math.nan, math.nan) if n == 1 else (n, value, 0.0, value, value)
    mean = float(values.mean())
    std = float(values.std(ddof=1))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * std / math.sqrt(n)
    return n, mean, std, mean - half, mean + half


def benchmark_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """Benchmark runs of a known configuration: layer-analysis runs measure components, not the configurations
    compared here, and a run that ended before it logged its parameters (killed at its start) belongs to none
    (the report's "Runs that did not count" still lists it)."""
    return frame[(frame["kind"] == "benchmark") & frame["model"].notna() & frame["precision"].notna()]


def workload_kind(workload: object) -> str:
    """``generate`` for a generation configuration (``generate<new tokens>``), else ``forward``."""
    return "generate" if str(workload).startswith("generate") else "forward"


def _logged(runs: pd.DataFrame, metrics: tuple[str, ...], workloads: pd.Series | None = None) -> list[str]:
    """The metrics of ``metrics`` some run of ``runs`` logged, and for each workload (of ``workloads``, default the
    runs') none of whose figures any run logged (every run failed before its window), its HEADLINE, unmeasured: each
    configuration's counts of runs, failed and running ones are still a row, under its own workload's figure."""
    present = [m for m in metrics if m in runs.columns and runs[m].notna().any()]
    workloads = runs["workload"] if workloads is None else workloads
    kinds = sorted(set(workloads.map(workload_kind))) if len(workloads) else ["forward"]
    headlines = [HEADLINE[k] for k in kinds if HEADLINE[k] in metrics and not set(present) & set(WORKLOAD_FIGURES[k])]
    return [m for m in metrics if m in present or m in headlines] or list(metrics[:1])


def aggregate(frame: pd.DataFrame, metrics: tuple[str, ...] = METRICS) -> pd.DataFrame:
    """Long table: configuration keys, ``metric`` and STATS; only metrics some run logged, and each workload's
    headline figure where no run logged any of its figures (``_logged``)."""
    runs = benchmark_runs(frame)
    present = _logged(runs, metrics)
    rows = []
    for key, group in runs.groupby(list(CONFIG_KEYS), sort=True, dropna=False):
        finished = group[group["status"] == "FINISHED"]
        kept = counted(group)
        # Under way (a report built while its sweep runs): not finished, not failed either (eaq.report.frame).
        running = int(group["running"].sum())
        counts = {"runs": len(group), "invalid": int((finished["valid"] == "false").sum()),
                  "failed": len(group) - len(finished) - running, "running": running}
        for metric in present:
            n, mean, std, low, high = t_interval(kept[metric] if metric in kept else pd.Series(dtype=float))
            cv = std / mean if n > 1 and mean else math.nan
            rows.append({**dict(zip(CONFIG_KEYS, key)), "metric": metric, "n": n, "mean": mean, "std": std,
                         "ci_low": low, "ci_high": high, "cv": cv, **counts,
                         "logged": int(group[metric].notna().sum()) if metric in group else 0})
    return pd.DataFrame(rows, columns=[*CONFIG_KEYS, "metric", *STATS])


def wide(table: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration, columns ``<metric>`` (mean), ``<metric>_ci_low``, ``<metric>_ci_high``."""
    if table.empty:
        return pd.DataFrame(columns=list(CONFIG_KEYS))
    pivot = table.pivot_table(index=list(CONFIG_KEYS), columns="metric", values=["mean", "ci_low", "ci_high", "n"],
                              dropna=False, sort=True)
    # dropna=False keeps metrics no run measured, and also spans every combination of the keys' values:
    # only the configurations that ran (or failed) are rows.
    pivot = pivot.loc[pivot.index.isin(table.groupby(list(CONFIG_KEYS), dropna=False).size().index)]
    out = pivot["mean"].copy()
    for stat in ("ci_low", "ci_high", "n"):
        out = out.join(pivot[stat].add_suffix(f"_{stat}"))
    counts = table.groupby(list(CONFIG_KEYS))[["runs", "invalid", "failed", "running"]].first()
    # A metric no run logged (per-batch latency of generation runs) is an empty column, not a missing one.
    columns = [f"{m}{stat}" for m in METRICS for stat in ("", "_ci_low", "_ci_high", "_n")]
    return out.reindex(columns=[*out.columns, *(c for c in columns if c not in out.columns)]).join(counts).reset_index()


def first_measured(configs: pd.DataFrame, metrics: tuple[str, ...]) -> str | None:
    """The first of ``metrics`` that some configuration of ``configs`` (``wide``: a column per metric) has a value of:
    a column alone says nothing, as every configuration has one for every metric any run of the store logged."""
    return next((m for m in metrics if m in configs and configs[m].notna().any()), None)


def quality_metric(table: pd.DataFrame) -> str | None:
    """The quality figure this set of runs (of one scope, or one model) measured, by QUALITY's order; None for
    synthetic data without fidelity figures.
    Measured: a value somewhere, not just a row (every configuration has a row for every metric any run of the store
    logged, and a classifier's accuracy would otherwise be an LM's figure)."""
    present = set(table.loc[table["mean"].notna(), "metric"])
    return next((m for m in QUALITY if m in present), None)


def ratio_interval(a: pd.Series, b: pd.Series, level: float = LEVEL) -> tuple[float, float, float]:
    """(ratio, lower, upper) of mean(a) / mean(b) for independent trials: delta method on the log of the ratio,
    Welch's degrees of freedom (``_ratio_of_means``, which ``ratio_from_summary`` shares). 1 exactly for the same runs
    over themselves (the baseline's row), NaN where either side has no value.
    """
    a, b = a.dropna().astype(float), b.dropna().astype(float)
    if a.empty or b.empty:
        return math.nan, math.nan, math.nan
    if a.index.equals(b.index) and a.equals(b):  # the same runs over themselves (the baseline's row): 1 exactly
        return 1.0, 1.0, 1.0
    return _ratio_of_means(a.mean(), a.var(ddof=1), len(a), b.mean(), b.var(ddof=1), len(b), level)


def ratio_from_summary(mean_a: float, std_a: float, n_a: int, mean_b: float, std_b: float, n_b: int,
                       level: float = LEVEL) -> tuple[float, float, float]:
    """``ratio_interval`` from each side's mean, sample std and count (an aggregate table's row), where the trials
    themselves are not at hand: the same interval, by the same code. NaN where either side has no trial."""
    if pd.isna(n_a) or pd.isna(n_b) or not n_a or not n_b or math.isnan(mean_a) or math.isnan(mean_b):
        return math.nan, math.nan, math.nan
    return _ratio_of_means(mean_a, std_a**2, int(n_a), mean_b, std_b**2, int(n_b), level)


def _ratio_of_means(mean_a: float, var_a: float, n_a: int, mean_b: float, var_b: float, n_b: int,
                    level: float = LEVEL) -> tuple[float, float, float]:
    """(ratio, lower, upper) of mean_a / mean_b, each a mean of n independent trials of sample variance var: the
    interval of ``ratio_interval`` and ``ratio_from_summary``.

    Why the delta method: trials of two precisions are independent runs (not pairs), energy
    and latency are positive with small relative spread (CV of a few percent), and then the
    first-order variance of the ratio's log, s_a^2/(n_a m_a^2) + s_b^2/(n_b m_b^2), is accurate
    and always gives a finite interval. On the log scale, not the ratio's own: a ratio is
    positive, and an interval symmetric around it went below 0 with two noisy trials; and b/a's
    interval is then exactly the reciprocal of a/b's (symmetric ones were not: a ratio of 1.27
    read "not separated" while its reciprocal speed-up read "slower"). Fieller's interval is
    exact for normal means but is unbounded whenever the denominator's own interval reaches 0,
    which with two trials and a t quantile of 12.7 happens for noisy runs; it would print no
    interval at all where the delta method prints a wide one. The t quantile uses
    Welch-Satterthwaite degrees of freedom of the two relative variances the interval adds (so
    a metric's unit does not change them, and a/b and b/a get the same), and two trials are
    not treated as many. NaN bounds with one trial.
    """
    mean_a, mean_b = np.float64(mean_a), np.float64(mean_b)  # a mean of 0 divides as numpy does (inf), not raises
    ratio = mean_a / mean_b
    if n_a < 2 or n_b < 2:
        return float(ratio), math.nan, math.nan
    ra, rb = var_a / n_a / mean_a**2, var_b / n_b / mean_b**2
    rel = ra + rb
    if rel == 0:
        return float(ratio), float(ratio), float(ratio)
    df = rel**2 / (ra**2 / (n_a - 1) + rb**2 / (n_b - 1))
    spread = float(np.exp(stats.t.ppf(0.5 + level / 2, df) * np.sqrt(rel)))
    return float(ratio), float(ratio / spread), float(ratio * spread)


def counted(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs that finished and that no check flagged: the ones means and intervals are taken over."""
    return runs[(runs["status"] == "FINISHED") & (runs["valid"].fillna("") != "false")]


def uncounted(running: int, invalid: int) -> str:
    """Why a configuration none of whose runs counted has no figure, in one word as every table says it: a run still
    under way first (its figure may yet come), then a finished run its checks flagged, else every run failed."""
    return "running" if running else "flagged invalid" if invalid else "failed"


def none_counted(row: pd.Series) -> str | None:
    """``uncounted``'s word for a configuration's row (its counts of runs, as ``wide`` gives them) none of whose runs
    counted; None where some did, or where the configuration did not run at all (no counts: not run at that shape)."""
    if pd.isna(row.get("runs")) or row["runs"] - row["failed"] - row["running"] - row["invalid"] > 0:
        return None
    return uncounted(row["running"], row["invalid"])


def _lacking(metric: str, sides: dict[str, pd.DataFrame]) -> str:
    """Why the ratio of two sides that both have counted runs is empty: the sides (precision: its counted runs) none of
    whose counted runs logged ``metric``, as energy "unavailable" on a machine without a sensor beside runs that had
    one; an empty ratio with no note read as a bug of the report. "" where both sides have a value."""
    names = [name for name, runs in sides.items() if runs[metric].isna().all()]
    return f"no {metric} in the counted runs of {' and '.join(names)}" if names else ""


def ratios(frame: pd.DataFrame, baseline: str, metrics: tuple[str, ...]) -> pd.DataFrame:
    """Each configuration's mean over the same model, shape and compile mode in ``baseline``, with its interval.

    Where one side has no counted run (the baseline's runs failed, were flagged invalid or are still running, or it was
    not run for this model and shape; or the configuration's own runs), the configurations of that model and shape are
    still rows, their ratio and interval NaN and ``note`` saying why: a ratio missing from the file read as a precision
    nobody swept. So are those where both sides counted but one logged no value of the metric ("no energy_per_sample_mj
    in the counted runs of fp32"). ``note`` is empty on every row with a ratio."""
    runs = benchmark_runs(frame)
    same = [k for k in CONFIG_KEYS if k != "precision"]
    rows = []
    for key, group in runs.groupby(same, sort=True, dropna=False):
        kept = counted(group)
        # The metrics this model and shape measured: those of its counted runs, whichever precision has them.
        # None (no precision of it counted): its workload's headline, so the shape still has its rows and notes.
        measured = ([m for m in metrics if m in kept.columns and kept[m].notna().any()]
                    or _logged(group.iloc[:0], metrics, group["workload"]))
        base = kept[kept["precision"] == baseline]
        for precision, runs_p in group.groupby("precision", sort=True):
            mine = counted(runs_p)
            missing = runs_p if mine.empty else group[group["precision"] == baseline] if base.empty else None
            note = "" if missing is None else (
                f"no counted run of {precision if mine.empty else baseline}: "
                + ("not run for this model and shape" if missing.empty else
                   uncounted(int(missing["running"].sum()), int(((missing["status"] == "FINISHED")
                                                                 & (missing["valid"] == "false")).sum()))))
            for metric in measured:
                why = note or _lacking(metric, {precision: mine, baseline: base})
                ratio, low, high = ratio_interval(mine[metric], base[metric]) if not why else (math.nan,) * 3
                rows.append({**dict(zip(same, key)), "precision": precision, "baseline": baseline, "metric": metric,
                             "ratio": ratio, "ci_low": low, "ci_high": high, "note": why})
    return pd.DataFrame(rows, columns=[*same, "precision", "baseline", "metric", "ratio", "ci_low", "ci_high", "note"])


def mode_words(row: pd.Series | dict) -> list[str]:
    """How a configuration ran, beyond its model, precision and shape, as words, naming only what is not the
    default: ``compiled`` (and the compiler's settings where not the defaults: ``untuned``, ``no pattern
    matcher``), ``graphs``, ``gen128`` for generation, then the device, dataset or sampler where the report's
    runs differ in them (``setting``). The run names leave the compiler's settings out."""
    compiled = bool(row["compile"])
    workload = str(row.get("workload", "forward"))
    return ((["compiled"] if compiled else [])
            + (["untuned"] if compiled and not bool(row.get("compile_tuning", COMPILER_DEFAULTS["compile_tuning"])) else [])
            + (["no pattern matcher"] if compiled and not bool(row.get("compile_pattern_matcher",
                                                                      COMPILER_DEFAULTS["compile_pattern_matcher"])) else [])
            + (["graphs"] if bool(row.get("cuda_graphs", False)) else [])
            + ([f"gen{workload.removeprefix('generate')}"] if workload.startswith("generate") else [])
            + ([str(row["setting"])] if row.get("setting") else []))


def config_label(row: pd.Series | dict) -> str:
    """A configuration as one readable word, like the run names:
    ``bert-tiny-random-int8-b4-s32[-compiled[-untuned][-no-pattern-matcher]][-graphs][-gen128][-sst2]``."""
    words = [f"{row['model']}-{row['precision']}-b{int(row['batch_size'])}-s{int(row['seq_len'])}", *mode_words(row)]
    # One word that is also a valid part of an MLflow metric name (the sweep's aggregates are named by it): a
    # device's "Intel(R) Xeon(R)" or a hub id's "org/name" keep their letters, not their punctuation.
    return re.sub(r"[^A-Za-z0-9_.]+", "-", "-".join(words)).strip("-")


# Significant digits of a quality figure on screen: int8's cosine of 0.9999999222 read "1", as fp32's, beside a front
# that called int8 dominated (eaq.report.front shows as many).
QUALITY_DIGITS = 10


def format_ci(mean: float, low: float, high: float, digits: int = 4) -> str:
    """``mean ± half-width``, the mean with ``digits`` significant digits and the half-width with 4; "not measured"
    for a missing figure, never 0; "non-finite" for a quality figure a run logged as not a number (eaq.report.frame
    reads it as the worst value)."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "not measured"
    if math.isinf(mean):
        return "non-finite"
    if low is None or math.isnan(low):
        return f"{mean:.{digits}g} (1 trial)"
    return f"{mean:.{digits}g} ± {(high - low) / 2:.4g}"


# A configuration's energy figure: a forward pass's per sample, generation's per output token (it logs none per sample).
ENERGY = ("energy_per_sample_mj", "decode_energy_per_token_mj")
# What a configuration is ranked by, in order of preference: energy where a sensor measured it, else time.
COSTS = (*ENERGY, "latency_mean_ms", "time_per_output_token_mean_ms")


def _cost(group: pd.DataFrame) -> str:
    """The cost the configurations of one model, shape and workload are ranked by: the first of COSTS any of them measured."""
    measured = [m for m in COSTS if group.loc[group["metric"] == m, "mean"].notna().any()]
    # None measured (every run failed): its workload's headline, the column its rows rank in.
    return measured[0] if measured else HEADLINE[workload_kind(group["workload"].iloc[0])]


def _versus_best(by_metric: pd.DataFrame, cost: str, best: pd.Series | None) -> str:
    """A configuration's ``cost`` over the lowest of its scope (``best``, an aggregate row), "best" for the lowest itself:
    "1.23x [1.10, 1.37]" with the delta-method 95% interval where both have two trials or more, "1.23x" where one has
    one (no interval: as "(1 trial)" beside a mean)."""
    mine = by_metric.loc[cost] if cost in by_metric.index else None
    if mine is None or best is None or math.isnan(mine["mean"]):
        return "not measured"
    if mine["mean"] == best["mean"]:
        return "best"
    ratio, low, high = ratio_from_summary(mine["mean"], mine["std"], mine["n"], best["mean"], best["std"], best["n"])
    return f"{_times(ratio)}x" if math.isnan(low) else f"{_times(ratio)}x [{_times(low)}, {_times(high)}]"


def _times(ratio: float) -> str:
    """Two decimals; two significant digits below 0.1, where two decimals read a wide interval's positive lower bound
    (two noisy trials: 0.0025) as "0.00", a ratio that could be zero."""
    return f"{ratio:.2f}" if ratio >= 0.1 else f"{ratio:.2g}"


def compact(table: pd.DataFrame) -> pd.DataFrame:
    """Configuration x mean ± CI of latency, energy per sample and quality: what a sweep prints at its end.

    Generation runs (no per-batch latency) show time and energy per output token instead, and any
    run with both shows all four.

    The last column answers the question a precision sweep is run for, in its own numbers:
    each configuration's mean energy per sample (per output token for generation; latency
    where no energy was measured) over the lowest of its model, shape and workload, whatever
    the precision, compile mode or CUDA graphs. A format that loses on this device (eager int8 on a GPU)
    reads as such without opening the report. Each model, shape and workload is ranked on the first
    of COSTS that any of its configurations measured, so forward and generate runs in one sweep are
    each ranked on their own figure. The ratio carries its delta-method 95% interval
    (``ratio_from_summary``, the ratios' own) where both sides have two trials or more, as every other
    cell carries its interval: "1.05x" alone read as a loss the trials may not separate from a tie.
    """
    present = set(table["metric"])
    # Energy per output token shown wherever generation was: "not measured" without a sensor, as per sample is.
    generated = (["time_per_output_token_mean_ms", "decode_energy_per_token_mj"]
                 if {"time_per_output_token_mean_ms", "decode_energy_per_token_mj"} & present else [])
    forward = ["latency_mean_ms", "energy_per_sample_mj"] if "latency_mean_ms" in present or not generated else []
    shape = list(SCOPE_KEYS)
    # A sweep mixing forward and generate runs ranks each workload on its own cost, in its own column
    # (blank in the other workload's rows). Each scope shows its own quality figure, the one the front judges it by
    # (a classifier's accuracy, an LM's perplexity; the same model's fidelity on synthetic ids): a column per figure
    # some scope has.
    ranked, quality = {}, {}
    for key, group in table.groupby(shape, sort=False):
        cost = _cost(group)
        costs = group[group["metric"] == cost]
        # The lowest mean, with its spread and count for the ratio's interval (NaN where no configuration measured it).
        ranked[key] = cost, costs.loc[costs["mean"].idxmin()] if costs["mean"].notna().any() else None
        # A scope with no figure of its own (none of its runs counted) says why under its model's figure.
        quality[key] = quality_metric(group) or quality_metric(table[table["model"] == key[shape.index("model")]])
    shown = [*forward, *generated, *(m for m in QUALITY if m in quality.values())]
    rows = []
    for key, group in table.groupby(list(CONFIG_KEYS), sort=True):
        config = dict(zip(CONFIG_KEYS, key))
        by_metric = group.set_index("metric")
        trials = by_metric["n"].max()
        row = {"configuration": config_label(config), "trials": f"{trials}/{group['runs'].iloc[0]}"}
        first = group.iloc[0]
        # No run counted: why, in every cell ("not measured" is for a figure a counted run did not have, as energy
        # on a machine without a sensor).
        none = "" if trials else uncounted(first["running"], first["invalid"])
        scope = tuple(config[k] for k in shape)
        other = {m for kind, figures in WORKLOAD_FIGURES.items() if kind != workload_kind(config["workload"]) for m in figures}
        for metric in shown:
            if metric in QUALITY and metric != quality[scope]:
                continue  # another scope's figure: blank, not "not measured"
            stat = by_metric.loc[metric] if metric in by_metric.index else None
            if metric in other and (stat is None or not stat["logged"]):
                continue  # the other workload's figure (a generation's latency per batch): blank, not "not measured"
            digits = QUALITY_DIGITS if metric in QUALITY else 4
            row[metric] = none or format_ci(*(stat[["mean", "ci_low", "ci_high"]] if stat is not None else (math.nan,) * 3),
                                            digits)
            if stat is not None and 1 < stat["n"] < trials:  # a mean over fewer trials than the row's says so
                row[metric] += f" ({stat['n']} trials)"
            elif metric in QUALITY and stat is not None and stat["n"] > 1 and stat["std"] == 0 and math.isfinite(stat["mean"]):
                # One evaluation read by every trial (trials.reuse_quality), or the same computed again: no spread to
                # show, which "± 0" would read as a precise measurement (it says nothing of the data's sampling error).
                row[metric] = f"{stat['mean']:.{QUALITY_DIGITS}g} (same in every trial)"
        cost, best = ranked[scope]
        row[f"{cost.removesuffix('_mj').removesuffix('_ms')}_vs_best"] = none or _versus_best(by_metric, cost, best)
        rows.append(row)
    # Columns in the order rows first hold them: a later scope's quality or ranked cost came after an earlier one's
    # ratio. The ratios close the table, as the README says.
    frame = pd.DataFrame(rows).fillna("")
    ratios = [c for c in frame.columns if c.endswith("_vs_best")]
    return frame[[c for c in frame.columns if c not in ratios] + ratios]
