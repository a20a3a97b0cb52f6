"""Wall time per phase of a run, so the harness's own cost is visible beside the window.

A sweep's wall time is mostly not measurement (issue 13: 12% inside windows on an H100).
Timing every phase (load, reference, quality, idle, warm-up, window, checks, cool-down)
and logging it as ``phase_<name>_s`` shows where the rest goes, run by run, in MLflow.
A listener hears each phase as it starts (the sweep's progress line); it is called
before the phase's work begins, never inside a measurement window.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Phases:
    """``with phases("load"): ...``; ``phases.metrics()`` -> ``{"phase_load_s": 1.2, ...}``."""

    def __init__(self, listener: Callable[[str], None] | None = None) -> None:
        self.seconds: dict[str, float] = {}
        self._listener = listener

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        if self._listener is not None:
            self._listener(name)
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float) -> None:
        """Time spent on ``name`` elsewhere (another process, a phase entered twice)."""
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def metrics(self) -> dict[str, float]:
        return {f"phase_{name}_s": seconds for name, seconds in self.seconds.items()}
