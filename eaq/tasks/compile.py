"""The ``compile`` axis: the model through torch.compile, the same way for every precision.

Every compiled run gets the Inductor settings torchao recommends for quantized models
(coordinate-descent tuning of the generated kernels, int8 matmul fused with its rescale):
applied only to the quantized runs, as torchao's configs do by default, a comparison
with bf16 would mix the precision with the compiler's tuning.
"""

from __future__ import annotations

import torch
from torch import nn

INDUCTOR_SETTINGS = "torchao recommended_inductor_config_setter (coordinate-descent tuning)"


def compile_model(model: nn.Module, cuda_graphs: bool) -> nn.Module:
    """The compiled model; it compiles on its first call (in warm-up, outside the window)."""
    from torchao.quantization.utils import recommended_inductor_config_setter

    # Runs that share a process (isolate=false) would share dynamo's caches and its
    # recompile limit, past which it runs the model eagerly with only a warning.
    torch._dynamo.reset()
    recommended_inductor_config_setter()
    return torch.compile(model, mode="reduce-overhead" if cuda_graphs else None)
