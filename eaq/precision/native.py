"""Precisions torch runs natively: float formats by casting weights, no quantization library."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Cast:
    """Weights and math in one float dtype. fp32 switches TF32 off, so fp32 means fp32 on GPUs too."""

    name: str
    dtype: torch.dtype
    # CUDA compute capability the format needs to run natively (bf16: Ampere, sm_80).
    min_capability: tuple[int, int] = (0, 0)

    @property
    def matmul(self) -> str:
        """The matmul format a roofline calibration of this precision uses."""
        return str(self.dtype).removeprefix("torch.")

    def supports(self, device: torch.device) -> str | None:
        if device.type == "cuda" and torch.cuda.get_device_capability(device) < self.min_capability:
            major, minor = self.min_capability
            return (
                f"{self.name} needs a GPU of compute capability {major}.{minor} or newer, and "
                f"{torch.cuda.get_device_name(device)} is {'.'.join(map(str, torch.cuda.get_device_capability(device)))}; "
                f"use precision=fp16 or fp32."
            )
        return None

    def apply(self, model: nn.Module, device: torch.device) -> nn.Module:
        if self.dtype == torch.float32:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        return model.to(device=device, dtype=self.dtype)


def fp32() -> Cast:
    return Cast("fp32", torch.float32)


def fp16() -> Cast:
    return Cast("fp16", torch.float16)


def bf16() -> Cast:
    return Cast("bf16", torch.bfloat16, min_capability=(8, 0))
