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

Imports torch and the samplers only: it runs in that light process.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from eaq.config import EaqConfig, auto_seconds
from eaq.device import device_key, resolve_device
from eaq.measure.idle import ReusePolicy, baseline_path, idle_baseline
from eaq.measure.samplers import Sampler, measures_energy, select_sampler, wait_for_sample


def idle_store(cfg: EaqConfig, device: torch.device, sampler: Sampler) -> tuple[Path, ReusePolicy] | None:
    """Where this device's idle baseline is kept and when it still stands (None: ``trials.idle_reuse=false``)."""
    if not cfg.trials.idle_reuse:
        return None
    policy = ReusePolicy(cfg.trials.idle_max_age_s, cfg.trials.idle_max_temp_delta_c, cfg.trials.idle_max_clock_change)
    return baseline_path(cfg.paths.cache_dir, device_key(device), sampler.name), policy


def ensure_idle(cfg: EaqConfig) -> str:
    """The idle baseline a run of ``cfg`` will look for: reused if it still stands, else measured now and stored; what happened.

    Measured as a run measures it (its sampler started, a sample past the start awaited,
    ``trials.idle_s`` idle, 5 s when left null), so the stored figure is the one the run
    would have taken.
    """
    device = resolve_device(cfg.device)
    sampler = select_sampler(cfg.sampler.name, device, cfg.sampler.interval_ms / 1e3)
    if not measures_energy(sampler):
        return f"no sampler measures energy on {device}"
    idle_s = auto_seconds(cfg.trials.idle_s, measuring=True)
    sampler.start()
    try:
        wait_for_sample(sampler)
        started = time.time()
        baseline, _, tags = idle_baseline(device, sampler, idle_s, idle_store(cfg, device, sampler))
    finally:
        sampler.stop()
    if baseline is None:
        return tags["eaq.idle"]
    how = "measured" if baseline.measured_unix_s >= started else "still stands"
    return f"{how}: {baseline.power_w:.1f} W at {baseline.facts.get('temperature_c', float('nan')):.0f} C ({tags['eaq.idle']})"
