"""The metric schema: every name eaq logs, its unit and meaning, defined once.

``docs/metrics.md`` is generated from this table (``python -m eaq.metrics > docs/metrics.md``)
and a test keeps the two in step. Units are part of the names.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    meaning: str


METRICS: tuple[Metric, ...] = (
    Metric("latency_mean_ms", "ms", "Mean time of one forward pass over one batch, in the measurement window."),
    Metric("latency_p50_ms", "ms", "Median per-batch latency."),
    Metric("latency_p90_ms", "ms", "90th percentile per-batch latency."),
    Metric("latency_p99_ms", "ms", "99th percentile per-batch latency."),
    Metric("latency_std_ms", "ms", "Sample standard deviation of per-batch latency."),
    Metric("throughput_samples_per_s", "samples/s", "Samples processed per second of window time (iterations x batch / duration)."),
    Metric("window_duration_s", "s", "Wall time of the measurement window, between device syncs at both ends."),
    Metric("window_iterations", "count", "Forward passes in the measurement window."),
    Metric("memory_peak_rss_mb", "MB", "Peak resident set size of the process during warm-up and window (Linux VmHWM, reset first)."),
    Metric("memory_peak_gpu_mb", "MB", "Peak bytes held by the CUDA caching allocator during warm-up and window (CUDA runs only)."),
    Metric("model_size_mb", "MB", "Bytes of the storages behind all parameters and buffers after the precision is applied (tied weights once)."),
    Metric("quantized_linear_layers", "count", "Linear layers whose weight is stored as a quantized tensor."),
    Metric("linear_layers", "count", "All Linear layers of the model."),
    Metric("quality_cosine_to_fp32_mean", "1", "Embedding models: mean cosine similarity of sentence embeddings to the fp32 model's."),
    Metric("quality_cosine_to_fp32_min", "1", "Embedding models: worst-case cosine similarity over the dataset."),
    Metric("quality_agreement_with_fp32", "fraction", "Classifiers: share of inputs whose predicted class equals the fp32 model's."),
    Metric("quality_top1_agreement_with_fp32", "fraction", "Causal LMs: share of positions whose top-1 next token equals the fp32 model's."),
    Metric("energy_total_j", "J", "Energy over the window from the sampler (absent when the run's tag eaq.energy is 'unavailable')."),
    Metric("energy_per_sample_mj", "mJ", "energy_total_j divided by samples processed in the window (absent when unavailable)."),
    Metric("power_mean_w", "W", "energy_total_j / window_duration_s (absent when unavailable)."),
)

METRIC_NAMES = frozenset(m.name for m in METRICS)

TAGS: tuple[tuple[str, str], ...] = (
    ("eaq.group.<group>", "The choice of each config group (model, precision, dataset, sampler, trials)."),
    ("eaq.config_hash", "Hash of the measurement-relevant resolved config (all but tracking, paths, debug)."),
    ("eaq.energy", "'measured' or 'unavailable'."),
    ("eaq.energy.reason", "Why energy is unavailable, when it is."),
    ("eaq.energy.sampler", "The sampler that ran (auto records what it picked)."),
    ("eaq.weights", "'pretrained' or 'random' (random-weight results measure speed and energy, not task quality)."),
    ("eaq.proof.stored_dtypes", "Share of stored elements per dtype after the precision is applied."),
    ("eaq.device", "The torch device the run used."),
    ("eaq.error", "Error class and message of a FAILED run."),
)


def markdown() -> str:
    lines = [
        "# Metric schema",
        "",
        "Generated from `eaq/metrics.py` by `python -m eaq.metrics > docs/metrics.md`; do not edit by hand.",
        "",
        "## Metrics (one MLflow metric each, unit in the name)",
        "",
        "| name | unit | meaning |",
        "|---|---|---|",
        *(f"| `{m.name}` | {m.unit} | {m.meaning} |" for m in METRICS),
        "",
        "## Tags",
        "",
        "| tag | meaning |",
        "|---|---|",
        *(f"| `{name}` | {meaning} |" for name, meaning in TAGS),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(), end="")
