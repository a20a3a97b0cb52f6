"""Roofline efficiency of a run, and the ``task=calibrate`` job that measures the peaks.

The peak FLOP/J per device and matmul format is measured once (a large matrix product in
a measurement window) and cached in ``paths.cache_dir``; so is the memory bandwidth that
bounds a decode step (a large copy). ``task=calibrate`` re-measures both.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path

import torch

from eaq.config import EaqConfig
from eaq.device import describe_device, device_key, resolve_device
from eaq.errors import EaqError
from eaq.files import exclusive
from eaq.measure.phases import Phases
from eaq.measure.samplers import measures_energy, select_sampler
from eaq.measure.roofline import (
    CALIBRATION_SIZE,
    Bandwidth,
    Calibration,
    bandwidth_path,
    calibrate,
    calibration_path,
    load_bandwidth,
    load_calibration,
    measure_bandwidth,
    save_calibration,
)
from eaq.models import model_skeleton
from eaq.precision import get_precision
from eaq.precision.mixed import MixedPrecision
from eaq.precision.base import set_tf32
from eaq.slots import local_executor
from eaq.tasks import peaks
from eaq.tasks.isolation import phase_listener
from eaq.tasks.result import TaskResult

log = logging.getLogger(__name__)


def _calibration(cfg: EaqConfig, device: torch.device, matmul: str, reuse: bool) -> Calibration | None:
    """The cached peak (``reuse``) or a new measurement, cached; None when no sampler measures energy.

    Under a lock per device: two runs that need a peak at the same moment measure it once
    (the second reads the first's), and never while the other's matmul loads the same device,
    which would halve both peaks. A peak is kept per sampler (``calibration_path``). A peak
    found or made is recorded for ``cfg``'s settings (eaq.tasks.peaks), so a sweep's process
    finds it without torch. One measured beside other jobs (``_beside_others``) is not cached.
    """
    sampler = select_sampler(cfg.sampler.name, device, cfg.sampler.interval_ms / 1e3)
    if not measures_energy(sampler):
        return None
    path = calibration_path(cfg.paths.cache_dir, device_key(device), matmul, sampler.name)
    with exclusive(path.with_name(f"roofline-{device_key(device)}.lock")):
        calibration = load_calibration(path) if reuse else None
        if calibration is None:
            size = CALIBRATION_SIZE if device.type == "cuda" else 2048  # a CPU needs minutes for 8192^3
            set_tf32(matmul == "tfloat32")  # fp32 products run as IEEE fp32 unless the format is TF32
            calibration = calibrate(device, matmul, sampler, cfg.trials.roofline_window_s, size=size)
            if calibration is None:
                return None
            if _beside_others(cfg, device) is not None:
                return calibration
            save_calibration(path, calibration)
        peaks.remember(cfg, path)
        return calibration


def _copies(bandwidth: Bandwidth) -> str:
    """How a bandwidth was measured: the buffer each timed copy reads and writes, and where."""
    return f"copies of a {bandwidth.bytes_per_copy / 2 / 2**30:.2f} GiB buffer (read and written) on {bandwidth.device_name}"


def _bandwidth(cfg: EaqConfig, device: torch.device, reuse: bool) -> Bandwidth:
    """The cached memory bandwidth (``reuse``) or a new measurement, cached unless measured beside other jobs
    (``_beside_others``); under a lock like the FLOP/J peak."""
    path = bandwidth_path(cfg.paths.cache_dir, device_key(device))
    with exclusive(path.with_suffix(".lock")):
        if reuse and (cached := load_bandwidth(path)) is not None:
            return cached
        # 1 GiB per buffer on a GPU (far past its 50 MB L2); 256 MiB on a CPU, past any L3.
        bandwidth = measure_bandwidth(device, 2**30 if device.type == "cuda" else 2**28)
        if _beside_others(cfg, device) is None:
            save_calibration(path, bandwidth)
        return bandwidth


def _beside_others(cfg: EaqConfig, device: torch.device) -> str | None:
    """Why a calibration here may measure other jobs too, or None: submitit's local executor starts every job of a
    sweep at once on this host, and CPU slots (hydra/launcher=gpus on a CPU) run several on one CPU (whether one did is
    known only after: the shared-CPU check flags the run then). Such a calibration (task=calibrate's, or one a run makes
    on first need) is logged and not cached: a slurm_local sweep of three had cached 4.3 GB/s for a CPU that copies
    17-18 GB/s alone, and the valid runs after it read their roofline from that."""
    if local_executor():
        return "it ran under submitit's local executor, beside the sweep's other jobs"
    if device.type == "cpu" and cfg.gpu_slots.enabled and cfg.gpu_slots.count != 1:
        return f"it ran on the CPU under {cfg.gpu_slots.count or 'several'} GPU slots, where other jobs may run beside it"
    return None


def decode_roofline_metrics(
    cfg: EaqConfig, device: torch.device, bytes_per_step: float, counted: str, step_s: float
) -> tuple[dict[str, float], dict[str, str]]:
    """A decode step against the memory bound: the bytes it must read over the measured bandwidth.

    ``bytes_per_step``: the stored weights a step reads (``stored_bytes_read``) plus the KV cache it reads on average;
    ``counted``: what those bytes count, in words (``decode_bytes_counted``), recorded with them (tag
    eaq.roofline.decode_bytes: runs before 2026-11-26 counted every embedding table whole, runs before 2026-11-29
    every routed expert, and a tag naming no experts); ``step_s``: the measured mean time of a decode step.
    """
    tags = {"eaq.roofline.decode_bytes": counted}
    try:
        bandwidth = _bandwidth(cfg, device, reuse=True)
    except torch.OutOfMemoryError:
        return {"decode_bytes_per_step_mb": bytes_per_step / 1e6}, tags | {"eaq.roofline.bandwidth": _no_room(cfg, device, "bandwidth")}
    limit_s = bytes_per_step / (bandwidth.gb_per_s * 1e9)
    metrics = {
        "decode_bytes_per_step_mb": bytes_per_step / 1e6,
        "peak_bandwidth_gb_per_s": bandwidth.gb_per_s,
        "decode_achieved_bandwidth_gb_per_s": bytes_per_step / step_s / 1e9,
        "decode_bandwidth_limit_ms": limit_s * 1e3,
        "decode_bandwidth_fraction": limit_s / step_s,
    }
    return metrics, tags | {"eaq.roofline.bandwidth": _copies(bandwidth)}


def _no_room(cfg: EaqConfig, device: torch.device, what: str) -> str:
    """Why a run has no roofline figure whose first measurement found no room beside the run's model: measured after
    the run's window, a peak or bandwidth not cached yet costs the run that figure, not its measurement."""
    torch.cuda.empty_cache()  # the measurement's own buffers, freed, for the checks after it
    return (f"none: measuring the {what} ran out of device memory beside this run's model and data on {device}; "
            f"python -m eaq.run task=calibrate precision={cfg.precision.name} measures it alone, for the runs after it")


def roofline_metrics(
    cfg: EaqConfig, device: torch.device, matmul: str, flops_per_batch: int, energy_j: float, iterations: int
) -> tuple[dict[str, float], dict[str, str]]:
    try:
        calibration = _calibration(cfg, device, matmul, reuse=True)
    except torch.OutOfMemoryError:
        return {"forward_flops_per_batch": float(flops_per_batch)}, {"eaq.roofline.calibration": _no_room(cfg, device, "peak FLOP/J")}
    except EaqError as exc:
        # Measured after the run's own window: a peak refused (too few sensor updates, another process, a slowdown)
        # costs the run its roofline figures, not its measurement.
        return {"forward_flops_per_batch": float(flops_per_batch)}, {
            "eaq.roofline.calibration": f"none: {exc} (python -m eaq.run task=calibrate precision={cfg.precision.name} measures it alone)"
        }
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
    return metrics, {
        "eaq.roofline.calibration": f"{calibration.matmul} {calibration.size}^3 on {calibration.device_name}",
        "eaq.roofline.calibration.measured_unix_s": f"{calibration.measured_unix_s:.3f}",
    }


def _matmul(cfg: EaqConfig, device: torch.device) -> str:
    """The matmul format of ``cfg``'s precision; a mixed plan's is that of most of the model's Linear layers, the
    plan's and the base's, learnt from the model's skeleton (no weights)."""
    precision = get_precision(cfg.precision.name, device, cfg.precision.plan)
    if isinstance(precision, MixedPrecision):
        precision.check(model_skeleton(cfg.model))
    return precision.matmul


def ensure_calibration(cfg: EaqConfig) -> str:
    """The peak a benchmark run of ``cfg`` will compare against, measured now unless cached (eaq.tasks.ahead); what happened."""
    device = resolve_device(cfg.device)
    matmul = _matmul(cfg, device)
    started = time.time()
    calibration = _calibration(cfg, device, matmul, reuse=True)
    if calibration is None:
        return f"{matmul}: no sampler measures energy on {device}"
    how = "measured" if calibration.measured_unix_s >= started else "cached"
    return f"{matmul} {how}: {calibration.flop_per_j / 1e12:.4f} TFLOP/J"


def _measured(bandwidth: Bandwidth, cached: bool) -> str:
    """The bandwidth as a sentence for the log (its dataclass printed whole read as a Python dump)."""
    return f"memory bandwidth {bandwidth.gb_per_s:.1f} GB/s by {_copies(bandwidth)}, measured{' and cached' * cached}"


def run_calibration(cfg: EaqConfig, artifact_dir: Path) -> TaskResult:
    """``python -m eaq.run task=calibrate precision=bf16``: measure and cache the peak FLOP/J and the memory bandwidth.

    The bandwidth needs no energy sensor (a timed copy), and generation's decode roofline needs only it: without a
    sensor it is still measured and cached, and the FLOP/J peak says why it is unavailable, never 0."""
    phases = Phases(phase_listener())  # so that its phases add up to the run's wall time, as every task's do
    with phases("calibrate"):
        device = resolve_device(cfg.device)
        crowd = _beside_others(cfg, device)
        calibration = _calibration(cfg, device, _matmul(cfg, device), reuse=False)
    with phases("bandwidth"):
        bandwidth = _bandwidth(cfg, device, reuse=False)
    if crowd is not None:
        log.warning("calibration: not cached, %s: a calibration measures the device alone (the basic launcher)", crowd)
    metrics = {"peak_bandwidth_gb_per_s": bandwidth.gb_per_s, **phases.metrics()}
    if calibration is None:
        unavailable = (f"unavailable: sampler={cfg.sampler.name} measures no energy on {device}; a GPU with sampler=nvml "
                       "(or a CPU with readable RAPL and sampler=rapl) measures it")
        log.warning("calibration: the peak FLOP/J is %s; %s", unavailable, _measured(bandwidth, crowd is None))
        tags = {"eaq.calibration.flop_per_j": unavailable}
    else:
        metrics |= {"peak_flop_per_j": calibration.flop_per_j, "peak_tflops": calibration.tflops,
                    "power_mean_w": calibration.power_mean_w}
        tags = {f"eaq.calibration.{k}": str(v) for k, v in asdict(calibration).items()}
        log.info("calibration: %.1f TFLOP/s, %.3g FLOP/J (%s, %d^3, %.0f W); %s", calibration.tflops, calibration.flop_per_j,
                 calibration.matmul, calibration.size, calibration.power_mean_w, _measured(bandwidth, crowd is None))
    if crowd is not None:
        tags["eaq.calibration.cached"] = f"false: {crowd}"
    return TaskResult(metrics=metrics, tags={"eaq.kind": "calibrate", "eaq.device": str(device), **tags},
                      device=describe_device(device), files=[])


__all__ = ["decode_roofline_metrics", "ensure_calibration", "roofline_metrics", "run_calibration"]
