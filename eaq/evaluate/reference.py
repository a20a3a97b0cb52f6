"""fp32 reference outputs and quality figures, computed once and cached on disk.

Every precision of a sweep compares against the same reference tensors, and the fp32
model is not run again for each of them. Stored as safetensors (never pickle).

A configuration's quality figures are the same for every trial: the trial index seeds
nothing that quality depends on (weights are seeded by ``model.seed``, the data is
fixed, evaluation is deterministic), so computing them again for each of five trials
only repeats the same forward passes (on this CPU, fp16 quality took 26 s of an 86 s
run). ``cached_figures`` keeps them per configuration, and each run says where its
figures came from; it keeps a model's forward FLOP count the same way (eaq.tasks.benchmark).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from eaq.files import atomic_write, atomic_write_text

log = logging.getLogger(__name__)


def reference_key(**settings: object) -> str:
    """A short hash of everything the reference outputs depend on."""
    blob = json.dumps(settings, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def cached_reference(cache_dir: str | Path, key: str, compute: Callable[[], torch.Tensor]) -> torch.Tensor:
    path = Path(cache_dir) / f"fp32-reference-{key}.safetensors"
    if path.exists():
        log.info("fp32 reference from cache %s", path)
        return load_file(path)["outputs"]
    outputs = compute()
    atomic_write(path, lambda tmp: save_file({"outputs": outputs.contiguous()}, tmp))
    return outputs


def cached_figures(
    cache_dir: str | Path, kind: str, key: str, compute: Callable[[], dict[str, float]]
) -> tuple[dict[str, float], bool]:
    """Figures of ``kind`` (quality, flops) for ``key`` (all that they depend on, hashed): (figures, whether they came from the cache)."""
    path = Path(cache_dir) / f"{kind}-{key}.json"
    try:
        return {k: float(v) for k, v in json.loads(path.read_text()).items()}, True
    except (OSError, ValueError, AttributeError):
        pass  # none yet, or unreadable: compute
    figures = compute()
    atomic_write_text(path, json.dumps(figures))
    return figures, False
