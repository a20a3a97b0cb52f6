"""``python -m eaq.report.compare --uri sqlite:///outputs/mlflow.db --baseline bf16``: what each precision buys.

The question a user brings is relative: how much energy and time does int8 or fp8 save
against the precision I run today, on my model, shape and compile mode? This report
answers it from MLflow alone. One row per model, sequence length, batch size, compile
mode and precision, averaged over trials (the count and the energy spread are shown, so a
single trial is visible as one), with energy and latency relative to the baseline
precision measured on the same model, shape and compile mode. A row without a baseline
to compare with says so (empty in CSV; on screen, e.g. "no fp32 run"), rather than comparing across shapes.

Each figure is the mean over trials of what each trial measured, as in the report's aggregates:
``latency_ms`` of each trial's mean time per batch, ``samples_per_s`` of each trial's rate. Where
trials differ, the mean of rates is not the rate of the mean time, and two precisions closer
than their trials' spread can rank one way by latency and the other by throughput: each figure
has its spread (``*_spread_pct``, (max - min) / mean over trials), so such a difference reads as
within the noise, not as a contradiction. Generation runs have no time per batch: their rows carry
what a served LM is paid by (time to first token ``ttft_ms``, ``ms_per_token``, ``tokens_per_s``,
``energy_mj_per_token`` and decode's ``bandwidth_fraction``), and their spreads and ratios to the
baseline are of the per-token figures; a store without generation runs has no such columns. On screen, a figure a counted configuration lacks reads
"not measured" (energy on a machine without a sensor), as in the report's summary. As in the report,
runs flagged invalid (``eaq.valid=false``) count in the ``valid`` column only, not in the
figures; an eager run's compiler settings (which did nothing) read as the defaults; forward
and generation runs of one shape are told apart by ``workload.name`` where a store has both, and
runs of two devices (by name), datasets, samplers or weights' sources by those where the stores hold several, as
are runs that differ in any other parameter of the measurement (a random model's architecture, the protocol);
several mixed plans are several precisions (``mixed-<plan hash>``), as in the report. A configuration none
of whose runs counted (every one failed, was flagged invalid, or is still running) is a row too, its
figures saying which, as the report's summary says it: left out, a precision that failed everywhere read
as one nobody ran.

``--grid energy_vs_baseline_pct`` turns the same figures into the view a reader scans: one
row per model and shape, one column per precision and compile mode.
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from eaq.report.aggregate import uncounted
from eaq.report.frame import DATA, PARAMS, TAGS, compiler_settings, plan_names, sole_value, splits_runs
from eaq.report.frame import SETTING as FRAME_SETTING
from eaq.report.table import runs_table
from eaq.tracking.failures import reported
from eaq.tracking.redact import redact

SHAPE = ("model.name", "seq_len", "batch_size")
# Compiled with torchao's tuned Inductor settings or with the defaults: two configurations, never averaged together.
COMPILER = ("compile_tuning", "compile_pattern_matcher", "cuda_graphs")
KEYS = (*SHAPE, "compile", *COMPILER)
# Where a run ran and on what (the report's SETTING, by their MLflow names): keys where the stores' runs differ in
# them, so stores of an H100 and an H200, or of two datasets, are never averaged together.
SETTING = tuple({column: name for name, column in {**PARAMS, **TAGS}.items()}[c] for c in FRAME_SETTING)
COLUMNS = (
    "params.model.name", "params.seq_len", "params.batch_size", "params.compile", "params.compile_tuning",
    "params.compile_pattern_matcher", "params.cuda_graphs", "params.workload.name", "params.workload.new_tokens", "params.dataset.name",
    "params.sampler.name", "tags.eaq.env.device_name", "params.model.name_or_path", "tags.eaq.precision.plan_sha256",
    "tags.eaq.precision.plan_applies_sha256",
    "params.precision.name", "params.trial", "tags.eaq.data.sha256", "metrics.latency_mean_ms", "metrics.throughput_samples_per_s",
    "metrics.energy_per_sample_mj", "metrics.roofline_efficiency", "metrics.time_to_first_token_mean_ms",
    "metrics.time_per_output_token_mean_ms", "metrics.decode_tokens_per_s", "metrics.decode_energy_per_token_mj",
    "metrics.decode_bandwidth_fraction", "metrics.quantized_linear_layers", "metrics.linear_layers", "tags.eaq.valid",
)
# A figure of a run's own workload, the one its spread and its ratio to the baseline are of: per batch for a forward
# pass, per output token for generation (which has no per-batch latency).
OWN = {"latency": ("latency_mean_ms", "time_per_output_token_mean_ms"),
       "rate": ("throughput_samples_per_s", "decode_tokens_per_s"),
       "energy": ("energy_per_sample_mj", "decode_energy_per_token_mj")}


def _spread_pct(values: pd.Series) -> float:
    """(max - min) / mean over trials, in percent; NaN for a single trial."""
    values = values.dropna()
    return (values.max() - values.min()) / values.mean() * 100 if len(values) > 1 else float("nan")


# The columns compare() reads by name; any other column of its runs is a configuration parameter
# (``runs_table(..., settings=True)``), a key where its values vary. A run's state (``every_status=True``) is no
# parameter: runs without these columns are finished.
NAMED = tuple(c.split(".", 1)[1] for c in COLUMNS)
STATE = ("status", "running")
# What compare() adds to a configuration's keys: its figures.
FIGURES = ("precision.name", "trials", "latency_ms", "ttft_ms", "ms_per_token", "latency_vs_baseline_pct",
           "latency_spread_pct", "samples_per_s", "tokens_per_s", "throughput_spread_pct", "energy_mj_per_sample",
           "energy_mj_per_token", "energy_vs_baseline_pct", "energy_spread_pct", "roofline_efficiency",
           "bandwidth_fraction", "quantized", "valid")
# The figures of one workload only: a row of the other reads blank there on screen, and a store without the workload
# has no such column.
FORWARD_ONLY = ("latency_ms", "samples_per_s", "energy_mj_per_sample", "roofline_efficiency")
GENERATION_ONLY = ("ttft_ms", "ms_per_token", "tokens_per_s", "energy_mj_per_token", "bandwidth_fraction")


def _settings(frame: pd.DataFrame) -> list[str]:
    """The configuration parameters among ``frame``'s columns, beyond those compare() names."""
    return [c for c in frame.columns if c not in NAMED and c not in FIGURES and c not in STATE]


def compare(runs: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Runs as ``runs_table(..., columns=COLUMNS)`` returns them, one row per configuration; with
    ``every_status=True``, a configuration none of whose runs counted says why in its figures' cells ("failed",
    "flagged invalid", "running"; ``trials`` 0), as the report's summary does."""
    # A CPU store has no energy metrics and no validity tags: their columns stay empty.
    runs = runs.reindex(columns=[*NAMED, *STATE, *_settings(runs)])
    runs["status"] = runs["status"].fillna("FINISHED")  # runs_table's runs
    runs["running"] = runs["running"].astype(object).fillna(False).astype(bool)
    finished = runs["status"] == "FINISHED"
    for flag in ("compile", "cuda_graphs"):  # as the report reads them: runs logged before a flag existed ran without it
        runs[flag] = runs[flag].astype(str).str.lower() == "true"
    compiler_settings(runs, runs["compile"])
    # As the report's workload: runs before the workload group were forward passes; generation runs of different
    # lengths are different configurations ("generate128").
    generating = runs["workload.name"] == "generate"
    runs["workload.name"] = runs["workload.name"].fillna("forward")
    tokens = pd.to_numeric(runs["workload.new_tokens"], errors="coerce").fillna(0).astype(int).astype(str)  # as the report
    runs.loc[generating, "workload.name"] = "generate" + tokens[generating]
    runs = runs.drop(columns="workload.new_tokens")
    runs["precision.name"] = plan_names(runs["precision.name"], runs["eaq.precision.plan_sha256"],  # as the report names them
                                        runs["eaq.precision.plan_applies_sha256"])
    # A run refused before it read its data (fp8 on a CPU) has no data hash: it is of the file the other runs of its
    # shape read, as the report fills it (eaq.report.frame), not a row of its own where the stores hold two files.
    shape = runs.groupby([*KEYS, "workload.name", "dataset.name"], dropna=False)[DATA]
    runs[DATA] = runs[DATA].fillna(shape.transform(sole_value))
    # Where a run ran splits as in the report (a finished run that recorded no device stays apart); any other
    # setting where the runs hold two values.
    keys = [k for k in KEYS if runs[k].notna().any()] + [
        k for k in ("workload.name", *SETTING, DATA, *_settings(runs))
        if (splits_runs(runs[k], finished) if k in SETTING else runs[k].nunique() > 1)]
    for name, (forward, generated) in OWN.items():
        runs[f"own_{name}"] = runs[forward].where(~generating, runs[generated])
    # All NaN (float) where no run was flagged; a run that did not finish was checked by nothing (None: not in "valid").
    runs = runs.assign(valid=runs["eaq.valid"].astype(object).fillna("").where(finished, None))
    runs = runs.assign(counted=finished & (runs["valid"] != "false"), flagged=finished & (runs["valid"] == "false"))
    figures = ["roofline_efficiency", "decode_bandwidth_fraction", "time_to_first_token_mean_ms",
               *(m for pair in OWN.values() for m in pair), *(f"own_{name}" for name in OWN)]
    runs.loc[~runs["counted"], figures] = float("nan")  # flagged runs count for nothing, as in the report
    # Grouped by workload always (a configuration is of one workload), shown as a key only where the stores hold two.
    grouped = runs.groupby([*dict.fromkeys([*keys, "workload.name"]), "precision.name"], dropna=False, sort=True)
    table = grouped.agg(
        trials=("counted", "sum"),
        latency_ms=("latency_mean_ms", "mean"),
        ttft_ms=("time_to_first_token_mean_ms", "mean"),
        ms_per_token=("time_per_output_token_mean_ms", "mean"),
        latency_spread_pct=("own_latency", _spread_pct),
        samples_per_s=("throughput_samples_per_s", "mean"),
        tokens_per_s=("decode_tokens_per_s", "mean"),
        throughput_spread_pct=("own_rate", _spread_pct),
        energy_mj_per_sample=("energy_per_sample_mj", "mean"),
        energy_mj_per_token=("decode_energy_per_token_mj", "mean"),
        energy_spread_pct=("own_energy", _spread_pct),
        roofline_efficiency=("roofline_efficiency", "mean"),
        bandwidth_fraction=("decode_bandwidth_fraction", "mean"),
        own_latency=("own_latency", "mean"),
        own_energy=("own_energy", "mean"),
        quantized=("quantized_linear_layers", "max"),
        linears=("linear_layers", "max"),
        # Valid: finished and not flagged (a run no check judged, a CPU's, is not "not valid"), of the finished runs.
        valid=("valid", lambda v: f"{(v.dropna() != 'false').sum()}/{v.count()}" if (v.dropna() != "").any() else ""),
        running=("running", "sum"),
        flagged=("flagged", "sum"),
    ).reset_index()
    base = table.loc[table["precision.name"] == baseline, [*keys, "own_energy", "own_latency"]]
    joined = table.merge(base, on=keys, how="left", suffixes=("", "_baseline"))  # keeps table's rows and order
    table["energy_vs_baseline_pct"] = (joined["own_energy"] / joined["own_energy_baseline"] - 1) * 100
    table["latency_vs_baseline_pct"] = (joined["own_latency"] / joined["own_latency_baseline"] - 1) * 100
    # Empty (None) where no run logged its layers' counts, not "nan/nan".
    table["quantized"] = [f"{q:.0f}/{n:.0f}" if q == q and n == n else None
                          for q, n in zip(table.pop("quantized"), table.pop("linears"))]
    none = table["trials"] == 0
    generation = table["workload.name"].str.startswith("generate")
    if none.any():  # no counted run: why, in every figure of its workload ("not measured" would say a counted run lacked it)
        words = pd.Series([uncounted(r, f) for r, f in zip(table["running"], table["flagged"])], index=table.index)
        for column in (c for c in FIGURES if c not in ("precision.name", "trials", "valid")):
            other = (generation if column in FORWARD_ONLY else ~generation if column in GENERATION_ONLY
                     else pd.Series(False, index=table.index))
            table[column] = table[column].astype(object)
            table.loc[none & ~other, column] = words[none & ~other]
    # A workload the stores do not hold has no columns; the other's figures of a row are left empty.
    absent = (GENERATION_ONLY if not generation.any() else ()) + (FORWARD_ONLY if generation.all() else ())
    return table[[*keys, *(c for c in FIGURES if c not in absent)]]


# What a grid may show: the figures of compare()'s rows that are numbers.
GRID_VALUES = ("latency_ms", "ttft_ms", "ms_per_token", "latency_vs_baseline_pct", "latency_spread_pct", "samples_per_s",
               "tokens_per_s", "throughput_spread_pct", "energy_mj_per_sample", "energy_mj_per_token",
               "energy_vs_baseline_pct", "energy_spread_pct", "roofline_efficiency", "bandwidth_fraction")
# The figures a relative one (a spread, a percentage over the baseline) is of: a forward row's, else a generation row's.
FIGURE_OF = {"latency_spread_pct": ("latency_ms", "ms_per_token"), "throughput_spread_pct": ("samples_per_s", "tokens_per_s"),
             "energy_spread_pct": ("energy_mj_per_sample", "energy_mj_per_token"),
             "latency_vs_baseline_pct": ("latency_ms", "ms_per_token"),
             "energy_vs_baseline_pct": ("energy_mj_per_sample", "energy_mj_per_token")}


def _own(table: pd.DataFrame, column: str) -> pd.Series:
    """Each row's figure that ``column`` (a relative one, or a figure itself) is of: its workload's, where compare()
    has that column (a row holds one workload's figures, or the words of why it has none)."""
    own = [c for c in FIGURE_OF.get(column, (column,)) if c in table]
    return table[own].bfill(axis=1).iloc[:, 0] if own else pd.Series(float("nan"), index=table.index)


def spelled(table: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """compare()'s rows for the screen, each empty figure as the words of why: "not measured" (energy on a machine
    without a sensor), a spread of "1 trial", a percentage over a baseline that has no run of this shape ("no fp32 run")
    or that has none counted or did not measure the figure ("fp32 failed", "fp32 not measured"). A bare "nan" said none
    of these; a figure of the other workload (a generation row's latency per batch) is left empty. The CSV keeps them
    empty, for programs."""
    keys = [c for c in table.columns if c not in FIGURES]
    columns = [c for c in (*GRID_VALUES, "quantized") if c in table]
    shown = table.astype({c: object for c in columns})
    owned = pd.DataFrame({c: _own(table, c) for c in FIGURE_OF}, index=table.index)
    base = table[keys].join(owned).loc[table["precision.name"] == baseline]
    theirs = table[keys].merge(base, on=keys, how="left", indicator=True).set_index(table.index)  # table's rows and order
    # One workload in the stores (no workload column): its own figures' columns are the ones compare() kept.
    generation = (table["workload.name"].str.startswith("generate") if "workload.name" in table
                  else pd.Series(not any(c in table for c in FORWARD_ONLY), index=table.index))
    for column in columns:
        empty = shown[column].isna()
        own = owned[column] if column in owned else table[column]
        words = pd.Series("not measured", index=table.index, dtype=object)
        if column.endswith("_spread_pct"):
            words = words.mask(own.notna() & (table["trials"] == 1), "1 trial")
        elif column.endswith("_vs_baseline_pct"):
            of_base = theirs[column].map(lambda v: v if isinstance(v, str) else "not measured")  # a word: none counted
            words = words.mask(own.notna(), (f"{baseline} " + of_base).where(theirs["_merge"] == "both",
                                                                               f"no {baseline} run"))
        other = generation if column in FORWARD_ONLY else ~generation if column in GENERATION_ONLY else None
        if other is not None:
            words = words.mask(other, "")
        shown.loc[empty, column] = words[empty]
    return shown


def grid(table: pd.DataFrame, value: str, baseline: str, missing: str | None = None) -> pd.DataFrame:
    """compare()'s rows as model/shape x "precision mode" columns, the baseline's first; a precision and mode not run in
    a row's shape reads ``missing`` (empty where None).

    Compiler settings that are the same for every row are left out of the row labels.
    """
    rows = [k for k in SHAPE if k in table] + [k for k in (*COMPILER, "workload.name", *SETTING, DATA, *_settings(table))
                                               if k in table and table[k].nunique(dropna=False) > 1]
    modes = table["compile"].astype(str).map({"True": "compiled", "False": "eager"}) if "compile" in table else "eager"
    wide = table.assign(mode=modes).pivot(index=rows, columns=["precision.name", "mode"], values=value)
    order = sorted(wide.columns, key=lambda c: (c[0] != baseline, c[0], c[1] != "eager"))
    wide = wide[order]
    wide.columns = [f"{precision} {mode}" for precision, mode in order]
    return (wide if missing is None else wide.astype(object).fillna(missing)).reset_index()


@reported()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].replace("``", ""))
    parser.add_argument("--uri", nargs="+", default=["sqlite:///outputs/mlflow.db"], help="one or more MLflow stores")
    parser.add_argument("--experiment", default="eaq")
    parser.add_argument("--baseline", default="bf16", help="the precision every other one is compared with")
    parser.add_argument("--grid", choices=GRID_VALUES, help="one figure as a grid: rows model and shape, columns precision and compile mode")
    parser.add_argument("--csv", action="store_true")
    args = parser.parse_args(argv)
    runs = runs_table(args.uri, args.experiment, COLUMNS, settings=True, every_status=True)
    if runs.empty:
        print(f"no benchmark runs in experiment {args.experiment!r} at {redact(' '.join(args.uri))}", file=sys.stderr)
        return 1
    # As the table names them: each of several mixed plans is a precision of its own (mixed-<hash>).
    plans = [runs.get(f"eaq.precision.{tag}", pd.Series(index=runs.index, dtype=object))  # none: no mixed run
             for tag in ("plan_sha256", "plan_applies_sha256")]
    found = sorted(plan_names(runs["precision.name"], *plans).unique())
    if args.baseline not in found:
        print(f"--baseline {args.baseline} has no runs in these stores; precisions found: {', '.join(found)}.", file=sys.stderr)
        return 2
    table = compare(runs, args.baseline)
    if args.grid and args.grid not in table:
        print(f"--grid {args.grid} is a figure of {'generation' if args.grid in GENERATION_ONLY else 'forward'} runs, "
              f"which these stores do not hold; figures they have: {', '.join(c for c in GRID_VALUES if c in table)}.",
              file=sys.stderr)
        return 2
    if not args.csv:
        table = spelled(table, args.baseline)
    if args.grid and "workload.name" in table and (args.grid in GENERATION_ONLY or args.grid in FORWARD_ONLY):
        # the rows of the figure's workload: the other's would be rows of empty cells
        table = table[table["workload.name"].str.startswith("generate") == (args.grid in GENERATION_ONLY)]
    if args.grid:
        table = grid(table, args.grid, args.baseline, missing=None if args.csv else "not run")
    if not args.csv:  # a column holding "failed" beside numbers is text to tabulate, which would print them unrounded,
        # and a setting a run did not record (a local model's architecture) "nan"
        table = table.apply(lambda column: column.map(lambda v: (f"{v:.4g}" if v == v else "") if isinstance(v, float) else v)
                            if column.dtype == object else column.fillna("") if pd.api.types.is_string_dtype(column)
                            else column)
    print(table.to_csv(index=False) if args.csv else table.to_markdown(index=False, floatfmt=".4g"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
