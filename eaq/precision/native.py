"""Precisions torch runs natively: float formats by casting weights, TF32, and autocast."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from eaq.precision.base import cast, dtype_name, set_tf32
from eaq.precision.requirements import AMPERE, Requirements


@dataclass
class Cast:
    """Weights and math in one float dtype; fp32 keeps TF32 off, so fp32 means IEEE fp32 on GPUs too."""

    name: str
    dtype: torch.dtype
    requirements: Requirements = field(default_factory=Requirements)
    tf32: bool = False
    kernels: tuple[str, ...] = ()
    quantized_math: bool = False

    @property
    def matmul(self) -> str:
        return "tfloat32" if self.tf32 else dtype_name(self.dtype)

    @property
    def float_gemm_dtype(self) -> torch.dtype:
        return self.dtype

    def apply(self, model: nn.Module, device: torch.device) -> nn.Module:
        set_tf32(self.tf32)
        return cast(model, device, self.dtype)


class AutocastModel(nn.Module):
    """Runs the wrapped fp32 model's forward under ``torch.autocast``: fp32 weights,
    matmuls and other autocast-listed ops in the lower dtype, the rest in fp32."""

    def __init__(self, model: nn.Module, device_type: str, dtype: torch.dtype) -> None:
        super().__init__()
        self.model, self.device_type, self.dtype = model, device_type, dtype

    def forward(self, *args: object, **kwargs: object) -> object:
        with torch.autocast(self.device_type, dtype=self.dtype):
            return self.model(*args, **kwargs)


@dataclass
class Autocast:
    """Mixed precision the way training code runs it (amp): fp32 weights, autocast forward."""

    name: str
    dtype: torch.dtype
    requirements: Requirements = field(default_factory=Requirements)
    kernels: tuple[str, ...] = ()
    quantized_math: bool = False

    @property
    def matmul(self) -> str:
        return dtype_name(self.dtype)

    @property
    def float_gemm_dtype(self) -> torch.dtype:
        return self.dtype

    def apply(self, model: nn.Module, device: torch.device) -> nn.Module:
        set_tf32(False)
        return AutocastModel(model.to(device=device, dtype=torch.float32), device.type, self.dtype)


def fp32(device: torch.device) -> Cast:
    return Cast("fp32", torch.float32)


def tf32(device: torch.device) -> Cast:
    return Cast("tf32", torch.float32, Requirements(devices=("cuda",), min_capability=AMPERE), tf32=True)


def fp16(device: torch.device) -> Cast:
    return Cast("fp16", torch.float16)


def bf16(device: torch.device) -> Cast:
    return Cast("bf16", torch.bfloat16, Requirements(min_capability=AMPERE))


def amp_fp16(device: torch.device) -> Autocast:
    return Autocast("amp_fp16", torch.float16)


def amp_bf16(device: torch.device) -> Autocast:
    return Autocast("amp_bf16", torch.bfloat16, Requirements(min_capability=AMPERE))
