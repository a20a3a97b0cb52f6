"""Figures of the layer analysis (``eaq.kind=layers`` runs), from their CSV artifacts only.

The report does not import the layer-analysis code: it reads what such a run leaves in
MLflow (``layers/components.csv``, ``layers/component_types.csv``, ``layers/correlation.csv``,
the contract between issues 11 and 12, and ``layers/outside.csv`` where the run logged it) and
its capture-ratio metrics. Empty cells mean "not measured" and stay out of the figures; with no
layers run in the store the figures are left out with a note. Runs logged before outside.csv
existed still report: their outside entries and "with blocks" ratios are left out with a note.
"""

from __future__ import annotations

import math
from pathlib import Path
import tempfile

import matplotlib.pyplot as plt
from mlflow.tracking import MlflowClient
import numpy as np
import pandas as pd

from eaq.report.aggregate import config_label, format_ci, t_interval, uncounted
from eaq.report.figures import Figure, save, suptitle
from eaq.report.frame import CONFIG_KEYS

ARTIFACTS = ("components.csv", "component_types.csv", "correlation.csv")
OUTSIDE = "outside.csv"  # logged since the blocks' own ops are measured; older runs lack it
IMPACTS = ("sensitivity_impact", "ablation_impact")
# The column of component_types.csv and outside.csv that each eaq.layers.share_basis is a share of.
BASIS_COLUMN = {"replay": "energy_replay_mj_per_pass", "attribution": "energy_attribution_mj_per_pass",
                "time": "time_ms_per_pass"}
# Capture ratio per method: (components only, with the blocks' own ops) metric names.
CAPTURE = {"replay": ("layers_capture_ratio_replay", "layers_capture_ratio_replay_with_blocks"),
           "attribution": ("layers_capture_ratio_attribution", "layers_capture_ratio_attribution_with_blocks"),
           "time": ("layers_time_capture_ratio", "layers_time_capture_ratio_with_blocks")}
TARGET = (0.95, 1.05)  # issue 11's bar for a capture ratio
BEFORE_OUTSIDE = "not logged (run predates layers/outside.csv)"


def read_artifacts(client: MlflowClient, run_id: str) -> dict[str, pd.DataFrame | None]:
    """The run's three layer tables by file name, and outside.csv (None where the run predates it)."""
    logged = {Path(f.path).name for f in client.list_artifacts(run_id, "layers")}
    with tempfile.TemporaryDirectory() as tmp:
        tables = {name: pd.read_csv(client.download_artifacts(run_id, f"layers/{name}", tmp)) for name in ARTIFACTS}
        outside = pd.read_csv(client.download_artifacts(run_id, f"layers/{OUTSIDE}", tmp)) if OUTSIDE in logged else None
    return tables | {OUTSIDE: outside}


def _label(run: pd.Series) -> str:
    """The run's configuration and trial in a title: a store may hold layer runs of several models, precisions and
    shapes, and trials of each (two trials' figures had the same heading, told apart by a file name alone)."""
    trial = f" trial {run['trial']:.0f}" if pd.notna(run.get("trial")) else ""
    return f"{config_label(run)}{trial}"


def outside_shares(types: pd.DataFrame, outside: pd.DataFrame, share_basis: str) -> pd.DataFrame:
    """Each outside entry as a percentage of the components' summed figure on the shares' own basis,
    with the first word of its logged basis (``measured`` or ``remainder``); NaN where not measured."""
    column = BASIS_COLUMN.get(share_basis)
    total = types[column].sum(min_count=len(types)) if column in types and column in outside else math.nan
    share = outside[column] / total * 100 if column in outside and total else pd.Series(math.nan, index=outside.index)
    return pd.DataFrame({"entry": outside["entry"], "kind": outside["basis"].str.split(":").str[0], "share": share})


def energy_by_type(types: pd.DataFrame, outside: pd.DataFrame | None, label: str, slug: str, share_basis: str,
                   out: Path) -> Figure:
    """Where a forward pass spends its energy (or device time, where no sensor measured energy), per type,
    then the work outside components on the same scale: hatched and named by basis, so the remainder
    (model_glue, computed) is never read as a measurement."""
    basis = "device time" if share_basis == "time" else "energy"
    title = f"{label}: {basis} share by component type"
    fig, ax = plt.subplots(figsize=(8.5, 4.5))
    ax.bar(types["type"], types["energy_share"] * 100, color="C0", label="component type (measured)")
    if outside is None:
        ax.text(0.99, 0.97, "work outside components: not logged\n(run predates layers/outside.csv)",
                transform=ax.transAxes, ha="right", va="top", fontsize=8, color="0.4")
    else:
        entries = outside_shares(types, outside, share_basis)
        x = len(types) + np.arange(len(entries)) + 0.5  # a gap between the components and what lies outside them
        ax.axvline(len(types) - 0.25, color="0.5", ls=":", lw=1)
        for position, entry in zip(x, entries.itertuples()):
            remainder = entry.kind == "remainder"
            if math.isnan(entry.share):
                ax.text(position, 0, "not\nmeasured", ha="center", va="bottom", fontsize=7, color="0.4")
            else:
                ax.bar(position, entry.share, color="white" if remainder else "C1", edgecolor="0.3",
                       hatch="xx" if remainder else "//", label=f"outside: {entry.entry} ({entry.kind})")
                ax.annotate(entry.kind, (position, entry.share), textcoords="offset points",
                            xytext=(0, 3 if entry.share >= 0 else -10), ha="center", fontsize=7)
        ax.set_xticks([*range(len(types)), *x], [*types["type"], *(f"{e}\n({k})" for e, k in zip(entries["entry"], entries["kind"]))])
        ax.axhline(0, color="0.3", lw=0.6)
    ax.set_xlabel("component type" if outside is None else "component type | outside components (share of the components' sum)")
    ax.set_ylabel(f"% of the components' summed {basis}" + (f" ({share_basis})" if basis == "energy" else ""))
    ax.legend(fontsize=7)
    ax.set_title(title)
    return save(fig, out, f"layers_energy_{slug}", title)


def _broke_at(frame: pd.DataFrame) -> float:
    """Where an infinite impact is drawn (a change that broke the outputs: docs/impact.md writes it inf, the worst of
    all): above every finite impact of ``frame``'s IMPACTS. matplotlib draws an infinite bar or point as nothing."""
    finite = frame[list(IMPACTS)].to_numpy(dtype=float)
    finite = finite[np.isfinite(finite)]
    return float(finite.max()) * 1.15 if finite.size and finite.max() > 0 else 1.0


def impact_by_type(types: pd.DataFrame, label: str, slug: str, out: Path) -> Figure:
    """What lowering (sensitivity) or removing (ablation) all components of a type costs in quality."""
    title = f"{label}: impact by component type"
    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.arange(len(types))
    top = _broke_at(types)
    any_broke = False
    for i, impact in enumerate(IMPACTS):
        values = types[impact].astype(float)
        broke = np.isinf(values.to_numpy())
        any_broke |= bool(broke.any())
        ax.bar(x + (i - 0.5) * 0.4, values.where(~broke, top), 0.4, label=impact.replace("_", " "), color=f"C{i}",
               hatch=["xx" if b else "" for b in broke])
        for position in x[broke]:
            ax.text(position + (i - 0.5) * 0.4, top, "broke\n(inf)", ha="center", va="bottom", fontsize=7, color="C3")
        for position in x[values.isna().to_numpy()]:  # an empty cell is "not computed", never a bar of 0
            ax.text(position + (i - 0.5) * 0.4, 0, "not\ncomputed", ha="center", va="bottom", fontsize=7, color="0.4")
    if any_broke:
        ax.set_ylim(top=top * 1.25)  # the "broke" labels inside the axes
    ax.set_xticks(x, types["type"])
    ax.set_xlabel("component type")
    ax.set_ylabel("impact score (dimensionless)")
    ax.legend(fontsize=8)
    ax.set_title(title)
    return save(fig, out, f"layers_impact_{slug}", title)


def energy_vs_impact(components: pd.DataFrame, correlation: pd.DataFrame, label: str, slug: str, basis: str,
                     out: Path) -> Figure:
    """Does a component's cost predict its impact? One panel per impact measure, the correlations in its title."""
    title = f"{label}: {basis} share vs impact per component"
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    top = _broke_at(components)
    for ax, impact in zip(axes, IMPACTS):
        kind = impact.split("_")[0]
        if impact not in components or pd.to_numeric(components[impact], errors="coerce").isna().all():
            # Said as such: an empty panel titled "no correlation computed", with a legend of every type, read as a
            # correlation that failed.
            off = "layers.impact=false" if kind == "sensitivity" else "layers.ablation=false or layers.impact=false"
            ax.text(0.5, 0.5, f"{kind} impact not measured\n({off})", ha="center", va="center", transform=ax.transAxes,
                    color="0.4")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_ylabel(impact.replace("_", " "))
            continue
        for i, (type_, sub) in enumerate(components.groupby("type")):
            values = sub[impact].astype(float)
            broke = np.isinf(values.to_numpy())
            ax.scatter(sub["energy_share"][~broke] * 100, values[~broke], label=type_, s=18, color=f"C{i}")
            if broke.any():  # at the top, marked: the worst components, which a point at infinity would hide
                ax.scatter(sub["energy_share"][broke] * 100, [top] * int(broke.sum()), marker="^", s=40, color=f"C{i}",
                           edgecolors="C3", label=f"{type_}: broke (impact inf)")
        stats = correlation[(correlation["scope"] == "all") & (correlation["impact"] == kind)]
        ax.set_title(", ".join(f"{r.method} r={r.r:.2f} (p={r.p_value:.2g}, n={r.n:.0f})" for r in stats.itertuples())
                     or f"{kind}: no correlation computed", fontsize=9)
        ax.set_xlabel(f"{basis} share of the component (%)")
        ax.set_ylabel(impact.replace("_", " "))
        ax.legend(fontsize=7)
    suptitle(fig, title)
    return save(fig, out, f"layers_scatter_{slug}", title)


def correlation_heatmap(correlation: pd.DataFrame, label: str, slug: str, basis: str, out: Path) -> Figure:
    """Every correlation of the run at a glance: scope by impact measure and method, r in each cell."""
    title = f"{label}: correlation of {basis} share with impact"
    grid = correlation.pivot_table(index="scope", columns=["impact", "method"], values="r")
    if grid.empty or grid.isna().all().all():  # impact not measured (layers.impact=false), or no r computable
        return Figure(title, note=f"{label}: no correlation computed (impact not measured, or too few components with a "
                                  "finite share and impact); correlation.csv says which.")
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(grid) + 2))
    image = ax.imshow(grid.to_numpy(), cmap="coolwarm", vmin=-1, vmax=1, aspect="auto")
    ax.set_xticks(range(grid.shape[1]), [f"{i}\n{m}" for i, m in grid.columns], fontsize=8)
    ax.set_yticks(range(grid.shape[0]), grid.index)
    for (row, col), value in np.ndenumerate(grid.to_numpy()):
        if not np.isnan(value):
            ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=8)
    ax.set_xlabel("impact measure and method")
    ax.set_ylabel("components (scope)")
    fig.colorbar(image, ax=ax, label="correlation r")
    ax.set_title(title, fontsize=10)
    return save(fig, out, f"layers_correlation_{slug}", title)


def layer_figures(client: MlflowClient, frame: pd.DataFrame, out: Path) -> list[Figure]:
    """The four layer figures for each finished layers run, or one note when there is none.

    A run its checks flagged invalid gets a note with their reasons instead: its shares come from windows the checks
    did not trust (the capture table counts it in its trials, as the aggregates do)."""
    runs = frame[(frame["kind"] == "layers") & (frame["status"] == "FINISHED")]
    if runs.empty:
        return [Figure("layer analysis", note=f"{_none_finished(frame)}: "
                                              "`python -m eaq.run task=layers ...` adds energy and impact by component type.")]
    figures = []
    for _, run in runs.iterrows():
        label, slug = _label(run), run["run_id"][:8]
        if run["valid"] == "false":
            figures.append(Figure(f"{label}: layer analysis", note=f"run {run['run_name']} is flagged invalid "
                                  f"({run['valid_reasons']}): its layer figures are not drawn."))
            continue
        try:
            tables = read_artifacts(client, run["run_id"])
        except Exception as error:  # a run without its CSVs (failed upload, moved store): say which, keep the rest
            figures.append(Figure(f"{label}: layer analysis", note=f"run {run['run_name']}: layers CSVs unreadable ({error})."))
            continue
        share_basis = client.get_run(run["run_id"]).data.tags.get("eaq.layers.share_basis", "")
        basis = "device time" if share_basis == "time" else "energy"
        figures += [energy_by_type(tables["component_types.csv"], tables[OUTSIDE], label, slug, share_basis, out),
                    impact_by_type(tables["component_types.csv"], label, slug, out),
                    energy_vs_impact(tables["components.csv"], tables["correlation.csv"], label, slug, basis, out),
                    correlation_heatmap(tables["correlation.csv"], label, slug, basis, out)]
    return figures


def _layer_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """The layer-analysis runs of a known configuration, whatever their status (one killed before it logged its model
    belongs to none: "Runs that did not count" lists it)."""
    return frame[(frame["kind"] == "layers") & frame["model"].notna() & frame["precision"].notna()]


def _none_finished(frame: pd.DataFrame) -> str:
    """Why there is no layer figure or capture ratio: no layer-analysis run at all, or none finished (each failed, or
    is under way), which "no layer-analysis runs" had said of a sweep whose layer runs all failed."""
    every = frame[frame["kind"] == "layers"]
    if every.empty:
        return "no layer-analysis runs (eaq.kind=layers) in these runs"
    running = int(every["running"].sum())
    return (f"no finished layer-analysis run (eaq.kind=layers): {len(every) - running} failed, {running} under way "
            "(listed under Runs that did not count)")


def _meets(n: int, mean: float, ci_low: float, ci_high: float) -> str:
    """Whether a capture ratio meets TARGET: "yes" where its 95% interval lies inside it, "on the mean only" where the
    mean does and the interval crosses an end (two trials 0.989 and 0.999 read "yes" beside 0.994 ± 0.063), "yes (1
    trial)" for a single run (no interval), else "no"."""
    low, high = TARGET
    if not low <= mean <= high:
        return "no"
    if n < 2:
        return "yes (1 trial)"
    return "yes" if low <= ci_low and ci_high <= high else "on the mean only"


def capture_table(frame: pd.DataFrame) -> pd.DataFrame | str:
    """Per configuration of finished, valid layers runs and per method: the capture ratio of the components
    only and with the blocks' own ops, mean ± 95% CI half-width over trials, beside issue 11's bar.

    A string (the note the report prints instead) where there is no layers run. A configuration whose
    runs predate outside.csv (no with-blocks ratio of any method, even time, which every run profiles)
    says so rather than "not measured"."""
    every = _layer_runs(frame)
    if (every["status"] != "FINISHED").all():
        return f"{_none_finished(frame)}: no capture ratio."
    low, high = TARGET
    rows = []
    for key, runs in every.groupby(list(CONFIG_KEYS), sort=True, dropna=False):
        group = runs[runs["status"] == "FINISHED"]
        if group.empty:  # a configuration whose every run failed (or is under way) is a row saying so, as in the summary
            running = int(runs["running"].sum())
            word = uncounted(running, 0)
            counts = ", ".join(f"{n} {said}" for n, said in ((len(runs) - running, "failed"), (running, "running")) if n)
            rows.append({"configuration": config_label(dict(zip(CONFIG_KEYS, key))),
                         "trials (valid/finished)": f"0/0 ({counts})", "method": "",
                         "components only": word, "with blocks": word, f"target {low:g}-{high:g}": "not judged"})
            continue
        counted = group[group["valid"].fillna("") != "false"]  # flagged runs are counted in "trials", not averaged
        predates = not any(m in group and group[m].notna().any() for _, m in CAPTURE.values())
        for method, metrics in CAPTURE.items():
            row: dict[str, object] = {"configuration": config_label(dict(zip(CONFIG_KEYS, key))),
                                      "trials (valid/finished)": f"{len(counted)}/{len(group)}", "method": method}
            inside = []
            for scope, metric in zip(("components only", "with blocks"), metrics):
                n, mean, _, ci_low, ci_high = t_interval(counted[metric] if metric in counted else pd.Series(dtype=float))
                row[scope] = BEFORE_OUTSIDE if scope == "with blocks" and predates else format_ci(mean, ci_low, ci_high)
                if n:
                    inside.append(f"{scope}: {_meets(n, mean, ci_low, ci_high)}")
            row[f"target {low:g}-{high:g}"] = "; ".join(inside) or "not measured"
            rows.append(row)
    return pd.DataFrame(rows)
