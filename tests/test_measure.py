"""Timing, statistics, peak memory and the energy fields on a machine with no sensor."""

from __future__ import annotations

import csv
import io
import random
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from eaq.measure.memory import PeakMemory
from eaq.measure.samplers import NoSampler
from eaq.measure.stats import LatencyStats
from eaq.measure.timing import run_timed
from eaq.config import WARMUP_RULES
from eaq.measure.warmup import BLOCK, CHUNK_S, POWER_TOLERANCE, RULES, pairs_agree, stationary, warm_up
from eaq.measure.window import MeasurementWindow

CPU = torch.device("cpu")


def test_latency_stats_match_numpy() -> None:
    seconds = list(np.random.default_rng(0).uniform(0.001, 0.01, size=101))
    stats = LatencyStats.from_seconds(seconds)
    ms = np.array(seconds) * 1e3
    assert stats.iterations == 101
    assert stats.mean_ms == pytest.approx(ms.mean())
    assert stats.p50_ms == pytest.approx(np.median(ms))
    assert stats.p99_ms == pytest.approx(np.percentile(ms, 99))
    assert stats.std_ms == pytest.approx(ms.std(ddof=1))
    assert stats.p50_ms <= stats.p90_ms <= stats.p99_ms


def test_one_iteration_logs_no_standard_deviation() -> None:
    """trials.iters=1 logged latency_std_ms 0.0 (and a generation's one decode step its std), read as perfectly steady."""
    from eaq.measure.stats import latency_metrics

    assert LatencyStats.from_seconds([0.004]).std_ms is None
    logged = latency_metrics([0.004], 0.004, 8, "time_per_output_token", "decode_tokens_per_s", "decode_")
    assert "time_per_output_token_std_ms" not in logged and logged["time_per_output_token_mean_ms"] == pytest.approx(4.0)
    assert latency_metrics([0.004, 0.006], 0.01, 8)["latency_std_ms"] == pytest.approx(np.std([4.0, 6.0], ddof=1))


def test_timed_loop_honours_iterations_and_minimum_duration() -> None:
    seen: list[int] = []
    latencies = run_timed(lambda x: (seen.append(x), time.sleep(0.002)), [1, 2, 3], CPU, iters=5, min_duration_s=0)
    assert len(latencies) == 5 and seen == [1, 2, 3, 1, 2]
    assert all(t >= 0.002 for t in latencies)
    start = time.perf_counter()
    longer = run_timed(lambda x: time.sleep(0.01), [0], CPU, iters=1, min_duration_s=0.2)
    # More than the one iteration asked, and stopped at the first step past the minimum (however slow each step).
    assert time.perf_counter() - start >= 0.2 and len(longer) > 1 and sum(longer[:-1]) < 0.2


def test_work_between_steps_runs_before_each_and_is_in_no_steps_time() -> None:
    # A decode window's return to the prefilled cache after each sequence was timed as the next sequence's first step.
    order: list[str] = []
    latencies = run_timed(lambda _: order.append("step"), [None], CPU, iters=3, min_duration_s=0,
                          between=lambda: (order.append("between"), time.sleep(0.05)))
    assert order == ["between", "step"] * 3 and max(latencies) < 0.05


def _gpu_step(seconds: float) -> Callable[[object], None]:
    """A step of ``seconds`` of GPU time and microseconds of the host's: one spinning kernel, as a CUDA graph's replay
    is one launch, whatever its length."""
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 10_000_000
    begin.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    per_s = cycles / (begin.elapsed_time(end) / 1e3)
    return lambda _: torch.cuda._sleep(int(seconds * per_s))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="queues kernels on a GPU (runs on the lent GPU)")
def test_on_cuda_the_timed_loop_ends_near_its_minimum_however_far_the_host_could_run_ahead() -> None:
    from eaq.measure.timing import QUEUE_S

    cuda = torch.device("cuda")
    step_s, min_s = 0.005, 0.5
    step = _gpu_step(step_s)
    torch.cuda.synchronize()
    start = time.perf_counter()
    latencies = run_timed(step, [None], cuda, iters=1, min_duration_s=min_s)
    wall = time.perf_counter() - start
    assert sum(latencies) == pytest.approx(wall, rel=0.05)  # the GPU was kept busy throughout
    assert min_s <= wall < min_s + QUEUE_S + 3 * step_s + 0.05, (wall, len(latencies))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="queues kernels on a GPU (runs on the lent GPU)")
def test_on_cuda_short_steps_keep_the_gpu_busy_between_them() -> None:
    cuda = torch.device("cuda")
    step = _gpu_step(0.0002)
    torch.cuda.synchronize()
    start = time.perf_counter()
    latencies = run_timed(step, [None], cuda, iters=1, min_duration_s=0.5)
    wall = time.perf_counter() - start
    assert sum(latencies) / wall > 0.9, (sum(latencies), wall, len(latencies))


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_timed_window_draws_no_progress_bar_on_a_terminal_and_the_warm_up_does(monkeypatch: pytest.MonkeyPatch) -> None:
    # A window's bar redrew every 0.5 s on a terminal (isolate=false): I/O inside the window.
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    run_timed(lambda _: time.sleep(0.01), [None], CPU, iters=1, min_duration_s=0.6)
    assert terminal.getvalue() == ""
    run_timed(lambda _: time.sleep(0.01), [None], CPU, iters=1, min_duration_s=0.6, label="warm-up", progress=True)
    assert "warm-up" in terminal.getvalue()


def test_window_times_its_body_between_syncs() -> None:
    sampler = NoSampler()
    sampler.start()
    with MeasurementWindow(CPU, sampler) as window:
        time.sleep(0.05)
        window.iterations = 7
    result = window.result
    assert result is not None and result.iterations == 7
    assert 0.05 <= result.duration_s < 1.0
    assert result.end_unix_s - result.start_unix_s == pytest.approx(result.duration_s, abs=1e-5)


def test_peak_rss_sees_a_large_allocation_after_reset() -> None:
    memory = PeakMemory(CPU)
    memory.reset()
    before = memory.read()["memory_peak_rss_mb"]
    block = torch.ones(300 * 1024 * 1024 // 4)  # 300 MB, touched
    after = memory.read()["memory_peak_rss_mb"]
    del block
    assert after - before > 250
    memory.reset()
    assert memory.rss_peak_is_windowed  # Linux lets us reset the high-water mark
    assert memory.read()["memory_peak_rss_mb"] < after - 250


def test_warm_up_settles_after_a_slow_first_pass_and_gives_up_on_drift() -> None:
    # The first pass is slow, as torch.compile's compilation is; settling time starts after it.
    calls = []

    def compiled_step(batch: object) -> None:
        calls.append(1)
        # Then a steady pass; a sleep keeps it steady on a loaded machine, where a tiny matmul's time is noise.
        time.sleep(1.0 if len(calls) == 1 else 0.002)

    # The cap leaves room for one block of chunks (BLOCK x 0.1 s) and some noise.
    settled = warm_up(compiled_step, [None], CPU, min_iters=1, settle=True, chunk_s=0.1, max_s=2.0)
    assert settled.settled is True and 1.0 + BLOCK * 0.1 <= settled.duration_s < 3.0

    def drifting_step(batch: object) -> None:  # each pass slower than the last: never settles
        calls.append(1)
        time.sleep(0.002 * len(calls))

    calls.clear()
    drifting = warm_up(drifting_step, [None], CPU, min_iters=1, settle=True, chunk_s=0.1, max_s=1.5)
    assert drifting.settled is False and drifting.duration_s < 3.0


def _first_settled(means: list[float]) -> int | None:
    """Chunks warm-up would run on these chunk means before calling them settled (None: never)."""
    return next((i for i in range(1, len(means) + 1) if stationary(means[:i], POWER_TOLERANCE)), None)


def test_stationary_noise_of_ten_percent_settles_at_the_first_block() -> None:
    # The H100's fp16 power moved +-10% chunk to chunk inside steady windows; the rule before
    # (two chunks within 3%) waited up to its 10 s cap on such noise.
    rng = random.Random(0)
    found = [_first_settled([330 * (1 + rng.uniform(-0.1, 0.1)) for _ in range(40)]) for _ in range(300)]
    assert all(f is not None for f in found)
    assert sorted(found)[len(found) // 2] == BLOCK  # half settle as soon as there is a block
    assert max(found) <= 2 * BLOCK  # and all within 2 blocks (3 s), far from the 10 s cap


@pytest.mark.parametrize("total, chunks, spread", [(0.6, 8, 0.05), (0.3, 12, 0.02)])
def test_a_ramp_is_not_called_settled_before_it_ends(total: float, chunks: int, spread: float) -> None:
    rng = random.Random(1)
    for _ in range(300):
        ramp = [330 * (1 - total + total * i / chunks) * (1 + rng.uniform(-spread, spread)) for i in range(chunks)]
        assert _first_settled(ramp) is None
        assert _first_settled(ramp + [330.0] * BLOCK) is not None  # and it settles once the level holds


def test_the_rule_before_stays_available_to_compare_protocols() -> None:
    assert set(RULES) == set(WARMUP_RULES)  # what trials.warmup_rule accepts is what warm-up knows
    # Two chunks within 3%: noise that happens to agree settles it at once, a steady ramp of 1% a chunk too.
    assert pairs_agree([330.0, 335.0], POWER_TOLERANCE) and not pairs_agree([300.0, 340.0], POWER_TOLERANCE)
    ramp = [300 * 1.01**i for i in range(BLOCK)]
    assert pairs_agree(ramp, POWER_TOLERANCE) and not stationary(ramp, POWER_TOLERANCE)


def _traced_warm_up(power_at: Callable[[float, float], float | None]) -> tuple[object, float]:
    """warm_up on a steady 5 ms step with 50 ms chunks, power from ``power_at(t0, t1)`` in seconds since it started."""
    began = time.perf_counter()
    result = warm_up(lambda _: time.sleep(0.005), [None], CPU, min_iters=1, settle=True, chunk_s=0.05, max_s=4.0,
                     power_w=lambda t0, t1: power_at(t0 - began, t1 - began))
    return result, began


def test_a_gap_in_the_power_trace_neither_ends_warm_up_nor_hides_a_ramp() -> None:
    """Power ramps 200 -> 300 W over the first second, and the trace stalls for 0.25 s inside the ramp. A chunk with no
    sample used to read "no trace, no trend" and end warm-up mid-ramp; it now joins the next chunk's mean."""
    def ramp(t0: float, t1: float) -> float | None:
        if 0.3 <= t0 and t1 <= 0.55:
            return None
        return 200 + 100 * min((t0 + t1) / 2, 1.0)

    result, _ = _traced_warm_up(ramp)
    assert result.settled and result.duration_s > 1.0


def test_polls_slower_than_a_chunk_still_settle() -> None:
    """Samples every 0.12 s against 50 ms chunks: two chunks in three see none. Their power joins the next mean, so a
    flat trace settles (a run whose chunks were gaps waited for its warmup_max_s)."""
    result, _ = _traced_warm_up(lambda t0, t1: 250.0 if int(t1 / 0.12) > int(t0 / 0.12) else None)
    assert result.settled and result.duration_s < 3.0
    silent, _ = _traced_warm_up(lambda t0, t1: None)  # no power trace at all: latency alone decides
    assert silent.settled and silent.duration_s < 3.0


def test_the_real_h100_step_settles_and_its_window_is_stationary() -> None:
    # NVML instant power polled every 15 ms: idle ~123 W, the work starting, the 5 s window from t=0.
    path = Path(__file__).parents[1] / "docs/results/2026-11-22-h100-energy/power_trace_gpt2-small_bf16_b64.csv"
    rows = [(float(r["t_s"]), float(r["power_instant_w"])) for r in csv.DictReader(path.open())]
    onset = next(t for t, w in rows if w > 1.5 * rows[0][1])

    def means(start: float, count: int) -> list[float]:
        return [np.mean([w for t, w in rows if start + i * CHUNK_S <= t < start + (i + 1) * CHUNK_S]) for i in range(count)]

    assert _first_settled(means(onset - CHUNK_S, 20)) == BLOCK + 1  # the chunk with the step, then a block
    window = means(0.0, 20)  # steady load: from any of its chunks, it settles within two blocks
    assert all((_first_settled(window[start:]) or 99) <= 2 * BLOCK for start in range(20 - 2 * BLOCK + 1))


def test_a_cpus_cached_measurements_are_keyed_by_its_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """Idle power, peaks and bandwidth are cached per device key in ``paths.cache_dir``, which a cluster's nodes may
    share: one CPU's key must not be another host's."""
    from eaq.device import device_key
    from eaq.measure.idle import baseline_path

    keys = []
    for host in ("node-a", "node b/1"):
        monkeypatch.setattr(socket, "gethostname", lambda host=host: host)
        keys.append(device_key(torch.device("cpu")))
    assert keys == ["cpu-node-a", "cpu-node_b_1"]
    assert baseline_path("/cache", keys[0], "rapl") != baseline_path("/cache", keys[1], "rapl")


def test_gpus_of_one_model_share_the_fp32_reference_and_keep_their_own_idle_power(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep over a host's GPUs computed the fp32 reference and every quality figure once per GPU (keyed by its
    UUID); what cuBLAS computes alike (one model, one SM count) shares them, what is each card's own stays apart.
    The properties are faked (no GPU here): the key's reading of real ones ran in the GPU tests."""
    from types import SimpleNamespace

    from eaq.device import arithmetic_key, device_key

    cards = {0: ("NVIDIA H100 80GB HBM3", 132, "GPU-aaa"), 1: ("NVIDIA H100 80GB HBM3", 132, "GPU-bbb"),
             2: ("NVIDIA H100 80GB HBM3 MIG 3g.40gb", 60, "MIG-ccc")}
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(
        name=cards[device.index][0], multi_processor_count=cards[device.index][1], uuid=cards[device.index][2]))
    gpus = [torch.device("cuda", i) for i in cards]
    assert arithmetic_key(gpus[0]) == arithmetic_key(gpus[1]) != arithmetic_key(gpus[2])
    assert len({device_key(g) for g in gpus}) == 3
    monkeypatch.setattr(socket, "gethostname", lambda: "node-a")
    assert arithmetic_key(torch.device("cpu")) == device_key(torch.device("cpu")) == "cpu-node-a"
