"""Tokenize once to fixed shapes and stage the batches on the device.

Padding every text to ``seq_len`` keeps every batch the same shape, so the timed loop
measures steady-state kernels rather than shape changes, and nothing inside the
measurement window does I/O or host-to-device copies.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizerBase

from eaq.data.token_cache import TokenCache


@dataclass
class Batches:
    """Tokenized batches already on the device; the last one may be partial."""

    batches: list[dict[str, torch.Tensor]]
    # Number of real texts (before cycling to fill the first batch): the rows of ``distinct()``.
    num_texts: int
    # Class labels aligned with the rows of ``batches`` (on the CPU), or None.
    labels: torch.Tensor | None = None
    # Texts longer than seq_len tokens, cut to it (quality scores the cut text), and the longest text's tokens.
    truncated: int = 0
    longest: int = 0

    def distinct(self, max_batches: int | None = None) -> list[dict[str, torch.Tensor]]:
        """The first ``max_batches`` batches without the rows cycled to fill the first batch: quality counts each
        text once (three texts at batch 8 counted their first two three times each, and accuracy 3/8 read 0.375 for
        1/3). ``labels[:rows]`` stay aligned with them."""
        kept, left = [], self.num_texts
        for batch in self.batches[:max_batches]:
            if left <= 0:
                break
            rows = batch["input_ids"].shape[0]
            kept.append(batch if rows <= left else {k: v[:left] for k, v in batch.items()})
            left -= rows
        return kept

    def distinct_labels(self, max_batches: int | None = None) -> torch.Tensor | None:
        """The labels of ``distinct(max_batches)``'s rows: those quality scores."""
        rows = sum(b["input_ids"].shape[0] for b in self.distinct(max_batches))
        return self.labels[:rows] if self.labels is not None else None

    def full(self) -> list[dict[str, torch.Tensor]]:
        """Batches of exactly ``batch_size`` rows, the ones the timed loop cycles through."""
        size = self.batches[0]["input_ids"].shape[0]
        return [b for b in self.batches if b["input_ids"].shape[0] == size]


def _encode(texts: list[str], tokenizer: PreTrainedTokenizerBase, seq_len: int) -> dict[str, torch.Tensor]:
    """The padded, cut token ids and masks, and each text's whole length in tokens (how many ``seq_len`` cut)."""
    encoded = tokenizer(texts, padding="max_length", truncation=True, max_length=seq_len, return_tensors="pt")
    whole = tokenizer(texts, verbose=False)["input_ids"]  # the special tokens counted as in the cut ids
    return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"],
            "lengths": torch.tensor([len(ids) for ids in whole])}


def make_batches(
    texts: list[str],
    tokenizer: PreTrainedTokenizerBase,
    batch_size: int,
    seq_len: int,
    device: torch.device,
    labels: list[int] | None = None,
    cache: TokenCache | None = None,
) -> Batches:
    """Fewer texts than one batch are cycled so that at least one full batch exists."""
    encode = lambda: _encode(texts, tokenizer, seq_len)  # noqa: E731
    encoded = cache.get(encode) if cache else encode()
    num_texts = len(texts)
    rows = torch.arange(max(num_texts, batch_size)) % num_texts  # cycle short data
    label_tensor = torch.tensor(labels)[rows] if labels else None
    batches = [
        {k: encoded[k][rows[start : start + batch_size]].to(device) for k in ("input_ids", "attention_mask")}
        for start in range(0, len(rows), batch_size)
    ]
    lengths = encoded["lengths"]
    return Batches(batches=batches, num_texts=num_texts, labels=label_tensor, truncated=int((lengths > seq_len).sum()),
                   longest=int(lengths.max()))


def make_synthetic(
    vocab_size: int, rows: int, batch_size: int, seq_len: int, device: torch.device, seed: int
) -> Batches:
    """Random token ids (no padding) for speed and energy work; seeded by the trial."""
    generator = torch.Generator().manual_seed(seed)
    rows = max(rows, batch_size)
    ids = torch.randint(0, vocab_size, (rows, seq_len), generator=generator)
    mask = torch.ones_like(ids)
    batches = [
        {"input_ids": ids[s : s + batch_size].to(device), "attention_mask": mask[s : s + batch_size].to(device)}
        for s in range(0, rows, batch_size)
    ]
    return Batches(batches=batches, num_texts=rows)


def make_stream(
    text: str,
    tokenizer: PreTrainedTokenizerBase,
    batch_size: int,
    seq_len: int,
    device: torch.device,
    max_rows: int | None,
    cache: TokenCache | None = None,
) -> tuple[Batches, torch.Tensor]:
    """One long text as consecutive rows of ``seq_len`` tokens, and the token stream perplexity scores: the whole
    text's without ``max_rows`` (its last part row short, left out of the rows, is scored too), else the rows'."""
    encode = lambda: {"ids": tokenizer(text, return_tensors="pt", add_special_tokens=False, verbose=False)["input_ids"][0]}  # noqa: E731
    ids = (cache.get(encode) if cache else encode())["ids"]
    rows = ids.numel() // seq_len
    if max_rows:
        rows = min(rows, max_rows)
    rows = max(rows, 1)
    cut = ids[: rows * seq_len]
    stream = cut if max_rows else ids
    matrix = cut.reshape(rows, seq_len) if cut.numel() >= seq_len else cut[None]
    if matrix.shape[0] < batch_size:
        matrix = matrix.repeat((batch_size + matrix.shape[0] - 1) // matrix.shape[0], 1)[:batch_size]
    batches = [
        {"input_ids": chunk.to(device), "attention_mask": torch.ones_like(chunk).to(device)}
        for chunk in matrix.split(batch_size)
    ]
    return Batches(batches=batches, num_texts=rows), stream.to(device)
