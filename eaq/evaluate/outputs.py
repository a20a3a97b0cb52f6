"""What each kind of model is judged on: the output a user of that model consumes."""

from __future__ import annotations

import torch
from torch import nn

from eaq.models.embedding_classifier import mean_pool


def model_outputs(model: nn.Module, head: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Embeddings (mean-pooled, unit length) or class logits in fp32, or next-token ids (int64), on the CPU."""
    out = model(**batch)
    if head == "embedding":
        return mean_pool(out.last_hidden_state.float(), batch["attention_mask"]).cpu()
    if head == "sequence_classification":
        return out.logits.float().cpu()
    # causal_lm: top-1 next-token id at each position; padding positions marked -1.
    predictions = out.logits.argmax(-1)
    return predictions.masked_fill(batch["attention_mask"] == 0, -1).cpu()


@torch.inference_mode()
def collect_outputs(model: nn.Module, head: str, batches: list[dict[str, torch.Tensor]]) -> torch.Tensor:
    return torch.cat([model_outputs(model, head, b) for b in batches])
