"""What the fork server imports once for every run, without initialising CUDA.

A process that has initialised CUDA cannot fork children that use it: torch refuses
("Cannot re-initialize CUDA in forked subprocess"). Importing transformers' models
imports torchao's prototype kernels, which ask ``torch.cuda.get_device_capability()`` at
import time (torchao 0.18, ``is_sm_at_least_100``), and that question initialises CUDA.
While the server imports, the question is answered from NVML instead, which reads the
same capability without a CUDA context; torch's own function is put back afterwards,
so runs ask CUDA itself. Where the GPUs of the host differ in capability there is no one
answer: the server then asks CUDA, and ``fork_safe`` tells the isolation to spawn.
"""

from __future__ import annotations

import torch

from eaq.measure.nvml import compute_capabilities


def _import_tasks() -> None:
    import eaq.tasks.benchmark  # noqa: F401
    import eaq.tasks.job  # noqa: F401  (a fork re-runs the sweep's main module, eaq.run, which imports it)
    import eaq.tasks.roofline  # noqa: F401


def _preload() -> None:
    found = compute_capabilities()
    if len(found) != 1:  # no GPU (nothing to ask), or GPUs that disagree
        _import_tasks()
        return
    (capability,) = found
    original = torch.cuda.get_device_capability
    torch.cuda.get_device_capability = lambda device=None: capability  # type: ignore[assignment]
    try:
        _import_tasks()
    finally:
        torch.cuda.get_device_capability = original


def fork_safe() -> bool:
    """True in a process forked from a server that never initialised CUDA."""
    return not torch.cuda._is_in_bad_fork()


_preload()
