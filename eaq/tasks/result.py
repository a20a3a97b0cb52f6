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

    def invalidate(self, reason: str) -> None:
        """Flag the run as standing for no configuration, keeping the reasons its own checks gave.

        The report counts a run flagged ``eaq.valid=false`` only as invalid, and resume measures its configuration
        again: a verdict found after the task ended (by the job, which alone knows the run's neighbours) joins the
        task's own.
        """
        self.tags["eaq.valid"] = "false"
        self.tags["eaq.valid.reasons"] = "; ".join(filter(None, (self.tags.get("eaq.valid.reasons"), reason)))
        if "valid" in self.metrics:  # the metric of the task's own checks (energy runs log it) follows the tag
            self.metrics["valid"] = 0.0
