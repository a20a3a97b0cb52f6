"""Figures of the layer analysis (``eaq.kind=layers`` runs), from their CSV artifacts only.

The report does not import the layer-analysis code: it reads what such a run leaves in
MLflow (``layers/components.csv``, ``layers/component_types.csv``, ``layers/correlation.csv``,
the contract between issues 11 and 12). Empty cells mean "not measured" and stay out of
the figures; with no layers run in the store the figures are left out with a note.
"""

from __future__ import annotations

from pathlib import Path
import tempfile

import matplotlib.pyplot as plt
from mlflow.tracking import MlflowClient
import numpy as np
import pandas as pd

from eaq.report.figures import Figure, save

ARTIFACTS = ("components.csv", "component_types.csv", "correlation.csv")
IMPACTS = ("sensitivity_impact", "ablation_impact")


def read_artifacts(client: MlflowClient, run_id: str) -> dict[str, pd.DataFrame]:
    """The run's three layer tables, by file name."""
    with tempfile.TemporaryDirectory() as tmp:
        return {name: pd.read_csv(client.download_artifacts(run_id, f"layers/{name}", tmp)) for name in ARTIFACTS}


def _label(run: pd.Series) -> str:
    """The run's configuration in a title: a store may hold layer runs of several models and precisions."""
    return f"{run['model']} {run['precision']} b{run['batch_size']:.0f}"


def energy_by_type(types: pd.DataFrame, label: str, slug: str, basis: str, out: Path) -> Figure:
    """Where a forward pass spends its energy (or device time, where no sensor measured energy), per type."""
    title = f"{label}: {basis} share by component type"
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(types["type"], types["energy_share"] * 100)
    ax.set_xlabel("component type")
    ax.set_ylabel(f"share of components' {basis} (%)")
    ax.set_title(title)
    return save(fig, out, f"layers_energy_{slug}", title)


def impact_by_type(types: pd.DataFrame, label: str, slug: str, out: Path) -> Figure:
    """What lowering (sensitivity) or removing (ablation) all components of a type costs in quality."""
    title = f"{label}: impact by component type"
    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.arange(len(types))
    for i, impact in enumerate(IMPACTS):
        ax.bar(x + (i - 0.5) * 0.4, types[impact], 0.4, label=impact.replace("_", " "), color=f"C{i}")
        for position in x[types[impact].isna().to_numpy()]:  # an empty cell is "not computed", never a bar of 0
            ax.text(position + (i - 0.5) * 0.4, 0, "not\ncomputed", ha="center", va="bottom", fontsize=7, color="0.4")
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
    for ax, impact in zip(axes, IMPACTS):
        kind = impact.split("_")[0]
        for type_, sub in components.groupby("type"):
            ax.scatter(sub["energy_share"] * 100, sub[impact], label=type_, s=18)
        stats = correlation[(correlation["scope"] == "all") & (correlation["impact"] == kind)]
        ax.set_title(", ".join(f"{r.method} r={r.r:.2f} (p={r.p_value:.2g}, n={r.n:.0f})" for r in stats.itertuples())
                     or f"{kind}: no correlation computed", fontsize=9)
        ax.set_xlabel(f"{basis} share of the component (%)")
        ax.set_ylabel(impact.replace("_", " "))
        ax.legend(fontsize=7)
    fig.suptitle(title)
    return save(fig, out, f"layers_scatter_{slug}", title)


def correlation_heatmap(correlation: pd.DataFrame, label: str, slug: str, basis: str, out: Path) -> Figure:
    """Every correlation of the run at a glance: scope by impact measure and method, r in each cell."""
    title = f"{label}: correlation of {basis} share with impact"
    grid = correlation.pivot_table(index="scope", columns=["impact", "method"], values="r")
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
    """The four layer figures for each finished layers run, or one note when there is none."""
    runs = frame[(frame["kind"] == "layers") & (frame["status"] == "FINISHED")]
    if runs.empty:
        return [Figure("layer analysis", note="no layer-analysis runs (eaq.kind=layers) in these runs: "
                                              "`python -m eaq.run task=layers ...` adds energy and impact by component type.")]
    figures = []
    for _, run in runs.iterrows():
        label, slug = _label(run), run["run_id"][:8]
        try:
            tables = read_artifacts(client, run["run_id"])
        except Exception as error:  # a run without its CSVs (failed upload, moved store): say which, keep the rest
            figures.append(Figure(f"{label}: layer analysis", note=f"run {run['run_name']}: layers CSVs unreadable ({error})."))
            continue
        basis = "device time" if client.get_run(run["run_id"]).data.tags.get("eaq.layers.share_basis") == "time" else "energy"
        figures += [energy_by_type(tables["component_types.csv"], label, slug, basis, out),
                    impact_by_type(tables["component_types.csv"], label, slug, out),
                    energy_vs_impact(tables["components.csv"], tables["correlation.csv"], label, slug, basis, out),
                    correlation_heatmap(tables["correlation.csv"], label, slug, basis, out)]
    return figures
