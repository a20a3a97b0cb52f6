"""fp32 reference outputs, computed once per model, data and length and cached on disk.

Every precision of a sweep compares against the same tensors, and the fp32 model is not
run again for each of them. Stored as safetensors (never pickle).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

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
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_file({"outputs": outputs.contiguous()}, tmp)
    tmp.replace(path)  # atomic: a parallel job never reads a half-written file
    return outputs
