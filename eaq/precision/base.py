"""What every precision provides: a capability check, a real transformation, and proof."""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn


class Precision(Protocol):
    """One numeric format. Adding one is one module here and one YAML file in conf/precision."""

    name: str
    # The matmul format a roofline calibration of this precision measures.
    matmul: str

    def supports(self, device: torch.device) -> str | None:
        """``None`` if it runs for real on ``device``; otherwise why not and what would work."""

    def apply(self, model: nn.Module, device: torch.device) -> nn.Module:
        """Transform the (fp32) model for real and move it to ``device``."""
