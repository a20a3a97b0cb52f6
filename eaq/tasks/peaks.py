"""Which cached roofline peak a run's settings resolve to, readable without torch.

A run finds its peak FLOP/J under the device's UUID and its precision's matmul format
(``eaq.tasks.roofline``): both known only once torch is imported (and CUDA asked, for a
GPU's UUID and capability). The sweep's own process imports neither: torch alone took 4 s
of the fork server's imports on the H100 machine
(docs/results/2026-11-25-h100-diag/importtime.txt), and the calibrations ahead of the runs
(``eaq.tasks.ahead``) start from that process's start-up. So each lookup that finds or
makes a peak also records which file it resolved to, under the settings that decide the
file and are known without torch: the host, CUDA's device numbering
(``CUDA_VISIBLE_DEVICES``, ``CUDA_DEVICE_ORDER``), the ``device`` setting, the sampler, the precision,
and its plan file's content (with a plan, the model too). ``cached`` reads that record and checks the file the run will
load, so a sweep whose peaks are all cached starts no calibrating process.

A record can only err towards more measuring: none yet (a new cache) leaves the
calibration to the process ahead, as before; one pointing at a file that is gone, or at
another GPU's (a card swapped behind the same setting), leaves it to the run itself,
which measures it as without ``calibrate_ahead``.

Imports nothing heavy: the sweep's process reads it.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from pathlib import Path

from eaq.config import EaqConfig
from eaq.files import atomic_write_text, file_sha256, read_cached


def _settings(cfg: EaqConfig) -> dict[str, str | None]:
    """What decides which calibration file a run of ``cfg`` on this host reads."""
    plan = Path(cfg.precision.plan).expanduser() if cfg.precision.plan else None
    # Which GPU ``auto`` or ``cuda:N`` names; ``cpu`` is the CPU whatever CUDA's numbering.
    numbering = {name: os.environ.get(name) for name in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")} if cfg.device != "cpu" else {}
    return {
        "host": socket.gethostname(),
        **numbering,
        "device": cfg.device,
        "precision": cfg.precision.name,
        "sampler": cfg.sampler.name,  # a peak per sampler (eaq.measure.roofline.calibration_path)
        # A plan's matmul format is that of most of the model's Linear layers, the plan's and the base's: its content
        # and the model's layers decide it (a head adds one, a classifier head on an embedding model one more), not
        # the plan's name.
        "plan_sha256": file_sha256(plan) if plan and plan.is_file() else cfg.precision.plan,
        **({"model": cfg.model.name_or_path, "architecture": json.dumps(cfg.model.architecture, sort_keys=True),
            "head": cfg.model.head, "classifier_head": cfg.model.classifier_head} if plan else {}),
    }


def _record_path(cfg: EaqConfig, settings: dict[str, str | None]) -> Path:
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
    return Path(cfg.paths.cache_dir) / "roofline" / f"peak-{digest}.json"


def remember(cfg: EaqConfig, calibration: Path) -> None:
    """Record that a run of ``cfg`` here reads the peak at ``calibration`` (written only when it changes)."""
    settings = _settings(cfg)
    record = _record_path(cfg, settings)
    text = json.dumps({"settings": settings, "calibration": calibration.name}, indent=2, sort_keys=True)
    if read_cached(record, Path.read_text) != text:
        atomic_write_text(record, text)


def cached(cfg: EaqConfig) -> bool:
    """Whether the peak a run of ``cfg`` here will compare against is in the cache (as recorded by ``remember``)."""
    record = _record_path(cfg, _settings(cfg))
    name = read_cached(record, lambda found: str(json.loads(found.read_text())["calibration"]))
    # Read as the run will read it (eaq.measure.roofline.load_calibration, whose torch this process does without): a
    # file cut short is measured by the run, inside its job, unless the sweep measures it ahead.
    calibration = Path(cfg.paths.cache_dir) / name if name is not None else None
    return calibration is not None and read_cached(calibration, lambda found: json.loads(found.read_text())) is not None
