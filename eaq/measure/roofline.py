"""Efficiency against what the device can do: FLOPs over its measured peak FLOP/J, bytes over its measured bandwidth.

A forward pass is compared with the peak FLOP/J; a decode step, which reads every weight
(and the KV cache) to produce one token per sequence, with the memory bandwidth. The peak
is measured, not taken from a datasheet: a large square matrix product in the
run's matmul format, timed and metered in a measurement window long enough for the
sensor (calibration), cached per device and format. The window is short (2.5 s by
default, ``trials.roofline_window_s``): a matmul's power is a flat plateau within ~50 ms of
its start (H100 traces, docs/results/2026-11-22-h100-transient), so the figure needs only
as many sensor updates as validity asks of any window (20 at ~100 ms); 5 s cost an H100
sweep 5.6 s per format for no better figure (docs/results/2026-11-24-h100-sweep-time
compares the two). A model's forward FLOPs are counted
by torch's FlopCounterMode on the fp32 model (the math is the same in every precision), with
a formula for the CPU's fused attention kernel, which torch's counter leaves at 0.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from eaq.device import synchronize
from eaq.errors import EaqError
from eaq.files import atomic_write_text, read_cached
from eaq.measure.energy import window_energy
from eaq.measure.samplers import Sampler, wait_for_sample
from eaq.measure.validity import MIN_SENSOR_UPDATES, check_device
from eaq.measure.window import MeasurementWindow

CALIBRATION_SIZE = 8192
# Products run right before the calibration's window, its device loaded up to it: the energy counter read at the
# window's start is up to one update old (NVML's ~100 ms), so the window's delta holds that stretch before it, and
# misses as much at its end. The benchmark's warm-up runs at the window's load; here the device sat idle while the
# sampler started, and the idle stretch counted as the window's, one way only: the peak FLOP/J read 0.3-2.5% high
# under a fake counter of 100 ms updates. Two and a half updates of loaded counter before the window.
PRELOAD_S = 0.25


# What a count of FLOPs means, in the keys of counts kept on disk: version 2 counts the CPU's fused attention
# (version 1, no key, left it out: 11% of bert-tiny's pass at seq_len 32, more at longer sequences).
FLOP_COUNT_VERSION = 2


def _sdpa_shapes(query_shape: torch.Size, key_shape: torch.Size, value_shape: torch.Size, *args: object,
                 out_shape: object = None, **kwargs: object) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def flop_counter() -> FlopCounterMode:
    """torch's FLOP counter, with the formula of its GPU attention kernels for the CPU's: torch has none for
    ``_scaled_dot_product_flash_attention_for_cpu`` (up to 2.13 at least), so a CPU pass through SDPA counted its
    attention as 0 FLOPs and the CPU roofline read low."""
    return FlopCounterMode(display=False, custom_mapping={
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_shapes,
    })


def forward_flops(forward: Callable[[], object]) -> int:
    with flop_counter() as counter:
        forward()
    return int(counter.get_total_flops())


@dataclass(frozen=True)
class Calibration:
    device_name: str
    matmul: str
    size: int
    tflops: float
    flop_per_j: float
    power_mean_w: float
    duration_s: float
    measured_unix_s: float


def _matmul_step(matmul: str, size: int, device: torch.device) -> Callable[[], object]:
    """One product in the format a precision's GEMMs run in, as the precision runs it."""
    if matmul == "int8":
        a = torch.randint(-128, 127, (size, size), dtype=torch.int8, device=device)
        b = torch.randint(-128, 127, (size, size), dtype=torch.int8, device=device).t()
        return lambda: torch._int_mm(a, b)
    if matmul == "float8_e4m3fn":  # row-wise scales and a bf16 result, as torchao's fp8 precision
        a = torch.randn(size, size, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(size, size, device=device).to(torch.float8_e4m3fn).t()
        scale_a = torch.ones(size, 1, device=device)
        scale_b = torch.ones(1, size, device=device)
        return lambda: torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16)
    # tf32 is fp32 storage with TF32 tensor-core math; the tf32 precision has switched it on.
    dtype = torch.float32 if matmul == "tfloat32" else getattr(torch, matmul)
    a = torch.randn(size, size, dtype=dtype, device=device)
    b = torch.randn(size, size, dtype=dtype, device=device)
    return lambda: torch.mm(a, b)


def _products_for(step: Callable[[], object], device: torch.device, seconds: float) -> int:
    """Run ``step`` for ``seconds``; how many ran."""
    iterations, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        iterations += 1
        if iterations % 8 == 0:
            synchronize(device)  # else the queue runs far past the time asked
    return iterations


def calibrate(device: torch.device, matmul: str, sampler: Sampler, min_duration_s: float, size: int = CALIBRATION_SIZE) -> Calibration | None:
    """Peak FLOP/J of a ``size``^3 product; None when the sampler measures no energy.

    Raises when the window saw fewer sensor updates than validity asks of any window: the
    peak would rest on too few readings.
    """
    step = _matmul_step(matmul, size, device)
    for _ in range(3):
        step()  # warm-up: kernels chosen, clocks up
    sampler.start()
    try:
        wait_for_sample(sampler)  # the trace's first sample before the window, and one past it below
        _products_for(step, device, PRELOAD_S)
        with MeasurementWindow(device, sampler) as window:
            window.iterations = _products_for(step, device, min_duration_s)
        wait_for_sample(sampler)
    finally:
        trace = sampler.stop()
    result = window.result
    assert result is not None
    energy = window_energy(sampler.name, trace, result.t0, result.t1, result.counter_j)
    if energy.energy_j is None:
        return None
    if energy.sensor_updates is not None and energy.sensor_updates < MIN_SENSOR_UPDATES:
        raise EaqError(
            f"the roofline calibration window ({result.duration_s:.1f} s) saw {energy.sensor_updates} sensor updates and needs "
            f"{MIN_SENSOR_UPDATES}; raise trials.roofline_window_s."
        )
    # The peak is cached and every later run's roofline divides by it: a window another process shared, or a
    # slowdown held, must not become it.
    if reasons := check_device(result, energy).reasons:
        raise EaqError(
            f"the roofline calibration window ({result.duration_s:.1f} s) is no peak: {'; '.join(reasons)}; nothing was "
            f"cached: measure it again on a quiet, cool device."
        )
    flops = 2 * size**3 * result.iterations
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return Calibration(
        device_name=name,
        matmul=matmul,
        size=size,
        tflops=flops / result.duration_s / 1e12,
        flop_per_j=flops / energy.energy_j,
        power_mean_w=energy.energy_j / result.duration_s,
        duration_s=result.duration_s,
        measured_unix_s=time.time(),
    )


@dataclass(frozen=True)
class Bandwidth:
    device_name: str
    # Bytes moved per copy: read once and written once.
    bytes_per_copy: int
    gb_per_s: float
    duration_s: float
    measured_unix_s: float


def measure_bandwidth(device: torch.device, size_bytes: int, min_duration_s: float = 1.0) -> Bandwidth:
    """The device memory's sustained bandwidth: one buffer copied onto another, far larger than any cache.

    A copy reads and writes ``size_bytes`` each, so it moves twice that; timed between syncs,
    after a warm-up copy. No energy counter is needed, so it runs without a sampler.
    """
    src = torch.empty(size_bytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    dst.copy_(src)
    copies = 0
    synchronize(device)
    start = time.perf_counter()
    while time.perf_counter() - start < min_duration_s:
        for _ in range(8):  # a sync every 8 copies, else the queue runs far past min_duration_s
            dst.copy_(src)
        copies += 8
        synchronize(device)
    duration = time.perf_counter() - start
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    moved = 2 * size_bytes
    return Bandwidth(name, moved, moved * copies / duration / 1e9, duration, time.time())


def bandwidth_path(cache_dir: str | Path, device_key: str) -> Path:
    return Path(cache_dir) / f"bandwidth-{device_key}.json"


def load_bandwidth(path: Path) -> Bandwidth | None:
    """The stored bandwidth, or None when there is none or it cannot be read (then: measure)."""
    return read_cached(path, lambda found: Bandwidth(**json.loads(found.read_text())))


def calibration_path(cache_dir: str | Path, device_key: str, matmul: str, sampler: str) -> Path:
    """A peak per device, matmul format and sampler: a peak metered by nvidia-smi's 1 s averages (which under-count an
    unsettled window by 9-38%) must not be what an NVML run's roofline efficiency is judged against."""
    return Path(cache_dir) / f"roofline-{device_key}-{matmul}-{sampler}.json"


def load_calibration(path: Path) -> Calibration | None:
    """The stored peak, or None when there is none or it cannot be read (then: measure)."""
    return read_cached(path, lambda found: Calibration(**json.loads(found.read_text())))


def save_calibration(path: Path, calibration: Calibration | Bandwidth) -> None:
    """Write a calibration (peak FLOP/J or bandwidth) whole, so a concurrent reader never sees half of one."""
    atomic_write_text(path, json.dumps(asdict(calibration), indent=2))
