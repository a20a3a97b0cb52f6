"""Resolve a config, flatten it into MLflow params, and hash what makes a measurement what it is."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from eaq.errors import ConfigError
from eaq.files import code_identity, file_sha256, from_launch_folder

# Settings that change where results go or how errors print, not what is measured.
# Where a run is logged and how it is scheduled (gpu_slots: which of a host's GPUs), not what it measures.
NOT_MEASUREMENT = ("tracking", "paths", "debug", "run_name", "resume", "gpu_slots", "calibrate_ahead")
# Settings of what a run adds beside its windows or reuses, its words, and the device's index (its name is recorded
# apart: two cards of one model are one device): runs differing only in these measured one configuration, which the
# report averages (eaq.report.frame.BESIDE) and eaq.diff counts as no difference.
BESIDE_THE_MEASUREMENT = frozenset({
    "device", "precision.description", "trials.reuse_quality", "trials.roofline", "trials.roofline_window_s",
    "trials.overhead_pairs", "trials.overhead_iters", "trials.idle_reuse", "trials.idle_max_age_s",
    "trials.idle_max_temp_delta_c", "trials.idle_max_clock_change", "trials.fidelity_on_synthetic",
    "workload.run_name_part",
})
# The compiler's settings: read only where something is compiled (compile=true; a layers run's savings pass under
# layers.saving=compiled). Elsewhere a run measured what their defaults give: ``as_read``.
COMPILER_DEFAULTS = {"compile_tuning": True, "compile_pattern_matcher": True}


def reads_group(task: str | None, group: str) -> bool:
    """Whether a run of ``task`` reads the config group ``group``: the ``layers`` group only a layer analysis does."""
    return group != "layers" or task == "layers"


def as_read(resolved: dict[str, Any]) -> dict[str, Any]:
    """``resolved`` with the settings the run did not read as if left alone: the compiler's at their defaults where
    nothing is compiled, no ``workload.new_tokens`` where no token is generated, and no ``layers`` group but in a
    layer analysis. How resume (``config_hash``) and eaq.diff count a run, as the report does: a sweep ``-m
    compile=false,true compile_tuning=true,false`` measured the eager configuration twice (resume and eaq.diff told
    the two apart), and the report averaged them as two trials."""
    layers = resolved.get("layers") or {}
    compiles = resolved.get("compile") or (resolved.get("task") == "layers" and layers.get("saving") == "compiled")
    read = dict(resolved) if compiles else resolved | {k: v for k, v in COMPILER_DEFAULTS.items() if k in resolved}
    workload = resolved.get("workload")
    if isinstance(workload, dict) and workload.get("name") != "generate":
        read["workload"] = {k: v for k, v in workload.items() if k != "new_tokens"}
    if not reads_group(resolved.get("task", "benchmark"), "layers"):  # -m task=benchmark,layers layers.budget=2
        read.pop("layers", None)
    return read


def resolved_config(cfg: DictConfig) -> dict[str, Any]:
    """The config with every interpolation resolved, as plain containers; a ConfigError naming the setting whose
    interpolation cannot be (``${oc.env:NAME}`` of a variable not set: a submitit sweep's job handed its tracking URI
    in ``EAQ_TRACKING_URI``, replayed by eaq.rerun without it), where Hydra printed OmegaConf's traceback."""
    try:
        resolved = OmegaConf.to_container(cfg, resolve=True)
    except InterpolationResolutionError as error:
        key = getattr(error, "full_key", None) or "a setting"
        why = str(error).strip().splitlines()[0]
        raise ConfigError(f"{key} could not be resolved ({why}): set what it names, or give {key}=<value> on the "
                          "command line.") from error
    assert isinstance(resolved, dict)
    return resolved


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """``{'model': {'name': 'x'}}`` -> ``{'model.name': 'x'}``; lists and empty dicts become JSON."""
    flat: dict[str, str] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{name}."))
        elif isinstance(value, (dict, list)):
            flat[name] = json.dumps(value)
        else:
            flat[name] = str(value)
    return flat


# The settings that name a file or folder the measurement reads: a plan, the data, local weights, tokenizer, head.
READ_FILES = ("precision.plan", "dataset.path", "model.name_or_path", "model.tokenizer", "model.classifier_head")


def _identity(path: Path) -> str | None:
    """A file's contents hashed; a folder's files by name, size and modification time (weights of gigabytes are not
    read for it); None for what is not there (a hub id, ``package:`` weights)."""
    if path.is_file():
        try:
            return file_sha256(path)
        except OSError:  # unreadable here: the run says so when it reads it
            return None
    if path.is_dir():
        return hashlib.sha256(json.dumps(_listing(path)).encode()).hexdigest()
    return None


def _listing(folder: Path) -> list[tuple[str, int, int]]:
    """(name, size, modification time) of each file under ``folder``, sorted. A file or folder that goes while it is
    walked is left out: a folder other processes write in (``/tmp`` given as a model by mistake, whose run then fails
    in one sentence) made the walk raise, and the run fail with a traceback before it could say so."""
    listing = []
    for parent, _, names in os.walk(folder):  # a subfolder that vanished is skipped (os.walk's errors are ignored)
        for name in names:
            file = Path(parent) / name
            try:
                st = file.stat()
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                listing.append((str(file.relative_to(folder)), st.st_size, st.st_mtime_ns))
    return sorted(listing)


def read_files(resolved: dict[str, Any], launched_from: str | Path) -> dict[str, str]:
    """{setting: identity} of the files and folders the run reads (READ_FILES), where they exist; a relative path read
    from the folder eaq was launched from, as the run reads it (``from_launch_folder``: a job under
    ``hydra.job.chdir=true`` runs in its own folder, where an edited plan would not be found and would not count)."""
    found = {}
    for name in READ_FILES:
        group, key = name.split(".")
        value = (resolved.get(group) or {}).get(key)
        # An empty value names nothing (model.tokenizer= takes the model's), not the working folder Path("") is.
        if not isinstance(value, str) or not value:
            continue
        if identity := _identity(Path(from_launch_folder(value, launched_from, home=True))):
            found[name] = identity
    return found


def config_hash(resolved: dict[str, Any], launched_from: str | Path, code: bool = True,
                files: dict[str, str] | None = None) -> str:
    """Equal hashes mean the same measurement: same model, precision, data, protocol, device, trial, and eaq code
    (the settings as the run read them: ``as_read``).

    The files the run reads count by their contents, not their paths: a plan or data file edited under the same path
    is another measurement, which resume must not take for the one it ran before, and one file reached by two paths
    (two checkouts beside ../shared/data) is one. So does eaq's own code (``code_identity``): a run
    the code before an edit or upgrade measured is not what the code now would measure, and resume must not skip it.
    ``code`` False: the settings and files alone (the tag ``eaq.settings_hash``), which tell a run of the same
    measurement by other code from one never measured, so resume can say why it measures again. ``files``: what
    ``read_files`` returned for this config already (each file is read once a run).
    """
    relevant = {k: v for k, v in as_read(resolved).items() if k not in NOT_MEASUREMENT}
    files = read_files(resolved, launched_from) if files is None else files
    if files:  # only where there are
        relevant["read_files"] = files
    for name in files:  # a file read counts by its contents alone, not by the path it was reached by: ../shared/data
        group, key = name.split(".")  # from two checkouts was measured twice, and reported as two trials of one
        path = Path(from_launch_folder(relevant[group][key], launched_from, home=True))
        # A folder, known by its files' names, sizes and times (not their bytes), keeps its place: two folders of
        # equal listings (normalised times) are not one model.
        relevant[group] = {**relevant[group], key: str(path.resolve()) if path.is_dir() else "(read_files)"}
    if code:
        relevant["eaq_code"] = code_identity()
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[:16]
