"""A run a user names on a command line: by id, by name, or (a sweep) by its folder.

One module for every tool that takes such a name (eaq.diff's runs and ``--sweep``, eaq.report's ``--sweep``), so
that what one accepts the others do: the report refused the sweep's name and folder that eaq.diff took.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from mlflow.entities import Run, ViewType
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from eaq.errors import EaqError, first_line
from eaq.tracking.callbacks import parent_run_id
from eaq.tracking.redact import redact
from eaq.tracking.run_logger import NOT_A_RUN_ID
from eaq.tracking.store import restore_command


def find_run(client: MlflowClient, ref: str, missing: Callable[[str], str] | None = None) -> Run:
    """The run ``ref`` names, by id or else by name (the newest of that name, said). Only the store's answer that there
    is no such id (or that ``ref`` cannot be one) sends it on to the names: a store that failed to answer is said as
    that, not as "not found". ``missing``: the sentence for a ``ref`` that names no run."""
    try:
        return client.get_run(ref)
    except MlflowException as error:
        if error.error_code not in NOT_A_RUN_ID:
            raise
    # MLflow's filters escape no quote: the value is quoted with the kind it does not hold.
    quote = next((q for q in "'\"" if q not in ref), None)
    if quote is None:
        raise EaqError(f"{ref!r} is no job folder or run id, and holds both kinds of quote, which no run name search can "
                       "hold; pass the run's id or its job folder.")
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, filter_string=f"attributes.run_name = {quote}{ref}{quote}",
                              order_by=["attributes.start_time DESC"])
    if not runs and (deleted := client.search_runs(
            [e.experiment_id for e in client.search_experiments(view_type=ViewType.DELETED_ONLY)],
            filter_string=f"attributes.run_name = {quote}{ref}{quote}", run_view_type=ViewType.ALL)):
        # Searched by name in the active experiments only: a run of a deleted one read as "no such run".
        raise EaqError(f"{ref!r} names run {deleted[0].info.run_id} of the experiment "
                       f"{client.get_experiment(deleted[0].info.experiment_id).name}, deleted in the store at "
                       f"{redact(str(client.tracking_uri))}; restore it "
                       f"({restore_command(str(client.tracking_uri), deleted[0].info.experiment_id)}), or pass another run.")
    if not runs:
        raise EaqError(missing(ref) if missing else
                       f"{ref!r} is neither a job folder nor a run id or run name in the store at "
                       f"{redact(str(client.tracking_uri))}; pass one of those, with --uri naming the store it is in "
                       "(runs of two stores: pass their job folders).")
    if len(runs) > 1:  # a name leaves out the task, sequence length, dataset and weights, and repeats across sweeps
        others = ", ".join(r.info.run_id for r in runs[1:6]) + (", ..." if len(runs) > 6 else "")
        print(f"note: {ref!r} names {len(runs)} runs; using the newest, {runs[0].info.run_id}; pass a run id to take "
              f"another ({others})", file=sys.stderr)
    return runs[0]


def find_sweep(client: MlflowClient, ref: str, instead: str = "") -> Run:
    """The sweep's parent run ``ref`` names: its folder (the parent's id its start left there), its id or its name
    (the sweep folder's, as the MLflow UI lists it). Whether it is a sweep's is the caller's to check. Not found: one
    sentence naming ``ref`` as given, not the id its folder held (a folder of a sweep logged into another store was
    called "neither a job folder nor a run id"), ``instead`` what else the tool takes."""
    in_folder = parent_run_id(ref) if Path(ref).is_dir() else None
    if Path(ref).is_dir() and in_folder is None and parent_run_id(Path(ref).parent):  # read as "no such sweep folder"
        raise EaqError(f"--sweep {ref} is one job's folder of the sweep in {Path(ref).parent}: pass that folder.")
    where = redact(client.tracking_uri)
    return find_run(client, in_folder or ref, lambda _: (
        f"--sweep {ref}: the sweep folder's parent run {in_folder} is not in {where}: its sweep logged to another store; "
        "pass that one as --uri (by default sqlite:///<the folder it was launched from>/outputs/mlflow.db)." if in_folder else
        f"--sweep {ref}: no such sweep folder, run id or run name in {where}; pass a sweep's folder or its parent run's "
        f"id or name (tag eaq.kind=sweep){instead}."))


class UnreadableArtifacts(EaqError):
    """A run's recorded config is in its artifacts, which cannot be read here."""


def unreadable_artifacts(run: Run, what: str, error: BaseException) -> UnreadableArtifacts | None:
    """Where a FINISHED run's recorded ``what`` (logged as it started) cannot be downloaded: its artifacts are not
    readable here, which the tools had called a run killed before it logged its config. None for a run that did not
    finish: it may have ended before logging it (a job that died before its run opened is recorded FAILED or KILLED
    with its params and no artifact, eaq.tasks.job.record_ended_job): the caller's own sentence."""
    if run.info.status != "FINISHED":
        return None
    return UnreadableArtifacts(
        f"run {run.info.run_name} ({run.info.run_id}) finished, and its recorded {what} cannot be read from its "
        f"artifacts at {run.info.artifact_uri} ({first_line(error)}): a store copied from another host leaves them there, "
        "or its server is not answering; pass the run's job folder instead, or run this where its artifacts are.")


__all__ = ["UnreadableArtifacts", "find_run", "find_sweep", "unreadable_artifacts"]
