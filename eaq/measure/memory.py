"""Peak memory over a stretch of work: allocator peak on CUDA, resident set on the CPU."""

from __future__ import annotations

from pathlib import Path

import psutil
import torch

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def _reset_rss_peak() -> bool:
    """Linux resets the VmHWM high-water mark when '5' is written to clear_refs."""
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def _rss_peak_bytes() -> int:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return psutil.Process().memory_info().rss  # no high-water mark here: the current RSS


class PeakMemory:
    """Call ``reset()`` before the work and ``read()`` after it."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.rss_peak_is_windowed = False

    def reset(self) -> None:
        self.rss_peak_is_windowed = _reset_rss_peak()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

    @property
    def rss_scope(self) -> str:
        """The tag ``eaq.memory.rss_peak``: what the RSS peak spans (a reset can fail outside Linux)."""
        return "warm-up and window" if self.rss_peak_is_windowed else "whole process (the high-water mark could not be reset)"

    def read(self) -> dict[str, float]:
        out = {"memory_peak_rss_mb": _rss_peak_bytes() / 1e6}
        if self.device.type == "cuda":
            out["memory_peak_gpu_mb"] = torch.cuda.max_memory_allocated(self.device) / 1e6
        return out
