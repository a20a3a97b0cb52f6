"""Quantization through torchao: weights really stored in int8 / fp8 / int4, real kernels run.

Nothing is simulated: eligible ``Linear`` weights are replaced by torchao tensors holding
the low-precision data and its scales, and their matmuls dispatch to the format's
kernels (checked by ``eaq.precision.kernel_check``). On a GPU the model is first cast to
bf16 (fp16 before Ampere), the dtype torchao's GPU kernels take activations in; on the
CPU it stays fp32.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from eaq.precision.base import half_dtype, set_tf32
from eaq.precision.requirements import Requirements

# Low-precision GEMM kernels need both matrix dimensions in multiples of 16; a layer that
# does not fit (a 2-way classifier head, a 50257-token LM head) stays in the base dtype by
# this rule instead of crashing, and the proof's coverage count shows it.
ALIGNMENT = 16
# int4 weights are quantized in groups of this many input features (tinygemm's layout).
INT4_GROUP = 128
ADA = (8, 9)
AMPERE = (8, 0)


def _quantization() -> Any:
    """torchao.quantization, imported only when a model is quantized (it is slow to import)."""
    from torchao import quantization

    return quantization


@dataclass
class TorchaoQuant:
    name: str
    # Builds the torchao config (torchao is imported when it is called, not before).
    config: Callable[[], Any]
    # Dtype of activations and of the layers left unquantized.
    base: torch.dtype
    matmul: str
    requirements: Requirements
    kernels: tuple[str, ...]
    quantized_math: bool
    # Input features must be a multiple of this (int4's group size) on top of ALIGNMENT.
    group: int = 1

    def eligible(self, module: nn.Module, fqn: str) -> bool:
        return (
            isinstance(module, nn.Linear)
            and module.out_features % ALIGNMENT == 0
            and module.in_features % ALIGNMENT == 0
            and module.in_features % self.group == 0
        )

    def apply(self, model: nn.Module, device: torch.device) -> nn.Module:
        set_tf32(False)
        model = model.to(device=device, dtype=self.base)
        _quantization().quantize_(model, self.config(), filter_fn=self.eligible)
        return model


def int8(device: torch.device) -> TorchaoQuant:
    """int8 weights per channel, activations quantized to int8 per token at run time, integer GEMMs."""
    return TorchaoQuant(
        "int8", lambda: _quantization().Int8DynamicActivationInt8WeightConfig(), half_dtype(device), "int8",
        Requirements(torchao=True, min_tokens=17 if device.type == "cuda" else 1),
        kernels=("_int_mm",), quantized_math=True,
    )


def int8_weight_only(device: torch.device) -> TorchaoQuant:
    """int8 weights per channel; the matmul computes in the base dtype on the int8 weights."""
    base = half_dtype(device)
    return TorchaoQuant(
        "int8_weight_only", lambda: _quantization().Int8WeightOnlyConfig(), base, str(base).removeprefix("torch."),
        Requirements(torchao=True), kernels=(), quantized_math=False,
    )


def fp8(device: torch.device) -> TorchaoQuant:
    """float8 e4m3 weights and activations, scaled per row (activations per token, at run time)."""
    def config() -> Any:
        q = _quantization()
        return q.Float8DynamicActivationFloat8WeightConfig(granularity=q.PerRow())

    return TorchaoQuant(
        "fp8", config, torch.bfloat16, "float8_e4m3fn",
        Requirements(devices=("cuda",), min_capability=ADA, torchao=True),
        kernels=("scaled_mm", "f8f8"), quantized_math=True,
    )


def int4_weight_only(device: torch.device) -> TorchaoQuant:
    """int4 weights in groups of 128 (tinygemm tile layout); bf16 activations and math."""
    def config() -> Any:
        return _quantization().Int4WeightOnlyConfig(group_size=INT4_GROUP, int4_packing_format="tile_packed_to_4d")

    return TorchaoQuant(
        "int4_weight_only", config, torch.bfloat16, "bfloat16",
        Requirements(devices=("cuda",), min_capability=AMPERE, torchao=True),
        kernels=("int4pack_mm",), quantized_math=False, group=INT4_GROUP,
    )
