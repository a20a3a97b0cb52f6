"""Open the MLflow tracking store once, before any job writes to it."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from eaq.errors import EaqError


def _check_reachable(uri: str) -> None:
    """Fail in seconds on a dead server, not after MLflow's minutes of retries."""
    if uri.startswith(("http://", "https://")):
        try:
            urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=5).close()
        except OSError as exc:
            raise EaqError(
                f"the MLflow server tracking.uri={uri} cannot be reached ({exc}); start it, or pass "
                f"tracking.uri=sqlite:///<absolute path>.db for a local store."
            ) from exc
    elif uri.startswith("sqlite:///"):
        Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)


def open_store(uri: str, experiment: str, artifact_location: str) -> tuple[MlflowClient, str]:
    """Return a client and the experiment id, creating the database and experiment if new.

    Call it in the parent process before parallel jobs start: concurrent first writes to
    a fresh SQLite store race in its schema migration.
    """
    try:
        _check_reachable(uri)
        client = MlflowClient(tracking_uri=uri)
        found = client.get_experiment_by_name(experiment)
        if found is not None:
            return client, found.experiment_id
        Path(artifact_location).mkdir(parents=True, exist_ok=True)
        location = Path(artifact_location).resolve().as_uri()
        try:
            return client, client.create_experiment(experiment, artifact_location=location)
        except MlflowException:  # another job created it in between
            found = client.get_experiment_by_name(experiment)
            if found is None:
                raise
            return client, found.experiment_id
    except EaqError:
        raise
    except (MlflowException, OSError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EaqError(
            f"the MLflow tracking store tracking.uri={uri} could not be opened ({first_line}); "
            f"pass a writable sqlite:///<absolute path>.db or a server URL."
        ) from exc
