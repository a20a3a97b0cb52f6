"""Flatten a resolved config into MLflow params, and hash what makes a measurement what it is."""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Settings that change where results go or how errors print, not what is measured.
# Where a run is logged and how it is scheduled (gpu_slots: which of a host's GPUs), not what it measures.
NOT_MEASUREMENT = ("tracking", "paths", "debug", "run_name", "resume", "gpu_slots", "calibrate_ahead")


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


def config_hash(resolved: dict[str, Any]) -> str:
    """Equal hashes mean the same measurement: same model, precision, data, protocol, device, trial."""
    relevant = {k: v for k, v in resolved.items() if k not in NOT_MEASUREMENT}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[:16]
