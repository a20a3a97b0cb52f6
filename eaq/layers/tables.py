"""The layer analysis as tables: layers/components.csv, component_types.csv, outside.csv, correlation.csv.

The columns are the contract with the report (which reads MLflow only, never this code):
see README "Layer analysis". A figure not measured is an empty cell, never 0: no energy
sensor, a component with no ablation (a layer norm), impact not asked for.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from eaq.layers.components import TYPES, Component
from eaq.layers.correlation import Correlation
from eaq.layers.energy import OUTSIDE_BASIS, ComponentEnergy, OutsideWork, PassCost, milli
from eaq.layers.impact import Impact

COMPONENT_COLUMNS = (
    "component", "type", "block", "modules", "params", "flops_per_pass", "time_ms_per_pass",
    "energy_replay_mj_per_pass", "energy_attribution_mj_per_pass", "energy_share",
    "sensitivity_kl", "sensitivity_impact", "ablation_kl", "ablation_impact",
    # Beyond the contract: net of the idle baseline, and the replay's own time.
    "energy_replay_net_mj_per_pass", "energy_attribution_net_mj_per_pass", "time_ms_replay_alone",
)
# Each change's other figures (docs/impact.md), after the contract's columns: empty where the data has none
# (accuracy needs labels and a classifier, perplexity raw text and a causal LM).
CHANGE_FIGURES = ("agreement", "accuracy_delta_points", "perplexity_delta_pct")
IMPACT_DETAIL_COLUMNS = tuple(f"{method}_{figure}" for method in ("sensitivity", "ablation") for figure in CHANGE_FIGURES)
COMPONENT_COLUMNS += IMPACT_DETAIL_COLUMNS
# Per type: summed over its components, impacts measured on the whole type at once.
SUMMED = ("params", "flops_per_pass", "time_ms_per_pass", "energy_replay_mj_per_pass", "energy_attribution_mj_per_pass",
          "energy_share", "energy_replay_net_mj_per_pass", "energy_attribution_net_mj_per_pass", "time_ms_replay_alone")
TYPE_COLUMNS = ("type", "components", *SUMMED, "sensitivity_kl", "sensitivity_impact", "ablation_kl", "ablation_impact",
                *IMPACT_DETAIL_COLUMNS)
# Work outside every component (eaq.layers.energy.OutsideWork): one row per entry, its basis in words.
OUTSIDE_COLUMNS = ("entry", "basis", "time_ms_per_pass", "energy_replay_mj_per_pass", "energy_attribution_mj_per_pass",
                   "energy_replay_net_mj_per_pass", "energy_attribution_net_mj_per_pass")
CORRELATION_COLUMNS = ("scope", "impact", "method", "r", "p_value", "n", "reason")
# layers.saving=measured: each component's cost per pass in the plan's base and target, and the difference.
# ``target_layers``: the component's Linear layers the target takes; 0 where it leaves the component as it is, whose
# saving is then the two measurements' noise, the yardstick for the others'.
SAVING_COLUMNS = ("component", "type", "target_layers", "basis", "unit", "base_per_pass", "target_per_pass",
                  "saving_per_pass", "valid")
# layers.saving=compiled: the whole compiled pass in the base (measured first and last: the mean, and how far
# it moved), and with each type's lowerable layers in the target (layers: quantized Linear layers of that pass).
TYPE_SAVING_COLUMNS = ("type", "layers", "basis", "unit", "base_per_pass", "base_drift", "lowered_per_pass", "saving_per_pass",
                       "valid")

Row = dict[str, object]


@dataclass(frozen=True)
class Impacts:
    """Impact per group name (component or type) by method; absent = not measured."""

    sensitivity: dict[str, Impact]
    ablation: dict[str, Impact]

    def columns(self, name: str) -> Row:
        found: Row = {}
        for method, impacts in (("sensitivity", self.sensitivity), ("ablation", self.ablation)):
            impact = impacts.get(name)
            for figure in ("kl", "impact", *CHANGE_FIGURES):
                found[f"{method}_{figure}"] = getattr(impact, figure) if impact is not None else None
        return found


COST_BASES = ("replay", "attribution", "time")


def component_costs(components: list[Component], *measured: ComponentEnergy) -> tuple[list[dict[str, float]], str]:
    """Each measurement's cost per pass of every component, on the first basis all of them have: ``replay``
    energy (J) where every component was replayed with energy, else ``attribution`` energy (J), else in-situ
    ``time`` (s). ``([], "none")`` where no basis is complete and positive in every measurement."""
    names = [c.name for c in components if c.roots]  # one with no root is timed by nothing (component_rows)
    for basis in COST_BASES:
        found = []
        for energy in measured:
            figures = {"replay": energy.replay_j, "attribution": energy.attribution_j, "time": energy.times.components}[basis]
            values = [figures.get(n) for n in names]
            if any(v is None for v in values) or sum(values) <= 0:  # type: ignore[arg-type]
                break
            found.append(dict(zip(names, values)))
        else:
            return found, basis  # type: ignore[return-value]
    return [], "none"


def energy_shares(components: list[Component], energy: ComponentEnergy) -> tuple[dict[str, float], str]:
    """Each component's share of the components' summed cost, and its basis (``component_costs``):
    the share of energy where measured, else of in-situ time."""
    found, basis = component_costs(components, energy)
    if not found:
        return {c.name: math.nan for c in components}, basis
    total = sum(found[0].values())
    return {c.name: found[0][c.name] / total if c.name in found[0] else math.nan for c in components}, basis


def told_apart(layers: dict[str, int], saving: dict[str, float]) -> tuple[dict[str, float], float | None]:
    """Each component's measured saving where it can be told from noise, NaN (unknown) where not, and the noise.

    A component the target takes no Linear layer of (``layers`` 0: embeddings, a layer norm) runs alike in both
    measurements, so its "saving" is their noise; a lowerable component's saving no larger than the largest of those
    is not told apart from it (on a busy 2-core CPU a component 46 ms "cheaper" in int8 beside an unchanged one 98 ms
    "cheaper" was lowered). The noise is None where every component is lowerable: nothing to read it from."""
    unchanged = [abs(value) for name, value in saving.items() if not layers.get(name)]
    noise = max(unchanged) if unchanged else None
    return {name: value if noise is None or not layers.get(name) or abs(value) > noise else math.nan
            for name, value in saving.items()}, noise


def saving_rows(components: list[Component], layers: dict[str, int], base: dict[str, float], target: dict[str, float],
                basis: str, noise: float | None) -> list[Row]:
    """One row per component, in SAVING_COLUMNS: costs in mJ (energy bases) or ms (time) per pass; ``layers``: each
    component's Linear layers the target takes; ``valid``: whether a lowerable component's saving is larger than
    ``noise`` (``told_apart``)."""
    unit = "ms" if basis == "time" else "mJ"

    def valid(name: str, saving: float) -> str:
        if not layers[name]:
            return "unchanged by the target: its saving is the measurements' noise"
        if noise is None:
            return "not checked (no unchanged component to read the noise from)"
        return "true" if abs(saving) > noise else (
            f"false: within the unchanged components' noise ({noise * 1e3:.4g} {unit} per pass), not lowered")

    return [
        {"component": c.name, "type": c.type, "target_layers": layers[c.name], "basis": basis, "unit": unit,
         **({"base_per_pass": base[c.name] * 1e3, "target_per_pass": target[c.name] * 1e3,
             "saving_per_pass": (base[c.name] - target[c.name]) * 1e3,
             "valid": valid(c.name, base[c.name] - target[c.name])} if c.name in base else
            {"base_per_pass": None, "target_per_pass": None, "saving_per_pass": None, "valid": None})}  # no root: not measured
        for c in components
    ]


def type_saving_rows(
    layers: dict[str, int], base: tuple[PassCost, PassCost], lowered: dict[str, PassCost],
) -> tuple[list[Row], str, dict[str, float]]:
    """One row per lowered type in TYPE_SAVING_COLUMNS (costs in mJ where every window has energy, else ms), the
    basis, and each type's saving per pass (J or s): against the mean of the base's first and last windows, which
    bracket the lowered ones, so a device drifting through the sequence moves both sides alike.

    A saving no larger than the base's own change between its two windows is not told apart from that drift: its row
    is not valid, saying so (a loaded 2-core CPU moved the base 81-99.7% between them, and a plan was chosen on those
    savings with nothing flagged), and its saving is NaN, unknown: the plan lowers only types measured cheaper (it
    lowered every type whose noise came out positive, an estimated 160% of the whole pass saved)."""
    energy = all(c.joules is not None for c in (*base, *lowered.values()))
    cost = (lambda c: c.joules) if energy else (lambda c: c.seconds)
    first, last = cost(base[0]), cost(base[1])
    reference = (first + last) / 2
    saved = {kind: reference - cost(found) for kind, found in lowered.items()}
    base_reasons = [f"base: {r}" for c in base for r in c.reasons]
    unit = "mJ" if energy else "ms"

    def valid(kind: str, found: PassCost) -> str:
        reasons = base_reasons + list(found.reasons)
        if abs(saved[kind]) <= abs(last - first):
            reasons.append(f"its saving ({saved[kind] * 1e3:.4g} {unit} per pass) is within the base's drift between its "
                           f"first and last windows ({(last - first) * 1e3:+.4g} {unit})")
        return "; ".join(reasons) if reasons else "true" if energy else "not checked (no energy)"

    rows = [
        {"type": kind, "layers": layers[kind], "basis": "energy" if energy else "time", "unit": unit,
         "base_per_pass": reference * 1e3, "base_drift": (last - first) * 1e3,
         "lowered_per_pass": cost(found) * 1e3, "saving_per_pass": saved[kind] * 1e3, "valid": valid(kind, found)}
        for kind, found in lowered.items()
    ]
    told_apart = {kind: saving if abs(saving) > abs(last - first) else math.nan for kind, saving in saved.items()}
    return rows, "compiled_energy" if energy else "compiled_time", told_apart


def component_rows(
    components: list[Component], params: dict[str, int], flops: dict[str, int], energy: ComponentEnergy,
    shares: dict[str, float], impacts: Impacts,
) -> list[Row]:
    """One row per component, in COMPONENT_COLUMNS. A component with no root (its parameters used by a module that
    also holds another component's: XLNet's ``rel_attn`` around its ``layer_norm``) is hooked, timed and replayed by
    nothing: its FLOPs, time and energy cells are empty, not 0 (its work counts in its block's own ops)."""
    return [
        {
            "component": c.name,
            "type": c.type,
            "block": c.block,
            "modules": ";".join(c.modules),
            "params": params[c.name],
            **{column: figure if c.roots else None for column, figure in {
                "flops_per_pass": flops[c.name],
                "time_ms_per_pass": energy.times.components[c.name] * 1e3,
                "energy_replay_mj_per_pass": milli(energy.replay_j.get(c.name)),
                "energy_attribution_mj_per_pass": milli(energy.attribution_j.get(c.name)),
            }.items()},
            "energy_share": shares[c.name],
            **impacts.columns(c.name),
            **{column: figure if c.roots else None for column, figure in {
                "energy_replay_net_mj_per_pass": milli(energy.replay_net_j.get(c.name)),
                "energy_attribution_net_mj_per_pass": milli(energy.attribution_net_j.get(c.name)),
                "time_ms_replay_alone": energy.replay_alone_s[c.name] * 1e3 if c.name in energy.replay_alone_s else None,
            }.items()},
        }
        for c in components
    ]


def type_rows(rows: list[Row], impacts: Impacts) -> list[Row]:
    """One row per type present: sums of the components' figures (empty if any is empty)."""
    found = []
    for kind in TYPES:
        members = [r for r in rows if r["type"] == kind]
        if not members:
            continue
        row: Row = {"type": kind, "components": len(members)}
        for column in SUMMED:
            values = [r[column] for r in members]
            row[column] = None if any(v is None for v in values) else sum(values)  # type: ignore[misc]
        found.append(row | impacts.columns(kind))
    return found


def type_metrics(types: list[Row]) -> dict[str, float]:
    """Per type, the MLflow metrics: its energy share and the impact of changing the whole type at once
    (``energy_share_<type>``, ``sensitivity_impact_<type>``, ``ablation_impact_<type>``); a figure not measured is
    no metric, never 0."""
    return {f"{column}_{row['type']}": float(row[column])  # type: ignore[arg-type]
            for row in types for column in ("energy_share", "sensitivity_impact", "ablation_impact")
            if row.get(column) is not None and not (isinstance(row[column], float) and math.isnan(row[column]))}


def outside_rows(outside: OutsideWork) -> list[Row]:
    """One row per entry of the work outside components, in OUTSIDE_COLUMNS."""
    return [
        {
            "entry": entry,
            "basis": basis,
            "time_ms_per_pass": milli(outside.time_s[entry]),
            "energy_replay_mj_per_pass": milli(outside.replay_j[entry]),
            "energy_attribution_mj_per_pass": milli(outside.attribution_j[entry]),
            "energy_replay_net_mj_per_pass": milli(outside.replay_net_j[entry]),
            "energy_attribution_net_mj_per_pass": milli(outside.attribution_net_j[entry]),
        }
        for entry, basis in OUTSIDE_BASIS.items()
    ]


def correlation_rows(correlations: Iterable[Correlation]) -> list[Row]:
    return [{k: getattr(c, k) for k in CORRELATION_COLUMNS} for c in correlations]


def write_csv(path: Path, columns: tuple[str, ...], rows: list[Row]) -> Path:
    """Empty cells for None and NaN: not measured, never 0."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None or (isinstance(v, float) and math.isnan(v)) else v for k, v in row.items()})
    return path


__all__ = [
    "COMPONENT_COLUMNS", "CORRELATION_COLUMNS", "COST_BASES", "OUTSIDE_COLUMNS", "SAVING_COLUMNS", "TYPE_COLUMNS",
    "TYPE_SAVING_COLUMNS", "Impacts", "component_costs", "component_rows", "correlation_rows", "energy_shares", "outside_rows",
    "saving_rows", "type_metrics", "type_rows", "type_saving_rows", "write_csv",
]
