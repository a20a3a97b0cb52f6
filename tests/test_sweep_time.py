"""Issue 13: sweeps that spend their time measuring. Isolation by fork, the idle baseline
reused while fresh, quality computed once per configuration, per-phase timings, progress."""

from __future__ import annotations

import gc
import contextlib
import os
import pickle
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import torch

from conftest import FAST, REPO, all_runs, command_line, run_eaq
from eaq.errors import EaqError
from eaq.config import EaqConfig
from eaq.files import try_exclusive
from eaq.measure.idle import IdleBaseline, ReusePolicy, idle_baseline, stale_reason
from eaq.measure.nvml import NvmlSampler
from eaq.tasks import roofline
from eaq.tasks.ahead import LOG_FILE, Plan, gate_path, start, wait_for_device
from eaq.tasks.idle import idle_store
from eaq.tasks.isolation import run_isolated
from fake_nvml import FakeNvml

_stash: list[torch.Tensor] = []


def _compile_and_stash() -> tuple[tuple[int, int], int, int, bool]:
    """In the run's process: compile a function, keep a tensor alive in a module global."""
    fn = torch.compile(lambda x: x * 2 + 1, backend="eager")
    fn(torch.ones(4))
    _stash.append(torch.ones(1024, 1024))
    frames = torch._dynamo.utils.counters["frames"]["ok"]
    return (os.getpid(), os.getppid()), frames, len(_stash), torch.cuda.is_initialized()


def test_each_isolated_run_starts_clean_in_its_own_forked_process() -> None:
    ((pid1, parent1), frames1, stash1, cuda1), _ = run_isolated("test_sweep_time:_compile_and_stash")
    ((pid2, parent2), frames2, stash2, cuda2), overhead2 = run_isolated("test_sweep_time:_compile_and_stash")
    assert pid1 != pid2 and os.getpid() not in (pid1, pid2)
    # Dynamo's frame counter and the module global start from nothing in each run: neither the
    # compiler state nor the memory the first run held carried over, and the parent never ran it.
    assert (frames1, stash1) == (frames2, stash2) == (1, 1)
    assert not _stash
    assert not cuda1 and not cuda2
    # The second run is a fork of the preloaded server, as the first was: no interpreter start, no imports (a
    # fork costs well under a second; a fresh interpreter importing torch takes seconds even on an idle machine).
    assert parent1 == parent2 != os.getpid()
    assert overhead2 < 5.0, overhead2


def _collector() -> tuple[bool, int]:
    return gc.isenabled(), gc.get_freeze_count()


def test_a_forked_run_collects_garbage_with_the_servers_imports_frozen() -> None:
    """The server imports with the collector off (eaq.tasks.preload): its runs must not inherit that."""
    (enabled, frozen), _ = run_isolated("test_sweep_time:_collector")
    assert enabled
    assert frozen > 10_000  # torch's and transformers' objects, never walked by the run's collections


def test_a_run_in_the_jobs_own_process_accounts_for_its_imports(out: Path) -> None:
    """Under isolate=false the task's imports (torch, transformers: 4-5 s in a process's first run) were in no phase,
    so the phases fell short of run_wall_s by that much where they add up to it but for milliseconds otherwise."""
    result = run_eaq(out, *FAST, "sampler=none", "isolate=false")
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = all_runs(out)
    metrics = run.data.metrics
    assert metrics["phase_import_s"] > 0 and "isolation_overhead_s" not in metrics
    unexplained = metrics["run_wall_s"] - sum(v for k, v in metrics.items() if k.startswith("phase_"))
    assert 0 <= unexplained < 0.1 + 0.05 * metrics["run_wall_s"], (unexplained, metrics)


def test_phases_reach_the_parent_while_the_run_is_in_progress(out: Path) -> None:
    result = run_eaq(out, "-m", "precision=fp32", "trial=1,2", *FAST)
    assert result.returncode == 0, result.stderr[-3000:]
    # Not a terminal: plain lines, one per phase and one per finished run, with counts.
    lines = [line for line in result.stderr.splitlines() if line.startswith("[sweep ")]
    assert "[sweep 1/2] bert-tiny-random-fp32-b4-t1: load" in lines
    assert "[sweep 2/2] bert-tiny-random-fp32-b4-t2: window" in lines
    # A phase entered again straight after itself (the sampler started, then its first sample awaited) is one line.
    assert not any(a == b for a, b in zip(lines, lines[1:])), lines
    assert any(line.startswith("[sweep 1/2] bert-tiny-random-fp32-b4-t1 finished in") and "about" in line for line in lines), lines
    assert not any("\r" in line or "\x1b[" in line for line in result.stderr.splitlines())  # no bar, no escape codes
    for run in all_runs(out):
        if run.data.tags.get("eaq.kind") != "benchmark":
            continue
        metrics = run.data.metrics
        phases = {k: v for k, v in metrics.items() if k.startswith("phase_")}
        assert {"phase_load_s", "phase_quality_s", "phase_warmup_s", "phase_window_s", "phase_logging_s"} <= set(phases)
        assert metrics["phase_window_s"] == pytest.approx(metrics["window_duration_s"], abs=0.05)
        # The phases and the isolation account for the run's wall time, within what happens
        # between them (a few milliseconds of bookkeeping; ~1.1 s a run on the H100 before
        # the sampler's start, stop and margins were a phase and the result's trip isolation).
        unexplained = metrics["run_wall_s"] - sum(phases.values()) - metrics["isolation_overhead_s"]
        # Bounded as a share of the run too: a loaded machine stretches the bookkeeping with everything else.
        assert 0 <= unexplained < 0.1 + 0.05 * metrics["run_wall_s"], (unexplained, metrics["run_wall_s"])
        assert "phase_sampler_s" in phases


def test_quality_is_computed_once_per_configuration_and_reused_by_other_trials(out: Path) -> None:
    result = run_eaq(out, "-m", "precision=fp32,int8", "trial=1,2", "model=minilm_sst2", "dataset=sst2",
                     "trials=quick", "batch_size=8", "seq_len=32", "trials.quality_max_batches=3")
    assert result.returncode == 0, result.stderr[-3000:]
    runs = {r.info.run_name: r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"}
    for precision in ("fp32", "int8"):
        first, second = runs[f"minilm-sst2-{precision}-b8-t1"], runs[f"minilm-sst2-{precision}-b8-t2"]
        assert first.data.tags["eaq.quality.source"] == "computed in this run"
        assert second.data.tags["eaq.quality.source"].startswith("cache")
        quality = {k: v for k, v in first.data.metrics.items() if k.startswith("quality_")}
        assert quality and quality == {k: v for k, v in second.data.metrics.items() if k.startswith("quality_")}
    # Another precision is another configuration: its figures are its own, not fp32's.
    assert runs["minilm-sst2-fp32-b8-t1"].data.metrics["quality_kl_from_fp32"] == 0
    assert runs["minilm-sst2-int8-b8-t1"].data.metrics["quality_kl_from_fp32"] > 0


def test_perplexity_is_scored_once_per_model_precision_and_text(out: Path, tmp_path: Path) -> None:
    """The whole text scored one window at a time is the same figure at every batch size: the second batch size reads
    it from the cache (it was scored again for each: minutes on WikiText-2), its agreement figures are its own."""
    text = tmp_path / "text.raw"
    text.write_text((REPO / "eaq" / "data" / "sample_sentences.txt").read_text() * 3)
    result = run_eaq(out, "-m", "batch_size=2,4", "model=gpt2_tiny_random", "dataset=wikitext2", f"dataset.path={text}",
                     "trials=quick", "seq_len=16")
    assert result.returncode == 0, result.stderr[-3000:]
    runs = {r.info.run_name: r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"}
    first, second = runs["gpt2-tiny-random-fp32-b2-t1"], runs["gpt2-tiny-random-fp32-b4-t1"]
    assert first.data.tags["eaq.quality.source"] == "computed in this run"
    assert second.data.tags["eaq.quality.source"] == "perplexity from the cache, the rest computed in this run"
    for name in ("quality_perplexity", "quality_perplexity_tokens"):
        assert first.data.metrics[name] == second.data.metrics[name]


def test_a_measuring_process_killed_by_a_signal_is_said_in_a_sentence_that_names_what_to_do() -> None:
    """The out-of-memory killer's SIGKILL (here the process aborts itself) surfaced as BrokenProcessPool's own words."""
    with pytest.raises(EaqError, match=r"ended without a word: a signal killed it .* isolate=false runs the task in this process"):
        run_isolated("os:abort")


class _Unrebuildable(Exception):
    """Pickles (its args are the message) and cannot be rebuilt from them, as huggingface_hub's
    StrictDataclassFieldValidationError (its __init__ takes a field and a cause)."""

    def __init__(self, field: str, cause: str) -> None:
        super().__init__(f"field {field}: {cause}")


def _raise_unrebuildable() -> None:
    raise _Unrebuildable("num_hidden_layers", "expected int, got float")


def test_an_exception_that_pickles_and_cannot_be_rebuilt_comes_back_as_its_words_not_as_a_killed_process() -> None:
    """transformers' check of model.architecture.num_hidden_layers=4.0 raised such an exception in the forked run: its
    trip back broke the process pool, and the run was reported killed by a signal (the out-of-memory killer)."""
    with pytest.raises(RuntimeError, match=r"_Unrebuildable: field num_hidden_layers: expected int, got float"):
        run_isolated("test_sweep_time:_raise_unrebuildable")


def _config(tmp_path: Path, **trials: float) -> EaqConfig:
    cfg = EaqConfig()
    cfg.paths.cache_dir = str(tmp_path / "cache")
    for key, value in trials.items():
        setattr(cfg.trials, key, value)
    return cfg


def test_no_idle_window_is_spent_where_no_energy_is_measured(tmp_path: Path) -> None:
    """trials=gpu_energy's idle_s (5 s) slept through a window that could give no baseline, in every run of a
    latency sweep with sampler=none (or auto on a host without a sensor)."""
    from eaq.measure.idle import idle_baseline
    from eaq.measure.samplers import select_sampler

    started = time.perf_counter()
    idle, window, tags = idle_baseline(torch.device("cpu"), select_sampler("none", torch.device("cpu")), 3.0, None)
    assert time.perf_counter() - started < 1.0 and idle is None and window is None
    assert tags == {"eaq.idle": "none (no energy sensor: no energy to net)"}


def test_a_stale_idle_baseline_is_measured_again(tmp_path: Path) -> None:
    fake = FakeNvml(schedule=[(0.0, 80.0)])
    sampler = NvmlSampler("1234-abcd", interval_s=0.005, nvml=fake)
    cpu = torch.device("cpu")
    sampler.start()
    try:
        cfg = _config(tmp_path)
        first, window, tags = idle_baseline(cpu, sampler, 0.3, idle_store(cfg, cpu, sampler))
        assert window is not None and tags["eaq.idle"].startswith("measured in this run (no stored baseline")
        assert first is not None and first.power_w == pytest.approx(80.0, rel=0.05)

        again, window, tags = idle_baseline(cpu, sampler, 0.3, idle_store(cfg, cpu, sampler))
        assert window is None and tags["eaq.idle"].startswith("reused") and again == first

        fake.temperature_c += 15  # the device warmed up since: idle power is not what it was
        moved, window, tags = idle_baseline(cpu, sampler, 0.3, idle_store(cfg, cpu, sampler))
        assert window is not None and "temperature moved from 45 to 60 C" in tags["eaq.idle"]
        assert moved is not None and moved.facts["temperature_c"] == 60

        time.sleep(0.2)
        old, window, tags = idle_baseline(cpu, sampler, 0.3, idle_store(_config(tmp_path, idle_max_age_s=0.1), cpu, sampler))
        assert window is not None and "old (reused up to 0 s)" in tags["eaq.idle"]
        assert old is not None and old.measured_unix_s > moved.measured_unix_s

        _, window, tags = idle_baseline(cpu, sampler, 0.3, idle_store(_config(tmp_path, idle_reuse=False), cpu, sampler))
        assert window is not None and "reuse off" in tags["eaq.idle"]
        # A CPU other jobs share (GPU slots; submitit's local executor): its idle is theirs too, so never kept.
        slots = _config(tmp_path)
        slots.gpu_slots.enabled = True
        assert idle_store(slots, cpu, sampler) is None and idle_store(cfg, cpu, sampler) is not None
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SUBMITIT_LOCAL_JOB_ID", "123")
            assert idle_store(cfg, cpu, sampler) is None

        # A protocol asking for a longer idle does not take the shorter baseline stored by another.
        longer, window, tags = idle_baseline(cpu, sampler, 0.6, idle_store(cfg, cpu, sampler))
        assert window is not None and "asks for 0.6 s" in tags["eaq.idle"]
        assert longer is not None and longer.duration_s >= 0.6
        _, window, tags = idle_baseline(cpu, sampler, 0.3, idle_store(cfg, cpu, sampler))
        assert window is None and tags["eaq.idle"].startswith("reused")  # a shorter ask takes the longer one
    finally:
        sampler.stop()


def test_an_idle_window_the_gpu_did_not_spend_idle_is_no_baseline_and_is_not_kept(tmp_path: Path) -> None:
    fake = FakeNvml(schedule=[(0.0, 80.0)])
    sampler = NvmlSampler("1234-abcd", interval_s=0.005, nvml=fake)
    cpu = torch.device("cpu")
    cfg = _config(tmp_path)
    sampler.start()
    try:
        # Another process's kernels for 0.1 s inside the 0.4 s idle window, gone before either end.
        fake.busy.append((time.perf_counter() - fake.origin + 0.15, 0.1, 60))
        busy, window, tags = idle_baseline(cpu, sampler, 0.4, idle_store(cfg, cpu, sampler))
        assert busy is None and window is not None
        assert tags["eaq.idle"].startswith("measured in this run, not used: the GPU was busy in ") and "(up to 60%)" in tags["eaq.idle"]
        # The run's own work up to the window's start (a layers run's last pass, synced): the sample whose period
        # straddles the start is not the window's.
        fake.busy.append((0.0, time.perf_counter() - fake.origin, 100))
        quiet, window, tags = idle_baseline(cpu, sampler, 0.4, idle_store(cfg, cpu, sampler))  # not kept: measured again
        assert tags["eaq.idle"].startswith("measured in this run (no stored baseline") and quiet is not None
        assert quiet.power_w == pytest.approx(80.0, rel=0.05)
        # A 1% blip in one sample (a read's, not another process's work) leaves the window idle.
        fake.busy.append((time.perf_counter() - fake.origin + 0.15, 0.02, 1))
        blip, _, tags = idle_baseline(cpu, sampler, 0.4, idle_store(_config(tmp_path, idle_reuse=False), cpu, sampler))
        assert blip is not None, tags
        # A GPU that keeps no utilization samples: the processes at the window's ends judge it.
        fake.unsupported.add("nvmlDeviceGetSamples")
        fake.processes = [os.getpid(), 4242]
        held, _, tags = idle_baseline(cpu, sampler, 0.2, idle_store(_config(tmp_path, idle_reuse=False), cpu, sampler))
        assert held is None and tags["eaq.idle"] == "measured in this run, not used: 1 other process(es) held the GPU at the window's start or end"
    finally:
        sampler.stop()


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        ({"temperature_c": 52.0, "sm_clock_mhz": 1900.0}, None),
        ({"temperature_c": 54.0, "sm_clock_mhz": 1980.0}, "temperature moved"),
        ({"temperature_c": 50.0, "sm_clock_mhz": 345.0}, "SM clock moved"),
        ({"temperature_c": 50.0, "sm_clock_mhz": 1980.0, "pstate": 2.0}, "performance state moved"),
    ],
)
def test_idle_reuse_rules(facts: dict[str, float], expected: str | None) -> None:
    baseline = IdleBaseline(80.0, 5.0, time.time() - 30, "nvml", {"temperature_c": 50.0, "sm_clock_mhz": 1980.0, "pstate": 0.0})
    policy = ReusePolicy()  # the defaults, which trials' are too
    assert (policy.max_age_s, policy.max_temp_delta_c, policy.max_clock_change) == (600, 3, 0.25)
    reason = stale_reason(baseline, "nvml", facts, policy)
    assert reason is None if expected is None else expected in (reason or "")
    assert "sampler" in (stale_reason(baseline, "rapl", facts, policy) or "")
    # nvidia-smi's power-only query leaves nothing to check a stored baseline against: measured again.
    smi = IdleBaseline(80.0, 5.0, time.time() - 30, "nvidia_smi", {})
    assert "reads no GPU temperature" in (stale_reason(smi, "nvidia_smi", {}, policy) or "")


def test_calibrations_ahead_hold_the_device_gate_until_they_end(tmp_path: Path) -> None:
    fp32, int8 = _config(tmp_path), _config(tmp_path)
    int8.precision.name = "int8"
    for cfg in (fp32, int8):
        cfg.device, cfg.sampler.name = "cpu", "none"
    ahead = start(Plan([fp32, int8]), tmp_path / "sweep")
    assert ahead is not None
    # Held before the fork exists: no run can pass the gate in between.
    assert try_exclusive(gate_path(fp32.paths.cache_dir)) is None
    waited = wait_for_device(fp32.paths.cache_dir)
    # Read as the gate opens: every calibration was done before it did, in a fork of this process's server.
    log = (tmp_path / "sweep" / LOG_FILE).read_text()
    assert "fp32 on cpu: float32: no sampler measures energy on cpu" in log and "int8 on cpu: int8:" in log
    assert "ended without" not in log and ahead.wait(10) and waited > 0
    # A gate held already (another sweep on the same cache) leaves the calibrations to the runs.
    with try_exclusive(gate_path(fp32.paths.cache_dir)):
        assert start(Plan([fp32]), tmp_path / "other") is None


def test_a_sweep_calibrates_each_format_once_ahead_and_its_runs_wait_for_it(out: Path) -> None:
    result = run_eaq(out, "-m", "precision=fp32,int8", "trial=1,2", *FAST, "trials.roofline=true", "sampler=none", "calibrate_ahead=true")
    assert result.returncode == 0, result.stderr[-3000:]
    (log,) = out.glob(f"multirun/*/{LOG_FILE}")
    lines = log.read_text().splitlines()
    # One line per format the runs need, whatever the trials: the composed jobs, deduplicated.
    assert [line.split(" - ", 1)[1].split(":")[0] for line in lines[1:]] == ["fp32 on auto", "int8 on auto"], lines
    done = datetime.strptime(lines[-1][1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    runs = [r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"]
    assert len(runs) == 4
    for run in runs:
        assert "phase_ahead_s" in run.data.metrics
        assert float(run.data.tags["eaq.window.start_unix_s"]) > done  # no window while it worked


def _calibrate_with_a_sensor(monkeypatch: pytest.MonkeyPatch, cache: Path, precision: str) -> None:
    """What a run on a machine with an energy sensor leaves in the cache: its peak, measured through the run's own code."""
    cfg = _config(cache.parent, roofline_window_s=1.2)  # ~60 updates of the fake sensor's 20 ms: >= 20 under load too
    cfg.paths.cache_dir, cfg.device, cfg.precision.name = str(cache), "cpu", precision
    cfg.sampler.name = "none"  # the sweeps' setting, which a peak is recorded under (the fake below stands in for a sensor)
    sensor = lambda *_: NvmlSampler("1234-abcd", interval_s=0.005, nvml=FakeNvml(schedule=[(0.0, 300.0)], update_s=0.02))  # noqa: E731
    with monkeypatch.context() as patch:
        patch.setattr(roofline, "select_sampler", sensor)
        assert "measured" in roofline.ensure_calibration(cfg)


def test_a_peak_is_kept_per_sampler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A peak metered by nvidia-smi's 1 s averages is not the one an NVML run is judged against (it was: one file per
    device and format), and the NVML run's own stays its own."""
    cache = tmp_path / "cache"
    _calibrate_with_a_sensor(monkeypatch, cache, "fp32")

    class Smi(NvmlSampler):
        name = "nvidia_smi"

    cfg = _config(tmp_path, roofline_window_s=1.2)
    cfg.paths.cache_dir, cfg.device, cfg.precision.name = str(cache), "cpu", "fp32"
    with monkeypatch.context() as patch:
        patch.setattr(roofline, "select_sampler", lambda *_: Smi("1234-abcd", interval_s=0.005, nvml=FakeNvml(schedule=[(0.0, 300.0)], update_s=0.02)))
        assert "measured" in roofline.ensure_calibration(cfg)
        assert "cached" in roofline.ensure_calibration(cfg)
    assert sorted(p.name.rsplit("-", 2)[1:] for p in cache.glob("roofline-*.json")) == [["float32", "nvidia_smi.json"], ["float32", "nvml.json"]]


def test_a_sweep_calibrates_ahead_only_what_is_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    sweep = ["-m", "precision=fp32,int8", "trial=1", *FAST, "trials.roofline=true", "sampler=none", "calibrate_ahead=true",
             "device=cpu", f"paths.cache_dir={cache}"]
    _calibrate_with_a_sensor(monkeypatch, cache, "fp32")
    result = run_eaq(tmp_path / "first", *sweep)
    assert result.returncode == 0, result.stderr[-3000:]
    (log,) = (tmp_path / "first").glob(f"multirun/*/{LOG_FILE}")
    assert [line.split(" - ", 1)[1].split(":")[0] for line in log.read_text().splitlines()[1:]] == ["int8 on cpu"]

    # Every peak cached: nothing started, and no run waits.
    _calibrate_with_a_sensor(monkeypatch, cache, "int8")
    result = run_eaq(tmp_path / "repeat", *sweep)
    assert result.returncode == 0, result.stderr[-3000:]
    (folder,) = (tmp_path / "repeat").glob("multirun/*")
    assert not (folder / LOG_FILE).exists()
    runs = [r for r in all_runs(tmp_path / "repeat") if r.data.tags.get("eaq.kind") == "benchmark"]
    assert len(runs) == 2 and all(r.data.metrics["phase_ahead_s"] < 0.05 for r in runs)


def test_a_models_flop_count_is_counted_once_per_architecture_and_shape(tmp_path: Path) -> None:
    from eaq.measure.roofline import forward_flops
    from eaq.tasks.benchmark import _model_flops
    from test_generate import preset

    model = preset("bert_tiny_random")
    batch = {"input_ids": torch.randint(0, 100, (4, 32)), "attention_mask": torch.ones(4, 32, dtype=torch.long)}
    counted = forward_flops(lambda: model(**batch))
    assert _model_flops(str(tmp_path), model, batch) == counted > 0
    (cached,) = tmp_path.glob("flops-*.json")
    cached.write_text('{"forward_flops": 12345.0}')  # what the next run reads, not a new count
    assert _model_flops(str(tmp_path), model, batch) == 12345
    longer = {name: value.repeat(1, 2) for name, value in batch.items()}  # another shape: another entry, counted
    assert _model_flops(str(tmp_path), model, longer) == forward_flops(lambda: model(**longer)) > counted
    model.config.num_hidden_layers += 1  # another architecture under the same name: not the cached count
    assert _model_flops(str(tmp_path), model, batch) != 12345
    assert len(list(tmp_path.glob("flops-*.json"))) == 3
    causal = preset("gpt2_tiny_random")  # one configuration, with and without its LM head at every position
    tokens = {"input_ids": torch.randint(0, 100, (2, 16))}
    with_head = _model_flops(str(tmp_path), causal, tokens)
    assert _model_flops(str(tmp_path), causal.transformer, tokens) == forward_flops(lambda: causal.transformer(**tokens)) < with_head


@pytest.mark.parametrize("name", ["bert_tiny_random", "gpt2_tiny_random"])
def test_attention_through_sdpa_counts_the_flops_of_its_matmuls_written_out(name: str) -> None:
    """The fused attention kernel SDPA picks (on this CPU, one torch's counter has no formula for) counts as the same
    FLOPs as eager attention's two matmuls: the CPU's count had left attention out, 11% of bert-tiny's pass here."""
    from eaq.layers.attribution import component_flops
    from eaq.layers.components import find_components
    from eaq.measure.roofline import forward_flops
    from test_generate import preset

    model = preset(name)
    batch = {"input_ids": torch.randint(0, 100, (4, 32)), "attention_mask": torch.ones(4, 32, dtype=torch.long)}
    assert model.config._attn_implementation == "sdpa"
    fused, by_component = forward_flops(lambda: model(**batch)), component_flops(model, find_components(model), lambda: model(**batch))
    model.set_attn_implementation("eager")
    assert forward_flops(lambda: model(**batch)) == fused
    assert component_flops(model, find_components(model), lambda: model(**batch)) == by_component


@pytest.mark.skipif(not torch.cuda.is_available(), reason="compares torch's GPU UUIDs with NVML's (runs on the lent GPU)")
def test_torchs_gpu_uuids_are_nvmls_without_its_prefix() -> None:
    """The NVML sampler finds a run's GPU by torch's UUID (``nvml_uuid``), and the idle store is keyed by it."""
    from eaq.device import device_key
    from eaq.measure.nvml import device_summaries

    from_torch = {device_key(torch.device("cuda", i)) for i in range(torch.cuda.device_count())}
    assert from_torch <= {gpu["uuid"].removeprefix("GPU-") for gpu in device_summaries()}


def test_the_sweeps_callbacks_import_neither_mlflow_nor_torch_before_the_process_ahead_starts() -> None:
    """Hydra instantiates every callback before the first start hook (calibrate_ahead's, which starts the process
    ahead of the runs): their modules' imports all come before it, so MLflow and the report wait for their hooks."""
    modules = "eaq.tracking.callbacks, eaq.tasks.ahead, eaq.tracking.progress, eaq.report.callback"
    probe = f"import sys; import {modules}; print(sorted(m for m in ('mlflow', 'torch', 'pandas', 'scipy') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stdout


@pytest.mark.parametrize(("code", "status", "stderr"), [(3, 3, ""), (None, 0, ""), ("stopped: why", 1, "stopped: why\n")])
def test_the_exit_without_teardown_still_waits_for_threads_runs_exit_handlers_and_flushes(
    tmp_path: Path, code: object, status: int, stderr: str
) -> None:
    script = f"""
import atexit, concurrent.futures, pathlib, sys, threading, time
from eaq.exit import exit_without_teardown
atexit.register(lambda: pathlib.Path({str(tmp_path / "handler")!r}).write_text("ran"))
threading.Thread(target=lambda: (time.sleep(0.5), print("thread done", end=""))).start()
concurrent.futures.ThreadPoolExecutor(1).submit(int)  # an idle worker, not a daemon: threading's exit hook ends it
print("buffered, no newline: ", end="")
exit_without_teardown({code!r})
"""
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert (done.returncode, done.stdout, done.stderr) == (status, "buffered, no newline: thread done", stderr)
    assert (tmp_path / "handler").read_text() == "ran"


def test_the_plan_handed_to_the_calibrating_process_holds_no_tracking_credentials() -> None:
    cfg = EaqConfig()
    cfg.tracking.uri = "postgresql://eaq:s3cr3t@db.example:5432/mlflow"
    blob = Plan([cfg]).to_pickle()
    assert b"s3cr3t" not in blob and b"db.example" not in blob
    (read,) = pickle.loads(blob)
    assert read.precision == cfg.precision and read.paths == cfg.paths and read.trials == cfg.trials


def test_a_run_waiting_at_the_device_gate_says_why_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging
    import threading

    from eaq.files import try_exclusive

    caplog.set_level(logging.INFO, logger="eaq.tasks.ahead")
    assert wait_for_device(tmp_path) < 0.5 and "waiting" not in caplog.text  # no work ahead: no word
    gate = try_exclusive(gate_path(tmp_path))
    assert gate is not None
    threading.Timer(0.4, gate.close).start()  # the calibrating process ends
    waited = wait_for_device(tmp_path)
    assert waited >= 0.3 and caplog.text.count("waiting for the roofline calibrations") == 1


def test_a_peak_refused_after_the_runs_window_costs_the_run_its_roofline_not_its_measurement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _config(tmp_path, roofline_window_s=0.3)
    cfg.device, cfg.precision.name = "cpu", "fp32"
    busy = lambda *_: NvmlSampler("1234-abcd", interval_s=0.005, nvml=FakeNvml(schedule=[(0.0, 300.0)], processes=[os.getpid(), 4242]))  # noqa: E731
    monkeypatch.setattr(roofline, "select_sampler", busy)
    metrics, tags = roofline.roofline_metrics(cfg, torch.device("cpu"), "float32", 10**9, 5.0, 10)
    assert metrics == {"forward_flops_per_batch": 1e9}
    assert tags["eaq.roofline.calibration"].startswith("none: the roofline calibration window")
    assert "1 other process(es) were using the GPU" in tags["eaq.roofline.calibration"]
    assert "task=calibrate precision=fp32" in tags["eaq.roofline.calibration"]


def test_a_peak_or_bandwidth_with_no_room_beside_the_runs_model_costs_the_run_that_figure_not_its_measurement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both are measured, the first time a device needs them, after the run's window with its model and KV cache
    still loaded: 1 GiB buffers or 8192^3 matrices that do not fit ended the finished run in a traceback, its
    figures unlogged. (No GPU here: the calibrations raise torch's out-of-memory error as a full GPU's would.)"""
    cfg = _config(tmp_path, roofline_window_s=0.3)
    cfg.device, cfg.precision.name = "cpu", "bf16"
    sensor = lambda *_: NvmlSampler("1234-abcd", interval_s=0.005, nvml=FakeNvml(schedule=[(0.0, 300.0)]))  # noqa: E731
    monkeypatch.setattr(roofline, "select_sampler", sensor)

    def full(*_: object, **__: object) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")

    monkeypatch.setattr(roofline, "calibrate", full)
    monkeypatch.setattr(roofline, "measure_bandwidth", full)
    metrics, tags = roofline.roofline_metrics(cfg, torch.device("cpu"), "bfloat16", 10**9, 5.0, 10)
    assert metrics == {"forward_flops_per_batch": 1e9}
    assert tags["eaq.roofline.calibration"].startswith("none: measuring the peak FLOP/J ran out of device memory")
    metrics, tags = roofline.decode_roofline_metrics(cfg, torch.device("cpu"), 2e9, "what was counted", 0.002)
    assert metrics == {"decode_bytes_per_step_mb": 2000.0}
    assert tags["eaq.roofline.decode_bytes"] == "what was counted"  # without it, the bytes read as an old run's
    assert "measuring the bandwidth ran out of device memory" in tags["eaq.roofline.bandwidth"]
    assert "task=calibrate precision=bf16" in tags["eaq.roofline.bandwidth"]


@pytest.mark.parametrize("beside", ["slurm_local", "cpu_slots", None])
def test_a_calibration_beside_other_jobs_is_logged_but_not_cached(tmp_path: Path, monkeypatch, beside: str | None) -> None:
    """A slurm_local sweep of three calibrations cached 4.3 GB/s for a CPU that copies 17-18 GB/s alone (each job ran
    beside the others), and the valid runs after it read their decode roofline from that; under CPU slots its run was
    not even flagged (it logged no eaq.device, which the shared-CPU check reads)."""
    cfg = _config(tmp_path)
    cfg.device, cfg.sampler.name = "cpu", "none"
    if beside == "slurm_local":
        monkeypatch.setenv("SUBMITIT_LOCAL_JOB_ID", "1")
    elif beside == "cpu_slots":
        cfg.gpu_slots.enabled, cfg.gpu_slots.count = True, 2
    result = roofline.run_calibration(cfg, tmp_path)
    assert result.tags["eaq.device"] == "cpu" and result.metrics["peak_bandwidth_gb_per_s"] > 0
    cached = list((tmp_path / "cache").rglob("bandwidth-*.json"))
    assert bool(cached) == (beside is None)
    assert ("eaq.calibration.cached" in result.tags) == (beside is not None)
    # Nor does a generation's bandwidth, measured on first need, land in the cache from beside other jobs.
    metrics, _ = roofline.decode_roofline_metrics(cfg, torch.device("cpu"), 2e9, "what was counted", 0.002)
    assert metrics["peak_bandwidth_gb_per_s"] > 0 and bool(list((tmp_path / "cache").rglob("bandwidth-*.json"))) == (beside is None)


def test_the_process_ahead_is_stopped_when_the_sweep_exits_before_its_end_hook(tmp_path: Path) -> None:
    """Hydra runs the end hooks in reverse order and stops at an exit: the sweep's MLflow hook exits 1 after failed
    runs, before this one's, and the calibrating process went on loading the device after the sweep had ended."""
    import psutil

    script = """
import contextlib, os, sys, time
from eaq.tasks import ahead
ahead.needed = lambda config: ["a plan"]
ahead.sweep_folder = lambda config: None
ahead.start = lambda plan, folder: ahead.Ahead("time:sleep", (600,), open(sys.argv[1], "w"), contextlib.ExitStack())
hook = ahead.CalibrateAhead()
hook.on_multirun_start(None)
while hook.ahead.pid is None:
    time.sleep(0.1)
print(hook.ahead.pid, time.monotonic(), flush=True)
sys.exit(1)  # as MlflowSweepCallback.on_multirun_end does after failed runs, before this hook's end
"""
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    log = tmp_path / "ahead.log"
    done = subprocess.run([sys.executable, "-c", script, str(log)], capture_output=True, text=True, timeout=300, env=env)
    pid, printed = done.stdout.split()
    # At once: concurrent.futures' exit hook waited for the fork's pool, so the sweep lived until the fork ended.
    assert time.monotonic() - float(printed) < 30, "the sweep's exit waited for the fork"
    try:
        assert done.returncode == 1, done.stderr[-2000:]
        assert not psutil.pid_exists(int(pid)) or psutil.Process(int(pid)).status() == psutil.STATUS_ZOMBIE  # ended with it
        assert log.read_text() == "stopped: the sweep ended before the calibrations did\n"  # not a signal's mystery
    finally:
        if psutil.pid_exists(int(pid)):
            psutil.Process(int(pid)).kill()


def test_a_job_ended_by_its_schedulers_signal_stops_its_run_at_once() -> None:
    """submitit's handler of SLURM's time-limit signal (USR2) raises in the job while it waits for the run's process:
    leaving the pool waited for that process, which measured on until the job was killed, so the job's FAILED record
    naming hydra.launcher.timeout_min was never written (and the kill's SIGINT recorded it as a Ctrl-C). Here a
    handler that raises as submitit's does."""
    import psutil

    script = """
import signal, sys, time
from eaq.tasks.isolation import run_isolated
def ended(*_):
    raise RuntimeError("time limit")
signal.signal(signal.SIGUSR2, ended)
try:
    run_isolated('time:sleep', 120)
except RuntimeError as exc:
    print("raised", exc, time.monotonic(), flush=True)
"""
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    job = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
    running: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        while not running and time.monotonic() < deadline:  # the task's process: a child of the job's fork server
            time.sleep(0.5)
            servers = [p for p in psutil.Process(job.pid).children(recursive=True) if "forkserver" in command_line(p)]
            running = [c for s in servers for c in s.children()]
        assert running, "the task's process never started"
        time.sleep(1)  # inside its task
        signalled = time.monotonic()
        job.send_signal(signal.SIGUSR2)
        out, _ = job.communicate(timeout=30)
        assert out.startswith("raised time limit") and float(out.split()[-1]) - signalled < 10, out
        _, alive = psutil.wait_procs(running, timeout=10)
        assert not alive, [p.pid for p in alive]
    finally:
        job.kill()
        for process in running:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()


def test_the_measuring_process_ends_when_the_jobs_process_is_killed() -> None:
    """Its parent is the fork server, not the job: a SIGKILL of the job left it running (holding a GPU's CUDA context,
    beside the sweep's next runs), as joblib's and submitit's local executors kill only the job."""
    import psutil

    script = "from eaq.tasks.isolation import run_isolated; run_isolated('time:sleep', 120)"
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    job = subprocess.Popen([sys.executable, "-c", script], env=env)
    descendants: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        running: list[psutil.Process] = []
        while not running and time.monotonic() < deadline:  # the task's process: a child of the job's fork server
            time.sleep(0.5)
            descendants = psutil.Process(job.pid).children(recursive=True)
            servers = [p for p in descendants if "forkserver" in command_line(p)]
            running = [c for s in servers for c in s.children()]
        assert running, "the task's process never started"
        job.kill()
        job.wait()
        _, alive = psutil.wait_procs(running, timeout=10)
        assert not alive, [p.pid for p in alive]
    finally:
        job.kill()
        for process in descendants:  # the job's fork server and resource tracker, orphaned with it
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
