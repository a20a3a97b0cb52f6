"""Where a run's idle baseline is kept and when it still stands.

The benchmark and the layers task pass ``idle_store`` to ``eaq.measure.idle.idle_baseline``;
the reuse rules (age, temperature, SM clock, performance state) are
``eaq.measure.idle.stale_reason``, and each run's tag ``eaq.idle`` says which baseline it used.

A run measures its baseline itself, with its own CUDA context open, and no process ahead of
a sweep's runs takes it for them: on the H100 the same idle GPU drew 76 W without a context
in the measuring process and 131 W with one (SM clock 345 against 1980 MHz, both P0;
docs/results/2026-11-25-h100-sweep-time, night), so a baseline read by NVML alone before
the runs is not the idle of any run (the runs refused it by the clock rule). Taken with torch
and a context (the evening's call there), that process needed about 9 s of imports and CUDA's
start before its 5 s window, so the first run waited at the device gate about as long as it
takes to measure its own baseline once the fork server is ready.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from eaq.config import EaqConfig
from eaq.measure.idle import ReusePolicy, baseline_path
from eaq.measure.samplers import Sampler

if TYPE_CHECKING:
    import torch


def idle_store(cfg: EaqConfig, device: torch.device, sampler: Sampler) -> tuple[Path, ReusePolicy] | None:
    """Where this device's idle baseline is kept and when it still stands; None (measured, neither reused nor kept)
    with ``trials.idle_reuse=false``, and for a CPU that other jobs of the sweep share: under GPU slots, or started
    with every other job by submitit's local executor (``eaq.slots.local_executor``). RAPL shows no other process, so
    such an idle cannot be told from a quiet one, and kept it would be netted from a later run alone on the host."""
    from eaq.device import device_key
    from eaq.slots import local_executor

    shared = device.type == "cpu" and (cfg.gpu_slots.enabled or local_executor())
    if not cfg.trials.idle_reuse or shared:
        return None
    policy = ReusePolicy(cfg.trials.idle_max_age_s, cfg.trials.idle_max_temp_delta_c, cfg.trials.idle_max_clock_change)
    return baseline_path(cfg.paths.cache_dir, device_key(device), sampler.name), policy
