"""The study's figures, from the aggregates and MLflow artifacts alone: 300 DPI PNG and SVG each.

Every point is a mean over trials with its 95% confidence interval as an error bar
(aggregate.py), because single numbers mislead. A figure whose data the store does not
hold (energy on a sensorless CPU, a layer analysis nobody ran, a single model) is not
drawn with zeros: it is left out with a note saying why, and the report shows the note.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import math
import re
from pathlib import Path
import tempfile
import textwrap

import matplotlib

matplotlib.use("Agg")  # files only, no display: runs in CI, in a Hydra callback, on a headless GPU host

from matplotlib.axes import Axes
from matplotlib.ticker import ScalarFormatter
import matplotlib.pyplot as plt
from mlflow.tracking import MlflowClient
import numpy as np
import pandas as pd

from eaq.report.aggregate import (
    ENERGY, QUALITY, counted, first_measured, mode_words, none_counted, ratios, wide,
)
from eaq.report.frame import CONFIG_KEYS, LOWER_IS_BETTER, SCOPE_KEYS
from eaq.tracking.redact import redact

DPI = 300
LABELS = {
    "latency_mean_ms": "latency per batch (ms)", "throughput_samples_per_s": "throughput (samples/s)",
    "energy_per_sample_mj": "energy per sample (mJ)", "model_size_mb": "model size (MB)",
    "quality_accuracy": "accuracy (fraction)", "quality_perplexity": "perplexity",
    "quality_cosine_to_fp32_mean": "cosine to fp32 (1 = same)", "quality_agreement_with_fp32": "agreement with fp32 (fraction)",
    "quality_top1_agreement_with_fp32": "top-1 agreement with fp32 (fraction)",
    "quality_generated_match_rate": "generated tokens matching fp32's (fraction)", "speed_up": "speed-up vs baseline (x)", "quality": "quality (synthetic data: none)",
    "time_per_output_token_mean_ms": "time per output token (ms)", "decode_tokens_per_s": "decode throughput (tokens/s)",
    "decode_energy_per_token_mj": "energy per output token (mJ)",
}
# A workload's figures in the figures' roles: a forward pass's per batch and sample, generation's per output token.
# A model's figures take the first workload its runs measured (forward where both ran).
ROLES = {
    "latency": ("latency_mean_ms", "time_per_output_token_mean_ms"),
    "throughput": ("throughput_samples_per_s", "decode_tokens_per_s"),
    "energy": ENERGY,
}


def measured(rows: pd.DataFrame, role: str) -> str | None:
    """The figure of ``role`` these rows measured (ROLES' order), or None."""
    return first_measured(rows, ROLES[role])


def _file_name(name: str) -> str:
    """A figure's file name from a model's: a hub id's '/' (Qwen/Qwen2-0.5B) would be a folder ("__", so that
    org/model and org-model stay two files)."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "-", name.replace("/", "__"))


@dataclass(frozen=True)
class Figure:
    """One figure of the report: written files, or the note saying why it was left out."""

    title: str
    png: Path | None = None
    svg: Path | None = None
    note: str = ""

    def __post_init__(self) -> None:
        # A note may quote a store's error, which quotes its URL, password and all: the screen and report.html show it.
        object.__setattr__(self, "note", redact(self.note))


# The share of a figure's width its panels take where a legend of the whole figure stands right of them.
LEGEND_ROOM = 0.9


# Characters of a suptitle (12 pt) per inch of figure width, with room to spare: a longer line is wrapped.
TITLE_CHARS_PER_INCH = 10


def suptitle(fig: plt.Figure, text: str) -> None:
    """The figure's title, wrapped to its width: a one-panel figure (5.5 in) cut a model's long title at both sides."""
    fig.suptitle(textwrap.fill(text, max(20, int(fig.get_figwidth() * TITLE_CHARS_PER_INCH))))


def save(fig: plt.Figure, out: Path, name: str, title: str, right: float = 1.0) -> Figure:
    """PNG at 300 DPI for papers and the HTML, SVG for editing; the figure is closed (a sweep draws dozens).

    Laid out first, the panels within the left ``right`` of the figure: tight_layout puts them where their labels
    fit, and would otherwise take back the room a figure's own legend was given (subplots_adjust)."""
    out.mkdir(parents=True, exist_ok=True)
    fig.tight_layout(rect=(0, 0, right, 1))
    png, svg = out / f"{_file_name(name)}.png", out / f"{_file_name(name)}.svg"
    fig.savefig(png, dpi=DPI)
    fig.savefig(svg)
    plt.close(fig)
    return Figure(title, png, svg)


def _yerr(rows: pd.DataFrame, metric: str) -> np.ndarray:
    """Asymmetric error bars from the CI columns; NaN, no bar and no cap, where one trial gives no interval (a bar of 0
    drew a cap at the mean, as the baseline's exact 1.0 has; never negative: matplotlib refuses those)."""
    mean, low, high = rows[metric], rows[f"{metric}_ci_low"], rows[f"{metric}_ci_high"]
    return np.clip(np.vstack([mean - low, high - mean]), 0, None)


def _mark_uncounted(ax: Axes, x: np.ndarray, rows: pd.DataFrame, metric: str) -> None:
    """Say, at its place on the axis, why a configuration has no bar: its runs failed, were flagged invalid or are
    running (an empty slot under a precision's name read as a figure missing by mistake); for a ratio, the note of
    its side with no counted run ("no fp32: not run for this model and shape")."""
    for xi, (_, row) in zip(x, rows.iterrows()):
        note = row.get(f"{metric}_note")  # NaN where the configuration was not run at this batch size: nothing to say
        if math.isnan(row[metric]) and (why := none_counted(row) or (note.replace("no counted run of ", "no ")
                                                                      if isinstance(note, str) else "")):
            ax.text(xi, 0.02, why, rotation=90, ha="center", va="bottom", fontsize=7, color="0.4",
                    transform=ax.get_xaxis_transform())


def _no_point(rows: pd.DataFrame, metric: str) -> str:
    """Why a line has no point at any batch size, for its legend entry: a precision listed with nothing drawn read as
    one hidden behind another's line. Its rows' words ("failed", "flagged invalid", "running"), else no value logged."""
    words = sorted({why for _, row in rows.iterrows() if (why := none_counted(row))})
    return ", ".join(words) if words else f"no {metric}"


def _single_trials(rows: pd.DataFrame, metrics: tuple[str, ...]) -> bool:
    """Whether a figure of ``metrics`` shows a mean with no interval (one trial): its bar would read as exact."""
    return any((rows[m].notna() & rows[f"{m}_ci_low"].isna()).any() for m in metrics if m in rows and f"{m}_ci_low" in rows)


ONE_TRIAL = "no error bar: one trial, no interval"


def _not_measured(ax: Axes, label: str, why: str = "not measured") -> None:
    """An empty panel that says so: a missing measurement is never drawn as a bar of 0."""
    ax.text(0.5, 0.5, textwrap.fill(why, 40), ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_ylabel(label)
    ax.set_xticks([])
    ax.set_yticks([])


# A setting (eaq.report.frame.setting: the device, dataset, protocol or weights' source, where runs differ in them)
# longer than this many characters is named by a number in a figure's labels and spelled out under the figure: inline,
# a protocol's parameters made labels wider than their panels, which ran over the next panel and which matplotlib could
# not lay out ("Tight layout not applied").
SETTING_INLINE = 24
# Characters of the 7-point text under a figure per inch of its width, with room to spare (DejaVu Sans averages ~17).
CHARS_PER_INCH = 15


def setting_keys(rows: pd.DataFrame) -> dict[str, str]:
    """Each setting of ``rows`` (configurations) as a figure's labels name it: itself where every one is short; else
    nothing where it is the only one and no configuration lacks one (a run that recorded no value, an older eaq's, has
    the setting "": unnamed, the two would share a label), or "[1]", "[2]", ... in sorted order; ``spell_out`` writes
    those out under the figure."""
    settings = sorted({s for s in rows["setting"].dropna() if s})
    if all(len(s) <= SETTING_INLINE for s in settings):
        return {s: s for s in settings}
    alone = len(settings) == 1 and bool(rows["setting"].fillna("").ne("").all())
    return {s: "" if alone else f"[{i}]" for i, s in enumerate(settings, 1)}


def spell_out(fig: plt.Figure, drawn: pd.DataFrame) -> None:
    """Under the figure, the settings of the configurations it ``drawn`` (``with_variants``' rows) that its labels name
    by number, each wrapped to the figure's width; nothing where none is numbered."""
    named = drawn.loc[drawn["setting_key"] != drawn["setting"], ["setting", "setting_key"]].drop_duplicates()
    lines = [f"{key or 'every configuration:'} {setting}"
             for setting, key in named.sort_values("setting").itertuples(index=False)]
    if lines:
        width = int(fig.get_figwidth() * CHARS_PER_INCH)
        text = "\n".join(textwrap.fill(line, width, subsequent_indent="    ", break_on_hyphens=False) for line in lines)
        fig.supxlabel(text, x=0.01, ha="left", fontsize=7)


def with_variants(rows: pd.DataFrame, keys: dict[str, str] | None = None) -> pd.DataFrame:
    """``rows`` (one model's configurations) with a ``variant`` column: the precision and how it ran, in words, and
    ``setting_key``, its setting as the words name it.

    Within one model and batch size a precision can have several configurations (eager and compiled,
    with and without CUDA graphs, other compiler settings, sequence lengths, workloads): each is its
    own bar, point or line, never drawn over another. The words name only what is not the default,
    so a sweep of precisions alone reads as the precisions' names. A setting is named as ``keys`` names it
    (default: ``setting_keys(rows)``), so a long one is a number ``spell_out`` writes out under the figure."""
    several_lengths = rows["seq_len"].nunique() > 1
    keys = setting_keys(rows) if keys is None else keys
    rows = rows.assign(setting_key=rows["setting"].map(lambda setting: keys.get(setting, "")))

    def variant(row: pd.Series) -> str:
        named = {**row, "setting": row["setting_key"]}
        return " ".join([str(row["precision"]), *([f"s{int(row['seq_len'])}"] if several_lengths else []), *mode_words(named)])

    return rows.assign(variant=rows.apply(variant, axis=1) if not rows.empty else pd.Series(dtype=str))


def _bars(ax: Axes, rows: pd.DataFrame, metric: str, variants: list[str]) -> None:
    """Grouped bars (dots for quality): one per variant (precision and how it ran) on x, one per batch size, CI error bars."""
    if metric not in rows or rows[metric].isna().all():
        # A ratio's panel says why it has no bar (its baseline's runs failed): "not measured" blamed the sensor.
        notes = sorted(set(rows.get(f"{metric}_note", pd.Series(dtype=str)).dropna()) - {""})
        _not_measured(ax, LABELS.get(metric, metric), "; ".join(notes) or "not measured")
        return
    batches = sorted(rows["batch_size"].unique())
    width = 0.8 / len(batches)
    quality = metric.startswith("quality")
    for i, batch in enumerate(batches):
        sub = rows[rows["batch_size"] == batch].set_index("variant").reindex(variants)
        x = np.arange(len(variants)) + (i - (len(batches) - 1) / 2) * width
        if quality:  # dots: quality differs in the third decimal, a bar from 0 would hide it
            ax.errorbar(x, sub[metric], yerr=_yerr(sub, metric), fmt="o", capsize=3, color=f"C{i}", label=f"batch {batch}")
        else:
            ax.bar(x, sub[metric], width, yerr=_yerr(sub, metric), capsize=3, label=f"batch {batch}")
        _mark_uncounted(ax, x, sub, metric)
    long = max(map(len, variants)) > 8  # "int8 compiled graphs": slanted, so neighbours do not overlap
    ax.set_xticks(np.arange(len(variants)), variants, rotation=30 if long else 0, ha="right" if long else "center")
    ax.set_xlim(-0.5, len(variants) - 0.5)  # a slot of no bar (failed) at an end: its mark sat on the axes' edge
    ax.set_xlabel("precision (and how it ran)")
    ax.set_ylabel(LABELS.get(metric, metric))
    if not quality:
        ax.set_ylim(bottom=0)  # every figure here is positive: an interval reaching below 0 is cut at the axis
    ax.ticklabel_format(axis="y", useOffset=False)


SPEED_UP = ("speed_up", "speed_up_ci_low", "speed_up_ci_high", "speed_up_note")


def speed_up(frame: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Baseline latency / latency per configuration (per output token for generation): the reciprocal of
    aggregate.ratios' latency ratio and of its interval, with its note where either side has no counted run (the
    baseline's failed, or was not run at that shape), which the figure writes where the bar would be."""
    latency = ratios(frame, baseline, ROLES["latency"]).drop_duplicates(list(CONFIG_KEYS), keep="first")
    return pd.DataFrame({**{key: latency[key] for key in CONFIG_KEYS}, "speed_up": 1 / latency["ratio"],
                         "speed_up_ci_low": 1 / latency["ci_high"], "speed_up_ci_high": 1 / latency["ci_low"],
                         "speed_up_note": latency["note"]}, columns=[*CONFIG_KEYS, *SPEED_UP])



def overview(configs: pd.DataFrame, ups: pd.DataFrame, model: str, baseline: str, out: Path) -> Figure:
    """Six panels for one model: latency, speed-up, energy per sample, throughput, quality, model size."""
    rows = with_variants(configs[configs["model"] == model].merge(ups, how="left", on=list(CONFIG_KEYS)))
    variants = sorted(rows["variant"].unique(), key=lambda v: (v.split(" ")[0] != baseline, v))
    quality = next((m for m in LABELS if m.startswith("quality_") and m in rows and rows[m].notna().any()), "quality")
    # Speed-up is of latency per batch, or per output token for generation (speed_up).
    # A figure no run measured keeps the workload's own name (energy per output token where energy was unavailable).
    generating = rows["workload"].astype(str).str.startswith("generate").all()
    roles = {role: measured(rows, role) or ROLES[role][int(generating)] for role in ROLES}
    plotted = (roles["latency"], "speed_up", roles["energy"], roles["throughput"], quality, "model_size_mb")
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5))
    for ax, metric in zip(axes.flat, plotted):
        _bars(ax, rows, metric, variants)
    axes.flat[1].axhline(1, color="0.3", lw=0.8, ls="--")
    axes.flat[1].set_ylabel(f"speed-up vs {baseline} (x)")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", title="batch size", fontsize=8)
    suptitle(fig, f"{model}: mean over trials, 95% CI error bars" + (f" ({ONE_TRIAL})" if _single_trials(rows, plotted) else ""))
    spell_out(fig, rows)
    return save(fig, out, f"overview_{model}", f"{model}: overview", right=LEGEND_ROOM)


def _scatter_ci(ax: Axes, rows: pd.DataFrame, x: str, y: str) -> None:
    """One point per configuration with CIs on both axes, colour by batch size, labelled with its variant (precision and how it ran)."""
    for batch, sub in rows.groupby("batch_size"):
        ax.errorbar(sub[x], sub[y], xerr=_yerr(sub, x), yerr=_yerr(sub, y), fmt="o", capsize=3, label=f"batch {batch}")
    # A label that would overlap earlier ones (measured on screen, at the final limits) goes one line higher.
    ax.set_xlim(left=0)  # energy and throughput are positive: an interval reaching below 0 is cut at the axis
    ax.autoscale_view()
    placed: list[tuple[float, float]] = []
    stacked = 0
    for _, row in rows.sort_values(x).iterrows():
        px, py = ax.transData.transform((row[x], row[y]))
        near = sum(abs(px - qx) < 60 and abs(py - qy) < 14 for qx, qy in placed)
        ax.annotate(f"{row['variant']} b{row['batch_size']:.0f}", (row[x], row[y]), textcoords="offset points",
                    xytext=(4, 5 + 11 * near), fontsize=8)
        placed.append((px, py))
        stacked = max(stacked, near)
    low, high = ax.get_ylim()
    ax.set_ylim(low, high + (high - low) * 0.07 * (stacked + 1))  # room for the stacked labels inside the frame
    ax.set_xlabel(LABELS.get(x, x))
    ax.set_ylabel(LABELS.get(y, y))
    ax.ticklabel_format(axis="y", useOffset=False)  # quality near 1 reads as 0.99999, not as an offset "1e-8+1"
    ax.legend(fontsize=8)
    if _single_trials(rows, (x, y)):
        ax.text(0.01, 0.01, ONE_TRIAL, transform=ax.transAxes, fontsize=7, color="0.4")


def tradeoff(configs: pd.DataFrame, model: str, out: Path) -> Figure:
    """Throughput (decode throughput for generation) against quality: what a precision gives up for its speed, on the
    first quality figure the model's configurations have (QUALITY's order: a classifier's accuracy, an LM's
    perplexity, else fidelity on synthetic ids); configurations with another figure only (synthetic ids beside
    SST-2) are in the Pareto figure's panels, each on its own."""
    title = f"{model}: speed vs quality"
    rows = with_variants(configs[configs["model"] == model])
    if (quality := first_measured(rows, QUALITY)) is None:
        return Figure(title, note="no quality metric (synthetic data): speed vs quality not drawn.")
    speed = measured(rows, "throughput")
    if speed is None:
        return Figure(title, note=f"no throughput measured for {model}: speed vs quality not drawn.")
    fig, ax = plt.subplots(figsize=(7, 5))
    drawn = rows[rows[speed].notna() & np.isfinite(rows[quality])]  # a non-finite quality: in the tables, as such
    _scatter_ci(ax, drawn, speed, quality)
    ax.set_title(title)
    spell_out(fig, drawn)
    return save(fig, out, f"tradeoff_{model}", title)


def pareto_front(points: pd.DataFrame, energy: str, quality: str) -> pd.DataFrame:
    """Configurations no other one beats on both energy (lower) and quality (per LOWER_IS_BETTER)."""
    sign = 1 if quality in LOWER_IS_BETTER else -1
    ordered = points.assign(_q=sign * points[quality]).sort_values([energy, "_q"])
    best, keep = math.inf, []
    for index, row in ordered.iterrows():
        if row["_q"] < best:
            best = row["_q"]
            keep.append(index)
    return points.loc[keep].sort_values(energy)


# At most this many panels side by side (more go on further rows).
PANEL_COLUMNS = 4


def pareto(configs: pd.DataFrame, model: str, out: Path) -> Figure:
    """Energy per sample (per output token for generation) against quality, the Pareto front drawn through the
    winners: one panel per scope in which configurations compete (SCOPE_KEYS: batch size, and the sequence length,
    workload, device, dataset and sampler where the runs have several), on the scope's own quality figure (accuracy
    on SST-2 beside fidelity on synthetic ids), as the front's verdicts (eaq.report.front) judge them."""
    title = f"{model}: energy vs quality, Pareto front per batch size and setting"
    rows = with_variants(configs[configs["model"] == model])
    if first_measured(rows, QUALITY) is None:
        return Figure(title, note="no quality metric (synthetic data): energy vs quality not drawn.")
    if measured(rows, "energy") is None:
        return Figure(title, note="energy not measured (no energy sensor on the machine that ran these runs).")
    energies = [m for m in ROLES["energy"] if m in rows]
    scopes = [k for k in SCOPE_KEYS if k != "model"]
    panels = list(rows[rows[energies].notna().any(axis=1)].groupby(scopes, sort=True, dropna=False))
    several = {k: rows[k].nunique() > 1 for k in ("seq_len", "workload")}
    columns = min(len(panels), PANEL_COLUMNS)  # rows of panels: a sweep of many shapes stays a drawable size
    rows_n = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows_n, columns, figsize=(5.5 * columns, 4.5 * rows_n), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (key, sub) in zip(axes.flat, panels):
        scope = dict(zip(scopes, key))
        energy = measured(sub, "energy")  # one workload a panel: its own energy figure
        sub = sub[sub[energy].notna()]
        setting = sub["setting_key"].iloc[0]
        if (quality := first_measured(sub, QUALITY)) is None:
            _not_measured(ax, "quality")
        elif (sub := sub[np.isfinite(sub[quality]) | sub[quality].isna()]).empty:  # non-finite: in the tables, as such
            _not_measured(ax, f"{LABELS.get(quality, quality)} (no finite value)")
        else:
            _scatter_ci(ax, sub, energy, quality)
            front = pareto_front(sub[sub[quality].notna()], energy, quality)
            ax.plot(front[energy], front[quality], "k--", lw=1, label="Pareto front")
            ax.legend(fontsize=8)
        ax.set_title(" ".join([f"batch {scope['batch_size']:.0f}", *([f"s{scope['seq_len']:.0f}"] if several["seq_len"] else []),
                               *([str(scope["workload"])] if several["workload"] else []), setting]).strip(),
                     fontsize=9)
    suptitle(fig, title)
    spell_out(fig, pd.concat([sub for _, sub in panels]))
    return save(fig, out, f"pareto_{model}", title)


def batch_scaling(configs: pd.DataFrame, model: str, out: Path) -> Figure:
    """Latency and energy per sample (per output token for generation) against batch size, a line per variant
    (precision and how it ran)."""
    rows = with_variants(configs[configs["model"] == model])
    generation = measured(rows, "latency") == ROLES["latency"][1]
    title = f"{model}: {'time and energy per output token' if generation else 'latency and energy per sample'} vs batch size"
    if rows["batch_size"].nunique() < 2:
        return Figure(title, note=f"one batch size ({rows['batch_size'].iloc[0]}) for {model}: no batch-size curve.")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, metric in zip(axes, (ROLES["latency"][generation], ROLES["energy"][generation])):
        if metric not in rows or rows[metric].isna().all():
            _not_measured(ax, LABELS[metric])
            continue
        lines = list(rows.groupby("variant"))
        for i, (variant, sub) in enumerate(lines):
            sub = sub.sort_values("batch_size")
            dodge = 2 ** (0.04 * (i - (len(lines) - 1) / 2))  # side by side, so error bars at one batch size do not hide each other
            ax.errorbar(sub["batch_size"] * dodge, sub[metric], yerr=_yerr(sub, metric), marker="o", capsize=3,
                        label=variant if sub[metric].notna().any() else f"{variant}: {_no_point(sub, metric)}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(rows["batch_size"].unique()))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.set_ylim(bottom=0)
        ax.set_xlabel("batch size (samples)")
        ax.set_ylabel(LABELS[metric])
        ax.legend(title="precision (and how it ran)", fontsize=8)
    suptitle(fig, title)
    spell_out(fig, rows)
    return save(fig, out, f"batch_{model}", title)


def at_largest_batch(rows: pd.DataFrame, metric: str) -> tuple[pd.DataFrame, pd.Series]:
    """The rows of each model's largest batch size with ``metric`` measured, the same for every precision (where
    precisions differ most), and that size per model. The largest of each precision put fp32 at batch 32 beside int8
    at batch 1 where int8 ran at batch 1 only: int8 read 3x dearer, where at batch 1 it was the cheaper. The largest
    run at all drew no bar where every run at that size failed (out of memory): the figure said "batch 64" of nothing.
    A model with the metric at no batch size keeps its largest, drawn empty."""
    largest = rows[rows[metric].notna()].groupby("model")["batch_size"].max()
    largest = largest.combine_first(rows.groupby("model")["batch_size"].max())
    return rows[rows["batch_size"] == rows["model"].map(largest)], largest


def models(configs: pd.DataFrame, out: Path) -> Figure:
    """Model against model: energy per sample (latency where energy was not measured) per precision and way it ran."""
    title = "model vs model"
    metric = measured(configs, "energy") or measured(configs, "latency") or "latency_mean_ms"
    # One workload: a forward pass's figure per sample, generation's per output token. Beside the other's metric a
    # configuration of the other workload was a legend entry with no bar (and its failed runs marks between groups).
    generation = metric in {per_token for _, per_token in ROLES.values()}
    same = configs["workload"].astype(str).str.startswith("generate") == generation
    left_out = "" if same.all() else "forward-pass" if generation else "generation"
    configs = configs[same]
    if configs["model"].nunique() < 2:
        return Figure(title, note="fewer than two models with a counted run in these runs"
                      + (" of one workload (forward pass or generation)" if left_out else "") + ": no model comparison.")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    names = sorted(configs["model"].unique())
    # Each model's own sequence lengths; the settings numbered alike across models, as one legend names them.
    keys = setting_keys(configs)
    rows = pd.concat([with_variants(group, keys) for _, group in configs.groupby("model")])
    rows, largest = at_largest_batch(rows, metric)
    variants = sorted(rows["variant"].unique())
    width = 0.8 / len(variants)
    for i, variant in enumerate(variants):
        # Whole rows: groupby().last() took each column's last non-empty value, a mean of one batch size with the
        # interval of another where the largest batch had one trial.
        sub = rows[rows["variant"] == variant].drop_duplicates("model", keep="last")
        sub = sub.set_index("model").reindex(names)
        x = np.arange(len(names)) + (i - (len(variants) - 1) / 2) * width
        ax.bar(x, sub[metric], width, yerr=_yerr(sub, metric), capsize=3, label=variant)
        _mark_uncounted(ax, x, sub, metric)
    ax.set_xticks(np.arange(len(names)), [f"{name}\nbatch {largest[name]:g}" for name in names])
    ax.set_xlabel("model (at its largest batch size measured)")
    ax.set_ylabel(LABELS[metric])
    ax.set_ylim(bottom=0)  # every figure here is positive: an interval reaching below 0 is cut at the axis
    ax.legend(title="precision (and how it ran)", fontsize=8)
    if left_out:
        ax.text(0.01, 0.01, f"{left_out} runs are not in this figure (another unit)", transform=ax.transAxes, fontsize=7,
                color="0.4")
    ax.set_title(title)
    spell_out(fig, rows)
    return save(fig, out, "models", title)


def power_trace(client: MlflowClient, run: pd.Series, out: Path) -> Figure:
    """The power trace of one run (its ``power_trace.csv`` artifact), its windows shaded (generation: prefill, decode)."""
    title = f"power trace: {run['run_name']}"
    if run.get("valid") == "false":  # drawn only when asked for by --trace-run: the title says what the checks found
        title += f" (flagged invalid: {run.get('valid_reasons')})"
    if run.get("status") != "FINISHED":  # a run that failed or is under way has no window: no sensor's fault
        return Figure(title, note=f"{run['run_name']} has status {run.get('status')}: no measured window to trace (see "
                                  "Runs that did not count).")
    if run.get("energy") != "measured":
        return Figure(title, note=f"energy not measured for {run['run_name']}: {run.get('energy_reason') or 'no sensor'}.")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            trace = pd.read_csv(client.download_artifacts(run["run_id"], "power_trace.csv", tmp))
    except Exception as error:  # the artifact store may be gone (a copied database): say so, draw the rest
        return Figure(title, note=f"power_trace.csv of {run['run_name']} could not be read ({type(error).__name__}: {error}).")
    fig, ax = plt.subplots(figsize=(9, 4))
    for column in trace.columns[1:]:  # a companion's channel (nvidia-smi beside NVML) is empty in the other's rows
        samples = trace[["t_s", column]].dropna()
        ax.plot(samples["t_s"], samples[column], lw=0.8, label=column.removesuffix("_w").replace("_", " "))
    # The trace's origin is the measured window's start: a forward pass's, or generation's decode window, its prefill
    # window before it (runs logged before 2026-11-28 recorded the decode window's place only).
    duration = next((d for d in (run.get("window_duration_s"), run.get("decode_window_duration_s")) if d is not None and d == d), 0)
    prefill = [pd.to_numeric(run.get(k), errors="coerce") - pd.to_numeric(run.get("window_start_unix_s"), errors="coerce")
               for k in ("prefill_start_unix_s", "prefill_end_unix_s")]
    if all(pd.notna(prefill)):
        ax.axvspan(*prefill, color="C1", alpha=0.15, label="prefill window")
    ax.axvspan(0, duration, color="C2", alpha=0.15, label="decode window" if all(pd.notna(prefill)) else "measurement window")
    ax.set_xlabel("time from window start (s)")
    ax.set_ylabel("power (W)")
    ax.legend(fontsize=8)
    ax.set_title(title)
    return save(fig, out, "power_trace", title)


def _by_workload(model: str, configs: pd.DataFrame, ups: pd.DataFrame) -> list[tuple[str, pd.DataFrame, pd.DataFrame]]:
    """A model's configurations (and speed-ups) as the figures take them: whole where its runs are of one kind of
    workload, else one part each, named "<model> forward" and "<model> generate": a model's figures show one
    workload's figures (per sample, or per output token), so a model measured both ways is drawn twice."""
    rows = configs[configs["model"] == model]
    kinds = rows["workload"].astype(str).str.startswith("generate").map({True: "generate", False: "forward"})
    if kinds.nunique() < 2:
        return [(model, configs, ups)]
    return [(f"{model} {kind}", rows[kinds == kind].assign(model=f"{model} {kind}"),
             ups.assign(model=ups["model"].mask(ups["model"] == model, f"{model} {kind}")))
            for kind in sorted(kinds.unique())]


def uncounted_note(rows: pd.DataFrame) -> str | None:
    """Why configurations (``wide``'s rows, with their counts) have no figure at all: none of their runs counted, and
    how many failed, were flagged invalid or are still running; None where some run counted.

    Drawn anyway, such a model's overview was six panels of "not measured" and its other figures were left out as
    if its data were synthetic, when its runs had failed."""
    counts = rows[["runs", "failed", "invalid", "running"]].sum()
    if none_counted(counts) is None:
        return None
    why = ", ".join(f"{int(counts[c])} {word}" for c, word in (("failed", "failed"), ("invalid", "flagged invalid"),
                                                              ("running", "still running")) if counts[c])
    return f"none of its {int(counts['runs'])} runs counted ({why}); \"Runs that did not count\" in report.html says why."


def study(frame: pd.DataFrame, table: pd.DataFrame, baseline: str, out: Path, client: MlflowClient,
          layer_figures: Callable[[], list[Figure]], trace_run: str | None = None) -> list[Figure]:
    """Every figure of the report, in reading order, per model where it applies.

    A model (or a workload of one) none of whose runs counted gets one note instead of its figures, and is not in the
    model comparison: with no counted run, every figure would be empty for that reason alone."""
    configs = wide(table)
    ups = speed_up(frame, baseline)
    figures: list[Figure] = []
    drawn = []
    for model in sorted(configs["model"].unique()):
        for name, rows, up in _by_workload(model, configs, ups):
            if (note := uncounted_note(rows[rows["model"] == name])) is not None:
                figures.append(Figure(f"{name}: figures", note=note))
                continue
            drawn.append(model)
            figures += [overview(rows, up, name, baseline, out), tradeoff(rows, name, out), pareto(rows, name, out),
                        batch_scaling(rows, name, out)]
    figures.append(models(configs[configs["model"].isin(drawn)], out))
    figures += layer_figures()
    benchmarks = frame[frame["kind"] == "benchmark"]
    if trace_run is not None:
        figures.append(power_trace(client, frame[frame["run_id"] == trace_run].iloc[0], out))
    elif benchmarks.empty:  # a sweep of task=layers only: its traces are not benchmark windows
        figures.append(Figure("power trace", note="no benchmark run in these runs: no power trace drawn."))
    else:  # default: the last run (by configuration) that counts and measured energy, so there is a trace to show
        kept = counted(benchmarks)
        measured = kept[kept["energy"] == "measured"]
        figures.append(power_trace(client, next(r for r in (measured, kept, benchmarks) if not r.empty).iloc[-1], out))
    return figures
