"""The idle baseline as a run looks for it, and measured ahead of a sweep's first run.

``idle_store`` says where a run's baseline is kept and when it still stands; the benchmark
and the layers task pass it to ``eaq.measure.idle.idle_baseline``. ``ensure_idle`` takes the
baseline the way a run would (same device, sampler, duration and store) from the process
that works ahead of a sweep's runs (``eaq.tasks.ahead``, ``eaq.tasks.calibrate_ahead``): a
sweep whose peaks are all cached used to have its first run wait for the fork server's
imports with the device idle, then sit idle 5 s more to measure this baseline
(docs/results/2026-11-25-h100-sweep-time: 7.2 s of waiting, then 5.0 s idle). Measured
during the wait, the run finds it stored seconds earlier at the same temperature and reuses
it under the usual rules, its tag ``eaq.idle`` saying so.

On a GPU measured by NVML it does so without torch: importing torch and starting CUDA took
that process about 9 s on the H100 host, more than the fork server's imports it hides behind
(the evening's call in the same folder). The GPU is found as CUDA will number it
(``eaq.slots.visible_gpus``: NVML's order, which ``eaq.run`` makes CUDA's), its key is the
UUID the run's ``device_key`` reads (NVML's, without the ``GPU-`` prefix), and the window
waits for no device work, there being none. Elsewhere, or when the order is the user's own,
it resolves the device through torch as the run does.

Imports no torch until it needs it: it runs in that light process.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from eaq.config import EaqConfig, auto_seconds
from eaq.measure.idle import ReusePolicy, baseline_path, idle_baseline
from eaq.measure.nvml import NvmlSampler
from eaq.measure.samplers import Sampler, measures_energy, wait_for_sample
from eaq.slots import ORDER, visible_gpus

if TYPE_CHECKING:
    import torch


def _store(cfg: EaqConfig, key: str, sampler: Sampler) -> tuple[Path, ReusePolicy] | None:
    if not cfg.trials.idle_reuse:
        return None
    policy = ReusePolicy(cfg.trials.idle_max_age_s, cfg.trials.idle_max_temp_delta_c, cfg.trials.idle_max_clock_change)
    return baseline_path(cfg.paths.cache_dir, key, sampler.name), policy


def idle_store(cfg: EaqConfig, device: torch.device, sampler: Sampler) -> tuple[Path, ReusePolicy] | None:
    """Where this device's idle baseline is kept and when it still stands (None: ``trials.idle_reuse=false``)."""
    from eaq.device import device_key

    return _store(cfg, device_key(device), sampler)


def nvml_gpu(cfg: EaqConfig) -> str | None:
    """The NVML UUID of the GPU a run of ``cfg`` will measure with NVML, found without torch; None: ask torch.

    Only where CUDA numbers GPUs as NVML does (``CUDA_DEVICE_ORDER=PCI_BUS_ID``, set by ``eaq.run``
    unless the user set another) and the run's sampler is NVML's alone (``auto`` or ``nvml``).
    """
    spec = cfg.device
    if os.environ.get(ORDER) != "PCI_BUS_ID" or cfg.sampler.name not in ("auto", "nvml") or cfg.sampler.compare_nvidia_smi:
        return None
    if spec in ("auto", "cuda"):
        index = 0
    elif spec.startswith("cuda:") and spec[5:].isdigit():
        index = int(spec[5:])
    else:
        return None
    gpus = visible_gpus()
    return gpus[index] if index < len(gpus) else None


def _nvml_sampler(uuid: str, interval_s: float) -> Sampler:
    return NvmlSampler(uuid, interval_s)


def _measure(cfg: EaqConfig, device: torch.device | None, key: str, sampler: Sampler) -> str:
    if not measures_energy(sampler):
        return f"no sampler measures energy on {cfg.device}"
    sampler.start()
    try:
        wait_for_sample(sampler)
        started = time.time()
        baseline, _, tags = idle_baseline(device, sampler, auto_seconds(cfg.trials.idle_s, measuring=True), _store(cfg, key, sampler))
    finally:
        sampler.stop()
    if baseline is None:
        return tags["eaq.idle"]
    how = "measured" if baseline.measured_unix_s >= started else "still stands"
    return f"{how}: {baseline.power_w:.1f} W at {baseline.facts.get('temperature_c', float('nan')):.0f} C ({tags['eaq.idle']})"


def ensure_idle(cfg: EaqConfig) -> str:
    """The idle baseline a run of ``cfg`` will look for: reused if it still stands, else measured now and stored; what happened.

    Measured as a run measures it (its sampler started, a sample past the start awaited,
    ``trials.idle_s`` idle, 5 s when left null), so the stored figure is the one the run
    would have taken.
    """
    uuid = nvml_gpu(cfg)
    if uuid is not None:
        sampler = _nvml_sampler(uuid, cfg.sampler.interval_ms / 1e3)
        if sampler.available() is None:
            return _measure(cfg, None, uuid.removeprefix("GPU-"), sampler) + " (NVML only)"
    from eaq.device import device_key, resolve_device
    from eaq.measure.samplers import select_sampler

    device = resolve_device(cfg.device)
    return _measure(cfg, device, device_key(device), select_sampler(cfg.sampler.name, device, cfg.sampler.interval_ms / 1e3))
