"""Tokenize once: token tensors cached on disk (safetensors), keyed by everything they depend on.

The key hashes the tokenizer's identity and settings, the exact examples (content, not
file name), the length settings and eaq's own code (which tokenizes and lays out the
tensors); change any of them and the cache misses. Runs of a
sweep that share data and tokenizer read the tensors instead of tokenizing again; each
run logs whether it hit and how long preparing its data took.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file, save
from transformers import PreTrainedTokenizerBase

from eaq.files import cached, code_identity


# from_pretrained's options a tokenizer keeps among its settings, which say how it was read, not how it tokenizes
# (local_files_only is set where the hub does not answer; the *_file paths move with HF_HOME): with them, one
# tokenizer's key changed with the network, and its tokens and the fp32 reference were computed again.
LOAD_ONLY = frozenset({"local_files_only", "is_local", "name_or_path", "cache_dir", "_commit_hash", "token", "revision"})


def tokenizer_identity(tokenizer: PreTrainedTokenizerBase) -> dict[str, object]:
    """What a tokenizer's output depends on. Beyond its vocabulary: its text cleanup (lower-casing, accent
    stripping), pre-tokenizer and special-token rules (BOS/EOS added or not), all in a fast tokenizer's serialised
    pipeline and a slow one's settings; a tokenizer saved over another with the same vocabulary (``do_lower_case``
    flipped) read the other's cached tokens, and the fp32 reference keyed by them."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    pipeline = json.loads(backend.to_str()) if backend is not None else None
    if pipeline is not None:  # the truncation and padding a call last set: each call sets its own
        pipeline["truncation"] = pipeline["padding"] = None
    settings = {k: v for k, v in tokenizer.init_kwargs.items() if k not in LOAD_ONLY and not k.endswith("_file")}
    return {
        "class": type(tokenizer).__name__,
        "name_or_path": tokenizer.name_or_path,
        "size": len(tokenizer),
        "padding_side": tokenizer.padding_side,
        "truncation_side": tokenizer.truncation_side,
        "pad_token": str(tokenizer.pad_token),
        # The vocabulary itself, in case two tokenizers share a name.
        "vocab_sha256": _sha256(sorted(tokenizer.get_vocab().items())),
        "pipeline_sha256": _sha256(pipeline),
        "settings_sha256": _sha256([settings, tokenizer.special_tokens_map]),
    }


def _sha256(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


class TokenCache:
    def __init__(self, folder: str | Path, **settings: object) -> None:
        blob = json.dumps({**settings, "eaq_code": code_identity()}, sort_keys=True, default=str).encode()
        self.path = Path(folder) / f"tokens-{hashlib.sha256(blob).hexdigest()[:16]}.safetensors"
        self.hit: bool | None = None
        self.seconds = 0.0

    def get(self, compute: Callable[[], dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        start = time.perf_counter()
        tensors, self.hit = cached(self.path, load_file, lambda: {k: v.contiguous() for k, v in compute().items()},
                                   lambda value, tmp: tmp.write_bytes(save(value)))
        self.seconds = time.perf_counter() - start
        return tensors
