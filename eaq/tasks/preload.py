"""What the fork server imports once for every run, without initialising CUDA.

A process that has initialised CUDA cannot fork children that use it: torch refuses
("Cannot re-initialize CUDA in forked subprocess"); even asking ``torch.cuda.is_available()``
the default way (cudaGetDeviceCount, which starts the driver) marks its forks bad, so the
server asks through NVML (``PYTORCH_NVML_BASED_CUDA_CHECK=1``). Importing transformers' models
imports torchao's prototype mx kernels, which at import time ask for the device's
capability (torchao 0.18, ``is_sm_at_least_100``) and whether triton can run on it
(``torch.utils._triton.has_triton``, which reads the device's properties): both
initialise CUDA (seen on the H100 machine, docs/results/2026-11-23-h100-sweep-time).
While the server imports, the capability is answered from NVML, which reads the same
number without a CUDA context, and triton's device detection is off (only those
prototype kernels, which eaq does not use, are defined or not by it). Afterwards
torch's function and Inductor's setting are put back and the cached triton answer is
forgotten, so runs ask CUDA itself. Where the host's GPUs differ, or an import still
initialises CUDA, ``fork_safe`` is false in the forks and the isolation spawns instead.

The garbage collector is off while the server imports: those imports are the critical path of
a sweep's start (12-19 s on the H100 machine, docs/results/2026-11-25-h100-sweep-time), and on
this project's CPU machine 1.4 s of their 4.9-5.1 s went to collections that find nothing to
free in freshly imported modules. Afterwards the imported objects are frozen (``gc.freeze``)
and collection is enabled again, the pattern Python's documentation gives for a process that
forks without exec: every run starts with the collector on, as a spawned process would, and
its collections no longer walk (and copy, page by page) the hundreds of thousands of objects
it shares with the server.
"""

from __future__ import annotations

import gc
import signal

gc.disable()
# A SIGINT arriving while the server imports (Ctrl-C, or the one a SIGTERM'd job hands its processes: eaq.exit) printed
# a KeyboardInterrupt traceback from inside torch's or eaq's imports, under the job's one-sentence stop. The server
# ignores SIGINT once it serves (multiprocessing.forkserver), and now while it imports; the handler is put back after,
# for the runs it forks (which Ctrl-C must stop).
_interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)

import os  # noqa: E402

import torch  # noqa: E402
import torch._inductor.config as inductor_config  # noqa: E402
from torch.utils import _triton  # noqa: E402

from eaq.measure.nvml import device_summaries  # noqa: E402


NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


def _import_tasks() -> None:
    import eaq.tasks.benchmark  # noqa: F401
    import eaq.tasks.layers  # noqa: F401
    import eaq.tasks.roofline  # noqa: F401


def _preload() -> None:
    check = os.environ.get(NVML_CHECK)
    os.environ[NVML_CHECK] = "1"
    try:
        _import_without_cuda()
    finally:
        if check is None:
            del os.environ[NVML_CHECK]
        else:
            os.environ[NVML_CHECK] = check


def _import_without_cuda() -> None:
    capabilities = {(g["major"], g["minor"]) for g in device_summaries()}
    if len(capabilities) != 1:  # no GPU (nothing to ask), or GPUs that differ: import as is
        _import_tasks()
        return
    (capability,) = capabilities
    ask_cuda, detect = torch.cuda.get_device_capability, inductor_config.triton_disable_device_detection
    torch.cuda.get_device_capability = lambda device=None: capability  # type: ignore[assignment]
    inductor_config.triton_disable_device_detection = True
    try:
        _import_tasks()
    finally:
        torch.cuda.get_device_capability = ask_cuda
        inductor_config.triton_disable_device_detection = detect
        _triton.has_triton.cache_clear()


def fork_safe() -> bool:
    """True in a process forked from a server that never initialised CUDA."""
    return not torch.cuda._is_in_bad_fork()


try:
    _preload()
finally:
    gc.freeze()
    gc.enable()
    signal.signal(signal.SIGINT, _interrupt)
