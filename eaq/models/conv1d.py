"""GPT-2's ``Conv1D`` layers as the ``nn.Linear`` they are.

transformers' GPT-2 family stores its projections as ``Conv1D`` (a Linear with the
weight transposed). Quantizers, torchao's ``quantize_`` and ``TorchAoConfig`` among them,
only look for ``nn.Linear`` and silently skip these, leaving every block in float. Converted
once at load, for every precision, the math is identical and every projection is covered.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.pytorch_utils import Conv1D


def _as_linear(conv: Conv1D) -> nn.Linear:
    in_features, out_features = conv.weight.shape
    linear = nn.Linear(in_features, out_features, bias=conv.bias is not None, device=conv.weight.device, dtype=conv.weight.dtype)
    with torch.no_grad():
        linear.weight.copy_(conv.weight.t())
        if conv.bias is not None:
            linear.bias.copy_(conv.bias)
    return linear


def convert_conv1d(model: nn.Module) -> int:
    """Replace every Conv1D in place; returns how many were replaced."""
    targets = [(name, module) for name, module in model.named_modules() if isinstance(module, Conv1D)]
    for name, conv in targets:
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, child, _as_linear(conv))
    return len(targets)
