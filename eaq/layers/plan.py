"""Choose a mixed-precision plan under a quality budget, verified on real data.

1. Estimate. What lowering a component to the target format saves is either assumed
   or measured (``layers.saving``). Assumed: a fraction of its cost, the same for every
   component, so the saving is proportional to the cost of the components lowered.
   Measured: its cost in the base minus its cost in the target, measured the same way
   on the eager components, or (``compiled``) its type's whole compiled pass in the base
   minus the same with the type lowered, split over the type's components
   (``split_type_savings``); a component the target makes no cheaper is never a candidate. On an H100, fp8
   lowered GPT-2-small's layers at no saving (docs/results/2026-11-25-h100-layers): the
   assumption does not hold for every format and shape. The cost is the component's
   energy per pass where it was measured, else its device time (``basis`` records
   which). Candidates are ranked by saving per unit of their measured sensitivity impact
   (cheap-to-lower, expensive-to-run first; an unknown impact or saving last), and the
   first guess takes them in rank order while their summed single-component quality
   losses fit the budget, skipping one that would not fit and trying the next.
2. Verify and back off. Impacts are not additive, so the guess is run for real (the plan
   applied through ``apply_plan``) and its quality measured on the data. While it is over
   budget, the lowest-ranked component is dropped and the plan measured again.
3. Fill. Each remaining candidate, in rank order, is tried on top of the verified plan
   and kept when the measured quality stays within budget.

The plan written is the last one measured within budget; its measured quality, the
budget and the basis go into its ``meta``. Where no component is cheaper in the target
(measured savings) or none fits the budget alone, the plan lowers nothing (the base
alone), and its ``meta`` says why: the analysis before it stands, and the plan is its
last step, so it never fails the run. A plan already measured is not measured again
(the fill step after a back-off would), and a one-component plan is the component's
sensitivity, measured already: a second measurement could only differ by noise, and
a re-roll of one known to be over budget could let it in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from eaq.errors import ConfigError
from eaq.layers.components import Component
from eaq.layers.impact import EvalData, Impact, Outputs, compare, linears, lowerable, lowered, run_outputs
from eaq.precision.mixed import Plan

# Budget kinds: what quality loss is bounded, in what unit.
BUDGETS = {
    "accuracy_points": "accuracy drop in percentage points (labelled classifiers)",
    "perplexity_pct": "perplexity increase in percent (causal LMs on raw text)",
    "impact": "impact score (KL divergence, or 1 - cosine for embedding models)",
}
# What the two task-quality budgets need: (the model's head, the dataset's kind), and in words.
REQUIRES = {"accuracy_points": ("sequence_classification", "labelled"), "perplexity_pct": ("causal_lm", "raw")}
NEEDS = {"accuracy_points": "a sequence classifier (model.head=sequence_classification) on labelled data, e.g. dataset=sst2",
         "perplexity_pct": "a causal LM (model.head=causal_lm) on raw text, e.g. dataset=wikitext2"}


@dataclass(frozen=True)
class Budget:
    kind: str
    limit: float

    def loss(self, impact: Impact) -> float:
        """The quality lost by a change, in the budget's unit (an improvement counts as 0; a figure that is not a
        number, from outputs gone NaN or infinite, as infinitely lost: NaN compares as within any limit). Outputs
        that broke (``impact`` infinite) are infinitely lost whatever the budget: an accuracy scored on NaN logits
        (argmax of a NaN row is class 0) came out finite, and a plan that broke the model passed a budget in points."""
        if not math.isfinite(impact.impact):
            return math.inf
        value = {
            "accuracy_points": None if impact.accuracy_delta_points is None else -impact.accuracy_delta_points,
            "perplexity_pct": impact.perplexity_delta_pct,
            "impact": impact.impact,
        }[self.kind]
        if value is None:
            raise ConfigError(
                f"a plan budget in {self.kind} needs that figure and this model/data has none "
                f"({NEEDS[self.kind]}); use layers.budget=impact, which every model and dataset has."
            )
        # Not max(value, 0.0): that keeps -0.0 (equal to 0.0, first), and the plan's trail read "loss -0".
        return (value if value > 0 else 0.0) if math.isfinite(value) else math.inf

    def describe(self) -> str:
        return f"{BUDGETS[self.kind]} at most {self.limit:g}"


def default_budget(head: str, labelled: bool, raw: bool) -> Budget:
    """0.5 accuracy points for classifiers on labelled data, 1% perplexity for causal LMs on raw text (``raw``), else
    0.01 impact: the budget in the figure the run can measure, as each budget REQUIRES (a causal LM on sentences or
    synthetic ids has no perplexity, and the default was refused as one the data cannot measure)."""
    if head == "sequence_classification" and labelled:
        return Budget("accuracy_points", 0.5)
    if head == "causal_lm" and raw:
        return Budget("perplexity_pct", 1.0)
    return Budget("impact", 0.01)


@dataclass
class Choice:
    """The verified plan and how it was reached."""

    plan: Plan
    components: list[str]
    measured: Impact  # the written plan against the unchanged model
    # Every plan measured: (components lowered, quality loss in the budget's unit, within budget).
    steps: list[tuple[tuple[str, ...], float, bool]] = field(default_factory=list)


def rank(candidates: list[str], saving: dict[str, float], impacts: dict[str, Impact]) -> list[str]:
    """Most saving per unit of impact first; zero-impact components first of all, by saving;
    a component whose impact or saving is not a number last (never taken as free)."""
    def key(name: str) -> tuple[float, float]:
        impact, save = impacts[name].impact, saving[name]
        if not (math.isfinite(impact) and math.isfinite(save)):
            return (math.inf, 0.0)
        return (-save / impact if impact > 0 else -math.inf, -save)
    return sorted(candidates, key=key)


def split_type_savings(members: dict[str, list[str]], saved: dict[str, float], cost: dict[str, float]) -> dict[str, float]:
    """Each component's part of its type's measured saving, in proportion to its own cost within the type.

    ``members``: per type, the components lowered together when that type was measured;
    ``saved``: per type, the whole pass's cost in the base minus with those components in the
    target (``layers.saving=compiled``: both compiled, so the casts around a lowered layer are
    fused as in deployment); ``cost``: each component's cost as the layers run measured it, in
    the run's precision (only its proportions within a type matter).
    """
    found: dict[str, float] = {}
    for kind, names in members.items():
        total = sum(cost[n] for n in names)
        for name in names:
            found[name] = saved[kind] * (cost[name] / total if total > 0 else 1 / len(names))
    return found


def _figure(value: float) -> float:
    """Six significant digits for the plan's meta: a KL-scale loss of 3e-10 must not read 0.0 (as six decimals did)."""
    return float(f"{value:.6g}") + 0.0  # + 0.0: a loss of -0.0 (an improvement rounded) reads 0.0


def choose_plan(
    model: nn.Module,
    components: list[Component],
    data: EvalData,
    device: torch.device,
    budget: Budget,
    impacts: dict[str, Impact],
    cost: dict[str, float],
    basis: str,
    target: str = "int8",
    base: str = "fp32",
    reference: Outputs | None = None,
    saving: dict[str, float] | None = None,
) -> Choice:
    """The plan saving the most by lowering to ``target`` whose measured quality loss fits ``budget``.

    ``impacts``: each component's sensitivity to ``target`` (eaq.layers.impact.sensitivity), measured
    against ``reference`` on ``data``, as the plans are; ``cost``: per component, in the unit ``basis``
    names (energy or time per pass: only its proportions rank); ``saving``: per component, its measured
    cost in the base minus in ``target`` (None: assumed proportional to ``cost``). With ``saving``, only
    components with a positive saving are candidates.
    """
    reference = reference or run_outputs(model, data)
    by_name = {c.name: c for c in components}
    steps: list[tuple[tuple[str, ...], float, bool]] = []

    def layers_of(chosen: list[str]) -> list[str]:
        return lowerable(model, [by_name[c] for c in chosen], target, device)

    # Only components with a layer the target can take: lowering any other changes nothing. (The layers
    # task's impacts leave those out already; the count below and direct callers need it.)
    able = [c for c in impacts if c in cost and c in by_name and layers_of([c])]
    if not able:
        raise ConfigError(
            f"no component has a Linear layer that {target} can take on {device.type} (shapes or device), so there "
            "is nothing to plan; choose another layers.target, or layers.plan=false."
        )
    saves = saving if saving is not None else cost
    candidates = rank(able if saving is None else [c for c in able if saving.get(c, 0.0) > 0], saves, impacts)
    unknown = sum(1 for c in able if saving is not None and math.isnan(saving.get(c, 0.0)))
    how = ("assumed proportional to cost" if saving is None else
           f"measured ({basis}): cost in {base} minus cost in {target}; {len(candidates)} of {len(able)} lowerable components cheaper in {target}"
           + (f" ({unknown} not told apart from the measurements' noise: not lowered)" if unknown else ""))

    # Plans measured, by their components (a set: the same components are the same plan); one-component plans
    # are the sensitivities already measured.
    known: dict[frozenset[str], tuple[Impact, float]] = {frozenset([c]): (impacts[c], budget.loss(impacts[c])) for c in able}

    def measure(chosen: list[str]) -> tuple[Impact, float]:
        key = frozenset(chosen)
        if key not in known:
            layers = layers_of(chosen)
            changed = lowered(model, layers, target, base, device)
            found = compare("plan", "sensitivity", reference, run_outputs(changed, data), data.head, tuple(layers))
            known[key] = found, budget.loss(found)
            steps.append((tuple(chosen), known[key][1], known[key][1] <= budget.limit))
        return known[key]

    # 1. The estimate: summed single-component losses within the budget.
    chosen, estimate = [], 0.0
    for name in candidates:
        if estimate + budget.loss(impacts[name]) <= budget.limit:
            chosen.append(name)
            estimate += budget.loss(impacts[name])
    # 2. Back off until the measured loss fits.
    measured, loss = measure(chosen) if chosen else (None, 0.0)
    while chosen and loss > budget.limit:
        chosen.pop()
        measured, loss = measure(chosen) if chosen else (None, 0.0)
    # 3. Fill with the rest, each kept only if the measured loss still fits.
    for name in candidates:
        if name not in chosen:
            trial, trial_loss = measure(chosen + [name])
            if trial_loss <= budget.limit:
                chosen, measured, loss = chosen + [name], trial, trial_loss
    # What the loss is measured against and on: the plan was chosen on these examples, so it fits the budget on them
    # by construction; on other data it can lose more (measure it: precision=mixed on another dataset).
    against = f"the {base} model (layers.base) on the {data.examples()} the plan was chosen on (in-sample)"
    if measured is None:  # nothing lowered: the base is the plan, and its meta says why
        if saving is not None and not candidates:
            why = f"{how}, so none is lowered"
        else:
            why = (f"{how}; none is lowered: each of the {len(candidates)} candidates alone measured over the budget "
                   "(raise layers.budget_limit or choose a gentler layers.target)")
        return Choice(Plan(base, {}, {"budget": budget.describe(), "saving": why, "saving_basis": basis, "measured_against": against,
                                      **({} if saving is None else {"saving_share_estimated": 0.0})}),
                      [], compare("plan", "sensitivity", reference, reference, data.head), steps)
    layers = list(measured.layers)
    total = sum(cost.values())
    plan = Plan(base, {layer: target for layer in layers}, {
        "budget": budget.describe(),
        "measured_against": against,
        "measured_loss": _figure(loss),
        "measured_impact": _figure(measured.impact),
        "components": chosen,
        "saving_basis": basis,
        "saving": how,
        "cost_share_lowered": _figure(sum(cost[c] for c in chosen) / total) if total else None,
        **({} if saving is None or not total else {"saving_share_estimated": _figure(sum(saving[c] for c in chosen) / total)}),
        "linear_layers_lowered": f"{len(layers)} of {len(linears(model, components))}",
        # The verification trail: each plan measured, in order.
        "measured_plans": [f"{len(c)} components: loss {loss_:.4g}, {'within' if ok else 'over'} budget" for c, loss_, ok in steps],
    })
    return Choice(plan, chosen, measured, steps)


__all__ = ["BUDGETS", "NEEDS", "REQUIRES", "Budget", "Choice", "choose_plan", "default_budget", "rank", "split_type_savings"]
