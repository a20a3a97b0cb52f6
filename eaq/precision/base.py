"""What every precision provides: requirements, a real transformation, and what proves it."""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn

from eaq.precision.requirements import AMPERE, Requirements


class Precision(Protocol):
    """One numeric format, built for one device.

    Adding one is a factory in this package (registered in ``PRECISIONS``) and one YAML
    file in conf/precision.
    """

    name: str
    # The matmul format a roofline calibration of this precision measures.
    matmul: str
    requirements: Requirements
    # Substrings of the profiler op or kernel names every quantized layer's matmul must
    # show (empty: nothing to look for beyond ordinary float GEMMs).
    kernels: tuple[str, ...]
    # True when the matmul itself runs in the low-precision format (int8, fp8), so a float
    # GEMM on a quantized layer is a silent fallback; False for weight-only formats,
    # whose matmuls read low-precision weights but compute in the base dtype.
    quantized_math: bool
    # The dtype of the float GEMMs' operands: the cast or autocast dtype, or the base dtype
    # of a quantized model's unquantized layers.
    float_gemm_dtype: torch.dtype

    def apply(self, model: nn.Module, device: torch.device) -> nn.Module:
        """Transform the (fp32) model for real and move it to ``device``."""


def set_tf32(enabled: bool) -> None:
    """TF32 tensor-core math for fp32 matmuls: on only for ``precision=tf32``.

    Process-wide torch flags, so every precision sets them explicitly rather than
    inheriting what an earlier run in the same process left behind.
    """
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled


def base_dtype(device: torch.device) -> torch.dtype:
    """The dtype a quantized model keeps for activations and the layers left unquantized.

    On a GPU, the 16-bit float its tensor cores and torchao's kernels take: bf16 from
    Ampere (sm_80) on, fp16 before. On the CPU, fp32: torchao's CPU int8 path takes fp32
    activations, and CPUs without bf16 units run it slower.
    """
    if device.type != "cuda":
        return torch.float32
    return torch.bfloat16 if torch.cuda.get_device_capability(device) >= AMPERE else torch.float16


def dtype_name(dtype: torch.dtype) -> str:
    """``bfloat16`` for torch.bfloat16: how matmul formats are named for the roofline calibration."""
    return str(dtype).removeprefix("torch.")


# Rotary-embedding frequency buffers: `from_pretrained(dtype=bf16)` leaves them fp32 (transformers computes them in
# fp32 and its rotary forward casts to fp32 anyway), so a model cast whole to a lower dtype must too.
# Matched by the end of the name: Gemma3 and ModernBERT keep one per layer type (sliding_attention_inv_freq, ...).
FP32_BUFFER_SUFFIX = "inv_freq"


def cast(model: nn.Module, device: torch.device, dtype: torch.dtype) -> nn.Module:
    """``model.to(device, dtype)``, its rotary frequencies kept in fp32.

    Cast with the rest, a tiny Llama's ``inv_freq`` (head_dim 16) rounded to bf16 moved its rotary cosines by up to 0.26
    below position 1,500 (0.002 kept in fp32; tests/test_precision.py), and the error grows with position and head
    size: a drift in every bf16 / fp16 / bf16-based quantized run's quality figures that the format deployed does not
    have.
    """
    kept = [(module, name, buffer) for module in model.modules() for name, buffer in module.named_buffers(recurse=False)
            if name.endswith(FP32_BUFFER_SUFFIX) and buffer.dtype == torch.float32]
    model = model.to(device=device, dtype=dtype)
    for module, name, buffer in kept:
        setattr(module, name, buffer.to(device))  # a registered buffer: setattr keeps it one, persistent or not
    return model
