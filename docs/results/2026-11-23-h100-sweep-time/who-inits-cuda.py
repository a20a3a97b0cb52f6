"""Which import initialises CUDA while the fork server preloads (prints the stack of torch's lazy init), and whether a fork of it can use CUDA."""

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

import os  # noqa: E402

pid = os.fork()
if pid == 0:  # what a run forked from the server would see
    print("fork can use CUDA:", not torch.cuda._is_in_bad_fork(), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print("initialised:", torch.cuda.is_initialized())
