"""The metric schema: every name eaq logs, its unit and meaning, defined once.

``docs/metrics.md`` is generated from this table (``python -m eaq.metrics > docs/metrics.md``)
and a test keeps the two in step. Units are part of the names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    meaning: str


# What a window's validity check read (eaq/measure/validity.py): logged for the window of a forward pass, and for
# generation's decode window under these names and its prefill window as prefill_<name>.
WINDOW_FACTS: tuple[Metric, ...] = tuple(
    Metric(name, unit, f"{meaning}; workload=generate: the decode window's, the prefill window's is prefill_{name}.")
    for name, unit, meaning in (
        ("sensor_updates", "count", "Changes of the primary power reading in the window, one per sensor update (NVML updates every ~100 ms); need 20"),
        ("poll_coverage", "fraction", "Power samples taken in the window / whole poll intervals in it; need 0.99. Can exceed 1 by one sample (a window holds a sample at each end of its intervals: 25 in a 1.2 s window polled every 50 ms reads 1.04)"),
        ("counter_vs_instant_disagreement", "fraction", "|instant integral - counter| / counter; over 0.03 flags the run"),
        ("gpu_temperature_start_c", "degC", "GPU temperature at the window start"),
        ("gpu_temperature_end_c", "degC", "GPU temperature at the window end"),
        ("sm_clock_start_mhz", "MHz", "SM clock at the window start"),
        ("sm_clock_end_mhz", "MHz", "SM clock at the window end; a drift over 10% flags the run"),
        ("clock_event_share_power_cap", "fraction", "NVML: share of the window the software power cap held the clocks (its cumulative clock-event time, read at the window's ends); the normal state of a GPU drawing its limit, never a reason"),
        ("clock_event_share_sync_boost", "fraction", "NVML: share of the window sync boost held the clocks; over 0.01 flags the run"),
        ("clock_event_share_software_thermal", "fraction", "NVML: share of the window a software thermal slowdown held the clocks; over 0.01 flags the run"),
        ("clock_event_share_hardware_thermal", "fraction", "NVML: share of the window a hardware thermal slowdown held the clocks; over 0.01 flags the run"),
        ("clock_event_share_hardware_power_brake", "fraction", "NVML: share of the window the hardware power brake held the clocks; over 0.01 flags the run"),
    )
)


METRICS: tuple[Metric, ...] = (
    Metric("latency_mean_ms", "ms", "Mean time of one forward pass over one batch, in the measurement window."),
    Metric("latency_p50_ms", "ms", "Median per-batch latency."),
    Metric("latency_p90_ms", "ms", "90th percentile per-batch latency (interpolated between the window's passes: below 10 passes, window_iterations, it lies between the two slowest)."),
    Metric("latency_p99_ms", "ms", "99th percentile per-batch latency (interpolated: below 100 passes, window_iterations, it lies between the two slowest, a near-maximum rather than a tail estimate)."),
    Metric("latency_std_ms", "ms", "Sample standard deviation of per-batch latency (absent from one iteration)."),
    Metric("throughput_samples_per_s", "samples/s", "Samples processed per second of window time (iterations x batch / duration)."),
    Metric("window_duration_s", "s", "Wall time of the measurement window, between device syncs at both ends."),
    Metric("window_iterations", "count", "Forward passes in the measurement window."),
    Metric("warmup_iterations", "count", "Forward passes before the window (fixed count, then until settled when asked); workload=generate: prefills and decode steps before their windows (with CUDA graphs the eager steps before the capture, which records and runs none)."),
    Metric("warmup_duration_s", "s", "Wall time of the warm-up."),
    Metric("data_truncated_texts", "count", "Texts of the dataset file longer than seq_len tokens, cut to seq_len (quality scores the cut text; the run's log names the longest); absent for raw text and synthetic ids."),
    Metric("data_tokenize_s", "s", "Getting the token tensors: tokenizing (cache miss) or reading them from outputs/cache (hit; tag eaq.data.token_cache)."),
    Metric("memory_peak_rss_mb", "MB", "Peak resident set size of the process during warm-up and window (Linux VmHWM, reset first; tag eaq.memory.rss_peak says when the reset failed)."),
    Metric("memory_peak_gpu_mb", "MB", "Peak bytes of tensors allocated on the GPU during warm-up and window (torch.cuda.max_memory_allocated; the caching allocator reserves more; CUDA runs only)."),
    Metric("model_size_mb", "MB", "Bytes of the storages behind all parameters and buffers after the precision is applied (tied weights once)."),
    Metric("quantized_linear_layers", "count", "Linear layers whose weight is stored as a quantized tensor."),
    Metric("linear_layers", "count", "All Linear layers of the model."),
    Metric("weights_outside_linear_share", "1", "Share of the model's matmul weights (Linear layers' and every other parameter of two dimensions or more but embedding tables') held outside Linear layers: a router's weight, a convolution's kernel, fused MoE experts (int8, fp8 and int4 quantize Linear layers, and refuse a model whose stacked experts hold most of these weights). What the Linear counts do not cover."),
    Metric("kernel_lowp_gemms", "count", "precision.kernel_check: calls of the format's GEMM (int8 _int_mm, fp8 _scaled_mm, int4 _weight_int4pack_mm) in one profiled forward."),
    Metric("kernel_float_gemms", "count", "precision.kernel_check: float GEMMs (aten::mm, aten::addmm) shaped like one of the model's Linear layers in that forward; for int8/fp8 at most the unquantized layers."),
    Metric("kernel_host_copies", "count", "precision.kernel_check: host<->device copies in that forward (the tag eaq.kernel_check says how many the fp32 model makes)."),
    Metric("quality_cosine_to_fp32_mean", "1", "Embedding models: mean cosine similarity of sentence embeddings to the fp32 model's."),
    Metric("quality_cosine_to_fp32_min", "1", "Embedding models: worst-case cosine similarity over the rows quality scores (trials.quality_max_batches)."),
    Metric("quality_agreement_with_fp32", "fraction", "Classifiers: share of inputs whose predicted class equals the fp32 model's."),
    Metric("quality_kl_from_fp32", "nats", "Classifiers: mean KL divergence of the fp32 model's class distribution from this precision's."),
    Metric("quality_accuracy", "fraction", "Classifiers on labelled data: share of inputs classified as labelled."),
    Metric("quality_perplexity", "1", "Causal LMs on raw text: sliding-window perplexity (windows of seq_len tokens, dataset.perplexity_stride apart)."),
    Metric("quality_perplexity_tokens", "count", "Tokens scored for quality_perplexity, over the stream's first dataset.max_samples rows of seq_len tokens (null: the whole text, its last part of a row too)."),
    Metric("quality_top1_agreement_with_fp32", "fraction", "Causal LMs: share of positions whose top-1 next token equals the fp32 model's."),
    Metric("quality_generated_match_rate", "fraction", "workload=generate: share of generated tokens (greedy, workload.new_tokens per prompt) equal to the fp32 model's at the same position."),
    Metric("quality_first_divergence_mean_tokens", "tokens", "workload=generate: new tokens before a sequence's first difference from fp32's, mean over prompts (new_tokens when none differs)."),
    Metric("quality_first_divergence_min_tokens", "tokens", "workload=generate: the same, for the earliest-diverging prompt."),
    Metric("energy_total_j", "J", "Energy over the window: the sampler's counter delta (NVML, RAPL), else the integral of its power trace (tag eaq.energy.source says which). Absent when eaq.energy is 'unavailable'."),
    Metric("energy_per_sample_mj", "mJ", "energy_total_j per sample processed in the window."),
    Metric("samples_per_j", "samples/J", "Samples processed per joule of window energy."),
    Metric("power_mean_w", "W", "energy_total_j / window_duration_s."),
    Metric("power_std_w", "W", "Standard deviation of the sampled power in the window (primary trace channel)."),
    Metric("power_min_w", "W", "Lowest sampled power in the window."),
    Metric("power_max_w", "W", "Highest sampled power in the window."),
    Metric("energy_instant_integral_j", "J", "NVML: integral of polled instant power (NVML_FI_DEV_POWER_INSTANT) over the window; cross-check of the counter."),
    Metric("energy_average_integral_j", "J", "NVML: integral of the averaged power field (power.draw; a 1 s average on Ampere+) over the window; shows that method's error."),
    Metric("energy_rapl_integral_j", "J", "RAPL: integral of the power derived from the polled counters."),
    Metric("energy_smi_integral_j", "J", "nvidia_smi: integral of nvidia-smi power.draw readings (the old method)."),
    Metric("idle_power_w", "W", "Mean power over the idle baseline taken before warm-up (device idle, model loaded)."),
    Metric("energy_net_j", "J", "energy_total_j minus idle_power_w x window_duration_s: what the work added above idle."),
    Metric("energy_net_per_sample_mj", "mJ", "energy_net_j per sample."),
    Metric("valid", "0/1", "1 when every validity check passed; else 0 and tag eaq.valid.reasons lists what failed."),
    *WINDOW_FACTS,
    Metric("forward_flops_per_batch", "FLOP", "FLOPs of one forward pass over one batch, counted by torch's FlopCounterMode on the fp32 model; "
           "for the roofline figures, so logged by a forward run that measures energy with trials.roofline on."),
    Metric("achieved_flop_per_j", "FLOP/J", "forward_flops_per_batch x window_iterations / energy_total_j."),
    Metric("peak_flop_per_j", "FLOP/J", "The device's measured peak: a large matmul in the precision's format, in a metered window (task=calibrate, cached)."),
    Metric("peak_tflops", "TFLOP/s", "Throughput of that calibration matmul."),
    Metric("roofline_efficiency", "fraction", "achieved_flop_per_j / peak_flop_per_j."),
    Metric("energy_roofline_limit_per_sample_mj", "mJ", "The least energy a sample could take at the peak FLOP/J: forward FLOPs per sample / peak_flop_per_j."),
    Metric("time_to_first_token_mean_ms", "ms", "workload=generate: mean time of one prefill of a batch of prompts (seq_len tokens, into a fresh KV cache) up to its first new token, in the prefill window."),
    Metric("time_to_first_token_p50_ms", "ms", "workload=generate: median time to first token."),
    Metric("time_to_first_token_p90_ms", "ms", "workload=generate: 90th percentile time to first token."),
    Metric("time_to_first_token_p99_ms", "ms", "workload=generate: 99th percentile time to first token (interpolated: a prefill window holds few prefills, and below 100 it lies between the two slowest)."),
    Metric("time_to_first_token_std_ms", "ms", "workload=generate: sample standard deviation of the time to first token (absent from one prefill)."),
    Metric("prefill_tokens_per_s", "tokens/s", "workload=generate: prompt tokens prefilled per second of prefill window (prefills x batch x seq_len / duration)."),
    Metric("prefill_window_duration_s", "s", "workload=generate: wall time of the prefill window, between device syncs."),
    Metric("prefill_window_iterations", "count", "workload=generate: prefills of a batch in the prefill window."),
    Metric("time_per_output_token_mean_ms", "ms", "workload=generate: mean time of one decode step (one new token for every sequence of the batch), in the decode window; the first token is prefill's."),
    Metric("time_per_output_token_p50_ms", "ms", "workload=generate: median decode step time."),
    Metric("time_per_output_token_p90_ms", "ms", "workload=generate: 90th percentile decode step time."),
    Metric("time_per_output_token_p99_ms", "ms", "workload=generate: 99th percentile decode step time (interpolated: below 100 steps it lies between the two slowest)."),
    Metric("time_per_output_token_std_ms", "ms", "workload=generate: sample standard deviation of the decode step time (absent from one step)."),
    Metric("decode_tokens_per_s", "tokens/s", "workload=generate: tokens generated per second of decode window (decode steps x batch / duration)."),
    Metric("decode_window_duration_s", "s", "workload=generate: wall time of the decode window, between device syncs (window_duration_s is not logged for generation)."),
    Metric("decode_window_iterations", "count", "workload=generate: decode steps in the decode window, a whole number of sequences of workload.new_tokens - 1 steps."),
    Metric("decode_window_sequences", "count", "workload=generate: times the decode window generated a whole sequence from the same prefilled cache."),
    Metric("prefill_energy_total_j", "J", "workload=generate: energy over the prefill window (counter delta, else the trace integral)."),
    Metric("prefill_energy_per_prefill_mj", "mJ", "workload=generate: prefill_energy_total_j per prefill of a batch of prompts."),
    Metric("prefill_energy_net_per_prefill_mj", "mJ", "workload=generate: the same net of idle_power_w over the prefill window."),
    Metric("prefill_power_mean_w", "W", "workload=generate: prefill_energy_total_j / prefill_window_duration_s."),
    Metric("decode_energy_total_j", "J", "workload=generate: energy over the decode window (counter delta, else the trace integral)."),
    Metric("decode_energy_per_token_mj", "mJ", "workload=generate: decode_energy_total_j per generated token (decode steps x batch)."),
    Metric("decode_energy_net_per_token_mj", "mJ", "workload=generate: the same net of idle_power_w over the decode window."),
    Metric("decode_tokens_per_j", "tokens/J", "workload=generate: tokens generated per joule of decode window energy."),
    Metric("decode_power_mean_w", "W", "workload=generate: decode_energy_total_j / decode_window_duration_s."),
    *(Metric(f"prefill_{m.name}", m.unit, f"workload=generate: {m.name} of the prefill window (a failed check of it is in eaq.valid.reasons).")
      for m in WINDOW_FACTS),
    Metric("prefill_prefills_per_j", "prefills/J", "workload=generate: prefills of a batch per joule of prefill window energy."),
    Metric("prefill_energy_net_j", "J", "workload=generate: prefill_energy_total_j minus idle_power_w x prefill_window_duration_s."),
    Metric("decode_energy_net_j", "J", "workload=generate: decode_energy_total_j minus idle_power_w x decode_window_duration_s."),
    # The forward window's power spread and trace cross-checks, per generation window (eaq.measure.energy).
    *(
        Metric(f"{window}_{name}", unit, f"workload=generate: {name} over the {window} window (see {name}).")
        for window in ("prefill", "decode")
        for name, unit in (("power_std_w", "W"), ("power_min_w", "W"), ("power_max_w", "W"), ("energy_instant_integral_j", "J"),
                           ("energy_average_integral_j", "J"), ("energy_rapl_integral_j", "J"), ("energy_smi_integral_j", "J"))
    ),
    Metric("decode_bytes_per_step_mb", "MB", "workload=generate: bytes a decode step must read: the stored weights (model_size_mb) less the rows of each untied embedding table its batch_size tokens do not look up (a table tied to the LM head is read whole) and, in a mixture of experts, the routed experts beyond the min(experts, batch_size x num_experts_per_tok) its tokens can choose per layer (eaq.roofline.decode_bytes says where they were counted whole), plus the KV cache it attends over, on average over a sequence (a static cache is read whole; a sliding-window layer of a dynamic cache, its window). A dynamic cache's copy on every append (transformers concatenates each layer's keys and values, compile=false) is not counted: an eager run's decode_bandwidth_fraction reads lower than the bytes it moves, and compares with a compiled run's as a lower bound."),
    Metric("peak_bandwidth_gb_per_s", "GB/s", "The device memory's measured bandwidth: a 1 GiB buffer copied (read and written) in a timed loop (256 MiB on a CPU); measured once per device and cached (not where measured beside other jobs: slurm_local, CPU slots), re-measured by task=calibrate."),
    Metric("decode_achieved_bandwidth_gb_per_s", "GB/s", "workload=generate: decode_bytes_per_step_mb / time_per_output_token_mean_ms."),
    Metric("decode_bandwidth_limit_ms", "ms", "workload=generate: the least time a decode step could take at the measured bandwidth: decode_bytes_per_step_mb / peak_bandwidth_gb_per_s."),
    Metric("decode_bandwidth_fraction", "fraction", "workload=generate: decode_bandwidth_limit_ms / time_per_output_token_mean_ms (1 = at the memory-bandwidth bound)."),
    Metric("sampler_overhead_pct", "%", "trials.overhead_pairs > 0: median over ABBA block pairs, in one process, of (latency with the sampler on / off - 1)."),
    Metric("sampler_overhead_spread_pct", "%", "Half the interquartile range of those paired ratios (quartiles within them; NaN with one pair): the resolution of sampler_overhead_pct."),
    Metric("latency_sampler_off_ms", "ms", "Median over blocks of each block's median latency, no sampler running (overhead check)."),
    Metric("latency_sampler_on_ms", "ms", "Median over blocks of each block's median latency, the sampler polling (overhead check)."),
    Metric("phase_import_s", "s", "isolate=false: importing the task's modules (torch, transformers, torchao) in the job's own process, which a process's first run pays (4-5 s on a 2-core CPU) and a later one not; under isolate=true the preloaded server holds them."),
    Metric("isolation_overhead_s", "s", "Starting and ending the fresh process a run measures in (a fork of the sweep's preloaded server; the first run waits for the server's imports where they have not finished yet), carrying the config there and the result back, and handing on what the task told last (its early tags, set in the store): the run's time outside its task; outside every measurement."),
    Metric("idle_baseline_age_s", "s", "Age of the idle baseline this run used at its first window's start (a generation run's prefill window), counted from the idle window's start: measured in this run, its idle window and the warm-up (compilation included) between them, seconds; reused, older (tag eaq.idle says which and why)."),
    Metric("run_wall_s", "s", "Wall time of the whole run in its job: setup, isolation, every phase below, logging."),
    Metric("phase_setup_s", "s", "Before the task: opening the store, logging params and the resolved config."),
    Metric("phase_slot_s", "s", "hydra/launcher=gpus (gpu_slots.enabled): waiting for a free GPU slot of the host, which another sweep's jobs may hold."),
    Metric("phase_same_config_s", "s", "In a sweep: waiting for another job of the same configuration to end (resume then reuses its run; logged by a run that measured all the same: the other failed)."),
    Metric("phase_ahead_s", "s", "Waiting, before the run touches the device, for what its sweep started measuring ahead of the runs: its roofline calibrations (eaq/tasks/ahead.py; calibrate_ahead)."),
    Metric("phase_prepare_s", "s", "In the run's process, before the model loads: the device (CUDA starts), the precision's checks, the sampler (NVML starts), the data file."),
    Metric("phase_load_s", "s", "Loading the model and tokenizer, preparing the batches on the device."),
    Metric("phase_reference_s", "s", "fp32 reference outputs (computed or from the cache), forward FLOPs, the kernel check's fp32 copy; task=layers: parameters and FLOPs per component."),
    Metric("phase_precision_s", "s", "Applying the precision to the model and recording its proof."),
    Metric("phase_quality_s", "s", "Quality figures: computed, or read from the cache when another trial of the configuration computed them (tag eaq.quality.source)."),
    Metric("phase_impact_s", "s", "task=layers: the impact model's reference outputs, then each component's sensitivity (and ablation) on the evaluation data."),
    Metric("phase_components_s", "s", "task=layers: energy and time per component (idle baseline, replay windows, attribution passes)."),
    Metric("phase_plan_s", "s", "task=layers with layers.plan: the savings (measured or compiled where asked), the plan's choice and its check on the data."),
    Metric("phase_sampler_s", "s", "Starting the power sampler (NVML: its polling process), waiting for its first sample before the idle window and for one past the last window (so the trace covers the windows' edges; each wait at most 0.3 s or two polling intervals, whichever is longer, and up to 3 s for a trace's first sample), stopping it."),
    Metric("phase_idle_s", "s", "Idle baseline: measured (trials.idle_s), or the check that a stored one is still fresh."),
    Metric("phase_warmup_s", "s", "Warm-up until latency and power settle (compilation included when compile=true)."),
    Metric("phase_window_s", "s", "The measurement window, its two device syncs and counter reads included."),
    Metric("phase_artifacts_s", "s", "Writing the power trace CSV and figure; task=layers: its tables (components, types, outside, correlation)."),
    Metric("phase_checks_s", "s", "After the window: roofline (calibrating the peak on first need), sampler overhead, kernel check."),
    Metric("phase_cooldown_s", "s", "Cool-down pause after the run (trials.cooldown_s)."),
    Metric("phase_calibrate_s", "s", "task=calibrate: the peak FLOP/J's metered matmul window (the device's start and the model's skeleton included)."),
    Metric("phase_bandwidth_s", "s", "task=calibrate: the memory bandwidth's timed copies."),
    Metric("phase_logging_s", "s", "After the task: releasing its GPU slot (hydra/launcher=gpus), logging metrics, tags, environment and artifacts to MLflow."),
    Metric("sweep_runs", "count", "Sweep parent runs: child runs in the sweep."),
    Metric("sweep_runs_failed", "count", "Sweep parent runs: child runs that did not finish."),
    Metric("sweep_jobs_unrecorded", "count", "Sweep parent runs: jobs that left no run in the store (refused before their run was created; each said why in the sweep's output); any makes the parent FAILED."),
    # Pattern, not one name (eaq/report/build.py): <metric> is latency_mean_ms, throughput_samples_per_s,
    # energy_per_sample_mj or a quality_* metric; the MLflow UI charts each <metric>/<configuration> as one section.
    Metric("<metric>/<configuration>/<stat>", "unit of <metric>", "Sweep parent runs (and eaq.kind=report runs): trials aggregated per configuration (model-precision-b<batch>-s<seq>[-compiled[-untuned][-no-pattern-matcher]][-graphs][-gen<tokens>][-<setting>], the setting where runs differ in device, dataset, sampler, weights or another parameter); <stat> is mean, ci95_low, ci95_high (Student t 95% interval of the mean, absent with one trial) or n (valid finished trials); a figure that is not finite (a quality every trial read as NaN) is absent. Absent for a metric no run of the configuration logged (n=0 where runs logged it and none counted: every trial flagged invalid). A report logged again onto the same run sets an earlier report's figure it has not (bounds now of one trial, a configuration no longer counted) to NaN."),
    # task=layers (eaq/layers): per-component tables are the artifacts layers/*.csv.
    Metric("layers_whole_model_time_ms", "ms", "task=layers: time of one whole-model forward pass in its window (the one attribution splits)."),
    Metric("layers_time_capture_ratio", "1", "task=layers: share of a profiled pass's time inside components (the rest: residual adds, activations, glue between modules)."),
    Metric("layers_capture_ratio_replay", "1", "task=layers: sum of the components' replay energy / whole-model energy, per pass (absent without an energy sensor)."),
    Metric("layers_capture_ratio_attribution", "1", "task=layers: sum of the components' attributed energy / whole-model energy, per pass (absent without an energy sensor)."),
    Metric("layers_capture_ratio_replay_net", "1", "task=layers: layers_capture_ratio_replay with every energy net of the idle baseline."),
    Metric("layers_capture_ratio_attribution_net", "1", "task=layers: layers_capture_ratio_attribution with every energy net of the idle baseline."),
    Metric("layers_kernel_time_ms", "ms", "task=layers: device time of the kernels of one profiled whole-model pass (on a CPU the time of its ops, the host's work between them left out); against layers_whole_model_time_ms it shows how launch-bound the window is."),
    Metric("layers_time_capture_ratio_with_blocks", "1", "task=layers: share of a profiled pass's time inside blocks or components outside blocks (1 - model glue's share)."),
    Metric("layers_capture_ratio_replay_with_blocks", "1", "task=layers: (components + the blocks' own ops) / whole-model energy per pass; measured, unlike the glue, which would make it 1."),
    Metric("layers_capture_ratio_attribution_with_blocks", "1", "task=layers: layers_time_capture_ratio_with_blocks applied to the whole-model window's energy."),
    Metric("layers_block_ops_time_ms", "ms", "task=layers: profiled time per pass inside blocks but outside their components (residual adds, masks in a block's forward)."),
    Metric("layers_model_glue_time_ms", "ms", "task=layers: profiled time per pass outside blocks and outside every component (a remainder)."),
    Metric("layers_block_ops_replay_mj", "mJ", "task=layers: the blocks' own ops (residual adds), replayed with the blocks' components stubbed, energy per pass (total, idle included)."),
    Metric("layers_model_glue_replay_mj", "mJ", "task=layers: whole-model energy per pass minus every component minus the blocks' own ops (a remainder, not a measurement of its own)."),
    Metric("layers_block_ops_attribution_mj", "mJ", "task=layers: the whole-model window's energy per pass in proportion to layers_block_ops_time_ms."),
    Metric("layers_model_glue_attribution_mj", "mJ", "task=layers: the whole-model window's energy per pass in proportion to layers_model_glue_time_ms."),
    Metric("layers_components", "count", "task=layers: components the model was grouped into (rows of layers/components.csv)."),
    *(
        metric
        for kind in ("embeddings", "attention", "ffn", "layer_norm", "head", "other")
        for metric in (
            Metric(f"energy_share_{kind}", "1", f"task=layers: share of the components' summed energy spent in {kind} components (basis: tag eaq.layers.share_basis)."),
            Metric(f"sensitivity_impact_{kind}", "1", f"task=layers: impact score (docs/impact.md) of lowering every {kind} component at once to layers.target; absent where none has a layer the target takes."),
            Metric(f"ablation_impact_{kind}", "1", f"task=layers: impact score of skipping every {kind} component's residual branch at once (attention and ffn only; layers.ablation)."),
        )
    ),
)

METRIC_NAMES = frozenset(m.name for m in METRICS)

TAGS: tuple[tuple[str, str], ...] = (
    ("eaq.group.<group>", "The choice of each config group (model, precision, dataset, sampler, trials, layers, workload)."),
    ("eaq.workload", "What one measured pass is: 'forward' or 'generate' (prefill and decode windows)."),
    ("eaq.config_hash", "Hash of the measurement-relevant resolved config (all but tracking, paths, debug, run_name, resume, gpu_slots, calibrate_ahead), of the files it reads (plan, data, local model, tokenizer and head folders: files by contents, folders by their files' names, sizes and times) and of eaq's own code (eaq.files.code_identity: its .py and conf/ YAML files by contents); resume reuses a FINISHED run of the same hash."),
    ("eaq.settings_hash", "The config hash without eaq's own code (eaq.tracking.flatten.config_hash(code=False)): where resume finds a FINISHED run of these settings but not of this code, it says so and measures again."),
    ("eaq.energy", "'measured' or 'unavailable'."),
    ("eaq.energy.reason", "Why energy is unavailable, when it is."),
    ("eaq.energy.source", "What energy_total_j is: energy_counter, or the integral of a power channel."),
    ("eaq.energy.notes", "Sampler fallbacks and failed reads (a missing power field, a counter error mid-run)."),
    ("eaq.valid", "'true' or 'false': did every validity check pass (energy runs; any run that shared the CPU with GPU-slot neighbours: 'false'; a task=layers run whose graphed pass ran far slower than its eager kernels, with or without a sensor: 'false')."),
    ("eaq.valid.reasons", "Each failed validity check, in words."),
    ("eaq.valid.notes", "What a validity check saw and judged benign, in words (an SM clock drift while the software power cap held the clocks)."),
    ("eaq.quality.source", "Where the quality figures came from: computed in this run, the cache of an earlier run of this configuration, or partly (perplexity, scored alone, is cached per model, precision and text: another batch size or workload reuses it)."),
    ("eaq.quality.model", "compile=true: which model the quality figures are of, the eager one (quality is computed before the model compiles; its cache key holds no compile setting)."),
    ("eaq.quality.reason", "Why quality metrics are absent (synthetic data), or only fidelity to fp32 (synthetic data with trials.fidelity_on_synthetic)."),
    ("eaq.roofline.calibration", "The matmul calibration the roofline metrics compare with; or `none: why` where it could not be measured after the run's window (refused, or no device memory beside the run's model), with the command that measures it alone."),
    ("eaq.roofline.calibration.measured_unix_s", "When that calibration was measured (Unix seconds): in this run, an earlier one, or ahead of the sweep's runs (calibrate_ahead)."),
    ("eaq.roofline.bandwidth", "workload=generate: the memory-bandwidth measurement the decode roofline divides by: the buffer one timed copy reads and writes (1.00 GiB on a GPU, 0.25 GiB on a CPU: each copy moves twice that), and the device; or `none: why` where its first measurement found no device memory beside the run's model."),
    ("eaq.roofline.decode_bytes", "workload=generate: what decode_bytes_per_step_mb counts (runs without this tag, before 2026-11-26, counted every embedding table whole; before 2026-11-29 a mixture of experts' tag names no experts and every expert was counted; since, it says whether the routed experts a step's tokens cannot choose were left out or why not)."),
    ("eaq.window.start_unix_s", "Window start, Unix seconds (workload=generate: the decode window's; power_trace.csv's time origin)."),
    ("eaq.window.end_unix_s", "Window end, Unix seconds (workload=generate: the decode window's)."),
    ("eaq.prefill_window.start_unix_s", "workload=generate: the prefill window's start, Unix seconds (before the decode window's; power_trace.png shades both)."),
    ("eaq.prefill_window.end_unix_s", "workload=generate: the prefill window's end, Unix seconds."),
    ("eaq.idle", "Which idle baseline idle_power_w is: measured in this run (and why a stored one was not reused), reused (measured how long before), or none; 'measured in this run, not used: <why>' when the GPU was not idle through its window (its utilization samples averaging over 1%, or other processes at its ends): no net figures then."),
    ("eaq.idle.measured_unix_s", "When that idle baseline was measured (Unix seconds)."),
    ("eaq.energy.sampler", "The sampler that ran (auto records what it picked)."),
    ("eaq.warmup.settled", "'true'/'false' when warm-up ran until latency and power settled (generation: 'true' only if "
     "both prefill's and decode's did); 'not asked' for a fixed count."),
    ("eaq.layers.share_basis", "task=layers: what energy_share is a share of: replay or attribution energy, or time where no energy was measured."),
    ("eaq.layers.block_ops", "task=layers: 'not measured: ...' where numbered blocks are held by a ModuleList or ModuleDict (Funnel's blocks of layers), which no forward calls: their own ops (residual adds) cannot be measured apart, and block_ops and model_glue are empty (never 0)."),
    ("eaq.layers.unmeasured", "task=layers: components no hook can time alone (their parameters used inside another component's module: XLNet's attention), whose cells are empty, and components with a member under none of their roots, whose figures leave that member's own work out; each named with why."),
    ("eaq.layers.impact", "task=layers: the impact measured (target precision, base format, ablation), or why none."),
    ("eaq.layers.plan", "task=layers: the mixed-precision plan written to layers/plan.yaml (layers lowered, budget)."),
    ("eaq.layers.cuda_graphs", "task=layers: whether the whole-model pass and the replays ran as CUDA graphs (layers.cuda_graphs), or why they ran eagerly."),
    ("eaq.layers.saving.<tag>", "task=layers with layers.saving=measured or compiled: the savings' own windows. valid, valid.reasons and valid.notes: their validity ('not checked (no energy)' without a sensor); energy and layers.cuda_graphs: the target's windows (measured); pass: what compiled savings compiled and fed it, 'compiled[, CUDA graphs]; inputs: ...' (the batch as the benchmark passes it)."),
    ("eaq.memory.rss_peak", "What memory_peak_rss_mb spans: 'warm-up and window', or the whole process where the high-water mark could not be reset."),
    ("eaq.data.sha256", "The first 16 hex digits of the examples' SHA-256 (their texts and labels, eaq.data.examples_digest): one file read from two paths is one dataset; the report keeps runs of two apart. Set as soon as the examples are read, before the model loads: a run that fails later carries it too, and is counted with its data's runs."),
    ("eaq.data.source", "Where the examples were read from: the file's path, eaq's packaged file, or the hub dataset (name[:config]:split) when dataset.path does not exist. Set when they are read, as eaq.data.sha256."),
    ("eaq.data.token_cache", "'hit' or 'miss': were the token tensors read from the cache."),
    ("eaq.compile", "'true' when the timed model ran through torch.compile (compiled during warm-up)."),
    ("eaq.compile.inductor", "The Inductor settings of a compiled run: torchao's recommended ones (compile_tuning=true) or Inductor's defaults, and whether its pattern matcher was off (compile_pattern_matcher=false), for every precision alike."),
    ("eaq.cuda_graphs", "'true' when the compiled model replayed CUDA graphs: Inductor's triton.cudagraphs (as torch.compile mode reduce-overhead) for forward passes (a run in which Inductor skipped graphs for any compiled graph fails, naming how to see why); for workload=generate one graph of the whole decode step (tag eaq.decode.cuda_graph)."),
    ("eaq.decode.cuda_graph", "workload=generate: 'one CUDA graph per decode step' (the compiled model over its static cache, the greedy pick, the token's record and the position, replayed with one launch), or 'none: not asked for' (a step that cannot be recorded fails the run)."),
    ("eaq.kernel_check", "'passed' (or 'passed, with N host<->device copies ...') when precision.kernel_check profiled the kernels; a failed check fails the run; else 'not asked'."),
    ("eaq.weights", "'pretrained' or 'random' (random-weight results measure speed and energy, not task quality)."),
    ("eaq.proof.stored_dtypes", "Share of stored values per dtype after the precision is applied (packed int4 weights counted as int4 values, 8 per int32)."),
    ("eaq.precision.plan", "precision=mixed: the plan file the run read (and applied, unless refused). Set when it is read, as eaq.precision.plan_sha256."),
    ("eaq.precision.plan_applies_sha256", "precision=mixed: the first 16 hex digits of the SHA-256 of what the plan applies, its base and each layer's format (not its meta, order or layout): the report names a plan by it, so two files the layers task wrote with the same choice (and other notes) are one precision. Set with eaq.precision.plan_sha256."),
    ("eaq.precision.plan_sha256", "precision=mixed: the first 16 hex digits of the SHA-256 of the plan file's bytes the run read. Set as soon as the plan is read, before it is checked against the model and before the model loads: a run that fails later, or whose plan is refused, carries it too, and is counted with its plan's runs."),
    ("eaq.precision.layer_formats", "precision=mixed: how many Linear layers store each format after the plan is applied."),
    ("eaq.device", "The torch device the run used."),
    ("eaq.error", "Error class and message of a FAILED (or KILLED) run; JobEndedError: a sweep's job returned no result (ended from outside: SLURM's time limit, out of memory, a cancel; or it exited or raised first), with submitit's state for it and its output files."),
    ("eaq.kind", "'benchmark', 'layers' (task=layers), 'calibrate', 'sweep' (a multirun's parent run), or 'report' (python -m eaq.report --log without --sweep)."),
    ("eaq.sweep.job", "A sweep's run: its job number in the sweep (hydra.job.num; its folder's name under the sweep folder). The sweep finds by it the run of a job that could not end it itself."),
    ("eaq.superseded", "On a run of a sweep's job that a later start of the same job replaced (a scheduler's requeue): why. Neither the sweep's summary nor the report counts it."),
    ("eaq.gpu_slot", "hydra/launcher=gpus (gpu_slots.enabled): the index of the GPU slot the run held, the GPU it measured on."),
    ("eaq.gpu_slot.key", "The slot's lock name: the GPU's UUID."),
    ("eaq.neighbours", "Under GPU slots: the other eaq runs that held a GPU of this host while this run held its own (name, GPU and run id of each), or 'none'."),
    ("eaq.neighbours.count", "How many neighbours eaq.neighbours names."),
    ("eaq.sweep_dir", "Sweep parent runs: the multirun folder its jobs wrote to."),
    ("eaq.reused.<run id>", "Sweep parent runs: a FINISHED run of the same config that resume reused instead of measuring it again (value: its name); the sweep's report counts it."),
    ("eaq.model_source", "Where the weights came from: the hub id or local directory they were read from, or random."),
    ("eaq.calibration.<field>", "Calibration runs (task=calibrate): the device, the matmul format and size, TFLOP/s, FLOP/J, mean power, duration and when; without an energy sensor only eaq.calibration.flop_per_j, saying why it is unavailable (the bandwidth is measured all the same)."),
    ("eaq.env.<fact>", "git_commit, git_dirty, torch, transformers, torchao, device_name, gpu_uuid; all of it in env.json (secrets redacted)."),
)

# A tag's name with its <placeholder> parts (eaq.group.<group>) standing for any text.
_TAG_PATTERN = re.compile("|".join(re.sub(r"<[^>]+>", ".+", re.escape(name)) for name, _ in TAGS))


def documented_tag(name: str) -> bool:
    """Whether TAGS describes this tag (MLflow's own ``mlflow.*`` tags are MLflow's to document)."""
    return name.startswith("mlflow.") or _TAG_PATTERN.fullmatch(name) is not None


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
