"""Run a task in a fresh process, so nothing leaks between runs of a sweep.

torch.compile caches, settings a quantization library may change process-wide, allocator
state and GPU memory all live in the process; a sweep that ran every configuration in one
interpreter would measure each run after whatever the previous one left behind.

Each run used to spawn a new interpreter and import torch, transformers and torchao
again: 12-17 s a run on the H100 machine, 4.8 s on this project's CPU machine (issue 13).
Now a fork server is started once per sweep process, imports those modules once and
never touches CUDA; each run is a fresh fork of it. The fork has its own CUDA context,
allocator, dynamo and Inductor caches, and dies with the run, exactly as a spawned process
did, but it starts in a fraction of a second. What a run changes never reaches the server,
so the next fork starts from the same just-imported state. The cost, the server's start
included for the first run, is still logged as ``isolation_overhead_s``.

The server keeps the environment of the process that started it: set environment
variables (CUDA_VISIBLE_DEVICES, ...) before the sweep starts, not per job.

Under a sweep's progress display the run's phases, and what it prints, travel to this
process over a queue, so its log lines land above the display instead of through it.
"""

from __future__ import annotations

import logging
import multiprocessing
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.context import ForkServerContext
from multiprocessing.queues import SimpleQueue
from typing import TypeVar

T = TypeVar("T")
# Imported once by the fork server; every run's process starts with them loaded.
PRELOAD = ("eaq.tasks.benchmark", "eaq.tasks.roofline")

# Who hears the phases of the task running in this process (see phase_listener).
_listener: Callable[[str], None] | None = None
_context: ForkServerContext | None = None


def phase_listener() -> Callable[[str], None] | None:
    """Where a task reports each phase as it starts: the sweep's progress line, or nobody."""
    return _listener


def _fork_server() -> ForkServerContext:
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(PRELOAD))
        _context = context
    return _context


class _QueueStream:
    """The run's stdout and stderr, sent to the parent's display; not a terminal, so no nested bars."""

    def __init__(self, events: SimpleQueue) -> None:
        self._events = events

    def write(self, text: str) -> int:
        if text:
            self._events.put(("output", text))
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _child_setup(events: SimpleQueue, relay_output: bool) -> None:
    global _listener
    if relay_output:
        sys.stdout = sys.stderr = _QueueStream(events)  # type: ignore[assignment]
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    _listener = lambda phase: events.put(("phase", phase))  # noqa: E731


def _ready() -> None:
    import eaq.tasks.benchmark  # noqa: F401  (preloaded by the server: this measures the fork alone)


def _relay(events: SimpleQueue, on_phase: Callable[[str], None] | None, on_output: Callable[[str], None] | None) -> None:
    while (event := events.get()) is not None:
        kind, payload = event
        handler = on_phase if kind == "phase" else on_output
        if handler is not None:
            handler(payload)


def run_isolated(
    task: Callable[..., T],
    *args: object,
    on_phase: Callable[[str], None] | None = None,
    on_output: Callable[[str], None] | None = None,
) -> tuple[T, float]:
    """``task(*args)`` in a fresh forked process; returns its result and the seconds spent starting it.

    Exceptions raised by the task (EaqError included) are re-raised here unchanged.
    ``on_phase`` hears, in this process, each phase the task reports as it starts;
    ``on_output``, when given, receives what the task prints instead of the terminal.
    """
    context = _fork_server()
    events = context.SimpleQueue()
    relay = threading.Thread(target=_relay, args=(events, on_phase, on_output), daemon=True)
    relay.start()
    start = time.perf_counter()
    setup = (events, on_output is not None)
    try:
        with ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=_child_setup, initargs=setup) as pool:
            pool.submit(_ready).result()
            overhead = time.perf_counter() - start
            return pool.submit(task, *args).result(), overhead
    finally:
        events.put(None)
        relay.join(timeout=5)


def run_in_process(task: Callable[..., T], *args: object, on_phase: Callable[[str], None] | None = None) -> T:
    """``task(*args)`` here (``isolate=false``), with ``on_phase`` hearing its phases."""
    global _listener
    _listener = on_phase
    try:
        return task(*args)
    finally:
        _listener = None
