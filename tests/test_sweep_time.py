"""Issue 13: sweeps that spend their time measuring. Isolation by fork, the idle baseline
reused while fresh, quality computed once per configuration, per-phase timings, progress."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import torch

from conftest import FAST, all_runs, run_eaq
from eaq.config import EaqConfig
from eaq.files import try_exclusive
from eaq.measure.idle import IdleBaseline, ReusePolicy, idle_baseline, load_baseline, stale_reason
from eaq.measure.nvml import NvmlSampler
from eaq.tasks import roofline
from eaq.measure.nvml_read import nvml_uuid
from eaq.tasks import idle
from eaq.tasks.ahead import LOG_FILE, PLAN_FILE, Plan, gate_path, start, wait_for_device
from eaq.tasks.idle import ensure_idle, idle_store
from eaq.tasks.isolation import run_isolated
from fake_nvml import FakeNvml

_stash: list[torch.Tensor] = []


def _compile_and_stash() -> tuple[int, int, int, bool]:
    """In the run's process: compile a function, keep a tensor alive in a module global."""
    fn = torch.compile(lambda x: x * 2 + 1, backend="eager")
    fn(torch.ones(4))
    _stash.append(torch.ones(1024, 1024))
    frames = torch._dynamo.utils.counters["frames"]["ok"]
    return os.getpid(), frames, len(_stash), torch.cuda.is_initialized()


def test_each_isolated_run_starts_clean_in_its_own_forked_process() -> None:
    (pid1, frames1, stash1, cuda1), _ = run_isolated("test_sweep_time:_compile_and_stash")
    (pid2, frames2, stash2, cuda2), overhead2 = run_isolated("test_sweep_time:_compile_and_stash")
    assert pid1 != pid2 and os.getpid() not in (pid1, pid2)
    # Dynamo's frame counter and the module global start from nothing in each run: neither the
    # compiler state nor the memory the first run held carried over, and the parent never ran it.
    assert (frames1, stash1) == (frames2, stash2) == (1, 1)
    assert not _stash
    assert not cuda1 and not cuda2
    # The second run is a fork of the preloaded server: no interpreter start, no imports.
    assert overhead2 < 2.0, overhead2


def _collector() -> tuple[bool, int]:
    return gc.isenabled(), gc.get_freeze_count()


def test_a_forked_run_collects_garbage_with_the_servers_imports_frozen() -> None:
    """The server imports with the collector off (eaq.tasks.preload): its runs must not inherit that."""
    (enabled, frozen), _ = run_isolated("test_sweep_time:_collector")
    assert enabled
    assert frozen > 10_000  # torch's and transformers' objects, never walked by the run's collections


def test_phases_reach_the_parent_while_the_run_is_in_progress(out: Path) -> None:
    result = run_eaq(out, "-m", "precision=fp32", "trial=1,2", *FAST)
    assert result.returncode == 0, result.stderr[-3000:]
    # Not a terminal: plain lines, one per phase and one per finished run, with counts.
    lines = [line for line in result.stderr.splitlines() if line.startswith("[sweep ")]
    assert "[sweep 1/2] bert-tiny-random-fp32-b4-t1: load" in lines
    assert "[sweep 2/2] bert-tiny-random-fp32-b4-t2: window" in lines
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
        assert 0 <= unexplained < 0.1, (unexplained, metrics["run_wall_s"])
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


def _config(tmp_path: Path, **trials: float) -> EaqConfig:
    cfg = EaqConfig()
    cfg.paths.cache_dir = str(tmp_path / "cache")
    for key, value in trials.items():
        setattr(cfg.trials, key, value)
    return cfg


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


def test_calibrations_ahead_hold_the_device_gate_until_they_end(tmp_path: Path) -> None:
    fp32, int8 = _config(tmp_path), _config(tmp_path)
    int8.precision.name = "int8"
    for cfg in (fp32, int8):
        cfg.device, cfg.sampler.name = "cpu", "none"
    process = start(Plan([fp32, int8]), tmp_path / "sweep")
    assert process is not None
    # Handed over before the process even imports: no run can pass the gate in between.
    assert try_exclusive(gate_path(fp32.paths.cache_dir)) is None
    waited = wait_for_device(fp32.paths.cache_dir)
    # Read as the gate opens: every calibration was done before it did.
    log = (tmp_path / "sweep" / LOG_FILE).read_text()
    assert "fp32 on cpu: float32: no sampler measures energy on cpu" in log and "int8 on cpu: int8:" in log
    # The gate opens as the process exits (the kernel closes its files), a moment before it can be reaped.
    assert process.wait(timeout=10) == 0 and waited > 0
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
    cfg = _config(cache.parent, roofline_window_s=1.2)  # >= 20 updates of the fake sensor's 50 ms
    cfg.paths.cache_dir, cfg.device, cfg.precision.name = str(cache), "cpu", precision
    sensor = lambda *_: NvmlSampler("1234-abcd", interval_s=0.005, nvml=FakeNvml(schedule=[(0.0, 300.0)], update_s=0.05))  # noqa: E731
    with monkeypatch.context() as patch:
        patch.setattr(roofline, "select_sampler", sensor)
        assert "measured" in roofline.ensure_calibration(cfg)


def test_a_sweep_calibrates_ahead_only_what_is_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    sweep = ["-m", "precision=fp32,int8", "trial=1", *FAST, "trials.roofline=true", "sampler=none", "calibrate_ahead=true",
             "device=cpu", f"paths.cache_dir={cache}"]
    _calibrate_with_a_sensor(monkeypatch, cache, "fp32")
    result = run_eaq(tmp_path / "first", *sweep)
    assert result.returncode == 0, result.stderr[-3000:]
    (log,) = (tmp_path / "first").glob(f"multirun/*/{LOG_FILE}")
    assert [line.split(" - ", 1)[1].split(":")[0] for line in log.read_text().splitlines()[1:]] == ["int8 on cpu"]

    # Every peak cached: no process at all, and no run waits for one.
    _calibrate_with_a_sensor(monkeypatch, cache, "int8")
    result = run_eaq(tmp_path / "repeat", *sweep)
    assert result.returncode == 0, result.stderr[-3000:]
    (folder,) = (tmp_path / "repeat").glob("multirun/*")
    assert not (folder / LOG_FILE).exists() and not (folder / PLAN_FILE).exists()
    runs = [r for r in all_runs(tmp_path / "repeat") if r.data.tags.get("eaq.kind") == "benchmark"]
    assert len(runs) == 2 and all(r.data.metrics["phase_ahead_s"] < 0.05 for r in runs)


def _watts(outcome: str) -> float:
    """The baseline's power in ensure_idle's sentence ("measured: 80.0 W at 45 C (...)")."""
    return float(outcome.split(": ", 1)[1].split(" W", 1)[0])


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


def _gpu_ahead(monkeypatch: pytest.MonkeyPatch, fake: FakeNvml) -> list[str]:
    """A host whose NVML lists two GPUs (the fake reads them both), CUDA numbering them as NVML does."""
    gpus = ["GPU-0000-first", "GPU-1234-abcd"]
    monkeypatch.setattr(idle, "visible_gpus", lambda: gpus)
    monkeypatch.setattr(idle, "_nvml_sampler", lambda uuid, interval_s: NvmlSampler(uuid, interval_s=0.005, nvml=fake))
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    return gpus


def test_the_idle_baseline_taken_ahead_is_the_one_the_first_run_reuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml(schedule=[(0.0, 95.0)])
    gpus = _gpu_ahead(monkeypatch, fake)
    cfg = _config(tmp_path, idle_s=0.3)
    cfg.device, cfg.sampler.name = "cuda:1", "auto"
    assert idle.nvml_gpu(cfg) == gpus[1]
    outcome = ensure_idle(cfg)
    assert outcome.startswith("measured: ") and "at 45 C (measured in this run (no stored baseline" in outcome
    assert _watts(outcome) == pytest.approx(95.0, rel=0.05)  # the fake's counter ticks every 10 ms of a 0.3 s window
    assert ensure_idle(cfg).startswith(f"still stands: {_watts(outcome):.1f} W")  # nothing measured twice

    # Where the run looks: its device_key is torch's UUID, which is NVML's without "GPU-" (the sampler's own rule;
    # on a GPU, test_the_idle_key_taken_from_nvml_is_the_runs_device_key checks it against torch).
    key = "1234-abcd"
    assert nvml_uuid(key) == gpus[1]
    store = idle._store(cfg, key, NvmlSampler(gpus[1], interval_s=0.005, nvml=fake))
    assert store is not None and load_baseline(store[0]) is not None
    # The run, seconds later on the same GPU: the baseline stands and is reused, not measured.
    run_sampler = NvmlSampler(gpus[1], interval_s=0.005, nvml=fake)
    run_sampler.start()
    try:
        baseline, window, tags = idle_baseline(None, run_sampler, 0.3, store)
        assert window is None and tags["eaq.idle"].startswith("reused") and baseline is not None
        fake.pstate = 2  # the run's device idles in another performance state (its CUDA context): it measures its own
        _, window, tags = idle_baseline(None, run_sampler, 0.3, store)
        assert window is not None and "performance state moved from P0 to P2" in tags["eaq.idle"]
        fake.temperature_c += 5  # warmer by the time the run looks: the same
        _, window, tags = idle_baseline(None, run_sampler, 0.3, store)
        assert window is not None and "temperature moved" in tags["eaq.idle"]
    finally:
        run_sampler.stop()


def test_what_nvml_alone_cannot_measure_as_the_run_will_is_left_to_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml(schedule=[(0.0, 95.0)])
    _gpu_ahead(monkeypatch, fake)

    def config(**changes: object) -> EaqConfig:
        cfg = _config(tmp_path, idle_s=0.3)
        cfg.device, cfg.sampler.name = "auto", "nvml"
        for key, value in changes.items():
            target, name = (cfg.sampler, key[8:]) if key.startswith("sampler_") else (cfg.gpu_slots, "enabled") if key == "slots" else (cfg, key)
            setattr(target, name, value)
        return cfg

    assert idle.nvml_gpu(config()) == "GPU-0000-first"  # auto: CUDA's first GPU
    declined = [config(device="cpu"),  # RAPL would read the CPU while the server imports
                config(device="cuda:2"),  # no such GPU
                config(sampler_compare_nvidia_smi=True),  # a companion sampler the run has and this would not
                config(slots=True)]  # a neighbour may be working on the GPU
    assert [idle.nvml_gpu(cfg) for cfg in declined] == [None] * 4
    assert ensure_idle(declined[0]).startswith("left to the run")
    monkeypatch.setattr(idle, "_mig_enabled", lambda uuid: True)  # CUDA would number MIG instances, not this GPU
    assert idle.nvml_gpu(config()) is None
    monkeypatch.setattr(idle, "_mig_enabled", lambda uuid: False)
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")  # the user's own order: indices are no longer NVML's
    assert idle.nvml_gpu(config()) is None
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    fake.processes.append(4242)  # another process computing on the GPU: not idle
    assert ensure_idle(config()) == "left to the run (1 other processes on the GPU)"
    assert not (Path(config().paths.cache_dir) / "idle").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="compares torch's GPU UUIDs with NVML's (runs on the lent GPU)")
def test_the_idle_key_taken_from_nvml_is_the_runs_device_key() -> None:
    from eaq.device import device_key
    from eaq.measure.nvml import device_summaries

    from_torch = {device_key(torch.device("cuda", i)) for i in range(torch.cuda.device_count())}
    assert from_torch <= {gpu["uuid"].removeprefix("GPU-") for gpu in device_summaries()}


def test_the_sweeps_callbacks_import_neither_mlflow_nor_torch_before_the_process_ahead_starts() -> None:
    """Hydra instantiates every callback before the first start hook (calibrate_ahead's, which starts the process
    ahead of the runs): their modules' imports all come before it, so MLflow and the report wait for their hooks."""
    for modules in ("eaq.tracking.callbacks, eaq.tasks.ahead, eaq.tracking.progress, eaq.report.callback",
                    "eaq.tasks.idle"):  # ... and what the process ahead imports to take an idle baseline
        probe = f"import sys; import {modules}; print(sorted(m for m in ('mlflow', 'torch', 'pandas', 'scipy') if m in sys.modules))"
        result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        assert result.stdout.strip() == "[]", (modules, result.stdout)


def _ahead_log(out: Path) -> list[str]:
    """What the sweep's process ahead of the runs did: one entry per line after the first, up to the colon."""
    (log,) = out.glob(f"multirun/*/{LOG_FILE}")
    return [line.split(" - ", 1)[1].split(":")[0] for line in log.read_text().splitlines()[1:]]


def test_a_sweep_with_nothing_to_calibrate_takes_its_first_idle_baseline_ahead(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    sweep = ["-m", "precision=fp32,int8", "trial=1", *FAST, "calibrate_ahead=true", f"paths.cache_dir={cache}",
             "trials.idle_s=0.2"]  # trials=quick takes none
    result = run_eaq(tmp_path / "idle", *sweep, "device=auto", "trials.roofline=false", "sampler=auto")
    assert result.returncode == 0, result.stderr[-3000:]
    assert _ahead_log(tmp_path / "idle") == ["idle baseline on auto"]  # once, for the first run, whatever the jobs
    (log,) = (tmp_path / "idle").glob(f"multirun/*/{LOG_FILE}")
    assert "left to the run (no GPU that NVML alone can measure" in log.read_text()  # this machine has none
    # Peaks to calibrate: the calibrations only (the device is hot after them: the first run takes the baseline).
    result = run_eaq(tmp_path / "peaks", *sweep, "device=auto", "trials.roofline=true", "sampler=auto")
    assert result.returncode == 0, result.stderr[-3000:]
    assert _ahead_log(tmp_path / "peaks") == ["fp32 on auto", "int8 on auto"]
    # A CPU's baseline (RAPL) would be read while the server imports, and no sampler has none: nothing to do ahead.
    for name, overrides in (("cpu", ["device=cpu", "sampler=auto"]), ("none", ["device=auto", "sampler=none"])):
        result = run_eaq(tmp_path / name, *sweep, "trials.roofline=false", *overrides)
        assert result.returncode == 0, result.stderr[-3000:]
        assert not list((tmp_path / name).glob(f"multirun/*/{LOG_FILE}")), name


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
