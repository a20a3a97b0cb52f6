"""What a task hands back to the job for logging.

Torch-free: the sweep's process unpickles it when a forked run returns, and importing torch
there cost the first run of a sweep about 2 s (measured here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class TaskResult:
    metrics: dict[str, float]
    tags: dict[str, str]
    device: dict[str, str] = field(default_factory=dict)
    # Files to attach to the run as artifacts (power trace CSV and figure, ...).
    files: list[Path] = field(default_factory=list)
