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
process over a queue, so its log lines land above the display instead of through it. The
tags that say what the run measures travel the same way as soon as the task knows them
(``tag_now``), so the job sets them on the run while it is under way.
"""

from __future__ import annotations

import atexit
import importlib
import logging
import multiprocessing
import multiprocessing.forkserver
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.context import ForkServerContext, SpawnContext
from multiprocessing.queues import SimpleQueue
from typing import Any

from tqdm import tqdm

from eaq.errors import EaqError

log = logging.getLogger(__name__)
# Imported once by the fork server; every run's process starts with the tasks loaded.
PRELOAD = ("eaq.tasks.preload",)

# Who hears the phases of the task running in this process (see phase_listener), and its early tags (see tag_now).
_listener: Callable[[str], None] | None = None
_tagger: Callable[[dict[str, str]], None] | None = None
_context: ForkServerContext | SpawnContext | None = None


def phase_listener() -> Callable[[str], None] | None:
    """Where a task reports each phase as it starts: the sweep's progress line, or nobody."""
    return _listener


def tag_now(tags: dict[str, str]) -> None:
    """Set ``tags`` on the run now, while its task runs, rather than with its result at the end.

    For what identifies what the run measures (its examples' hash, a mixed plan's), told as soon as the task knows it:
    a run that fails later (out of memory in warm-up, a kernel check) still carries it, so the report counts the
    failure beside the runs of its own configuration rather than in a row of its own; the UI shows it while the run
    is under way. The result's tags hold the same values and are set again at the end. Nobody hears them where no job
    runs the task (a test calling it directly).
    """
    if _tagger is not None and tags:
        _tagger(tags)


def start_server() -> None:
    """Start the fork server now, so its imports overlap with the sweep's own start-up (idempotent)."""
    if isinstance(_fork_server(), ForkServerContext):
        multiprocessing.forkserver.ensure_running()


def _fork_server() -> ForkServerContext | SpawnContext:
    global _context
    if _context is None:
        if multiprocessing.get_start_method(allow_none=True) not in multiprocessing.get_all_start_methods():
            # A joblib launcher's worker names loky's own start method, which the server's
            # children are told to set and cannot ("cannot find context for 'loky'").
            multiprocessing.set_start_method("forkserver", force=True)
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(PRELOAD))
        atexit.register(_stop_server)
        _context = context
    return _context


def _stop_server() -> None:
    """End the fork server with this process, at once.

    Left to itself it exits when it sees this process gone, then spends seconds unloading
    torch: a sweep stopped with Ctrl-C would leave it running that long. It holds nothing
    worth a clean exit (runs in progress are processes of their own).
    """
    pid = getattr(multiprocessing.forkserver._forkserver, "_forkserver_pid", None)
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _spawn_instead() -> SpawnContext:
    """For a server that had to initialise CUDA while importing (eaq.tasks.preload): spawn every run."""
    global _context
    log.warning("the fork server initialised CUDA while importing, so its forks cannot use the GPU; runs are spawned instead")
    _context = multiprocessing.get_context("spawn")
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


# How often the measuring process looks for the job's process that started it.
WATCH_S = 1.0


def _exit_with(job_pid: int) -> None:
    """End this process once the job's process is gone. A SIGKILL of the job (a local launcher's cancel, the kernel's
    out-of-memory killer) left the run's process running: the fork server, not the job, is its parent, and a process
    left holding a GPU's CUDA context measured beside the sweep's next runs. A scheduler's cgroup ends them together;
    joblib's and submitit's local executors do not."""
    while True:
        time.sleep(WATCH_S)
        try:
            os.kill(job_pid, 0)
        except ProcessLookupError:
            os._exit(1)
        except PermissionError:  # alive, another user's (a reused pid): still there
            pass


def _child_setup(events: SimpleQueue, relay_output: bool, job_pid: int) -> None:
    global _listener, _tagger
    # Ctrl-C reaches this process too (the terminal's process group): the job's process handles it, ending this one
    # (_run). Landing here while the pool set this process up, it printed the pool's "Exception in initializer"
    # traceback under the sweep's "stopped by Ctrl-C".
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # tqdm guards its bars with a multiprocessing lock, a named semaphore in multiprocessing's resource tracker: this
    # process, SIGKILLed by its job on a stop, never unregistered it, and the tracker warned of a "leaked semaphore"
    # under the sweep's "stopped by". Its bars are this process's alone (the relay carries them): a thread's lock does.
    tqdm.set_lock(threading.RLock())
    threading.Thread(target=_exit_with, args=(job_pid,), daemon=True, name="eaq-job-watch").start()
    if relay_output:
        sys.stdout = sys.stderr = _QueueStream(events)  # type: ignore[assignment]
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    _listener = lambda phase: events.put(("phase", phase))  # noqa: E731
    _tagger = lambda tags: events.put(("tags", tags))  # noqa: E731


def resolve(task: str) -> Callable[..., Any]:
    """``"package.module:function"`` -> the function (imported in the process that runs it)."""
    module, _, name = task.partition(":")
    return getattr(importlib.import_module(module), name)


def _call(task: str, *args: object) -> tuple[Any, float]:
    """Runs in the child: the task's result and the seconds the task itself ran, so the
    parent can count the rest (the arguments' and the result's trip, the process's start
    and exit) as isolation. An exception that cannot travel back (it holds a lambda, a
    lock; or it pickles and cannot be rebuilt, as transformers' config validation errors,
    whose unpickling broke the process pool: the run was reported killed by a signal)
    travels as text."""
    try:
        started = time.perf_counter()
        result = resolve(task)(*args)
        return result, time.perf_counter() - started
    except Exception as exc:
        try:
            pickle.loads(pickle.dumps(exc))  # noqa: S301 (this process's own exception)
        except Exception:
            raise RuntimeError(f"{type(exc).__name__}: {exc}") from None
        raise


def _ready() -> tuple[bool, int]:
    """Imports the tasks (preloaded by a fork server: this then measures the fork alone); whether CUDA works here,
    and this process's id."""
    from eaq.tasks.preload import fork_safe

    return fork_safe(), os.getpid()


def _stop(pid: int) -> None:
    """End the run's process at once: it holds nothing to save (its parent records the run)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _relay(events: SimpleQueue, handlers: dict[str, Callable[[Any], None] | None]) -> None:
    """Hands each event the child sends to its handler here, by kind ("phase", "tags", "output"), in the order sent.

    A handler that fails is logged and the relay goes on: it must drain the queue to its end, or a child printing more
    than the pipe holds would block, and the run with it."""
    while (event := events.get()) is not None:
        kind, payload = event
        if (handler := handlers.get(kind)) is None:
            continue
        try:
            handler(payload)
        except Exception as exc:
            log.warning("the run's %s event was not handled here (%s: %s); the run goes on", kind, type(exc).__name__, exc)


def run_isolated(
    task: str,
    *args: object,
    on_phase: Callable[[str], None] | None = None,
    on_output: Callable[[str], None] | None = None,
    on_tags: Callable[[dict[str, str]], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> tuple[Any, float]:
    """``task(*args)`` in a fresh forked process; returns its result and the seconds spent outside the task:
    starting and ending the process, and carrying the arguments and the result between the two.

    ``task`` is named (``"eaq.tasks.benchmark:benchmark"``) so this process never imports
    what only the run needs (torch, transformers: 16 s on the H100 machine).

    Exceptions raised by the task (EaqError included) are re-raised here unchanged.
    ``on_phase`` hears, in this process, each phase the task reports as it starts;
    ``on_output``, when given, receives what the task prints instead of the terminal; ``on_tags``, the tags the
    task sets ahead of its result (``tag_now``). Each hears, in the order sent, what the task sent before it ended
    (also where its process was killed between two events, as the kernel's out-of-memory killer kills one), before
    this returns or raises; the relay is given up to 5 s to finish. ``on_start`` hears the process's id before the
    task starts, for a caller in another thread that may have to stop it.
    """
    context = _fork_server()
    handlers = {"phase": on_phase, "tags": on_tags, "output": on_output}
    result = _run(context, task, args, handlers, on_start)
    if result is None:
        result = _run(_spawn_instead(), task, args, handlers, on_start)
        assert result is not None
    return result


def _run(
    context: ForkServerContext | SpawnContext,
    task: str,
    args: tuple[object, ...],
    handlers: dict[str, Callable[[Any], None] | None],
    on_start: Callable[[int], None] | None = None,
) -> tuple[Any, float] | None:
    """None when the process cannot use CUDA (a fork of a server that initialised it)."""
    events = context.SimpleQueue()
    relay = threading.Thread(target=_relay, args=(events, handlers), daemon=True)
    relay.start()
    start = time.perf_counter()
    setup = (events, handlers["output"] is not None, os.getpid())
    try:
        with ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=_child_setup, initargs=setup) as pool:
            fork_safe, pid = pool.submit(_ready).result()
            if not fork_safe:
                return None
            if on_start is not None:
                on_start(pid)
            try:
                result, task_s = pool.submit(_call, task, *args).result()
            except BrokenProcessPool:
                raise EaqError(
                    "the process measuring the run ended without a word: a signal killed it (most often the kernel's "
                    "out-of-memory killer: `dmesg` says so; lower batch_size or seq_len, or use a smaller model) or native "
                    "code crashed in it; isolate=false runs the task in this process, where a crash shows its trace."
                ) from None
            except BaseException:
                # This job is ending while the run measures: submitit's handler of SLURM's time-limit signal raised
                # here, or Ctrl-C (which the run's process ignores). Leaving the pool waits for that process, which
                # measured on until the job was killed, and the job's FAILED record ("hydra.launcher.timeout_min")
                # was never written.
                _stop(pid)
                raise
    finally:
        events.put(None)
        relay.join(timeout=5)
    # Everything but the task: the fork (or the server's imports), pickling the config and the result, the process's
    # exit (0.9 s for a sweep's first run here), and the relay's wait for the handlers of the task's last events (tags
    # set on a busy MLflow server over PostgreSQL took 1.2 s after a 0.1 s task: a run's wall time no phase held).
    return result, time.perf_counter() - start - task_s


def run_in_process(
    task: str,
    *args: object,
    on_phase: Callable[[str], None] | None = None,
    on_tags: Callable[[dict[str, str]], None] | None = None,
) -> Any:
    """``task(*args)`` here (``isolate=false``), with ``on_phase`` hearing its phases and ``on_tags`` its early tags;
    returns its result and the seconds importing the task took (torch, transformers, torchao: 4-5 s in a process's
    first run on a 2-core CPU, nothing after), which no phase of the task holds."""
    global _listener, _tagger
    _listener, _tagger = on_phase, on_tags
    try:
        start = time.perf_counter()
        function = resolve(task)
        import_s = time.perf_counter() - start
        return function(*args), import_s
    finally:
        _listener = _tagger = None
