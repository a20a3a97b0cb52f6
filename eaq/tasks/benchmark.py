"""The benchmark task: load, apply the precision, evaluate quality, then measure.

Order matters: the fp32 reference is taken before the precision transforms the model;
quality is computed outside the measurement window; batches are on the device before it.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field

import torch

from eaq.config import EaqConfig
from eaq.data import load_texts, make_batches
from eaq.device import resolve_device
from eaq.evaluate import cached_reference, collect_outputs, fidelity, reference_key
from eaq.measure import LatencyStats, MeasurementWindow, PeakMemory, run_timed, select_sampler
from eaq.models import load_model
from eaq.precision import get_precision, proof

log = logging.getLogger(__name__)


@dataclass
class BenchmarkResult:
    metrics: dict[str, float]
    tags: dict[str, str]
    device: dict[str, str] = field(default_factory=dict)


def describe_device(device: torch.device) -> dict[str, str]:
    info = {"torch_device": str(device), "torch_threads": str(torch.get_num_threads())}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info |= {
            "gpu_name": props.name,
            "gpu_uuid": str(getattr(props, "uuid", "unknown")),
            "gpu_capability": f"{props.major}.{props.minor}",
            "cuda": str(torch.version.cuda),
        }
    return info


def _energy_metrics(window, samples: int) -> tuple[dict[str, float], dict[str, str]]:
    energy = window.energy
    tags = {"eaq.energy": energy.status, "eaq.energy.sampler": energy.sampler}
    if energy.energy_j is None:
        return {}, tags | {"eaq.energy.reason": energy.reason}
    metrics = {
        "energy_total_j": energy.energy_j,
        "energy_per_sample_mj": energy.energy_j / samples * 1e3,
        "power_mean_w": energy.energy_j / window.duration_s,
    }
    return metrics, tags


@torch.inference_mode()
def benchmark(cfg: EaqConfig) -> BenchmarkResult:
    # Everything that can be refused is checked before the model loads.
    device = resolve_device(cfg.device)
    precision = get_precision(cfg.precision.name, device)
    sampler = select_sampler(cfg.sampler.name)
    texts = load_texts(cfg.dataset)
    torch.manual_seed(cfg.trial)

    loaded = load_model(cfg.model)
    model, head = loaded.model.to(device), cfg.model.head
    batches = make_batches(texts, loaded.tokenizer, cfg.batch_size, cfg.seq_len, device)
    quality_batches = batches.batches[: cfg.trials.quality_max_batches]
    quality_rows = sum(b["input_ids"].shape[0] for b in quality_batches)
    key = reference_key(
        model=asdict(cfg.model), dataset=asdict(cfg.dataset), seq_len=cfg.seq_len, rows=quality_rows, device=device.type
    )
    reference = cached_reference(cfg.paths.cache_dir, key, lambda: collect_outputs(model, head, quality_batches))

    model = precision.apply(model, device)
    evidence = proof(model)
    quality = fidelity(head, collect_outputs(model, head, quality_batches), reference)

    timed = batches.full()
    memory = PeakMemory(device)
    memory.reset()
    run_timed(lambda b: model(**b), timed, device, cfg.trials.warmup_iters, 0.0, label="warm-up")
    with MeasurementWindow(device, sampler) as window:
        latencies = run_timed(lambda b: model(**b), timed, device, cfg.trials.iters, cfg.trials.min_duration_s)
        window.iterations = len(latencies)
    assert window.result is not None
    result = window.result
    stats = LatencyStats.from_seconds(latencies)
    samples = result.iterations * cfg.batch_size
    energy_metrics, energy_tags = _energy_metrics(result, samples)

    metrics = {
        "latency_mean_ms": stats.mean_ms,
        "latency_p50_ms": stats.p50_ms,
        "latency_p90_ms": stats.p90_ms,
        "latency_p99_ms": stats.p99_ms,
        "latency_std_ms": stats.std_ms,
        "throughput_samples_per_s": samples / result.duration_s,
        "window_duration_s": result.duration_s,
        "window_iterations": result.iterations,
        "model_size_mb": evidence["model_size_mb"],
        "quantized_linear_layers": evidence["quantized_linear_layers"],
        "linear_layers": evidence["linear_layers"],
        **memory.read(),
        **quality,
        **energy_metrics,
    }
    tags = {
        "eaq.device": str(device),
        "eaq.weights": cfg.model.weights,
        "eaq.model_source": loaded.source,
        "eaq.proof.stored_dtypes": str(evidence["stored_dtypes"]),
        "eaq.window.start_unix_s": f"{result.start_unix_s:.3f}",
        "eaq.window.end_unix_s": f"{result.end_unix_s:.3f}",
        **energy_tags,
    }
    return BenchmarkResult(metrics=metrics, tags=tags, device=describe_device(device))
