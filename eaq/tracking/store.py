"""Open the MLflow tracking store, created once however many processes start at the same moment.

MLflow creates a new SQLite store's schema on a client's first request; two processes
doing that at once (two sweeps launched together, parallel jobs) race in the migration
(``no such column: spans.dimension_attributes``, ``table ... already exists``) and one of
them fails. Opening a SQLite store here takes a lock file beside the database, so the
first process creates the schema and the others find it done.
"""

from __future__ import annotations

import base64
import os
import shlex
import ssl
import urllib.error
import urllib.parse
import urllib.request
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from mlflow.entities import Experiment
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from eaq.errors import ConfigError, EaqError, first_line
from eaq.files import exclusive
from eaq.tracking.redact import redact, remember

# The read tools (report, diff, rerun) download a small artifact per run or configuration (its config, overrides, a
# trace, layer CSVs); MLflow's progress bar for each would bury what they print on stderr. A user's own setting wins.
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


def _tls_context() -> ssl.SSLContext | None:
    """The TLS settings MLflow's own client takes from the environment, so the check trusts what MLflow trusts:
    verification off, a CA bundle (a file, or a folder as requests takes it), a client certificate."""
    if os.environ.get("MLFLOW_TRACKING_INSECURE_TLS", "").lower() in ("true", "1"):
        return ssl._create_unverified_context()  # noqa: S323 (the user turned verification off for MLflow)
    bundle = os.environ.get("MLFLOW_TRACKING_SERVER_CERT_PATH") or os.environ.get("REQUESTS_CA_BUNDLE")
    client = os.environ.get("MLFLOW_TRACKING_CLIENT_CERT_PATH")
    if not bundle and not client:
        return None
    context = ssl.create_default_context(**({"capath": bundle} if bundle and Path(bundle).is_dir() else {"cafile": bundle}))
    if client:
        context.load_cert_chain(client)
    return context


def _check_reachable(uri: str, setting: str = "tracking.uri") -> None:
    """Fail in seconds on a dead server, not after MLflow's minutes of retries.

    Credentials in the URI (``https://user:pw@host``) go in a header: urllib would take
    them for part of the host name. Any HTTP answer, an error status included (401 from a
    proxy that wants a token MLflow will send), means a server is there.
    """
    parts = urllib.parse.urlsplit(uri)
    try:
        port = parts.port
    except ValueError:  # the message quotes what follows the ':', which may be a password: not repeated
        raise EaqError(
            f"{setting}={redact(uri)} is not a valid URL: what follows the host's ':' is not a port number. A password "
            "holding '/', '?', '#' or '@' must be percent-encoded (urllib.parse.quote(password, safe=''))."
        ) from None
    netloc = parts.hostname or ""
    if ":" in netloc:  # an IPv6 literal
        netloc = f"[{netloc}]"
    request = urllib.request.Request(
        urllib.parse.urlunsplit(parts._replace(netloc=netloc + (f":{port}" if port else ""))).rstrip("/") + "/health"
    )
    if parts.username is not None:
        pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        request.add_header("Authorization", "Basic " + base64.b64encode(pair.encode()).decode())
    try:
        urllib.request.urlopen(request, timeout=5, context=_tls_context()).close()
    except urllib.error.HTTPError:
        return
    except OSError as exc:
        raise EaqError(
            f"the MLflow server {setting}={redact(uri)} cannot be reached ({redact(str(exc))}); start it, or pass "
            f"{setting}=sqlite:///<absolute path>.db for a local store."
        ) from exc


def check_store(uri: str, setting: str = "tracking.uri") -> None:
    """A server or database store answers within seconds, or one redacted sentence (EaqError) says why not; a local
    file store passes."""
    if uri.startswith(("http://", "https://")):
        _check_reachable(uri, setting)
    _check_database(uri, setting)


def unanswered(uri: str) -> str | None:
    """Why the store ``uri`` does not answer now (check_store's sentence), or None.

    Asked before a record is written where the store may have gone since it last answered (a server stopped
    mid-sweep): each MLflow request to a dead server waits out its retries, about 4 minutes, and the runs' and the
    sweep's closing records, several requests, kept a stopped sweep (SIGTERM, Ctrl-C) alive for 7 minutes."""
    try:
        check_store(uri)
    except EaqError as error:
        return str(error)
    return None


# Database stores checked first, and the name of the connection timeout each driver takes: connect_timeout for
# psycopg (SQLAlchemy's default PostgreSQL driver is psycopg2), pymysql, mysqlclient and mysql-connector; pg8000's is
# timeout (given connect_timeout it raised a TypeError: every run and read tool stopped in a traceback).
TIMED_DATABASES = ("postgresql", "mysql")
TIMEOUT_ARGUMENT = {"pg8000": "timeout"}


def _check_database(uri: str, setting: str = "tracking.uri") -> None:
    """Fail in seconds on a database store that refuses the connection (a wrong password, no server there, a missing
    driver), in one redacted sentence: MLflow retries for ~100 s and then raises SQLAlchemy's own error, which no
    store error caught, so the job ended in a traceback and Hydra printed its overrides, the password in clear."""
    database, _, driver = urllib.parse.urlsplit(uri).scheme.partition("+")
    if database not in TIMED_DATABASES:
        return
    from sqlalchemy import create_engine
    from sqlalchemy.exc import SQLAlchemyError

    try:
        engine = create_engine(uri, connect_args={TIMEOUT_ARGUMENT.get(driver, "connect_timeout"): 5})
    except (ImportError, SQLAlchemyError) as exc:  # the URI's driver is not installed, or the URI is malformed
        raise EaqError(f"{setting}={redact(uri)} cannot be used ({redact(first_line(exc))}); install its driver "
                       "(postgresql+psycopg:// is eaq's, psycopg) or correct the URI.") from None
    try:
        engine.connect().close()
    except SQLAlchemyError as exc:
        raise EaqError(
            f"the MLflow store {setting}={redact(uri)} refused the connection ({redact(first_line(getattr(exc, 'orig', None) or exc))}); "
            "check that the database server runs and takes this user and password, or pass "
            f"{setting}=sqlite:///<absolute path>.db for a local store."
        ) from None
    finally:
        engine.dispose()


def creation_lock(uri: str) -> AbstractContextManager[object]:
    """An exclusive lock beside a SQLite database (its folder created); a server serializes its own creation.

    Whatever else opens a store that eaq may be creating at the same moment (a script polling a sweep's store) makes
    its first request under this lock too, or races eaq's migration."""
    if not uri.startswith("sqlite:///"):
        return nullcontext()
    database = Path(uri.removeprefix("sqlite:///"))
    return exclusive(database.with_name(database.name + ".lock"))


def _artifact_uri(location: str | None) -> str | None:
    """Where a new experiment's artifacts go: a URI (``s3://``, ``mlflow-artifacts:/``, ``file:///``) as given, a
    path made absolute (and created, as a file store needs), or None for the store's own default (a server's
    ``--artifacts-destination``)."""
    if location is None:
        return None
    if len(urllib.parse.urlsplit(location).scheme) > 1:  # one letter is a Windows drive, not a scheme
        return location
    Path(location).mkdir(parents=True, exist_ok=True)
    return Path(location).resolve().as_uri()


def _no_password_in(artifact_location: str | None) -> None:
    """MLflow keeps an experiment's artifact location, and each run's artifact URI under it, in clear in the store (its
    experiments' and runs' rows, which the UI and API show to whoever reads the store): a password there would be in
    a record whatever eaq redacts of its own (an ftp:// or sftp:// store takes its password only from the URI)."""
    try:
        password = urllib.parse.urlsplit(artifact_location or "").password
    except ValueError:  # not a URL MLflow could use either: left to its own error
        return
    if password is not None:
        raise ConfigError(
            f"tracking.artifact_location={redact(artifact_location or '')} holds a password, which MLflow would keep in "
            "clear in the store (its experiment and every run's artifact URI); drop it from the URI and give it to the "
            "artifact store's client instead (~/.netrc for ftp://, an SSH key for sftp://, AWS_* variables or a profile "
            "for s3://), or let the server hold the artifacts (tracking.artifact_location=null with its "
            "--artifacts-destination)."
        )


def _credentials_kept_quiet(uri: str) -> None:
    """Remember ``uri``'s credentials for redaction, and where it holds one, stop MLflow printing a server store's run
    URL, credentials and all, whenever a run ends (a job's run, and the report's own run that --log opens)."""
    remember(uri)
    if redact(uri) != uri:
        os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"


def read_store(uri: str, option: str = "--uri") -> MlflowClient:
    """A client for reading a store that must already exist (the report, diff and rerun tools).

    A dead server fails in seconds, not after MLflow's minutes of retries; a SQLite file that is not there is said,
    not created empty (the tools' default, ``outputs/mlflow.db``, is relative to the folder they run in). ``option``:
    the tool's option that named the store, as its messages quote it.
    """
    _credentials_kept_quiet(uri)
    if len(urllib.parse.urlsplit(uri).scheme) <= 1:  # a path (a Windows drive's letter is no scheme), read by MLflow
        # as a file store that it refuses with advice on migrating one
        raise EaqError(
            f"{option} {redact(uri)} is a path, not a store URI: pass {option} sqlite:///<absolute path to the .db file> for a "
            "store file (a run writes outputs/mlflow.db), or http(s)://host:port for a tracking server."
        )
    check_store(uri, option)
    if uri.startswith("sqlite:///") and not (database := Path(uri.removeprefix("sqlite:///"))).is_file():
        raise EaqError(
            f"there is no MLflow store at {database.absolute()} ({option} {redact(uri)}): a run writes its store to "
            f"outputs/mlflow.db under the folder it was launched from; pass {option} sqlite:///<absolute path to that file>."
        )
    return MlflowClient(tracking_uri=uri)


def open_store(uri: str, experiment: str, artifact_location: str | None) -> tuple[MlflowClient, str]:
    """Return a client and the experiment id, creating the database and experiment if new.

    Any number of processes may call it at the same moment on a new store (see the
    module docstring). The first request to the store, which creates its schema, happens
    under the lock; after that, the store is MLflow's to serialize.
    """
    if not experiment.strip():  # MLflow's "Invalid experiment name" was read as a store that cannot be opened
        raise ConfigError("tracking.experiment is empty: name the MLflow experiment the runs go to (default: eaq).")
    _credentials_kept_quiet(uri)
    _no_password_in(artifact_location)
    try:
        check_store(uri)
        with creation_lock(uri):
            client = MlflowClient(tracking_uri=uri)
            found = client.get_experiment_by_name(experiment)
            if found is None:
                try:
                    return client, client.create_experiment(experiment, artifact_location=_artifact_uri(artifact_location))
                except MlflowException:  # created in between, by a process this lock does not cover (a server store)
                    found = client.get_experiment_by_name(experiment)
                    if found is None:
                        raise
    except EaqError:
        raise
    except (MlflowException, OSError) as exc:
        raise EaqError(
            f"the MLflow tracking store tracking.uri={redact(uri)} could not be opened ({redact(first_line(exc))}); "
            f"pass a writable sqlite:///<absolute path>.db or a server URL."
        ) from exc
    check_active(client, experiment, uri, "tracking.uri", "pick another tracking.experiment=NAME", "tracking.experiment=")
    return client, found.experiment_id


def existing_experiment(client: MlflowClient, experiment: str, uri: str, setting: str, instead: str, option: str) -> Experiment:
    """The experiment a read tool's ``option`` names, refused where the store lacks it (naming those it holds: a
    mistyped name had read as "no runs in experiment X") or deleted it (``check_active``)."""
    found = client.get_experiment_by_name(experiment)
    if found is None:
        names = ", ".join(e.name for e in client.search_experiments())
        raise EaqError(f"{option}{experiment}: not in {redact(uri)}; experiments there: {names or 'none'}.")
    check_active(client, experiment, uri, setting, instead, option)
    return found


def check_active(client: MlflowClient, experiment: str, uri: str, setting: str, instead: str, option: str = "") -> None:
    """Refuse an experiment deleted in the store (``setting``: the option naming the store; ``option``: the one naming
    the experiment, "" where none did), with the command that restores
    it there: ``mlflow experiments restore`` alone opens the store of the folder it runs in (an empty ``mlflow.db``
    created there: "No Experiment with id=2 exists"). The read tools had called its runs "none; run into it first"."""
    found = client.get_experiment_by_name(experiment)
    if found is not None and found.lifecycle_stage != "active":
        raise EaqError(
            f"the experiment {option}{experiment} is deleted in the store {setting}={redact(uri)}; restore it "
            f"({restore_command(uri, found.experiment_id)}) or {instead}."
        )


def restore_command(uri: str, experiment_id: str) -> str:
    """The command restoring a deleted experiment in the store at ``uri`` (``mlflow experiments restore`` alone opens
    the store of the folder it runs in)."""
    return f"MLFLOW_TRACKING_URI={shlex.quote(redact(uri))} mlflow experiments restore --experiment-id {experiment_id}"
