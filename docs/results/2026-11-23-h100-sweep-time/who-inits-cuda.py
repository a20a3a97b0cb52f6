"""Which import initialises CUDA while the fork server preloads (prints the stack of torch's lazy init)."""

import traceback

import torch

from eaq.measure.nvml import device_summaries

print("NVML:", device_summaries())
original = torch.cuda._lazy_init


def traced() -> None:
    if not torch.cuda.is_initialized():
        traceback.print_stack(limit=25)
    original()


torch.cuda._lazy_init = traced
import eaq.tasks.preload  # noqa: E402,F401

print("initialised:", torch.cuda.is_initialized())
