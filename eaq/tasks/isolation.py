"""Run a task in a fresh Python process, so nothing leaks between runs of a sweep.

torch.compile caches, settings a quantization library may change process-wide, allocator
state and GPU memory all live in the process; a sweep that ran every configuration in one
interpreter would measure each run after whatever the previous one left behind. The price is one
interpreter start and the imports per run, measured and logged as ``isolation_overhead_s``.
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

T = TypeVar("T")


def _child_setup() -> None:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")


def _ready() -> None:
    import eaq.tasks.benchmark  # noqa: F401  (the imports are the cost being measured)


def run_isolated(task: Callable[..., T], *args: object) -> tuple[T, float]:
    """``task(*args)`` in a spawned process; returns its result and the seconds spent starting it.

    Exceptions raised by the task (EaqError included) are re-raised here unchanged.
    """
    context = multiprocessing.get_context("spawn")
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=_child_setup) as pool:
        pool.submit(_ready).result()
        overhead = time.perf_counter() - start
        return pool.submit(task, *args).result(), overhead
