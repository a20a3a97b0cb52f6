"""One MLflow run's life: created RUNNING, always ended FINISHED, FAILED or KILLED.

Uses the explicit ``MlflowClient`` rather than mlflow's global active run, so several
runs in one process (a Hydra multirun) never leak state into each other. Every param, tag
and text artifact passes through eaq.tracking.redact on its way in. This class writes every
run's records; the other writers redact too: the report's (eaq.report.build.log) its folder
before it logs it, resume's (eaq.tracking.callbacks.record_skip) the tag it puts on a sweep's
parent, so no credential reaches the store by another path.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, Run, RunTag
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE, RESOURCE_DOES_NOT_EXIST, ErrorCode
from mlflow.tracking import MlflowClient

from eaq.errors import EaqError, first_line
from eaq.tracking.redact import redact, redact_file, redact_folder, redact_tree

PARENT_TAG = "mlflow.parentRunId"
# On a run a later start of its job replaced (a scheduler's requeue): neither the sweep's summary nor the report counts it.
SUPERSEDED_TAG = "eaq.superseded"
# On a sweep's parent, one tag per FINISHED run that resume reused instead of measuring its configuration again
# (the value: the run's name): the sweep's report reads them as the sweep's own runs.
REUSED_TAG = "eaq.reused."
# What every run leaves in its job folder and as artifacts: the resolved config and environment.
CONFIG_FILE = "config.yaml"
ENV_FILE = "env.json"
# The identities of the files a run reads (eaq.tracking.flatten.read_files), logged as it starts: env.json, at its end,
# holds them too, but a run that fails before its end has none, and eaq.diff could not tell its files from another's.
FILES_FILE = "read_files.json"
# In the folder of a job resume skipped: the id of the FINISHED run it reused (eaq.diff reads that run's config).
REUSED_FILE = "reused_run_id.txt"


# Runs MLflow returns per page at most (its SQL store's limit).
PAGE = 50000
# How a store answers a ref that is no run's id: none has it, or it is not shaped as one (a path, a quote).
NOT_A_RUN_ID = (ErrorCode.Name(RESOURCE_DOES_NOT_EXIST), ErrorCode.Name(INVALID_PARAMETER_VALUE))


def every_run(client: MlflowClient, experiment_ids: list[str], where: str = "") -> list[Run]:
    """Every run of the experiments matching ``where``, page after page: one search returns 1000 runs unless asked for
    more and PAGE at most, and an experiment holding more was cut off silently (a report of part of it)."""
    runs: list[Run] = []
    token = None
    while True:
        page = client.search_runs(experiment_ids, filter_string=where, max_results=PAGE, page_token=token)
        runs.extend(page)
        if not (token := page.token):
            return runs


def every_experiment(client: MlflowClient) -> list[str]:
    """The ids of the store's experiments: where a sweep's runs are, since a sweep may give its jobs experiments of
    their own (``tracking.experiment=a,b``), none of them the parent's."""
    return [e.experiment_id for e in client.search_experiments(max_results=PAGE)]


def sweep_runs(client: MlflowClient, parent: Run) -> list[Run]:
    """A sweep's runs: its children and the runs resume reused for it (``REUSED_TAG`` tags on the parent), once each,
    in whichever experiment they are."""
    wheres = [f"tags.`{PARENT_TAG}` = '{parent.info.run_id}'"]
    reused = [tag.removeprefix(REUSED_TAG) for tag in parent.data.tags if tag.startswith(REUSED_TAG)]
    wheres += ["attributes.run_id IN ({})".format(", ".join(f"'{i}'" for i in reused[start:start + 100]))
               for start in range(0, len(reused), 100)]
    experiments = every_experiment(client)
    found = {run.info.run_id: run for where in wheres for run in every_run(client, experiments, where)}
    return list(found.values())


def finished_run(client: MlflowClient, experiment_id: str, config_hash: str, device_name: str | None = None,
                 tag: str = "eaq.config_hash") -> str | None:
    """The id of a FINISHED run with this config hash that was not flagged invalid, if there is one.

    A run its own checks flagged (``eaq.valid=false``: a throttled GPU, too few sensor updates, a CPU shared with
    slot neighbours) counts for nothing in the report, so resuming measures its configuration again. Filtered
    here, not in the query: runs without an energy sensor carry no ``eaq.valid`` tag at all.
    ``device_name``: only a run on a device of that name counts (the config says ``cuda``, not which GPU: a store
    shared by an H100 and an H200 host holds both); None: any device. ``tag``: the hash's tag (``eaq.settings_hash``:
    the same settings, whatever eaq's code).
    """
    where = f"tags.`{tag}` = '{config_hash}' and attributes.status = 'FINISHED'"
    if device_name is not None:
        quote = next((q for q in "'\"" if q not in device_name), None)  # MLflow's filters escape neither
        if quote is None:  # a name no filter can hold: reuse nothing rather than another device's run
            return None
        where += f" and tags.`eaq.env.device_name` = {quote}{device_name}{quote}"
    found = client.search_runs([experiment_id], filter_string=where, max_results=100)
    return next((r.info.run_id for r in found if r.data.tags.get("eaq.valid") != "false"), None)


class TrackedRun:
    def __init__(
        self,
        client: MlflowClient,
        experiment_id: str,
        run_name: str,
        tags: dict[str, str],
        parent_run_id: str | None = None,
    ) -> None:
        all_tags = dict(tags)
        if parent_run_id:
            all_tags[PARENT_TAG] = parent_run_id
        self.client = client
        self.run = client.create_run(experiment_id, run_name=redact(run_name), tags=redact_tree(all_tags))
        self.run_id = self.run.info.run_id
        self._ended = False

    def log_params(self, params: dict[str, str]) -> None:
        self.client.log_batch(self.run_id, params=[Param(k, redact(v)[:6000]) for k, v in params.items()])

    def set_tags(self, tags: dict[str, Any]) -> None:
        self.client.log_batch(self.run_id, tags=[RunTag(k, redact(str(v))[:5000]) for k, v in tags.items()])

    def log_metrics(self, metrics: dict[str, float]) -> None:
        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()])

    def log_artifact(self, file: Path) -> None:
        """Redacts a text file in place first, so the job folder's copy is the store's."""
        redact_file(file)
        with self._storing():
            self.client.log_artifact(self.run_id, str(file))

    def log_artifacts(self, folder: Path, artifact_path: str) -> None:
        if folder.is_dir():
            redact_folder(folder)
            with self._storing():
                self.client.log_artifacts(self.run_id, str(folder), artifact_path)

    @contextmanager
    def _storing(self) -> Iterator[None]:
        """An artifact store this process cannot write to (s3:// without boto3, an ftp:// host down) is one sentence
        naming where the run's artifacts go: it was the store client's traceback, naming neither (a run's first
        artifact, its config, is logged before it measures)."""
        try:
            yield
        except (ImportError, OSError, MlflowException) as exc:
            raise EaqError(
                f"the run's artifacts cannot be stored at {redact(self.run.info.artifact_uri)} "
                f"({redact(first_line(exc))}); that is tracking.artifact_location's (or, for an experiment that existed "
                "before, the location it was created with): install what that store needs (boto3 for s3://), make it "
                "reachable, or use a folder (tracking.artifact_location=PATH with a new tracking.experiment)."
            ) from exc

    @property
    def ended(self) -> bool:
        return self._ended

    def end(self, status: str, error: BaseException | None = None) -> None:
        """Idempotent; records the error class and message on failure."""
        if self._ended:
            return
        end_run(self.client, self.run_id, status, error)
        self._ended = True


def end_run(client: MlflowClient, run_id: str, status: str, error: BaseException | None = None) -> None:
    """End a run with ``status``; a failure's class and message go in its ``eaq.error`` tag (redacted, as every tag).

    Also for a run whose own process cannot end it: a job its scheduler killed (eaq.tasks.job.record_ended_job).
    """
    if error is not None:
        client.set_tag(run_id, "eaq.error", redact(f"{type(error).__name__}: {error}")[:5000])
    client.set_terminated(run_id, status=status)
