"""How eaq's processes end: a finished sweep's without the interpreter's teardown, and on signals (SIGTERM as
Ctrl-C, a job's process with the process that started it).

A separate module so that ``eaq.run`` stays composition and dispatch, and so the exit can be
tested without Hydra. Imports only the standard library: ``eaq.run`` imports it first, and
``eaq.tasks.job`` uses it too.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from typing import NoReturn


def exit_without_teardown(code: object) -> NoReturn:
    """Exit as ``sys.exit(code)`` would, but without the interpreter tearing its objects down.

    After a sweep's last output, clearing the ~390,000 objects Hydra, MLflow, pandas and
    matplotlib leave in this process took 1.2-1.3 s of a 1.8-2.0 s tail on this project's
    CPU machine (strace: no system call in it), every sweep. It writes nothing: the steps
    of a normal exit before it run as the interpreter runs them, in its order, through the
    same (private) functions: threading's shutdown (its exit hooks, which stop thread pools
    such as MLflow's, then a wait for every thread that is not a daemon), the exit handlers
    (the parent run's close on a sweep that stopped early, the fork server's stop,
    logging's flush and close of its files); then stdout and stderr are flushed.
    """
    if code is not None and not isinstance(code, int):  # sys.exit("message"): printed, status 1
        print(code, file=sys.stderr)
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (``| head``) or stream: nothing left to deliver
            pass
    os._exit(code or 0)


def stop_on_terminate() -> None:
    """Make SIGTERM stop this process as Ctrl-C does: the run in progress ends KILLED, the sweep's parent closes.

    Ctrl-C reaches the whole process group; ``kill PID``, ``timeout`` and a scheduler's time limit send SIGTERM to
    this process alone, and its default ended it on the spot: the runs stayed RUNNING in the store, and the process
    measuring the run (a fork server's child) measured on, an orphan on the GPU.
    """
    _stop_on(signal.SIGTERM, f"stopped by signal {int(signal.SIGTERM)} (SIGTERM)")


def stop_with_parent() -> None:
    """Stop this process as Ctrl-C does when the process that started it dies (a signal the kernel sends on its
    parent's death, Linux only; elsewhere nothing).

    Under submitit's local executor a job's task runs under a controller process, the job's pid in the sweep folder.
    A SIGKILL to that controller alone (``kill -9`` of the pid the sweep names) left the task an orphan measuring on:
    the sweep recorded the job failed, then the orphan closed its run FINISHED and the sweep's summary said every run
    finished. A real-time signal nothing else sends, so the run's record says what happened: submitit's job process
    ignores SIGTERM, and a terminal's SIGHUP (a logout, which ``nohup`` has the sweep ignore) is no parent's death.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    orphaned = signal.SIGRTMIN + 1
    _stop_on(orphaned, "stopped: the process that started this job (submitit's controller) ended")
    parent = os.getppid()
    pr_set_pdeathsig = 1  # <linux/prctl.h>
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, orphaned)
    if os.getppid() != parent:  # the parent died before the request was made: no signal will come
        os.kill(os.getpid(), orphaned)


def _stop_on(signum: int, why: str) -> None:
    """Make ``signum`` stop this process as Ctrl-C does, ``why`` the interrupt's words (the KILLED run's reason).

    The handler first hands Ctrl-C's SIGINT to every process under this one (the fork server and the run's process
    ignore it, as under Ctrl-C: the job ends the run's process on the KeyboardInterrupt), then raises
    KeyboardInterrupt here.
    """
    def stop(received: int, frame: object) -> None:
        signal.signal(signum, signal.SIG_IGN)  # a second one must not cut the run's KILLED record short
        import psutil  # only when it happens: this module imports nothing but the standard library

        for child in psutil.Process().children(recursive=True):
            try:
                child.send_signal(signal.SIGINT)
            except psutil.NoSuchProcess:  # ended meanwhile
                continue
        raise KeyboardInterrupt(why)

    signal.signal(signum, stop)


def restore_interrupt() -> None:
    """Give SIGINT Ctrl-C's meaning again, before this process starts any other (the fork server first).

    Started in the background of a script (``cmd &`` in a shell without job control), a process inherits SIGINT
    ignored, and so does every process it starts: ``kill -INT`` of such a sweep (and the SIGINT that
    ``stop_on_terminate`` hands to the processes under it) passed unheard.
    """
    signal.signal(signal.SIGINT, signal.default_int_handler)
