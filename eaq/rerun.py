"""``python -m eaq.rerun RUN [override ...]``: launch a logged run again from its own record.

RUN is a job folder, an MLflow run id or a run name. The run's Hydra overrides
(``.hydra/overrides.yaml``, kept in its folder and as an artifact) are replayed through
``python -m eaq.run``, with any extra overrides after them, from the config it was composed
from: a named sweep's job (``-cd sweeps -cn NAME``) is composed from that file again, read
from ``.hydra/hydra.yaml``, since its top-level settings are in no override. ``python -m
eaq.diff`` then shows whether anything differs from the original (the config, or the environment).
"""

from __future__ import annotations

import argparse
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from eaq.diff import find_job_run
from eaq.errors import EaqError
from eaq.tracking.failures import reported
from eaq.tracking.find import unreadable_artifacts
from eaq.tracking.redact import REDACTED, redact, remember
from eaq.tracking.store import read_store

OVERRIDES = ".hydra/overrides.yaml"
HYDRA = ".hydra/hydra.yaml"


def _composed_from(hydra_yaml: dict) -> list[str]:
    """``-cd DIR -cn NAME`` where the run was composed from another config than eaq's own ``config``, and the search
    path it was composed with; nothing where neither."""
    hydra = hydra_yaml.get("hydra", {})
    name = hydra.get("job", {}).get("config_name") or "config"
    runtime = hydra.get("runtime", {})
    folders = [s["path"] for s in runtime.get("config_sources", []) if s.get("provider") == "command-line"]
    if folders and not Path(folders[0]).is_dir() and runtime.get("cwd"):
        # Recorded on another host or checkout: the same place relative to where it ran (sweeps/), if here.
        moved = Path(folders[0]).relative_to(runtime["cwd"]) if Path(folders[0]).is_relative_to(runtime["cwd"]) else None
        folders[0] = str(moved.resolve()) if moved is not None and moved.is_dir() else folders[0]
    # A search path (hydra.searchpath=[file://...]: presets of one's own beside eaq's) is one of Hydra's overrides, no
    # config source the command line gave: left out, the rerun refused the run's own presets (model=mine).
    searched = [o for o in hydra.get("overrides", {}).get("hydra", []) if o.lstrip("+").startswith("hydra.searchpath=")]
    return [*(["-cd", folders[0]] if folders else []), *(["-cn", name] if name != "config" or folders else []), *searched]


def logged_command(ref: str, client: MlflowClient | None) -> list[str]:
    """The arguments that compose the run ``ref`` again: its config's folder and name, then its overrides. ``client``:
    the store a run id or name is looked up in; a job folder needs none."""
    return logged_run(ref, client)[0]


def logged_run(ref: str, client: MlflowClient | None) -> tuple[list[str], Path | None]:
    """``logged_command``'s arguments, and the folder the run was launched from (``_launch_folder``)."""
    if (Path(ref) / OVERRIDES).exists():  # a job folder
        return _read(Path(ref)), _launch_folder(Path(ref))
    assert client is not None, "a run id or name is looked up in a store"
    run = find_job_run(client, ref)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            logged = Path(client.download_artifacts(run.info.run_id, ".hydra", tmp))
        except (MlflowException, OSError) as error:
            if unreadable := unreadable_artifacts(run, ".hydra/", error):  # it logged .hydra/ as it started
                raise unreadable from error
            raise EaqError(
                f"run {run.info.run_name} ({run.info.run_id}) has no recorded .hydra/ (it ended, killed or out of time, "
                "before logging its config); pass its job folder instead (the sweep's folder/<job number>, which holds "
                ".hydra/ from the job's start)."
            ) from error
        return _read(logged.parent), _launch_folder(logged.parent)


def _read(folder: Path) -> list[str]:
    """From a folder holding ``.hydra/``."""
    overrides = list(yaml.safe_load((folder / OVERRIDES).read_text()) or [])
    hydra = yaml.safe_load((folder / HYDRA).read_text()) if (folder / HYDRA).exists() else {}
    return [*_composed_from(hydra or {}), *overrides]


def _key(override: str) -> str:
    """The setting an override sets (``+``/``~`` left off): ``tracking.uri`` of ``tracking.uri=http://...``."""
    return override.split("=", 1)[0].lstrip("+~")


def _replayable(logged: list[str], given: list[str]) -> list[str]:
    """The logged overrides less those that ``given`` sets again: a plain ``key=`` (the given one replaces it) and one
    holding a redacted credential; a credential not set again is refused in a sentence naming it. Hydra parses and
    resolves every override before a later one replaces it: ``<redacted>`` is not in its grammar (a run launched with a
    password in its tracking.uri could not be rerun, even passed again as the README says: a LexerNoViableAltException,
    exit 1), and a SLURM job's ``tracking.uri=${oc.env:EAQ_TRACKING_URI}`` failed where the variable is not set. A
    logged ``+key=`` stays: it adds the key that a plain ``key=`` given again then sets."""
    again = {_key(o) for o in given if "=" in o}
    kept = [o for o in logged if not (_key(o) in again and (REDACTED in o or not o.startswith(("+", "~"))))]
    if hidden := [_key(o) for o in kept if REDACTED in o]:
        raise EaqError(f"the run's {', '.join(hidden)} held a credential, which is never recorded; pass "
                       f"{' '.join(f'{k}=...' for k in hidden)} again after the run (python -m eaq.rerun RUN {hidden[0]}=...).")
    return kept


DEFAULT_URI = "sqlite:///outputs/mlflow.db"


def _into(uri: str) -> str:
    """The override that logs the rerun into the store its run was found in (a SQLite path made absolute: the run
    starts in this folder too, but a relative one would be read from eaq.run's). Without it the rerun went to the
    store of the folder it was launched from (or to one the run's own overrides named), where ``eaq.diff --uri`` did
    not find it beside the original; an override given after RUN still wins."""
    scheme, sep, path = uri.partition(":///")
    if scheme == "sqlite" and sep and not path.startswith("/"):
        uri = f"sqlite:///{Path(path).resolve()}"
    return f"tracking.uri={uri}"


@reported()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].replace("``", ""))
    parser.add_argument("run", help="job folder, run id or run name")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides, applied after the logged ones")
    parser.add_argument("--uri", help="MLflow tracking store a run id or name is found in, and the rerun logs into "
                                      f"(default {DEFAULT_URI}); for a job folder, where the rerun logs (default: the "
                                      "store the job was launched with)")
    args = parser.parse_intermixed_args(argv)  # overrides before or after --uri
    # A job folder needs no store, and none is opened: a SQLite URI's client creates an empty one where none was. Its
    # --uri, where given, is where the rerun goes (it was ignored: the rerun went to the store of the job's launch).
    folder = (Path(args.run) / OVERRIDES).exists()
    uri = args.uri or DEFAULT_URI
    into = args.uri if folder else uri  # None: a job folder's own store
    given = [*([_into(into)] if into else []), *args.overrides]
    recorded, where = logged_run(args.run, None if folder else read_store(uri))
    logged = _replayable(recorded, given)
    command = [sys.executable, "-m", "eaq.run", *logged, *given]
    remember([override.partition("=")[2] for override in args.overrides])  # a store URI passed again, its password
    print("rerun: python", redact(shlex.join(command[1:])), *([f"(in {where})"] if where else []), flush=True)  # as a user would type it
    return _run_forwarding_signals(command, where)


def _launch_folder(job: Path) -> Path | None:
    """The folder the job was launched from (its ``hydra.runtime.cwd``, in the folder holding its ``.hydra/``), where
    its relative paths, store and caches resolve as they did: run from elsewhere, a job folder's rerun logged into that
    folder's store (a new one), where ``eaq.diff`` did not find it beside the original, and a run id's read the plan
    file of the same relative name in this folder, another plan measured as a rerun. None where it is not recorded or
    no longer there (another host's run: this folder)."""
    hydra = yaml.safe_load((job / HYDRA).read_text()) if (job / HYDRA).exists() else None
    cwd = ((hydra or {}).get("hydra") or {}).get("runtime", {}).get("cwd")
    return Path(cwd) if cwd and Path(cwd).is_dir() else None


def _run_forwarding_signals(command: list[str], cwd: Path | None = None) -> int:
    """Run ``command`` to its end and return its exit code as a shell gives it (128 + the signal's number where one
    ended it): a SIGTERM this process gets is handed to the run, and Ctrl-C's SIGINT, which the terminal sends the run
    too (one process group), is left to it.

    ``subprocess.call`` left the run behind on a SIGTERM (a scheduler's limit, ``timeout``): this process died, and
    the run went on measuring, orphaned, to log itself FINISHED after its caller had seen it end; on Ctrl-C it
    printed a traceback and killed the run 0.25 s later, which can cut its KILLED record short. The run says how it
    ended (KILLED, exit 130 or 143) as when launched directly."""
    child = subprocess.Popen(command, cwd=cwd)  # before the handlers: the run starts with this process's own
    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, lambda signum, _frame: child.send_signal(signum)),
                signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN)}
    try:
        code = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
