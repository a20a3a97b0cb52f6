"""How far a precision's outputs drift from the fp32 model's on the same inputs.

Needs no labels, so it works on any text: the default quality figure.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def fidelity(head: str, outputs: torch.Tensor, reference: torch.Tensor) -> dict[str, float]:
    """Metrics named with what they compare; see docs/metrics.md."""
    if head == "embedding":
        cosine = F.cosine_similarity(outputs, reference, dim=-1)
        return {"quality_cosine_to_fp32_mean": cosine.mean().item(), "quality_cosine_to_fp32_min": cosine.min().item()}
    if head == "sequence_classification":
        agree = (outputs.argmax(-1) == reference.argmax(-1)).float().mean().item()
        return {"quality_agreement_with_fp32": agree}
    valid = reference >= 0
    agree = (outputs[valid] == reference[valid]).float().mean().item()
    return {"quality_top1_agreement_with_fp32": agree}
