"""Sliding-window perplexity: equal to a token-by-token computation, and exact at the boundaries."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModelForCausalLM

from eaq.errors import ConfigError
from eaq.evaluate.perplexity import perplexity, windows


@pytest.fixture(scope="module")
def tiny_gpt2():
    torch.manual_seed(0)
    config = AutoConfig.for_model("gpt2", vocab_size=500, n_embd=32, n_layer=2, n_head=2, n_positions=64)
    return AutoModelForCausalLM.from_config(config).eval()


def _token_by_token(model, ids: torch.Tensor, max_length: int, stride: int) -> float:
    """Independent: one forward per token, its context from the first window that covers it
    with at least one token before it (window k spans k*stride .. k*stride + max_length)."""
    nll, count = 0.0, 0
    for t in range(1, ids.numel()):
        k = max(0, math.ceil((t - max_length + 1) / stride))
        if k * stride >= t:
            continue  # t opens that window and no earlier window reaches it: not scored
        context = ids[k * stride : t]
        with torch.inference_mode():
            logits = model(input_ids=context[None]).logits[0, -1].float()
        nll -= F.log_softmax(logits, -1)[ids[t]].item()
        count += 1
    return math.exp(nll / count)


@pytest.mark.parametrize(("total", "max_length", "stride"), [(40, 64, 32), (40, 16, 16), (41, 16, 5), (37, 12, 1)])
def test_equals_token_by_token(tiny_gpt2, total: int, max_length: int, stride: int) -> None:
    ids = torch.randint(0, 500, (total,), generator=torch.Generator().manual_seed(total))
    ours = perplexity(tiny_gpt2, ids, max_length, stride)
    expected_tokens = total - 1 if stride < max_length or total <= max_length else total - math.ceil(total / stride)
    assert ours.tokens == expected_tokens
    assert ours.perplexity == pytest.approx(_token_by_token(tiny_gpt2, ids, max_length, stride), rel=1e-4)


@pytest.mark.parametrize(("total", "max_length", "stride"), [(10, 4, 2), (9, 4, 3), (3, 8, 4), (10, 4, 1), (2, 4, 2), (11, 4, 3)])
def test_overlapping_windows_score_every_token_once(total: int, max_length: int, stride: int) -> None:
    spans = windows(total, max_length, stride)
    scored = [t for begin, end, first in spans for t in range(first, end)]
    assert scored == list(range(1, total))  # each token after the first, once, in order
    assert all(end - begin <= max_length and begin <= first - 1 for begin, end, first in spans)
    assert spans[-1][1] == total


def test_window_boundaries() -> None:
    # Disjoint: each window's first token has no context in it and is not scored.
    assert windows(10, 4, 4) == [(0, 4, 1), (4, 8, 5), (8, 10, 9)]
    assert windows(10, 4, 2) == [(0, 4, 1), (2, 6, 4), (4, 8, 6), (6, 10, 8)]
    assert windows(4, 4, 2) == [(0, 4, 1)]  # one window covers it all: stop there
    assert windows(1, 4, 2) == []  # a single token has nothing to predict from


@pytest.mark.parametrize("stride", [0, 5])
def test_bad_stride_is_refused(stride: int) -> None:
    with pytest.raises(ConfigError, match="between 1 and max_length=4"):
        windows(10, 4, stride)
