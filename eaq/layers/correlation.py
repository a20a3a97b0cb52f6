"""Does a component's energy share predict its impact? Pearson and Spearman, with p-values.

Computed across components, once over all of them (``scope="all"``) and once per
component type, for each impact (sensitivity, ablation). A scope with fewer than three
components that have both figures, or where either figure is constant, has no defined
correlation: r and p are NaN and ``reason`` says why, instead of failing the run.

p-values: scipy's large-sample ones (t distribution, Spearman's too) are far too small for
the few components of a per-type scope (a perfect rank order of 3 gives p = 0, where 1 in 3
of the 3! orders are as extreme: p = 1/3). Up to ``EXACT_MAX`` points the p-value is the
exact permutation test's, every pairing enumerated (scipy.stats.permutation_test).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

METHODS: dict[str, Callable[..., object]] = {"pearson": stats.pearsonr, "spearman": stats.spearmanr}
# Fewer points than this leave r undefined (two points always lie on a line).
MIN_POINTS = 3
# Up to this many points the p-value enumerates all n! pairings (40320 at 8).
EXACT_MAX = 8


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
            rows.append(Correlation(scope, impact_name, method, float(result.statistic), _p_value(method, share, impact, result), n))
    return rows


def _p_value(method: str, x: list[float], y: list[float], result: object) -> float:
    """Two-sided p of the method's statistic: exact by permutation for few points, else scipy's own."""
    if len(x) > EXACT_MAX:
        return float(result.pvalue)  # type: ignore[attr-defined]
    a, b = (stats.rankdata(x), stats.rankdata(y)) if method == "spearman" else (np.asarray(x, float), np.asarray(y, float))
    b = b - b.mean()

    def pearson(sample: np.ndarray, axis: int = -1) -> np.ndarray:  # Spearman's r is Pearson's on the ranks
        centred = sample - sample.mean(axis=axis, keepdims=True)
        return (centred @ b) / (np.linalg.norm(centred, axis=axis) * np.linalg.norm(b))

    # One sample permuted against the other: its n! orders, each pairing once (n_resamples=inf: all of them).
    exact = stats.permutation_test(
        (a,), pearson, permutation_type="pairings", vectorized=True, n_resamples=math.inf, alternative="two-sided"
    )
    return float(exact.pvalue)


def correlations(
    types: dict[str, str], share: dict[str, float], impacts: dict[str, dict[str, float]]
) -> list[Correlation]:
    """Every scope and impact: ``types`` and ``share`` per component name, ``impacts`` as
    {"sensitivity": {component: score}, "ablation": {...}}. Components missing either
    figure (no energy, not ablatable) are left out of that pair's scope."""
    rows = []
    for impact_name, scores in impacts.items():
        names = [c for c in types if c in scores and c in share and not math.isnan(share[c]) and not math.isnan(scores[c])]
        scopes = {"all": names} | {t: [c for c in names if types[c] == t] for t in dict.fromkeys(types[c] for c in names)}
        for scope, members in scopes.items():
            rows.extend(correlate([share[c] for c in members], [scores[c] for c in members], scope, impact_name))
    return rows


__all__ = ["EXACT_MAX", "METHODS", "MIN_POINTS", "Correlation", "correlate", "correlations"]
