"""How the store's failures and a read tool's errors reach a user: one redacted sentence, never a traceback.

Here, not in eaq.errors, which every room imports: both redact (eaq.tracking.redact), which only tracking and
the rooms above it may use.
"""

from __future__ import annotations

import functools
import sys
from typing import Callable, ParamSpec

from eaq.errors import EaqError, first_line
from eaq.tracking.redact import redact

P = ParamSpec("P")


def store_failed(error: Exception, store: str) -> EaqError:
    """An MLflow client's failure (a server that went away after answering, retries used up) as one sentence.

    MLflow's message quotes the request's URL, password and all, and goes on for lines: raised as it is, Hydra or
    Python prints it whole, so only its first line is kept, redacted. ``store`` names the store as the user gave it
    (``tracking.uri=...``, ``named by --uri``)."""
    failed = EaqError(
        f"the MLflow tracking store {redact(store)} failed ({redact(first_line(error))}); check that it is up and answering "
        "(a server's log says why it refused), and run this again."
    )
    failed.__cause__ = error  # debug=true's traceback (redacted) goes on into MLflow's
    return failed


def reported(status: int = 2) -> Callable[[Callable[P, int]], Callable[P, int]]:
    """A command-line tool's ``main`` whose EaqError is printed as one line, ``error: ...`` on stderr, and returned as
    ``status`` (2: the input was wrong; the report's 1: nothing to report), never a traceback: the read tools (diff,
    rerun, table, compare, front, the report) all answer a user's mistake the same way. A store failing under them
    (``MlflowException``, requests' error where an artifact's transfer failed, SQLAlchemy's of a database store) is
    said the same way, redacted: its traceback quoted the URL's password, and diff's exit 1 read as "the
    configurations differ"."""

    def wrap(main: Callable[P, int]) -> Callable[P, int]:
        # Imported here, not with the module: every process imports eaq.errors, the isolated task's too, which has
        # no use for MLflow; a tool wrapped in this reads a store, and has imported MLflow already.
        from mlflow.exceptions import MlflowException
        from requests import RequestException  # an artifact's upload or download refused (a proxy's 413), MLflow's
        from sqlalchemy.exc import SQLAlchemyError  # a database store (postgresql://) failing after it opened

        @functools.wraps(main)
        def run(*args: P.args, **kwargs: P.kwargs) -> int:
            try:
                return main(*args, **kwargs)
            except (MlflowException, RequestException, SQLAlchemyError) as failure:
                print(f"error: {store_failed(failure, 'named by --uri')}", file=sys.stderr)
                return status
            except EaqError as error:  # redacted here, whichever part of a tool wrote the sentence
                print(f"error: {redact(str(error))}", file=sys.stderr)
                return status

        return run

    return wrap
