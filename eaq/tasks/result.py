"""What a task hands back to the job for logging."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from eaq.measure.nvml import gpu_facts


@dataclass
class TaskResult:
    metrics: dict[str, float]
    tags: dict[str, str]
    device: dict[str, str] = field(default_factory=dict)
    # Files to attach to the run as artifacts (power trace CSV and figure, ...).
    files: list[Path] = field(default_factory=list)


def describe_device(device: torch.device) -> dict[str, str]:
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
