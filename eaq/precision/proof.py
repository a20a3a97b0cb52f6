"""Evidence that a precision really changed what is stored: bytes and dtypes, not labels."""

from __future__ import annotations

from collections import Counter

import torch
from torch import nn


def _leaf_tensors(tensor: torch.Tensor) -> list[torch.Tensor]:
    """Plain tensors behind a tensor subclass (torchao keeps int8 data and scales inside)."""
    flatten = getattr(type(tensor), "__tensor_flatten__", None)
    if flatten is None or type(tensor) in (torch.Tensor, nn.Parameter):
        return [tensor]
    names, _ = tensor.__tensor_flatten__()
    leaves: list[torch.Tensor] = []
    for name in names:
        leaves.extend(_leaf_tensors(getattr(tensor, name)))
    return leaves


def _stored(model: nn.Module) -> list[torch.Tensor]:
    tensors = [*model.parameters(), *model.buffers()]
    return [leaf for t in tensors for leaf in _leaf_tensors(t.data if isinstance(t, nn.Parameter) else t)]


def model_size_bytes(model: nn.Module) -> int:
    """Bytes of the storages behind parameters and buffers; tied weights count once."""
    seen: dict[tuple[str, int], int] = {}
    for leaf in _stored(model):
        storage = leaf.untyped_storage()
        seen[(str(leaf.device), storage.data_ptr())] = storage.nbytes()
    return sum(seen.values())


def weight_dtypes(model: nn.Module) -> dict[str, int]:
    """How many stored elements each dtype holds, e.g. {'torch.int8': 21M, 'torch.float32': 4M}."""
    counts: Counter[str] = Counter()
    for leaf in _stored(model):
        counts[str(leaf.dtype)] += leaf.numel()
    return dict(counts)


def linear_coverage(model: nn.Module) -> tuple[int, int]:
    """(Linear layers whose weight is a quantized tensor subclass, all Linear layers)."""
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    quantized = [m for m in linears if type(m.weight.data) not in (torch.Tensor, nn.Parameter)]
    return len(quantized), len(linears)


def proof(model: nn.Module) -> dict[str, float | str]:
    """What gets recorded with every run."""
    quantized, linears = linear_coverage(model)
    dtypes = weight_dtypes(model)
    total = sum(dtypes.values()) or 1
    return {
        "model_size_mb": model_size_bytes(model) / 1e6,
        "quantized_linear_layers": quantized,
        "linear_layers": linears,
        "stored_dtypes": ", ".join(f"{k.removeprefix('torch.')}={v / total:.1%}" for k, v in sorted(dtypes.items())),
    }
