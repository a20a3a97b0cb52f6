"""A sentence-embedding model with a linear classifier on top: MiniLM + an SST-2 head.

The head reads the same mean-pooled, unit-length embedding the encoder is trained for,
so a 384 x 2 linear layer fitted on SST-2 train sentences is a real sentiment classifier
that works offline. Its weights ship with eaq (``eaq/models/heads``), fitted by
``python -m eaq.models.fit_head``.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import nn
from transformers import PreTrainedModel

from eaq.errors import ModelLoadError


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sentence-transformers pooling for all-MiniLM-L6-v2: masked mean, then L2 norm."""
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1)
    return F.normalize(pooled, dim=-1)


class EmbeddingClassifier(nn.Module):
    def __init__(self, encoder: PreTrainedModel, head: nn.Linear) -> None:
        super().__init__()
        self.encoder = encoder
        self.classifier = head
        self.config = encoder.config  # what the rest of eaq reads (vocab size, pad id)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> SimpleNamespace:
        """No mask means every token counts, as for a Hugging Face model: the layers task passes a batch without
        padding without its all-ones mask (eaq.layers.energy.without_full_mask)."""
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        embedding = mean_pool(hidden, attention_mask if attention_mask is not None else torch.ones_like(input_ids))
        return SimpleNamespace(logits=self.classifier(embedding.to(self.classifier.weight.dtype)))


def load_head(path: str, hidden_size: int) -> nn.Linear:
    """The linear classifier stored at ``path`` (safetensors: ``weight`` classes x hidden, ``bias``), checked against
    the encoder's ``hidden_size`` it reads embeddings of: a mismatch failed later, in the reference phase, as a shape
    error of a matmul."""
    try:
        tensors = load_file(path)
    except (SafetensorError, OSError) as error:  # a TSV or a .bin in its place: the library's error, in a traceback
        raise ModelLoadError(
            f"model.classifier_head={path} is not a safetensors file ({error}); pass the safetensors file of a head "
            "('weight' classes x hidden size, 'bias' classes), as eaq.models.fit_head writes."
        ) from None
    if missing := sorted({"weight", "bias"} - set(tensors)):
        raise ModelLoadError(
            f"model.classifier_head={path} has no tensor {', '.join(map(repr, missing))}; it holds {sorted(tensors)}: "
            "a head is a safetensors file with 'weight' (classes x hidden size) and 'bias' (classes)."
        )
    weight, bias = tensors["weight"], tensors["bias"]
    if weight.dim() != 2 or weight.shape[1] != hidden_size or bias.shape != weight.shape[:1]:
        raise ModelLoadError(
            f"model.classifier_head={path} holds weight {tuple(weight.shape)} and bias {tuple(bias.shape)}, and the encoder's "
            f"embeddings have {hidden_size} features: it needs weight (classes, {hidden_size}) and bias (classes,); use the "
            "head trained on this encoder."
        )
    head = nn.Linear(weight.shape[1], weight.shape[0])
    with torch.no_grad():
        head.weight.copy_(weight)
        head.bias.copy_(bias)
    return head
