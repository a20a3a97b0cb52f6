"""Errors a user can act on.

Each message is one sentence: what was wrong, what is valid, what to do. The entrypoint
prints it without a traceback (``debug=true`` shows one) and exits non-zero.
"""

from __future__ import annotations

import functools
import sys
from typing import Callable, ParamSpec

P = ParamSpec("P")


class EaqError(Exception):
    """A problem with the user's input or machine, as opposed to a bug in eaq."""


class ConfigError(EaqError):
    """A config value is out of range or inconsistent."""


class DeviceError(EaqError):
    """The requested device does not exist on this machine."""


class UnsupportedPrecisionError(EaqError):
    """The precision cannot run for real on the chosen device; never substituted."""


class ModelLoadError(EaqError):
    """Weights or tokenizer could not be found or read."""


class DataError(EaqError):
    """A dataset file is missing or malformed."""


class JobEndedError(EaqError):
    """A sweep's job returned no result: ended from outside (a scheduler's time limit, out of memory, a cancel), or it
    exited or raised first."""


def reported(status: int = 2) -> Callable[[Callable[P, int]], Callable[P, int]]:
    """A command-line tool's ``main`` whose EaqError is printed as one line, ``error: ...`` on stderr, and returned as
    ``status`` (2: the input was wrong; the report's 1: nothing to report), never a traceback: the read tools (diff,
    rerun, table, compare, front, the report) all answer a user's mistake the same way."""

    def wrap(main: Callable[P, int]) -> Callable[P, int]:
        @functools.wraps(main)
        def run(*args: P.args, **kwargs: P.kwargs) -> int:
            try:
                return main(*args, **kwargs)
            except EaqError as error:
                print(f"error: {error}", file=sys.stderr)
                return status

        return run

    return wrap
