"""The idle baseline as a run looks for it, and taken ahead of a sweep's first run on a GPU.

``idle_store`` says where a run's baseline is kept and when it still stands; the benchmark
and the layers task pass it to ``eaq.measure.idle.idle_baseline``. ``ensure_idle`` takes the
first run's baseline from the process that works ahead of a sweep's runs (``eaq.tasks.ahead``,
``eaq.tasks.calibrate_ahead``): a sweep whose peaks were all cached had its first run wait
for the fork server's imports with the device idle, then sit idle 5 s more to measure this
baseline (docs/results/2026-11-25-h100-sweep-time: 7.3 s of waiting, then 5.0 s idle).
Measured during the wait, the run finds it stored seconds earlier and reuses it under the
usual rules (temperature, SM clock, performance state: ``eaq.measure.idle.stale_reason``),
its tag ``eaq.idle`` saying so.

It reads NVML alone, without torch: importing torch and starting CUDA took that process
about 9 s on the H100 host, more than the server's imports it hides behind (the evening's
call in the same folder). The GPU is found as CUDA will number it (``eaq.slots.visible_gpus``:
NVML's order, which ``eaq.run`` makes CUDA's), the baseline is keyed by its UUID without
NVML's ``GPU-`` prefix (what the run's ``device_key`` reads from torch), and the window waits
for no device work, there being none. What differs from a run's own baseline: no CUDA context
is open while it is measured; a device that idles in another performance state with one is
caught by the reuse rule. Whatever it cannot take this way is left to the run: a CPU (RAPL
would be read while the server imports, which is not idle), a GPU NVML cannot map to CUDA's
numbering (another device order, MIG), nvidia-smi polled beside NVML, GPU slots (a neighbour
may be working on the GPU), or another process on the GPU.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from eaq.config import EaqConfig, auto_seconds
from eaq.measure.idle import ReusePolicy, baseline_path, idle_baseline
from eaq.measure.nvml import NvmlSampler
from eaq.measure.nvml_read import import_pynvml
from eaq.measure.samplers import Sampler, wait_for_sample
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


def _mig_enabled(uuid: str) -> bool:
    """Whether the GPU runs in MIG mode (CUDA then numbers its instances, not the GPU); False where NVML cannot say."""
    try:
        nvml = import_pynvml()
        nvml.nvmlInit()
        return bool(nvml.nvmlDeviceGetMigMode(nvml.nvmlDeviceGetHandleByUUID(uuid))[0])
    except Exception:  # no MIG support or no reading: a GPU without instances
        return False


def _gpu_index(cfg: EaqConfig) -> int | None:
    """The CUDA index of the GPU a run of ``cfg`` measures with NVML alone, read from its settings; None: not such a run.

    The settings part of ``nvml_gpu``, which the sweep's process also asks when it plans (``eaq.tasks.ahead``).
    """
    if (os.environ.get(ORDER) != "PCI_BUS_ID" or cfg.sampler.name not in ("auto", "nvml") or cfg.sampler.compare_nvidia_smi
            or cfg.gpu_slots.enabled):
        return None
    if cfg.device in ("auto", "cuda"):
        return 0
    if cfg.device.startswith("cuda:") and cfg.device[5:].isdigit():
        return int(cfg.device[5:])
    return None


def takes_idle_ahead(cfg: EaqConfig) -> bool:
    """Whether a run of ``cfg`` looks for a stored idle baseline that NVML alone could take ahead of it."""
    return cfg.trials.idle_reuse and cfg.trials.idle_s != 0 and _gpu_index(cfg) is not None


def nvml_gpu(cfg: EaqConfig) -> str | None:
    """The NVML UUID of the GPU a run of ``cfg`` will measure with NVML alone, found without torch; None: leave it to the run."""
    index = _gpu_index(cfg)
    if index is None:
        return None
    gpus = visible_gpus()
    if index >= len(gpus) or _mig_enabled(gpus[index]):
        return None
    return gpus[index]


def _nvml_sampler(uuid: str, interval_s: float) -> Sampler:
    return NvmlSampler(uuid, interval_s)


def ensure_idle(cfg: EaqConfig) -> str:
    """The idle baseline a run of ``cfg`` will look for: reused if it still stands, else measured now and stored; what happened.

    Measured as a run measures it (the run's NVML sampler started, a sample past the start
    awaited, ``trials.idle_s`` idle, 5 s when left null), so the stored figure is the one the
    run would have taken, but for the CUDA context (module docstring).
    """
    uuid = nvml_gpu(cfg)
    if uuid is None:
        return "left to the run (no GPU that NVML alone can measure as the run will)"
    sampler = _nvml_sampler(uuid, cfg.sampler.interval_ms / 1e3)
    if (reason := sampler.available()) is not None:
        return f"left to the run ({reason})"
    sampler.start()
    try:
        if others := sampler.snapshot().get("other_processes"):
            return f"left to the run ({others:.0f} other processes on the GPU)"
        wait_for_sample(sampler)
        started = time.time()
        baseline, _, tags = idle_baseline(None, sampler, auto_seconds(cfg.trials.idle_s, measuring=True), _store(cfg, uuid.removeprefix("GPU-"), sampler))
    finally:
        sampler.stop()
    if baseline is None:
        return tags["eaq.idle"]
    how = "measured" if baseline.measured_unix_s >= started else "still stands"
    return f"{how}: {baseline.power_w:.1f} W at {baseline.facts.get('temperature_c', float('nan')):.0f} C ({tags['eaq.idle']})"
