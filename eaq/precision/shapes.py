"""The rows each Linear layer's matmul sees at the run's batch shape, measured, not guessed.

A kernel's limit on M (cuBLAS int8 GEMMs need more than 16 rows) depends on the layer:
a transformer block's projections see batch x seq_len rows, a pooler or classifier head
sees batch rows only. One forward pass of the fp32 model with hooks on every Linear
records the real figure, so the shape rule can keep exactly the layers that would not
fit in the base dtype.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn


def linear_rows(model: nn.Module, forward: Callable[[], object]) -> dict[str, int]:
    """{qualified name: rows of its input} for every Linear layer ``forward()`` calls."""
    rows: dict[str, int] = {}
    handles = []
    for fqn, module in model.named_modules():
        if isinstance(module, nn.Linear):
            def record(module: nn.Module, args: tuple, fqn: str = fqn) -> None:
                m = args[0].numel() // args[0].shape[-1]  # rows of the flattened input
                rows[fqn] = min(rows.get(fqn, m), m)
            handles.append(module.register_forward_pre_hook(record))
    try:
        forward()
    finally:
        for handle in handles:
            handle.remove()
    return rows
