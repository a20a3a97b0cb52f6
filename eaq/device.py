"""Turn the ``device`` setting into a torch device, or say what this machine has."""

from __future__ import annotations

import re
import socket

import torch

from eaq.errors import DeviceError
from eaq.measure.nvml import gpu_facts


def resolve_device(spec: str) -> torch.device:
    """``auto`` picks the first CUDA GPU when there is one, else the CPU.

    A GPU also becomes the process's current device: CUDA events, a library's kernels or
    context, anything that asks for "the" device would otherwise land on cuda:0, which on a
    host running one job per GPU (eaq/slots.py) is a neighbour's.
    """
    device = _parse(spec)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


def _parse(spec: str) -> torch.device:
    if spec == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    device = torch.device(spec)
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise DeviceError(f"device={spec} was asked for but this machine has no CUDA GPU; use device=cpu or device=auto.")
        index = device.index or 0
        if index >= count:
            raise DeviceError(
                f"device={spec} does not exist: this machine has {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}."
            )
        return torch.device("cuda", index)
    return device


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work; a no-op on the CPU, where every op is synchronous."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_key(device: torch.device) -> str:
    """A name for the physical device that survives renumbering: the GPU's UUID, or ``cpu-<host>``.

    Keys what is measured once per device and cached (roofline peak, bandwidth, idle baseline); the fp32 reference
    and quality figures are keyed by what computes the same numbers (``arithmetic_key``).
    A CPU's has its host's name: a cache folder on a file system several hosts share (a cluster's) would otherwise
    hand one node's idle power and peaks to another, and no reuse check could tell (RAPL reports no temperature or
    clock to compare).
    """
    if device.type == "cuda":
        return str(torch.cuda.get_device_properties(device).uuid)
    return "cpu-" + re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())


def arithmetic_key(device: torch.device) -> str:
    """A name for the devices that compute the same numbers: a GPU's model and SM count, or the host (``device_key``).

    Keys the fp32 reference and the quality figures, so that a sweep over several GPUs of one model computes them
    once: cuBLAS documents bitwise-reproducible results across GPUs of one architecture and SM count (a MIG slice has
    fewer SMs, so another key). A CPU's kernels follow its instruction set, which its host's name stands for.
    """
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return f"{props.name}-sm{props.multi_processor_count}"
    return device_key(device)


def draw_key(device: torch.device) -> str:
    """A name for the devices that draw the same random numbers from one seed: ``cpu`` (torch's CPU generator; hosts
    whose vector units might round its normal draws apart are not told apart), a GPU's model and SM count
    (``arithmetic_key``: the kernels that draw on a GPU size their launch grid by its SM count, and each thread draws
    its own part of the sequence). Random weights drawn on the device a run uses (eaq.models.load_model) are other
    weights on another kind (docs/results/2026-11-27-h100-session25: none of 11 tensors equal, H100 against CPU)."""
    return "cpu" if device.type == "cpu" else arithmetic_key(device)


def describe_device(device: torch.device) -> dict[str, str]:
    """What a run logs about where it ran (eaq.tasks.result.TaskResult.device)."""
    info = {"torch_device": str(device), "torch_threads": str(torch.get_num_threads())}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info |= {
            "gpu_name": props.name,
            "gpu_uuid": str(getattr(props, "uuid", "unknown")),
            "gpu_capability": f"{props.major}.{props.minor}",
            "gpu_memory_gb": f"{props.total_memory / 1e9:.1f}",
            "cuda": str(torch.version.cuda),
            "cudnn": str(torch.backends.cudnn.version()),
            **gpu_facts(str(props.uuid)),
        }
    return info
