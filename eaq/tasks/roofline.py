"""Roofline efficiency of a run, and the ``task=calibrate`` job that measures the peak.

The peak FLOP/J per device and matmul format is measured once (a large matrix product in
a measurement window) and cached in ``paths.cache_dir``; ``task=calibrate`` re-measures.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path

import torch

from eaq.config import EaqConfig
from eaq.device import describe_device, device_key, resolve_device
from eaq.errors import EaqError
from eaq.files import exclusive
from eaq.measure.samplers import measures_energy, select_sampler
from eaq.measure.roofline import CALIBRATION_SIZE, Calibration, calibrate, calibration_path, load_calibration, save_calibration
from eaq.precision import get_precision
from eaq.precision.base import set_tf32
from eaq.tasks.result import TaskResult

log = logging.getLogger(__name__)


def _calibration(cfg: EaqConfig, device: torch.device, matmul: str, reuse: bool) -> Calibration | None:
    """The cached peak (``reuse``) or a new measurement, cached; None when no sampler measures energy.

    Under a lock per device and format: two runs that need the peak at the same moment
    measure it once (the second reads the first's), and never while the other's matmul
    loads the same device, which would halve both peaks.
    """
    path = calibration_path(cfg.paths.cache_dir, device_key(device), matmul)
    with exclusive(path.with_suffix(".lock")):
        if reuse and (cached := load_calibration(path)) is not None:
            return cached
        sampler = select_sampler(cfg.sampler.name, device, cfg.sampler.interval_ms / 1e3)
        if not measures_energy(sampler):
            return None
        size = CALIBRATION_SIZE if device.type == "cuda" else 2048  # a CPU needs minutes for 8192^3
        set_tf32(matmul == "tfloat32")  # fp32 products run as IEEE fp32 unless the format is TF32
        calibration = calibrate(device, matmul, sampler, cfg.trials.roofline_window_s, size=size)
        if calibration is not None:
            save_calibration(path, calibration)
        return calibration


def roofline_metrics(
    cfg: EaqConfig, device: torch.device, matmul: str, flops_per_batch: int, energy_j: float, iterations: int
) -> tuple[dict[str, float], dict[str, str]]:
    calibration = _calibration(cfg, device, matmul, reuse=True)
    if calibration is None:
        return {"forward_flops_per_batch": float(flops_per_batch)}, {}
    achieved = flops_per_batch * iterations / energy_j
    metrics = {
        "forward_flops_per_batch": float(flops_per_batch),
        "achieved_flop_per_j": achieved,
        "peak_flop_per_j": calibration.flop_per_j,
        "peak_tflops": calibration.tflops,
        "roofline_efficiency": achieved / calibration.flop_per_j,
        "energy_roofline_limit_per_sample_mj": flops_per_batch / cfg.batch_size / calibration.flop_per_j * 1e3,
    }
    return metrics, {"eaq.roofline.calibration": f"{calibration.matmul} {calibration.size}^3 on {calibration.device_name}"}


def run_calibration(cfg: EaqConfig, artifact_dir: Path) -> TaskResult:
    """``python -m eaq.run task=calibrate precision=bf16``: measure and cache the peak FLOP/J."""
    device = resolve_device(cfg.device)
    precision = get_precision(cfg.precision.name, device, cfg.precision.plan)
    calibration = _calibration(cfg, device, precision.matmul, reuse=False)
    if calibration is None:
        raise EaqError(
            f"task=calibrate needs a sampler that measures energy, and sampler={cfg.sampler.name} measures none on {device}; "
            "run it on a GPU with sampler=nvml (or a CPU with readable RAPL and sampler=rapl)."
        )
    metrics = {"peak_flop_per_j": calibration.flop_per_j, "peak_tflops": calibration.tflops, "power_mean_w": calibration.power_mean_w}
    tags = {f"eaq.calibration.{k}": str(v) for k, v in asdict(calibration).items()}
    log.info("calibration: %s", calibration)
    return TaskResult(metrics=metrics, tags={"eaq.kind": "calibrate", **tags}, device=describe_device(device), files=[])


__all__ = ["roofline_metrics", "run_calibration"]
