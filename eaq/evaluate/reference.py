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
from safetensors.torch import load_file, save

from eaq.files import cached, code_identity

log = logging.getLogger(__name__)


def weights_fingerprint(model: torch.nn.Module, samples: int = 1024) -> str:
    """A short hash of the model's weights: every tensor's name, shape and dtype, and ``samples`` values strided
    over it (a few kB copied to the host, not the model).

    The reference's key needs it beside the model's settings: random weights drawn from one seed differ between
    GPUs (torch's CUDA generator spreads its draws over the device's multiprocessors) and torch or transformers
    versions, and a folder can be saved over; a reference of other weights would put every precision, fp32 too,
    out of agreement with it, without an error.
    """
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        flat = tensor.detach().reshape(-1)
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
        digest.update(flat[:: max(1, flat.numel() // samples)][:samples].float().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def reference_key(**settings: object) -> str:
    """A short hash of everything the reference outputs (or cached figures) depend on: ``settings``, and eaq's own code.

    The code counts because it computes what is cached (how outputs are collected, pooled, scored): after an edit or
    upgrade of eaq, a reference the old code computed would be read back as the new code's, without a word.
    """
    blob = json.dumps({**settings, "eaq_code": code_identity()}, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def cached_reference(cache_dir: str | Path, key: str, compute: Callable[[], torch.Tensor]) -> torch.Tensor:
    path = Path(cache_dir) / f"fp32-reference-{key}.safetensors"
    outputs, hit = cached(path, lambda found: load_file(found)["outputs"], lambda: compute().contiguous(),
                          lambda value, tmp: tmp.write_bytes(save({"outputs": value})))
    if hit:
        log.info("fp32 reference from cache %s", path)
    return outputs


def cached_figures(
    cache_dir: str | Path, kind: str, key: str, compute: Callable[[], dict[str, float]]
) -> tuple[dict[str, float], bool]:
    """Figures of ``kind`` (quality, flops) for ``key`` (all that they depend on, hashed): (figures, whether they came from the cache)."""
    return cached(Path(cache_dir) / f"{kind}-{key}.json",
                  lambda found: {k: float(v) for k, v in json.loads(found.read_text()).items()},
                  compute, lambda figures, tmp: tmp.write_text(json.dumps(figures)))
