"""Precisions torch runs natively: plain float formats, no quantization library."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Fp32:
    """IEEE float32 with TF32 tensor-core math switched off, so fp32 means fp32 on GPUs too."""

    name: str = "fp32"

    def supports(self, device: torch.device) -> str | None:
        return None

    def apply(self, model: nn.Module, device: torch.device) -> nn.Module:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        return model.float().to(device)
