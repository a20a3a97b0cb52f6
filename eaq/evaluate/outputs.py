"""What each kind of model is judged on: the output a user of that model consumes."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def model_outputs(model: nn.Module, head: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Embeddings (mean-pooled, unit length), class logits, or next-token predictions, in fp32 on the CPU."""
    out = model(**batch)
    if head == "embedding":
        # Sentence-transformers pooling for all-MiniLM-L6-v2: masked mean, then L2 norm.
        mask = batch["attention_mask"].unsqueeze(-1).to(out.last_hidden_state.dtype)
        pooled = (out.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1)
        return F.normalize(pooled.float(), dim=-1).cpu()
    if head == "sequence_classification":
        return out.logits.float().cpu()
    # causal_lm: top-1 next-token id at each position; padding positions marked -1.
    predictions = out.logits.argmax(-1)
    return predictions.masked_fill(batch["attention_mask"] == 0, -1).cpu()


@torch.inference_mode()
def collect_outputs(model: nn.Module, head: str, batches: list[dict[str, torch.Tensor]]) -> torch.Tensor:
    return torch.cat([model_outputs(model, head, b) for b in batches])
