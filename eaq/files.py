"""Files that several processes may write at the same moment: written whole, or locked.

Two sweeps, a parallel launcher's jobs, or a sweep and a single run all share
``paths.cache_dir`` and the store beside it. A file written in place can be read
half-written by another run, and two writers that share one temporary name (``x.tmp``)
replace each other's file mid-write, so one of them fails and the cache may hold the
other's half. Each writer here gets a temporary file of its own in the target's folder
and renames it over the target (atomic on POSIX): a reader sees the old file or a whole
new one. Work that must happen once (creating a database, measuring a device) takes an
exclusive lock instead, held by the operating system, so a killed process never leaves
a stale one.

Files are also hashed here, for every room alike: a file's contents (``file_sha256``), and eaq's own code
(``code_identity``), which the keys of the references, figures and token ids cached under ``paths.cache_dir`` and the
resume hash hold (not the device's calibrations, peak and idle power: facts of the device, keyed by it).

A path a user typed is read here from the folder they launched eaq from (``from_launch_folder``): the config's files
and folders (eaq.config), the store's (eaq.tasks.job), the sweep's folder (eaq.tracking.callbacks.sweep_dir) and the
files the resume hash reads (eaq.tracking.flatten).

Used by every room (tracking, measure, evaluate, data), so it imports nothing of eaq but its errors.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TypeVar

from eaq.errors import EaqError

T = TypeVar("T")
log = logging.getLogger(__name__)

# The folder holding the ``eaq`` package and, beside it, ``conf/`` (eaq/run.py composes from ``../conf``).
ROOT = Path(__file__).resolve().parent.parent


def file_sha256(path: str | Path) -> str:
    """SHA-256 (hex) of a file's bytes, read in chunks: a data file of gigabytes is not held in memory."""
    with Path(path).open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


# eaq's code that computes nothing a run measures, caches or resumes: the read tools (the report reads MLflow only).
# An edit there leaves every cache and finished run valid.
READ_ONLY_CODE = ("eaq/report/", "eaq/diff.py", "eaq/rerun.py")


def code_identity(root: str | Path | None = None) -> str:
    """A short hash of eaq's own code: every ``.py`` file of the ``eaq`` package but the read tools (READ_ONLY_CODE),
    every YAML file of ``conf/`` and the data and heads eaq ships (CODE_FILES), by path relative to ``root`` (default: the folder this eaq is installed in) and
    contents.

    Cached references, figures, token ids and resume were keyed by settings alone: after eaq was edited or upgraded,
    a cache of what the old code computed was read back as the new code's, and resume skipped configurations the new
    code would measure differently. Every such key holds this instead, so new code misses the old code's entries.
    It is the files' contents, not the git commit: a dirty tree, an sdist or an installed copy has no commit that
    says what runs. Read once per process and root (about 1 MB over some hundred files, a few milliseconds), at this
    module's import for the default root: a process forked from one that imported eaq (the fork server's runs) keeps
    the identity of the code it runs, not of files edited on disk since.
    """
    return _code_identity(ROOT if root is None else Path(root).resolve())


# eaq's source and config, and what it ships for runs to read by ``package:`` (the default data, the shipped classifier
# heads), which read_files leaves out: an edit of the shipped sentences was reused by resume as the data before it.
CODE_FILES = ("eaq/**/*.py", "conf/**/*.yaml", "eaq/data/*.txt", "eaq/models/heads/*.safetensors")


@functools.cache
def _code_identity(root: Path) -> str:
    digest = hashlib.sha256()
    found = ((f.relative_to(root).as_posix(), f) for pattern in CODE_FILES for f in root.glob(pattern))
    files = sorted((name, f) for name, f in found if f.is_file() and not name.startswith(READ_ONLY_CODE))
    for name, path in files:
        data = path.read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode())  # lengths keep one file's end from passing for the next's start
        digest.update(data)
    return digest.hexdigest()[:16]


code_identity()  # now, at import (see code_identity)


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` to a temporary file of this writer's own, then rename it to ``path``.

    ``write`` receives a path (safetensors and other writers want one, not a handle).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    tmp = Path(name)
    try:
        write(tmp)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_cached(path: str | Path, read: Callable[[Path], T]) -> T | None:
    """``read(path)``, or None where no file is there or it cannot be read: then the caller computes it again.

    A cache file can be cut short (a disk that filled, a copy of the cache folder stopped half-way) or be another
    eaq's layout (a field added since); a run that found one used to fail on it, although the cache only saves
    time. Such a file is said in the log and replaced by the caller's fresh one.
    """
    path = Path(path)
    if not path.exists():
        return None
    try:
        return read(path)
    except Exception as error:  # noqa: BLE001 - whatever the reader raises on a bad file, the cure is to compute again
        log.warning("cache file %s cannot be read (%s: %s): computing it again", path, type(error).__name__, error)
        return None


def cached(path: str | Path, read: Callable[[Path], T], compute: Callable[[], T],
           write: Callable[[T, Path], None]) -> tuple[T, bool]:
    """(What ``path`` holds, True), or (``compute()``, False) after writing it there atomically with ``write(value,
    tmp)``: the read-or-compute of every cache under ``paths.cache_dir`` (token ids, references, figures).

    A file that cannot be written fails the run with what to change: the folder also holds the locks, idle baselines
    and peaks every run needs, so going on without it would only move the failure to a less clear place. ``write``
    must raise OSError where the disk refuses (Python's own writes do; safetensors' ``save_file`` raises its own error,
    so its bytes are written by Python instead).
    """
    found = read_cached(path, read)
    if found is not None:
        return found, True
    value = compute()
    try:
        atomic_write(path, lambda tmp: write(value, tmp))
    except OSError as error:
        raise EaqError(
            f"cannot write the cache file {path} ({error.strerror or error}): paths.cache_dir must be a folder this "
            "user can write, with free space; set paths.cache_dir=<another folder>, or remove what stands at that name"
        ) from error
    return value, False


def atomic_write_text(path: str | Path, text: str) -> None:
    """``path.write_text(text)``, but never seen half-written."""
    atomic_write(path, lambda tmp: tmp.write_text(text))


def shared_folder(folder: Path) -> None:
    """Create ``folder`` (and its parents) so that every user of the host can add files to it: mode 1777, as /tmp.

    Locks of one host's GPUs live in one folder whoever runs the job; a folder another user made is left as it is.
    """
    folder.mkdir(parents=True, exist_ok=True)
    try:
        if folder.stat().st_uid == os.getuid():
            folder.chmod(0o1777)
    except PermissionError:  # not ours to change
        pass


def open_shared(path: Path) -> IO[str]:
    """``path.open("a")``, the file created readable and writable by every user (0666) when this process makes it:
    a lock file or log another user's job must open too (a umask's 0644 refused them)."""
    # O_NOFOLLOW: in a folder every user writes to, a link planted under this name must not open (and open up) a file
    # of this user's elsewhere.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    try:
        if os.fstat(fd).st_uid == os.getuid():
            os.fchmod(fd, 0o666)
    except PermissionError:
        pass
    return os.fdopen(fd, "a")


def _lock_file(lock_path: Path, shared: bool) -> IO[str]:
    """The lock file opened for appending, created as ``open_shared`` makes it where ``shared``."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    return open_shared(lock_path) if shared else lock_path.open("a")


@contextmanager
def exclusive(lock_path: str | Path, shared: bool = False) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path`` (created if needed) across processes; waits for it.

    ``flock`` is released by the kernel when the process ends, however it ends. ``shared``: created for every user of
    the host (``open_shared``), for the GPU slots' folder; other locks keep the user's umask.
    """
    with _lock_file(Path(lock_path), shared) as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def try_exclusive(lock_path: str | Path, shared: bool = False) -> IO[str] | None:
    """Take an exclusive lock on ``lock_path`` (created if needed) without waiting.

    Returns the open file that holds it (closing it, or the process ending, releases it),
    or None when another process holds it.
    """
    handle = _lock_file(Path(lock_path), shared)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


# A URI's scheme (s3://, file:, mlflow-artifacts:) or eaq's package:<name>: a value that names no path. Two letters at
# least: one is a Windows drive.
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")


def from_launch_folder(value: str | None, launched_from: str | Path, hub: bool = False, home: bool = False) -> str | None:
    """The path ``value`` names when read from the folder the user launched eaq from: a relative path under
    ``launched_from``; an absolute path, a URI, ``package:``, an empty value and None as given.

    A job may run in another folder than the one the user typed the path in: ``hydra.job.chdir=true`` runs each job in
    its output folder, and a launcher's worker or a cluster node may start elsewhere still. Read against the working
    folder, a plan, data file or model folder next to the user would be "not found" (or a model read from the hub);
    read against the launch folder, the path names the file the user meant, in every process and whatever the launcher.
    ``..`` is kept, not folded: below a symbolic link it is the link target's parent.

    ``home``: a leading ``~`` is the home folder, as eaq's own readers of a file (data, plan, model, head) take it.
    Without it ``~`` is a folder of that name, as Hydra (the job and sweep folders), SQLite (a ``sqlite:///`` store)
    and MLflow (an artifact folder) take it in the sweep's process: the store a job opens is the sweep's.

    ``hub``: the value may be a Hugging Face hub id (``org/name``), which reads like a relative path. It names the
    folder under the launch folder only where that folder exists (a local model of that name is chosen over the hub,
    as transformers chooses it over the hub from the working folder); otherwise it is left as given: a hub id.
    """
    if not value or SCHEME.match(value):
        return value
    expanded = os.path.expanduser(value) if home else value
    if os.path.isabs(expanded):
        return expanded
    path = str(Path(launched_from, expanded))
    return value if hub and not os.path.isdir(path) else path
