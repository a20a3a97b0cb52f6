"""``python -m eaq.diff A B``: what differs between two runs, and does it matter?

A and B are MLflow run ids, run names, or job folders (the folder a run wrote, holding
``config.yaml`` and ``env.json``). Prints the resolved-config differences by group, then
the files the runs read (plan, data, local model: by contents, where the config names them by path),
then the environment differences, and exits 0 when the measurement-relevant configuration and the
files read are identical (two trials of one configuration are), 1 when they differ (``--env``: environment
differences count too, and so does an environment a failed run never recorded, which cannot
be shown to be the same), 2 when a run cannot be found. ``--sweep PARENT`` shows which keys
vary across a sweep's runs.
Reads only job folders and MLflow, never a model.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from eaq.errors import EaqError
from eaq.tracking.callbacks import parent_run_id
from eaq.tracking.environment import MEASURED_ENVIRON as MEASURED_ENVIRON_NAMES
from eaq.tracking.failures import reported
from eaq.tracking.find import UnreadableArtifacts, find_run, find_sweep, unreadable_artifacts
from eaq.tracking.flatten import BESIDE_THE_MEASUREMENT, NOT_MEASUREMENT, READ_FILES, as_read, flatten
from eaq.tracking.run_logger import CONFIG_FILE, ENV_FILE, FILES_FILE, REUSED_FILE, sweep_runs
from eaq.tracking.store import check_active, read_store

# Environment facts that differ between any two runs and say nothing about the measurement.
VOLATILE_ENV = ("config_hash", "environ.", "hostname")
# ... but for the variables that change what a run measures (eaq.tracking.environment.MEASURED_ENVIRON): compared
# like any fact.
MEASURED_ENVIRON = tuple(f"environ.{prefix}" for prefix in MEASURED_ENVIRON_NAMES)


def _from_folder(folder: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, str] | None]:
    config = yaml.safe_load((folder / CONFIG_FILE).read_text())
    return config, *_env_and_files(folder)


def _env_and_files(folder: Path) -> tuple[dict[str, Any], dict[str, str] | None]:
    """The environment (empty: the run failed before its end) and the identities of the files read (None: an older
    eaq's run recorded none) in ``folder``: env.json's, else those the run logged as it started (a run that failed)."""
    env = json.loads((folder / ENV_FILE).read_text()) if (folder / ENV_FILE).exists() else {}
    files = env.pop("read_files", None)
    if files is None and (folder / FILES_FILE).exists():
        files = json.loads((folder / FILES_FILE).read_text())
    return env, files


def find_job_run(client: MlflowClient, ref: str):
    """The run a job logged: its config and overrides are artifacts; a sweep's parent run (or folder) has neither."""
    def of_a_sweep(kind: str) -> EaqError:
        return EaqError(
            f"{ref!r} is a sweep's {kind}, which has no configuration of its own; pass one of its runs (a job folder "
            f"in the sweep's folder, <n>_<run name>, or a run id), or see what varies across them with: python -m "
            f"eaq.diff --sweep {ref}"
        )

    if Path(ref).is_dir() and parent_run_id(ref) is not None:
        raise of_a_sweep("folder")
    run = find_run(client, ref)
    if run.data.tags.get("eaq.kind") == "sweep":
        raise of_a_sweep("parent run")
    if run.data.tags.get("eaq.kind") == "report":  # its missing .hydra/ read as the store failing
        raise EaqError(f"{ref!r} is a report's run (python -m eaq.report --log), which ran no configuration; pass one of "
                       "the runs it reports on.")
    return run


def _from_run(client: MlflowClient, run) -> tuple[dict[str, Any], dict[str, Any], dict[str, str] | None]:
    with tempfile.TemporaryDirectory() as tmp:
        try:
            config = yaml.safe_load(Path(client.download_artifacts(run.info.run_id, CONFIG_FILE, tmp)).read_text())
        except (MlflowException, OSError) as error:  # exit 1 would read as "the configurations differ"
            if unreadable := unreadable_artifacts(run, CONFIG_FILE, error):
                raise unreadable from error
            raise EaqError(
                f"run {run.info.run_name} ({run.info.run_id}) has no recorded {CONFIG_FILE} (killed before it logged its "
                "config, or not a run of one configuration); pass a run that finished or failed after starting."
            ) from error
        for name in (ENV_FILE, FILES_FILE):  # neither, where the run failed before its environment was captured
            with contextlib.suppress(MlflowException, OSError):
                client.download_artifacts(run.info.run_id, name, tmp)
        return config, *_env_and_files(Path(tmp))


def load(ref: str, client: MlflowClient | None) -> tuple[dict[str, Any], dict[str, Any], dict[str, str] | None]:
    """(resolved config, environment, files read: ``_env_and_files``) of a job folder, run id or run name; ``client``
    None where every ref of the command is a job folder (``main`` opens no store then)."""
    folder = Path(ref)
    if (folder / CONFIG_FILE).exists():
        return _from_folder(folder)
    assert client is not None
    if (folder / REUSED_FILE).exists():  # a job resume skipped: its configuration is the run it reused
        reused = (folder / REUSED_FILE).read_text().strip()
        try:
            return _from_run(client, find_run(client, reused))
        except EaqError as error:  # not readable here, or not in this store: said of the folder the user gave
            raise type(error)(f"{ref} is a job resume skipped, reusing run {reused}: {error}") from error
    return _from_run(client, find_job_run(client, ref))


def differences(a: dict[str, str], b: dict[str, str]) -> dict[str, tuple[str | None, str | None]]:
    return {k: (a.get(k), b.get(k)) for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)}


def measurement_config(config: dict[str, Any]) -> dict[str, str]:
    """The settings of what a run measured, as it read them (``as_read``), flat; an empty group (a hub model's
    ``model.architecture``) as none, not as a difference of its own beside the other run's keys of that group."""
    flat = flatten({k: v for k, v in as_read(config).items() if k not in NOT_MEASUREMENT})
    return {k: v for k, v in flat.items() if v != "{}"}


def comparable_env(env: dict[str, Any]) -> dict[str, str]:
    flat = flatten({k: v for k, v in env.items() if k != "pip_freeze"})
    flat |= {f"pip.{line.split('==')[0]}": line.split("==", 1)[-1] for line in env.get("pip_freeze", [])}
    return {k: v for k, v in flat.items() if not k.startswith(VOLATILE_ENV) or k.startswith(MEASURED_ENVIRON)}


def _print_grouped(title: str, diffs: dict[str, tuple[str | None, str | None]]) -> None:
    print(f"{title}: {'identical' if not diffs else f'{len(diffs)} difference(s)'}")
    groups: dict[str, list[str]] = defaultdict(list)
    for key, (left, right) in diffs.items():
        groups[key.split(".", 1)[0]].append(f"    {key}: {left if left is not None else '(absent)'} -> {right if right is not None else '(absent)'}")
    for group, lines in sorted(groups.items()):
        print(f"  [{group}]")
        print("\n".join(lines))


def _device_kind(device: str | None) -> str:
    """``cuda`` of ``cuda:1``; ``cpu``, ``auto`` (resolved by the host: not a kind) as they are."""
    return str(device).split(":")[0]


def compare(a: str, b: str, client: MlflowClient | None, count_env: bool) -> int:
    """Print both kinds of difference; 1 where the configurations differ (or, ``count_env``, the environments).

    Two trials of one configuration are one measurement repeated (the report averages them): the trial is shown, and
    counts for nothing; so are the settings beside the measurement (BESIDE_THE_MEASUREMENT: the device's index, what is
    reused, what is added after the window)."""
    config_a, env_a, read_a = load(a, client)
    config_b, env_b, read_b = load(b, client)
    config_diff = differences(measurement_config(config_a), measurement_config(config_b))
    repeat = config_diff.pop("trial", None)
    # A file named by two paths (the data file resolves from the folder a run is launched in: two checkouts) whose
    # contents both runs recorded the same is one file read, as the report and resume count it.
    files_a, files_b = read_a or {}, read_b or {}
    moved = {k: config_diff.pop(k) for k in list(config_diff)
             if k in READ_FILES and files_a.get(k) is not None and files_a.get(k) == files_b.get(k)}
    # A data path there in neither run (both recorded what they read: no file at it) named nothing read: both read the
    # same dataset.hub instead, as their eaq.data.source says (two checkouts without ../shared/data). An older eaq's run
    # recorded no read files at all: that says nothing of its path.
    hub = (config_a.get("dataset") or {}).get("hub")
    unread = {k: config_diff.pop(k) for k in list(config_diff)
              if k == "dataset.path" and read_a is not None and read_b is not None and k not in files_a
              and k not in files_b and hub and "dataset.hub" not in config_diff}
    # The device beside only as an index of one kind (cuda:0, cuda:1): the report tells cpu from cuda by the device's name.
    beside = {k: config_diff.pop(k) for k in list(config_diff) if k in BESIDE_THE_MEASUREMENT
              and (k != "device" or _device_kind(config_diff[k][0]) == _device_kind(config_diff[k][1]) != "auto")}
    _print_grouped("configuration", config_diff)
    for key, (left, right) in beside.items():
        print(f"  {key}: {left} -> {right} (beside the measurement: the report averages runs differing in it; not a "
              "difference)")
    if repeat is not None:
        print(f"  trial: {repeat[0]} -> {repeat[1]} (repeats of one configuration: not a difference)")
    for key, (left, right) in moved.items():
        print(f"  {key}: {left} -> {right} (the same contents from two paths: not a difference)")
    for key, (left, right) in unread.items():
        print(f"  {key}: {left} -> {right} (there in neither run: both read dataset.hub={hub}; not a difference)")
    # The files read, recorded as a run starts: a run that failed before its end read a plan edited since as well.
    files_diff = _files_differences(a, read_a, b, read_b)
    # A run that failed before its end captured no environment: every fact of the other would read as a difference.
    unrecorded = [ref for ref, env in ((a, env_a), (b, env_b)) if not env]
    if unrecorded:
        print(f"environment: not recorded for {' and '.join(unrecorded)} (a run that failed before its end); not compared")
        return int(bool(config_diff) or files_diff or count_env)
    env_diff = differences(comparable_env(env_a), comparable_env(env_b))
    _print_grouped("environment", env_diff)
    return int(bool(config_diff) or bool(files_diff) or (count_env and bool(env_diff)))


def _files_differences(a: str, files_a: dict[str, str] | None, b: str, files_b: dict[str, str] | None) -> bool:
    """Print how the files the runs read differ (a plan, data file, local model, tokenizer or head, each by its
    identity: a file's contents, a folder's files' names, sizes and times); whether they do. The config names them by
    path, so a plan edited between two runs of one path read as the same measurement, which resume and the report
    know it is not. A run recorded before eaq kept them (env.json without ``read_files``) is said to be, not compared."""
    unrecorded = [ref for ref, files in ((a, files_a), (b, files_b)) if files is None]
    if unrecorded:
        print(f"files read: not recorded for {' and '.join(unrecorded)} (an older eaq's run); not compared")
        return False
    assert files_a is not None and files_b is not None
    diffs = differences(files_a, files_b)
    print(f"files read: {'the same' if not diffs else f'{len(diffs)} difference(s)'}")
    for setting, (left, right) in diffs.items():  # 16 hex digits, as the tags hold a plan's and the data's
        print(f"    {setting}: {(left or '(none)')[:16]} -> {(right or '(none)')[:16]}")
    return bool(diffs)


def sweep(parent: str, client: MlflowClient) -> int:
    run = find_sweep(client, parent)
    if run.data.tags.get("eaq.kind") != "sweep":  # an ordinary run has no children: "0 runs, 0 vary" would be no answer
        raise EaqError(
            f"{parent!r} is no sweep's parent run (eaq.kind={run.data.tags.get('eaq.kind')}); pass the sweep's run (named "
            "after its folder, tagged eaq.kind=sweep), or compare two runs with: python -m eaq.diff A B"
        )
    # Its runs are searched for in the store's active experiments: a deleted one's read as "0 runs", exit 0.
    check_active(client, client.get_experiment(run.info.experiment_id).name, client.tracking_uri, "--uri",
                 "pass another --sweep")
    # Its children and the runs resume reused for it, by id: a rerun of a killed run has that run's name.
    # A run whose recorded config cannot be read here (UnreadableArtifacts) leaves no answer: what varies is unknown.
    configs, unrecorded = {}, []
    for child in sweep_runs(client, run):
        try:
            configs[child.info.run_id] = measurement_config(_from_run(client, child)[0])
        except UnreadableArtifacts:
            raise
        except EaqError:  # killed before it logged its config: nothing to compare, said below
            unrecorded.append(child.info.run_name)
    keys = sorted(set().union(*configs.values())) if configs else []
    varying = {k: sorted({cfg.get(k, "(absent)") for cfg in configs.values()}) for k in keys}
    varying = {k: v for k, v in varying.items() if len(v) > 1}
    print(f"sweep {run.info.run_name}: {len(configs)} runs; {len(varying)} key(s) vary"
          + (f"; {len(unrecorded)} without a recorded config left out ({', '.join(unrecorded)})" if unrecorded else ""))
    for key, values in varying.items():
        print(f"  {key}: {', '.join(values)}")
    return 0


@reported()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].replace("``", ""))
    parser.add_argument("runs", nargs="*", help="two run ids, run names or job folders")
    parser.add_argument("--uri", default="sqlite:///outputs/mlflow.db", help="MLflow tracking store")
    parser.add_argument("--env", action="store_true", help="environment differences also make the exit code 1")
    parser.add_argument("--sweep", metavar="PARENT", help="show what varies across a sweep's runs")
    args = parser.parse_args(argv)
    if args.sweep:
        return sweep(args.sweep, read_store(args.uri))
    if len(args.runs) != 2:
        parser.error("give two runs (ids, names or job folders), or --sweep PARENT")
    # Two job folders need no store, and open none: MLflow's client creates a missing SQLite store (an empty
    # outputs/mlflow.db in whatever folder this runs in). A run id or name is looked up in one that must exist.
    folders = all((Path(ref) / CONFIG_FILE).exists() for ref in args.runs)
    return compare(args.runs[0], args.runs[1], None if folders else read_store(args.uri), args.env)


if __name__ == "__main__":
    sys.exit(main())
