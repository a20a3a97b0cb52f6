"""Does a component's energy share predict its impact? Pearson and Spearman, with p-values.

Computed across components, once over all of them (``scope="all"``) and once per
component type, for each impact (sensitivity, ablation). A scope with fewer than three
components that have both figures, or where either figure is constant, has no defined
correlation: r and p are NaN and ``reason`` says why, instead of failing the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats

METHODS = {"pearson": stats.pearsonr, "spearman": stats.spearmanr}
# Fewer points than this leave r undefined (two points always lie on a line).
MIN_POINTS = 3


@dataclass(frozen=True)
class Correlation:
    """One row of layers/correlation.csv."""

    scope: str  # "all" or a component type
    impact: str  # "sensitivity" or "ablation"
    method: str  # "pearson" or "spearman"
    r: float
    p_value: float
    n: int
    reason: str = ""  # why r is NaN, empty when it is defined


def correlate(share: list[float], impact: list[float], scope: str, impact_name: str) -> list[Correlation]:
    """One row per method for paired (energy share, impact) values of one scope."""
    n = len(share)
    reason = ""
    if n < MIN_POINTS:
        reason = f"{n} component(s) with both energy share and {impact_name} impact; a correlation needs at least {MIN_POINTS}"
    elif len(set(share)) == 1 or len(set(impact)) == 1:
        reason = f"{'energy share' if len(set(share)) == 1 else impact_name + ' impact'} is the same for all {n} components"
    rows = []
    for method, test in METHODS.items():
        if reason:
            rows.append(Correlation(scope, impact_name, method, math.nan, math.nan, n, reason))
        else:
            result = test(share, impact)
            rows.append(Correlation(scope, impact_name, method, float(result.statistic), float(result.pvalue), n))
    return rows


def correlations(
    types: dict[str, str], share: dict[str, float], impacts: dict[str, dict[str, float]]
) -> list[Correlation]:
    """Every scope and impact: ``types`` and ``share`` per component name, ``impacts`` as
    {"sensitivity": {component: score}, "ablation": {...}}. Components missing either
    figure (no energy, not ablatable) are left out of that pair's scope."""
    rows = []
    for impact_name, scores in impacts.items():
        names = [c for c in types if c in scores and c in share and not math.isnan(share[c])]
        scopes = {"all": names} | {t: [c for c in names if types[c] == t] for t in dict.fromkeys(types[c] for c in names)}
        for scope, members in scopes.items():
            rows.extend(correlate([share[c] for c in members], [scores[c] for c in members], scope, impact_name))
    return rows


__all__ = ["METHODS", "MIN_POINTS", "Correlation", "correlate", "correlations"]
