"""What a run executed on: code revision and identity, packages, machine, device; secrets redacted (by name, by value).

Written as ``env.json`` beside the resolved config (job folder and MLflow artifacts), so
``python -m eaq.diff`` can say what differed between two runs besides their configs.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from eaq.files import code_identity
from eaq.tracking.redact import REDACTED, redact, redact_tree

PACKAGES = ("torch", "transformers", "torchao", "mlflow", "mlflow-skinny", "hydra-core", "omegaconf", "nvidia-ml-py", "eaq")
# Environment variables whose names say they hold a secret: their values never leave the process.
# PASS covers PASSWORD, PASSWD, PASSPHRASE (BORG_PASSPHRASE) and SSHPASS; a PWD of a name's own (MYSQL_PWD), not
# the shell's PWD and OLDPWD (directories).
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASS|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|DSN|_PWD\b|PWD_", re.IGNORECASE)
# The variables that change what a run measures: threads, kernels and math modes (NVIDIA_TF32_OVERRIDE,
# CUBLAS_WORKSPACE_CONFIG, ONEDNN_DEFAULT_FPMATH_MODE, ATEN_CPU_CAPABILITY), the compiler (TORCHINDUCTOR_MAX_AUTOTUNE),
# which GPU, the allocator. By prefix; eaq.diff compares them like any fact.
MEASURED_ENVIRON = ("CUDA_", "CUBLAS", "CUDNN_", "NVIDIA_", "NCCL_", "PYTORCH_", "TORCHDYNAMO_", "TORCHINDUCTOR_",
                    "TORCH_COMPILE", "TORCH_CUDNN", "TORCH_BLAS", "TORCH_ALLOW_TF32", "TRITON_", "OMP_", "MKL_",
                    "OPENBLAS_", "KMP_", "GOMP_", "ATEN_", "ONEDNN_", "DNNL_", "MALLOC_")
# ... and those that say where and how it ran: these names exactly (a prefix would record USER_DB_PW), and the families
# of CONTEXT_FAMILIES by prefix. Only these values are recorded; any other variable by its name alone: a secret's name
# need not say so (AZURE_DEVOPS_EXT_PAT, DB_PW, a webhook URL that is itself the credential), and no list of names or
# value shapes finds them all.
CONTEXT_ENVIRON = frozenset({
    "PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONWARNINGS",
    "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "HF_HOME", "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "TRANSFORMERS_CACHE", "TOKENIZERS_PARALLELISM", "HYDRA_FULL_ERROR",
    "SLURM_JOB_ID", "SLURM_JOB_NAME", "SLURM_JOB_PARTITION", "SLURM_NODELIST", "SLURM_JOB_NODELIST",
    "SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE", "SLURM_GPUS", "SLURM_GPUS_ON_NODE", "SLURM_NTASKS", "SLURM_PROCID",
    "SLURM_LOCALID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "PWD", "OLDPWD", "HOME", "USER", "LANG", "TZ",
    "SHELL", "HOSTNAME",
})
CONTEXT_FAMILIES = ("EAQ_", "LC_")
# In env.json in place of a value not recorded.
NOT_RECORDED = "<not recorded>"


def package_version(package: str) -> str:
    """An installed distribution's version, or "not installed"."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _import_path_stamps() -> tuple[tuple[str, int], ...]:
    """Each import path folder with its modification time, which an install, upgrade or removal changes
    (each adds or removes a ``.dist-info`` folder there); 0 for an entry that is no folder."""
    stamps = []
    for entry in sys.path:
        try:
            stamps.append((entry, os.stat(entry or os.curdir).st_mtime_ns))
        except OSError:
            stamps.append((entry, 0))
    return tuple(stamps)


# The last scan, with the import path stamps it was read under.
_scanned: tuple[tuple[tuple[str, int], ...], list[str]] | None = None


def _installed() -> list[str]:
    """``pip freeze`` without pip: every installed distribution as name==version.

    Read again only when an import path folder changed: parsing every distribution's
    metadata took 0.05-0.09 s of each run's 0.12 s logging phase on this project's CPU
    machine, for the same answer every run of a sweep.
    """
    global _scanned
    stamps = _import_path_stamps()
    if _scanned is None or _scanned[0] != stamps:
        found = {(d.metadata["Name"] or "").lower(): d.version for d in metadata.distributions()}
        _scanned = stamps, sorted(f"{name}=={version}" for name, version in found.items() if name)
    return _scanned[1]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git(root: Path) -> dict[str, str]:
    def run(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10).stdout

    try:
        commit = run("rev-parse", "HEAD").strip()
        diff = run("diff", "HEAD")
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "dirty": "unknown", "diff_sha256": ""}
    if not re.fullmatch(r"[0-9a-f]{40}", commit):  # not a git checkout (a copied tree, an sdist)
        return {"commit": "unknown", "dirty": "unknown", "diff_sha256": ""}
    return {
        "commit": commit,
        "dirty": str(bool(diff)).lower(),
        # Two dirty trees with the same hash ran the same code.
        "diff_sha256": hashlib.sha256(diff.encode()).hexdigest()[:16] if diff else "",
    }


def _recorded(name: str, value: str) -> str:
    """What env.json keeps of one variable: a measured or context one's value, credentials in it redacted (a
    ``PYTHONPATH`` or proxy may hold a ``user:password@`` URL: eaq.tracking.redact knows those shapes); a name saying
    it holds a secret blanked (but for a context variable named exactly, none a secret: TOKENIZERS_PARALLELISM's TOKEN
    had blanked it); any other variable's value not recorded."""
    if name in CONTEXT_ENVIRON:
        return redact(value)
    if SECRET_NAME.search(name):
        return REDACTED
    if name.upper().startswith(MEASURED_ENVIRON + CONTEXT_FAMILIES):
        return redact(value)
    return NOT_RECORDED


def redacted_environ(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment's names, with the values of those that change or place a measurement (MEASURED_ENVIRON,
    CONTEXT_ENVIRON), credentials redacted, and no other value."""
    environ = dict(os.environ if environ is None else environ)
    return {k: _recorded(k, v) for k, v in sorted(environ.items())}


def capture(device: dict[str, Any], config_hash: str, read_files: dict[str, str]) -> dict[str, Any]:
    """Environment facts, credentials redacted; ``device`` comes from the task, which knows torch and the GPU;
    ``read_files``: the identities of the files the run read (eaq.tracking.flatten.read_files), which the config
    names by path only: ``python -m eaq.diff`` tells two runs of one plan path edited between them apart by them."""
    return redact_tree({
        "config_hash": config_hash,
        "read_files": read_files,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": platform.node(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "packages": {p: package_version(p) for p in PACKAGES},
        "pip_freeze": _installed(),
        "git": _git(Path(__file__).resolve().parents[2]),
        # eaq's own code by contents (its .py and conf/ YAML files): the same under two runs means the same code ran,
        # where the git commit says nothing (an installed copy, or a dirty tree edited between them).
        "eaq_code": code_identity(),
        "device": device,
        "environ": redacted_environ(),
    })


def device_name(spec: str) -> str | None:
    """The name ``eaq.env.device_name`` will hold for a run of ``device=spec``, known before the run starts and
    without a CUDA context (NVML; this process forks the runs): the CPU's model, or the GPU's name where every GPU
    this process sees has that name.

    None where it cannot be told: GPUs of several names (which one a run gets depends on the device order and on
    GPU slots), MIG instances (CUDA_VISIBLE_DEVICES names them; torch and NVML name them differently), or a GPU
    asked for where NVML sees none.
    """
    from eaq.slots import visible_gpus
    from eaq.measure.nvml import device_summaries

    if spec.startswith("cpu"):
        return cpu_model()
    gpus = {gpu["uuid"]: gpu for gpu in device_summaries()}
    seen = [gpus[uuid] for uuid in visible_gpus() if uuid in gpus]
    if "MIG-" in os.environ.get("CUDA_VISIBLE_DEVICES", "") or any(gpu.get("mig") for gpu in seen):
        return None
    visible = {gpu["name"] for gpu in seen}
    if spec == "auto" and not visible:
        return cpu_model()
    return visible.pop() if len(visible) == 1 else None


def summary_tags(env: dict[str, Any]) -> dict[str, str]:
    """The few facts worth a tag of their own (searchable in the MLflow UI)."""
    device = env["device"]
    return {
        "eaq.env.git_commit": env["git"]["commit"],
        "eaq.env.git_dirty": env["git"]["dirty"],
        "eaq.env.torch": env["packages"]["torch"],
        "eaq.env.transformers": env["packages"]["transformers"],
        "eaq.env.torchao": env["packages"]["torchao"],
        "eaq.env.device_name": device.get("gpu_name", env["cpu"]),
        **({"eaq.env.gpu_uuid": device["gpu_uuid"]} if "gpu_uuid" in device else {}),
    }
