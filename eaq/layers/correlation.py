"""Does a component's energy share predict its impact? Pearson and Spearman, with p-values.

Computed across components, once over all of them (``scope="all"``) and once per
component type, for each impact (sensitivity, ablation). A scope with fewer than three
components that have both figures, or where either figure is constant, has no defined
correlation: r and p are NaN and ``reason`` says why, instead of failing the run. A figure
that is not finite (an infinite KL divergence: the changed model gave an outcome the
unchanged one predicts zero probability, or its outputs went NaN; an impact given as NaN) is no
point of a linear fit: its component is left out, and ``reason`` says how many were. Only a
figure not measured is left out unsaid: an impact absent (a layer norm has no ablation), or an
energy share of NaN (``eaq.layers.tables.energy_shares``: no basis to share by).

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
    reason: str = ""  # why r is NaN, and how many components were left out; empty when r is defined on all of them


def correlate(share: list[float], impact: list[float], scope: str, impact_name: str) -> list[Correlation]:
    """One row per method for paired (energy share, impact) values of one scope. Pairs with a figure that is not
    finite are left out (scipy gives Pearson's r = NaN and p = 0 for them), and every row's reason says how many;
    an r that still comes out not finite is NaN with its p, and the reason says so."""
    pairs = [(s, i) for s, i in zip(share, impact) if math.isfinite(s) and math.isfinite(i)]
    n = len(pairs)
    notes = [f"{len(share) - n} component(s) left out: energy share or {impact_name} impact not finite"] if n < len(share) else []
    xs, ys = [s for s, _ in pairs], [i for _, i in pairs]
    undefined = ""
    if n < MIN_POINTS:
        undefined = f"{n} component(s) with both energy share and {impact_name} impact; a correlation needs at least {MIN_POINTS}"
    elif len(set(xs)) == 1 or len(set(ys)) == 1:
        undefined = f"{'energy share' if len(set(xs)) == 1 else impact_name + ' impact'} is the same for all {n} components"
    rows = []
    for method, test in METHODS.items():
        r, p, why = math.nan, math.nan, undefined
        if not undefined:
            result = test(xs, ys)
            r = float(result.statistic)
            if math.isfinite(r):
                p = _p_value(method, xs, ys, result)
            else:
                r, why = math.nan, f"{method}'s r came out {r}: float arithmetic on these figures overflows or cancels"
        rows.append(Correlation(scope, impact_name, method, r, p, n, "; ".join([*notes, *([why] if why else [])])))
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
    {"sensitivity": {component: score}, "ablation": {...}}. Components with either figure not
    measured (no energy share, not ablatable) are left out of that pair's scope; an impact
    that is there but not finite, NaN included, is counted in its scope's reason."""
    rows = []
    for impact_name, scores in impacts.items():
        names = [c for c in types if c in scores and c in share and not math.isnan(share[c])]
        scopes = {"all": names} | {t: [c for c in names if types[c] == t] for t in dict.fromkeys(types[c] for c in names)}
        for scope, members in scopes.items():
            rows.extend(correlate([share[c] for c in members], [scores[c] for c in members], scope, impact_name))
    return rows


__all__ = ["EXACT_MAX", "METHODS", "MIN_POINTS", "Correlation", "correlate", "correlations"]
