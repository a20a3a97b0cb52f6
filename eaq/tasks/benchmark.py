"""The benchmark task: load, apply the precision, evaluate quality, then measure.

Order matters: the fp32 reference and the forward FLOPs are taken before the precision
transforms the model; quality is computed outside the measurement window; batches are on
the device before it; the sampler runs from the idle baseline to after the window, so
the trace shows both and the window's edges have samples on either side.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
import time
from dataclasses import asdict
from pathlib import Path

import torch
import transformers

from eaq.config import EaqConfig, protocol_seconds
from eaq.data import examples_digest
from eaq.device import arithmetic_key, describe_device, resolve_device
from eaq.evaluate import (
    accuracy, cached_figures, cached_reference, collect_outputs, fidelity, generation_agreement, reference_key,
    weights_fingerprint,
)
from eaq.evaluate.perplexity import perplexity
from eaq.evaluate.fidelity import ARITHMETIC as FIDELITY_ARITHMETIC
from eaq.measure.energy import PRIMARY_CHANNELS, WindowEnergy
from eaq.measure.idle import idle_baseline
from eaq.measure.memory import PeakMemory
from eaq.measure.overhead import sampler_overhead
from eaq.measure.phases import Phases
from eaq.measure.roofline import FLOP_COUNT_VERSION, forward_flops
from eaq.measure.samplers import measures_energy, select_sampler, wait_for_sample
from eaq.measure.timing import run_timed
from eaq.measure.validity import Validity
from eaq.measure.warmup import WarmupResult, warm_up
from eaq.measure.window import MeasurementWindow
from eaq.measure.trace_export import write_csv, write_png
from eaq.models import load_model, load_tokenizer, model_config, model_skeleton, position_limit
from eaq.errors import ConfigError
from eaq.precision import decode_bytes_counted, proof, stored_bytes_read
from eaq.precision.base import set_tf32
from eaq.precision.kernel_check import check_kernels, host_copies, linear_calls
from eaq.precision.mixed import MixedPrecision
from eaq.tasks.compile import compile_model, graph_skips, inductor_settings, require_graphs
from eaq.tasks.isolation import phase_listener
from eaq.tasks.result import TaskResult
from eaq.tasks.roofline import decode_roofline_metrics, roofline_metrics
from eaq.tasks.idle import idle_store
from eaq.tasks.shared import (
    FIDELITY_SEED, check_positions, check_scored_labels, data_metrics, data_tags, make_inputs, read_examples, run_precision, synthetic_batches,
)
from eaq.tracking.environment import package_version
from eaq.workloads.generate import Decoder, Generator, check_generation, eos_ids, unapplied_settings
from eaq.workloads.windows import forward_metrics, generate_metrics, measure_generate

log = logging.getLogger(__name__)


def _primary(trace) -> str:
    return next((ch for ch in PRIMARY_CHANNELS if ch in trace.channels), "")


def energy_record(energy: WindowEnergy, validity: Validity) -> tuple[dict[str, str], dict[str, float]]:
    """The tags and metrics of the run's energy and its verdict. ``energy`` is the run's window's (generation: the
    decode window's); the verdict is recorded wherever any window measured energy, so a prefill measured beside a
    decode the sensor missed is judged invalid (its figures are logged), not left without a verdict the report would
    count as valid."""
    tags: dict[str, str] = {}
    if energy.energy_j is None:
        tags["eaq.energy.reason"] = energy.reason
    else:
        tags["eaq.energy.source"] = energy.source
        tags |= {"eaq.energy.notes": "; ".join(energy.notes)} if energy.notes else {}
    if energy.energy_j is None and not validity.reasons:
        return tags, {}
    tags["eaq.valid"] = str(validity.valid).lower()
    tags |= {"eaq.valid.reasons": "; ".join(validity.reasons)} if validity.reasons else {}
    tags |= {"eaq.valid.notes": "; ".join(validity.notes)} if validity.notes else {}
    return tags, {"valid": float(validity.valid), **validity.facts}


def _generation_reference(cfg: EaqConfig, generator: Generator, batches: list[dict[str, torch.Tensor]], key: str) -> torch.Tensor:
    """The fp32 model's generated tokens for the quality batches, cached like the forward reference."""
    # Batched at batch_size: a row's float results depend on how many rows share its GEMMs, and one flipped argmax
    # changes every later token, so each batch size has its own reference. The end ids never chosen are the
    # model's generation config's too (a file beside the weights, not in their fingerprint).
    gen_key = reference_key(forward=key, new_tokens=cfg.workload.new_tokens, batch_size=cfg.batch_size,
                            eos=generator.eos.tolist())
    return cached_reference(cfg.paths.cache_dir, gen_key, lambda: generator.generate_all(batches))


def _model_flops(cache_dir: str, model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> int:
    """FLOPs of one forward pass of ``model`` over ``batch``, counted once per architecture and input shapes and cached.

    Counting runs the model once under torch's FlopCounterMode, in the ``reference`` phase (0.3 s
    a run on the H100 for DistilBERT-base at batch 32, docs/results/2026-11-25-h100-sweep-time), for
    the same figure in every trial and precision of a sweep (it counts the fp32 model). The key
    holds all the count depends on: the model's configuration (its architecture; every model eaq
    loads has one), its class and its parameters' names and shapes (one configuration loads as an
    encoder, a causal LM whose head runs at every position, or an encoder under a classifier head),
    the inputs' names and shapes, the versions of torch and transformers, and which counting
    (eaq.measure.roofline.FLOP_COUNT_VERSION: a count cached before the CPU's attention was counted is not reused).
    """
    count = lambda: {"forward_flops": float(forward_flops(lambda: model(**batch)))}  # noqa: E731
    key = reference_key(
        architecture=model.config.to_dict(), model=type(model).__qualname__,
        parameters={name: list(value.shape) for name, value in model.named_parameters()},
        shapes={name: list(value.shape) for name, value in batch.items()},
        torch=torch.__version__, transformers=transformers.__version__, counting=FLOP_COUNT_VERSION,
    )
    return int(cached_figures(cache_dir, "flops", key, count)[0]["forward_flops"])


@torch.inference_mode()
def benchmark(cfg: EaqConfig, artifact_dir: Path) -> TaskResult:
    phases = Phases(phase_listener())
    # Everything that can be refused is checked before the model loads (CUDA and NVML start here).
    with phases("prepare"):
        device = resolve_device(cfg.device)
        precision = run_precision(cfg, device)
        if cfg.cuda_graphs and device.type != "cuda":
            raise ConfigError(f"cuda_graphs=true needs a CUDA device and this run is on {device}; drop cuda_graphs or use device=cuda.")
        sampler = select_sampler(cfg.sampler.name, device, cfg.sampler.interval_ms / 1e3, cfg.sampler.compare_nvidia_smi)
        measuring = measures_energy(sampler)
        min_window_s, idle_s = protocol_seconds(cfg.trials, measuring)
        examples = read_examples(cfg)  # a bad data file fails now, not after loading the model
        text = examples is not None
        # Synthetic ids have no labels and no meaning, but the drift from fp32 on them is real:
        # computed only when asked, so timed sweeps on synthetic ids gain no phases.
        fidelity_only = not text and cfg.trials.fidelity_on_synthetic
        generating = cfg.workload.name == "generate"
        if generating:  # from the architecture's config: a 7B shape's weights take minutes to draw or read
            check_generation(model_config(cfg.model), cfg.seq_len, cfg.workload.new_tokens, cfg.compile,
                             position_limit(model_skeleton(cfg.model)))
        else:
            check_positions(cfg)
        torch.manual_seed(cfg.trial)
        set_tf32(False)  # the fp32 reference is IEEE fp32, whatever an earlier run in this process set

    with phases("load"):
        tokenizer = load_tokenizer(cfg.model) if text else None
        (batches, stream), token_cache = make_inputs(cfg, tokenizer, examples, device)
        timed = batches.full()
        loaded = load_model(cfg.model, with_tokenizer=text, device=device, tokenizer=tokenizer)
        model, head = loaded.model.to(device), cfg.model.head
    config = loaded.model.config  # read before a precision wraps the model (autocast)
    check_scored_labels(cfg, loaded, batches)

    generation_config = getattr(loaded.model, "generation_config", None)
    # Never chosen: a key of generated figures (a forward run's config may have no vocabulary size at its top).
    end_ids = eos_ids(config.vocab_size, config, generation_config) if generating else []
    if generating and (unapplied := unapplied_settings(generation_config)):
        log.warning("this model's generation config sets %s, which its own generate() applies and eaq's greedy decode does "
                    "not (it masks end-of-sequence ids only): the tokens may differ from generate()'s; the work per token, "
                    "and every precision's comparison with fp32 under eaq's decoding, are as measured", ", ".join(unapplied))

    def generator(net: torch.nn.Module, runner: torch.nn.Module | None = None, static: bool = False) -> Generator:
        return Generator(net, runner if runner is not None else net, config, cfg.seq_len, cfg.workload.new_tokens, device, static,
                         generation_config)

    def eager_pass(net: torch.nn.Module) -> Callable[[], object]:
        """One eager pass of ``net`` as the workload repeats it: a decode step (its prefill done now), or a forward."""
        return Decoder(generator(net), timed[0]["input_ids"]).step if generating else (lambda: net(**timed[0]))

    evaluated = synthetic_batches(cfg, config.vocab_size, device, FIDELITY_SEED) if fidelity_only else batches
    quality_batches = evaluated.distinct(cfg.trials.quality_max_batches)
    reference = generated_reference = None
    with phases("reference"):
        flops = _model_flops(cfg.paths.cache_dir, model, timed[0]) if measuring and cfg.trials.roofline and not generating else None
        if text or fidelity_only:
            rows = sum(b["input_ids"].shape[0] for b in quality_batches)
            # dataset holds kind=synthetic, so no synthetic reference is taken for a text one.
            # Everything the fp32 outputs depend on: the examples themselves (a file edited under the same path), the
            # batch a row shares its GEMMs with, the device and the libraries computing them.
            # The rows and batch size are not the text's perplexity's: scored alone, it keys on the rest (below).
            # The token ids' cache key holds the tokenizer's identity (its vocabulary, not only its path); the model's
            # config is its own file (a folder's config.json edited in place: layer_norm_eps, hidden_act, rope_scaling).
            inputs = dict(model=asdict(cfg.model), weights=weights_fingerprint(model), architecture=model.config.to_dict(),
                          dataset=asdict(cfg.dataset),
                          **({"tokens": token_cache.path.stem} if token_cache is not None else {}),
                          seq_len=cfg.seq_len, device=arithmetic_key(device), torch=torch.__version__,
                          transformers=transformers.__version__,
                          **({"data": examples_digest(examples)} if examples is not None else {}))
            key = reference_key(**inputs, rows=rows, batch_size=cfg.batch_size,
                                **({"synthetic_seed": FIDELITY_SEED} if fidelity_only else {}))
            reference = cached_reference(cfg.paths.cache_dir, key, lambda: collect_outputs(model, head, quality_batches))
            if generating:
                generated_reference = _generation_reference(cfg, generator(model), quality_batches, key)
        # Kept on the host for the kernel check's baseline, profiled at the end of the run: a
        # profiler session before the window could change what the window measures.
        fp32_model = copy.deepcopy(model).cpu() if cfg.precision.kernel_check else None
    with phases("precision"):
        model = precision.apply(model, device)
        evidence = proof(model)
    quality: dict[str, float] = {}
    quality_reused: dict[str, bool] = {}  # per cached part of the figures: whether it came from the cache
    with phases("quality"):
        plan = precision.plan.sha256 if isinstance(precision, MixedPrecision) else None  # the bytes it applied

        def figures_of(kind: str, depends_on: dict[str, object], compute: Callable[[], dict[str, float]]) -> dict[str, float]:
            """Computed, or read from the cache under all they depend on (the trial index is not among them; the device's
            arithmetic is in ``depends_on``)."""
            if not cfg.trials.reuse_quality:
                return compute()
            found, reused = cached_figures(cfg.paths.cache_dir, kind, reference_key(
                **depends_on, precision=asdict(cfg.precision), plan=plan,
                # How torchao's precisions quantize (scales, which layers it takes) is its version's to change.
                quantizer=package_version("torchao")), compute)
            quality_reused[kind] = reused
            return found

        if reference is not None:
            def compute_quality() -> dict[str, float]:
                outputs = collect_outputs(model, head, quality_batches)
                figures = fidelity(head, outputs, reference)
                if batches.labels is not None:
                    figures |= accuracy(head, outputs, batches.labels)
                if generated_reference is not None:
                    tokens = generator(model).generate_all(quality_batches)
                    figures |= generation_agreement(tokens, generated_reference)
                return figures

            quality = figures_of("quality", {"reference": key, "batch_size": cfg.batch_size, "fidelity": FIDELITY_ARITHMETIC,
                                             **({"new_tokens": cfg.workload.new_tokens, "eos": end_ids} if generating else {})},
                                   compute_quality)
        if stream is not None and head == "causal_lm":
            # The whole text scored one window at a time: the same figure at every batch size and workload.
            stride = cfg.dataset.perplexity_stride if cfg.dataset.perplexity_stride is not None else max(1, cfg.seq_len // 2)

            def compute_perplexity() -> dict[str, float]:
                ppl = perplexity(model, stream, cfg.seq_len, stride)
                return {"quality_perplexity": ppl.perplexity, "quality_perplexity_tokens": ppl.tokens}

            quality |= figures_of("perplexity", {**inputs, "stride": stride}, compute_perplexity)

    # Compiled after quality is measured on the eager model; compilation happens in warm-up.
    # Generation compiles the decode step only, over a static KV cache (fixed shapes); prefill runs eager.
    # Its CUDA graph is the whole decode step's, recorded by measure_generate: not Inductor's, inside it.
    runner = compile_model(model, cfg.cuda_graphs and not generating, cfg.compile_tuning, cfg.compile_pattern_matcher) if cfg.compile else model
    step = lambda batch: runner(**batch)  # noqa: E731
    measured = generator(model, runner, static=cfg.compile) if generating else None
    memory = PeakMemory(device)
    memory.reset()
    settle = cfg.trials.warmup_settle if cfg.trials.warmup_settle is not None else measuring
    with phases("sampler"):
        sampler.start()
    try:
        with phases("sampler"):
            wait_for_sample(sampler)  # the trace starts before the idle window
        with phases("idle"):
            idle, idle_window, idle_tags = idle_baseline(device, sampler, idle_s, idle_store(cfg, device, sampler))

        def power(t0: float, t1: float) -> float | None:
            trace_so_far = sampler.trace  # drains the polling process once, outside any window
            return trace_so_far.stats_w(_primary(trace_so_far), t0, t1).get("mean")

        def warm(run: object, inputs: list) -> WarmupResult:
            return warm_up(run, inputs, device, cfg.trials.warmup_iters, settle, power, cfg.trials.warmup_max_s, cfg.trials.warmup_rule)

        if measured is not None:
            prompts = [b["input_ids"] for b in timed]
            windows = measure_generate(measured, prompts, device, sampler, cfg.trials.iters, min_window_s, warm, phases, cfg.cuda_graphs)
            step = windows.decoder.step  # the sampler-overhead check times decode steps
        else:
            skips = graph_skips()

            def graphs_kept() -> None:  # after warm-up, and after the window: a graph first recorded there may be skipped too
                if cfg.compile and cfg.cuda_graphs:
                    require_graphs(skips, "cuda_graphs=true", "Measure this configuration with cuda_graphs=false.")

            with phases("warmup"):
                warmed = warm(step, timed)  # compiles the model on its first pass
            graphs_kept()
            with phases("window"), MeasurementWindow(device, sampler) as window:
                latencies = run_timed(step, timed, device, cfg.trials.iters, min_window_s)
                window.iterations = len(latencies)
            graphs_kept()
        with phases("sampler"):
            wait_for_sample(sampler)  # ... and ends after the last window
    finally:
        with phases("sampler"):
            trace = sampler.stop()
    idle_w = idle.power_w if idle is not None else None
    if measured is not None:
        workload_metrics, energy, validity = generate_metrics(windows, cfg.batch_size, sampler.name, trace, idle_w, min_window_s)
        result, settled, first_start = windows.decode, windows.settled, windows.start_unix_s
    else:
        result, settled = window.result, warmed.settled
        assert result is not None
        first_start = result.start_unix_s
        workload_metrics, energy, validity = forward_metrics(result, latencies, warmed, cfg.batch_size, sampler.name, trace, idle_w, min_window_s)

    metrics = {
        **workload_metrics,
        "model_size_mb": evidence["model_size_mb"],
        "quantized_linear_layers": evidence["quantized_linear_layers"],
        "linear_layers": evidence["linear_layers"],
        "weights_outside_linear_share": evidence["weights_outside_linear_share"],
        **memory.read(),
        **quality,
        **({"idle_baseline_age_s": first_start - idle.measured_unix_s} if idle is not None else {}),
    }
    tags = {
        "eaq.device": str(device),
        "eaq.weights": cfg.model.weights,
        "eaq.model_source": loaded.source,
        "eaq.proof.stored_dtypes": str(evidence["stored_dtypes"]),
        "eaq.window.start_unix_s": f"{result.start_unix_s:.3f}",
        "eaq.window.end_unix_s": f"{result.end_unix_s:.3f}",
        "eaq.energy": energy.status,
        "eaq.energy.sampler": energy.sampler,
        "eaq.compile": str(cfg.compile).lower(),
        **({"eaq.compile.inductor": inductor_settings(cfg.compile_tuning, cfg.compile_pattern_matcher)} if cfg.compile else {}),
        "eaq.cuda_graphs": str(cfg.cuda_graphs).lower(),
        "eaq.kernel_check": "not asked",
        "eaq.warmup.settled": str(settled).lower() if settled is not None else "not asked",
        "eaq.workload": cfg.workload.name,
        "eaq.memory.rss_peak": memory.rss_scope,
        **idle_tags,
    }
    if measured is not None:  # the window tags above are the decode window's: the trace's origin
        tags["eaq.prefill_window.start_unix_s"] = f"{windows.prefill.start_unix_s:.3f}"
        tags["eaq.prefill_window.end_unix_s"] = f"{windows.prefill.end_unix_s:.3f}"
        tags["eaq.decode.cuda_graph"] = "one CUDA graph per decode step" if windows.decode_graph is None else f"none: {windows.decode_graph}"
    tags |= data_tags(examples)
    if token_cache is not None:
        metrics["data_tokenize_s"] = token_cache.seconds
        tags["eaq.data.token_cache"] = "hit" if token_cache.hit else "miss"
    metrics |= data_metrics(cfg, batches)
    if not quality:
        tags["eaq.quality.reason"] = "dataset is synthetic token ids: no quality figures for meaningless text"
    else:
        reused = [kind for kind, hit in quality_reused.items() if hit]
        tags["eaq.quality.source"] = ("computed in this run" if not reused else "cache: computed by an earlier run of this configuration"
                                      if len(reused) == len(quality_reused) else f"{', '.join(reused)} from the cache, the rest computed in this run")
        if cfg.compile:  # the figures a reader sets beside the compiled kernels' speed and energy
            tags["eaq.quality.model"] = "eager: computed before compilation, as for the same run with compile=false"
        if fidelity_only:
            tags["eaq.quality.reason"] = (
                f"dataset is synthetic token ids: fidelity to fp32 only (trials.fidelity_on_synthetic, ids of seed {FIDELITY_SEED}), "
                "no accuracy or perplexity"
            )
    energy_tags, energy_figures = energy_record(energy, validity)
    tags |= energy_tags
    metrics |= energy_figures
    files = []
    with phases("artifacts"):
        if trace.times:
            files = [artifact_dir / "power_trace.csv", artifact_dir / "power_trace.png"]
            write_csv(trace, files[0], origin=result.t0)
            title = f"{cfg.run_name}: {energy.sampler}, window {result.duration_s:.1f} s"
            idle_span = (idle_window.t0, idle_window.t1) if idle_window else None
            spans = ([("prefill window", windows.prefill.t0, windows.prefill.t1), ("decode window", result.t0, result.t1)]
                     if measured is not None else [("measurement window", result.t0, result.t1)])
            write_png(trace, files[1], spans, idle_span, title, origin=result.t0)
        if isinstance(precision, MixedPrecision):  # which layer runs which format, read from the model
            tags |= precision.tags(model)
            files.append(precision.write_layers(model, artifact_dir / "precision_layers.csv"))
    # After the window: roofline, sampler overhead, kernel check.
    with phases("checks"):
        if flops and energy.energy_j:
            extra_metrics, extra_tags = roofline_metrics(cfg, device, precision.matmul, flops, energy.energy_j, result.iterations)
            metrics |= extra_metrics
            tags |= extra_tags
        if measured is not None and cfg.trials.roofline:
            # What a decode step reads: every stored weight byte but the embedding rows no token looks up and the
            # routed experts no token can choose, plus the KV cache it attends over.
            read = stored_bytes_read(model, cfg.batch_size) + windows.decoder.kv_bytes_read_per_step()
            extra_metrics, extra_tags = decode_roofline_metrics(cfg, device, read, decode_bytes_counted(model),
                                                                metrics["time_per_output_token_mean_ms"] / 1e3)
            metrics |= extra_metrics
            tags |= extra_tags
        if cfg.trials.overhead_pairs and measuring:
            make = lambda: select_sampler(cfg.sampler.name, device, cfg.sampler.interval_ms / 1e3)  # noqa: E731
            cost = sampler_overhead(step, timed, device, make, cfg.trials.overhead_pairs, cfg.trials.overhead_iters)
            metrics |= {
                "sampler_overhead_pct": cost.overhead_pct,
                "sampler_overhead_spread_pct": cost.spread_pct,
                "latency_sampler_off_ms": cost.off_ms,
                "latency_sampler_on_ms": cost.on_ms,
            }
        if fp32_model is not None:
            # Last of all: a profiler session could change what a later window or calibration measures.
            fp32_model.to(device)  # before profiling: moving the weights is no part of a forward pass
            # Generation checks a decode step, the pass it repeats; a forward workload, a forward pass.
            baseline_copies = host_copies(eager_pass(fp32_model), device)
            # Each Linear's calls in one pass, counted on the eager model (the profiled pass may be compiled).
            calls = linear_calls(model, eager_pass(model))
            kernels = check_kernels(precision, model, lambda: step(timed[0]), device, baseline_copies, calls)
            metrics |= kernels.metrics()
            tags["eaq.kernel_check"] = kernels.summary
    with phases("cooldown"):
        time.sleep(cfg.trials.cooldown_s)
    return TaskResult(metrics=metrics | phases.metrics(), tags=tags, device=describe_device(device), files=files)
