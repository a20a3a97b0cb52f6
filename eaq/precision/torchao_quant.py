"""Integer quantization through torchao: weights really stored as int8, int8 kernels run.

Nothing is simulated: the ``Linear`` weights are replaced by torchao tensors holding int8
data and scales, and their matmuls dispatch to integer kernels (checked by ``proof``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


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
        quantization.quantize_(model, quantization.Int8DynamicActivationInt8WeightConfig())
        return model
