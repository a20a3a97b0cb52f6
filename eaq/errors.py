"""Errors a user can act on.

Each message is one sentence: what was wrong, what is valid, what to do. The entrypoint
prints it without a traceback (``debug=true`` shows one) and exits non-zero.
"""

from __future__ import annotations

from pathlib import Path


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


# Why a job under GPU slots runs in a process of its own: refused in a job (validate) and ahead of a gpus sweep.
ISOLATE_WITH_SLOTS = (
    "isolate=false with GPU slots (hydra/launcher=gpus, or gpu_slots.enabled=true) would run each job where its CUDA "
    "context and cached memory outlive the run (a long-lived worker) and may take another slot next, sharing the GPU "
    "another job measures (its windows flagged for another process); leave isolate=true with GPU slots."
)


# A plan refused before the run opens (eaq.config.validate) and where it is read (eaq.precision.mixed), in one wording.
NO_PLAN = "precision=mixed needs precision.plan=FILE (a plan YAML, e.g. the layers/plan.yaml of a task=layers run)."


def first_line(error: BaseException) -> str:
    """What ``error`` says first, or its class's name where it says nothing: a library's message quoted inside one
    sentence (MLflow's goes on for lines and quotes its request's URL; torch's capture errors carry advice)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def missing_plan(path: object) -> str:
    """The sentence for a plan file that is not there (or a folder where the file should be)."""
    what = "is a folder, not a file" if Path(str(path)).expanduser().is_dir() else "does not exist"
    return f"precision.plan={path} {what}; give the path of a plan YAML (e.g. the layers/plan.yaml a task=layers run wrote)."
