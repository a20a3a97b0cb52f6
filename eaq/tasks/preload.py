"""What the fork server imports once for every run, without initialising CUDA.

A process that has initialised CUDA cannot fork children that use it: torch refuses
("Cannot re-initialize CUDA in forked subprocess"). Importing transformers' models
imports torchao's prototype kernels, which at import time ask for the device's
capability (torchao 0.18, ``is_sm_at_least_100``) and whether triton can run on it
(``torch.utils._triton.has_triton``, which reads the current device's properties); both
questions initialise CUDA. While the server imports, they are answered from NVML, which
reads the same facts (name, capability, memory) without a CUDA context; torch's own
functions are put back afterwards, so runs ask CUDA itself. Where the host's GPUs
differ, or an import needs more than NVML can tell, the server imports with CUDA, and
``fork_safe`` tells the isolation to spawn instead.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import torch

from eaq.measure.nvml import device_summaries

log = logging.getLogger(__name__)


def _import_tasks() -> None:
    import eaq.tasks.benchmark  # noqa: F401
    import eaq.tasks.job  # noqa: F401  (a fork re-runs the sweep's main module, eaq.run, which imports it)
    import eaq.tasks.roofline  # noqa: F401


def _preload() -> None:
    gpus = device_summaries()
    kinds = {(g["name"], g["major"], g["minor"]) for g in gpus}
    if len(kinds) != 1:  # no GPU (nothing to ask), or GPUs that differ: import as is
        _import_tasks()
        return
    props = SimpleNamespace(**gpus[0])
    answers = {
        "current_device": lambda: 0,
        "get_device_capability": lambda device=None: (props.major, props.minor),
        "get_device_properties": lambda device=None: props,
    }
    originals = {name: getattr(torch.cuda, name) for name in answers}
    for name, answer in answers.items():
        setattr(torch.cuda, name, answer)
    try:
        _import_tasks()
    except Exception as exc:  # an import wanted more than NVML tells: import with CUDA (runs are then spawned)
        log.warning("preloading with device facts from NVML failed (%s); importing with CUDA", exc)
    finally:
        for name, original in originals.items():
            setattr(torch.cuda, name, original)
        # Dynamo keeps the properties it read for its compile workers: drop the stand-ins,
        # so a run's compilation reads the real ones.
        from torch._dynamo import device_interface

        device_interface.caching_worker_device_properties.pop("cuda", None)
        device_interface.caching_worker_current_devices.pop("cuda", None)
    _import_tasks()


def fork_safe() -> bool:
    """True in a process forked from a server that never initialised CUDA."""
    return not torch.cuda._is_in_bad_fork()


_preload()
