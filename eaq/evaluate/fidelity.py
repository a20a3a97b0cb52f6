"""How far a precision's outputs drift from the fp32 model's on the same inputs.

Needs no labels, so it works on any text: the default quality figure.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from eaq.errors import DataError

# How the figures are computed, part of every cache key of quality figures (eaq.tasks.benchmark): figures
# computed in float32 before 2026-11-25 are not mixed with these.
ARITHMETIC = "float64"


def fidelity(head: str, outputs: torch.Tensor, reference: torch.Tensor) -> dict[str, float]:
    """Metrics named with what they compare; see docs/metrics.md.

    Computed in float64: the drifts compared here go down to 1e-6 (a KL) and 1e-7 (one minus a cosine), where
    float32's rounding of log-probabilities (~1e-7 each) is a sizeable part of the figure; on a tiny random
    model whose class logits differ by 0.05, int8's KL came out as -1.2e-9 in float32.
    """
    if head == "embedding":
        cosine = F.cosine_similarity(outputs.double(), reference.double(), dim=-1)
        return {"quality_cosine_to_fp32_mean": cosine.mean().item(), "quality_cosine_to_fp32_min": cosine.min().item()}
    if head == "sequence_classification":
        agree = (predictions(outputs) == reference.argmax(-1)).float().mean().item()
        # KL(fp32 || this precision) of the class distributions, averaged over inputs.
        kl = F.kl_div(F.log_softmax(outputs.double(), -1), F.log_softmax(reference.double(), -1), log_target=True,
                      reduction="batchmean")
        return {"quality_agreement_with_fp32": agree, "quality_kl_from_fp32": kl.item()}
    valid = reference >= 0
    agree = (outputs[valid] == reference[valid]).float().mean().item()
    return {"quality_top1_agreement_with_fp32": agree}


def check_labels(labels: torch.Tensor, classes: int) -> None:
    """Refuse labels outside the classifier's classes, before any pass scores them: GLUE's test splits carry -1
    for "no label", and every prediction would count as wrong."""
    if len(labels) and (labels.min() < 0 or labels.max() >= classes):
        raise DataError(
            f"the dataset's labels run from {labels.min().item()} to {labels.max().item()} and the classifier has {classes} classes "
            f"(0 to {classes - 1}); use a labelled split, or dataset.label_column=null to measure without accuracy."
        )


def accuracy(head: str, outputs: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Task accuracy against the dataset's labels (classifiers only)."""
    if head != "sequence_classification":
        return {}
    labels = labels[: outputs.shape[0]]
    check_labels(labels, outputs.shape[-1])
    return {"quality_accuracy": (predictions(outputs) == labels).float().mean().item()}


def predictions(logits: torch.Tensor) -> torch.Tensor:
    """Each row's class, -1 (no class, never right) where any of its logits is not finite: argmax takes a NaN for the
    largest, so an fp16 run whose logits overflowed to NaN predicted class 0 in every such row, and scored SST-2's
    share of label 0 (~0.5) as its accuracy, believable on the report's front."""
    return logits.argmax(-1).masked_fill(~torch.isfinite(logits).all(-1), -1)


def generation_agreement(tokens: torch.Tensor, reference: torch.Tensor) -> dict[str, float]:
    """Greedy tokens (rows x new tokens) against the fp32 model's for the same prompts.

    Once a sequence diverges it continues from a different token, so later positions
    compare different contexts: the match rate counts every position, and the first
    divergence (the number of new tokens before the first difference; all of them when
    none differs) says how long generation stayed on the reference's path.
    """
    same = tokens.to(reference.device) == reference
    new_tokens = same.shape[1]
    # The first False per row, or new_tokens where the row matches throughout.
    first = torch.where(same.all(1), new_tokens, (~same).int().argmax(1)).float()
    return {
        "quality_generated_match_rate": same.float().mean().item(),
        "quality_first_divergence_mean_tokens": first.mean().item(),
        "quality_first_divergence_min_tokens": first.min().item(),
    }
