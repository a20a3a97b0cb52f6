"""Integer quantization through torchao: weights really stored as int8, int8 kernels run.

Nothing is simulated: the ``Linear`` weights are replaced by torchao tensors holding int8
data and scales, and their matmuls dispatch to integer kernels (checked by ``proof``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


# int8 GEMM kernels need both matrix dimensions in multiples of 16; a layer that does
# not fit (a 2-way classifier head, a 50257-token LM head) stays in the base precision by
# this rule instead of crashing, and the proof's coverage count shows it.
ALIGNMENT = 16


def eligible(module: nn.Module, fqn: str) -> bool:
    return isinstance(module, nn.Linear) and module.in_features % ALIGNMENT == 0 and module.out_features % ALIGNMENT == 0


@dataclass
class Int8Dynamic:
    """int8 weights (per channel) and int8 activations quantized per token at run time."""

    name: str = "int8"
    matmul: str = "int8"

    def supports(self, device: torch.device) -> str | None:
        if device.type not in ("cpu", "cuda"):
            return f"int8 (torchao) runs on cpu and cuda, not {device.type}; use device=cpu or device=cuda."
        return None

    def apply(self, model: nn.Module, device: torch.device) -> nn.Module:
        from torchao import quantization  # imported here: only quantizing runs pay for it

        model = model.float().to(device)
        quantization.quantize_(model, quantization.Int8DynamicActivationInt8WeightConfig(), filter_fn=eligible)
        return model
