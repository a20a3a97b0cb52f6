"""What a run executed on: package versions, machine, code revision."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("torch", "transformers", "torchao", "mlflow", "hydra-core", "omegaconf", "nvidia-ml-py", "eaq")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git(root: Path) -> dict[str, str]:
    def run(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()

    try:
        commit = run("rev-parse", "HEAD")
        dirty = bool(run("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "dirty": "unknown"}
    return {"commit": commit or "unknown", "dirty": str(dirty).lower() if commit else "unknown"}


def capture(device: dict[str, Any]) -> dict[str, Any]:
    """Environment facts for ``env.json``; ``device`` comes from the caller, which knows torch."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "packages": {p: _version(p) for p in PACKAGES},
        "git": _git(Path(__file__).resolve().parents[2]),
        "device": device,
    }
