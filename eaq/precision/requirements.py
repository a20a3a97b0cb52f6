"""What a precision needs from the device, checked before any model loads.

A precision that cannot run for real is refused, never replaced by another one: the
error names what was missing and which precisions this device does run.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

import torch

# CUDA compute capabilities formats need: int8 tensor cores from Turing (cuBLASLt's int8 GEMM, torch._int_mm, answers
# CUBLAS_STATUS_NOT_SUPPORTED on Volta: pytorch/pytorch#106840), bf16 and TF32 from Ampere, fp8 from Ada/Hopper.
TURING = (7, 5)
AMPERE = (8, 0)
ADA = (8, 9)


@dataclass(frozen=True)
class Requirements:
    devices: tuple[str, ...] = ("cpu", "cuda")
    # CUDA compute capability of the tensor cores the format needs (int8: 7.5 Turing; bf16: 8.0 Ampere; fp8: 8.9 Ada/Hopper).
    min_capability: tuple[int, int] = (0, 0)
    torchao: bool = False

    def unmet(self, name: str, device: torch.device) -> str | None:
        """Why ``name`` cannot run for real on ``device``, or None when it can."""
        if device.type not in self.devices:
            return f"precision={name} runs on {' and '.join(self.devices)}, not on {device.type}"
        if device.type == "cuda" and self.min_capability > (0, 0):
            capability = torch.cuda.get_device_capability(device)
            if capability < self.min_capability:
                need = ".".join(map(str, self.min_capability))
                have = ".".join(map(str, capability))
                return (
                    f"precision={name} needs a GPU of compute capability {need} or newer, "
                    f"and {torch.cuda.get_device_name(device)} is {have}"
                )
        if self.torchao and importlib.util.find_spec("torchao") is None:
            return f"precision={name} needs torchao, which is not installed (pip install torchao)"
        return None
