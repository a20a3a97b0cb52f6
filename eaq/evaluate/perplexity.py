"""Perplexity of a causal LM over one long text, with the standard sliding window.

Windows of ``max_length`` tokens start every ``stride`` tokens; each window scores only
the tokens the previous window did not, with up to ``max_length - stride`` tokens of
extra context (the method of the Hugging Face perplexity guide). A token needs at least
one token of context inside its window, so with ``stride < max_length`` every token after
the first is scored exactly once; with disjoint windows (``stride == max_length``) the
first token of each window is not scored, as in that guide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from eaq.errors import ConfigError, DataError


@dataclass(frozen=True)
class Perplexity:
    perplexity: float
    nll_sum: float
    tokens: int


def windows(total: int, max_length: int, stride: int) -> list[tuple[int, int, int]]:
    """(begin, end, first scored token) of each window over ``total`` tokens."""
    if not 1 <= stride <= max_length:
        raise ConfigError(f"perplexity stride={stride} must be between 1 and max_length={max_length}.")
    spans, scored_to = [], 0
    for begin in range(0, total, stride):
        end = min(begin + max_length, total)
        first = max(scored_to, begin + 1)  # a token is predicted from at least one before it
        if end > first:
            spans.append((begin, end, first))
        scored_to = end
        if end == total:
            break
    return spans


@torch.inference_mode()
def perplexity(model: nn.Module, ids: torch.Tensor, max_length: int, stride: int) -> Perplexity:
    """``ids``: one 1-D tensor of token ids, already on the model's device."""
    if ids.numel() < 2:
        raise DataError(f"perplexity needs a text of at least two tokens and this one has {ids.numel()}; use a longer text.")
    nll_sum, count = 0.0, 0
    for begin, end, first in windows(ids.numel(), max_length, stride):
        window = ids[begin:end]
        logits = model(input_ids=window[None]).logits[0, :-1].float()
        nll = -F.log_softmax(logits, -1).gather(-1, window[1:, None])[:, 0]  # nll[j] scores token begin+1+j
        scored = nll[first - begin - 1 :]
        nll_sum += scored.sum().item()
        count += scored.numel()
    return Perplexity(math.exp(nll_sum / count), nll_sum, count)
