"""The energy path on a machine with no GPU: samplers driven through an NVML test double,
RAPL through a fake powercap tree, and the analysis and validity checks on known inputs."""

from __future__ import annotations

import functools
import math
from dataclasses import replace
import os
import time
from pathlib import Path

import pytest
import torch
from conftest import command_line

from eaq.errors import ConfigError, EaqError
from eaq.measure.energy import WindowEnergy, energy_metrics, window_energy
from eaq.measure import samplers
from eaq.measure.samplers import FIRST_SAMPLE_S, TRACE_MARGIN_S, NoSampler, select_sampler, wait_for_sample
from eaq.measure.trace import PowerTrace
from eaq.measure.validity import check
from eaq.measure.window import MeasurementWindow, WindowResult
from eaq.measure.nvml import NvmlSampler, nvml_uuid
from eaq.measure.roofline import calibrate
from eaq.measure.poller import Poller
from eaq.measure.rapl import RaplSampler
from eaq.measure.trace_export import write_csv, write_png
from fake_nvml import FakeNvml

CPU = torch.device("cpu")


def _session(fake: FakeNvml, seconds: float, before: float = 0.1, interval_s: float = 0.005):
    """Start the sampler, idle ``before`` s, measure a ``seconds`` window, stop; return what the run sees."""
    sampler = NvmlSampler("1234-abcd", interval_s=interval_s, nvml=fake)
    sampler.start()
    time.sleep(before)
    wait_for_sample(sampler)  # as the benchmark does: a sample on either side of the window, however late the poller
    with MeasurementWindow(CPU, sampler) as window:
        time.sleep(seconds)
    wait_for_sample(sampler)
    trace = sampler.stop()
    result = window.result
    return result, trace, window_energy(sampler.name, trace, result.t0, result.t1, result.counter_j)


def test_counter_is_the_primary_figure_and_instant_agrees() -> None:
    result, trace, energy = _session(FakeNvml(schedule=[(0.0, 300.0)]), seconds=0.5)
    assert energy.status == "measured" and energy.source == "energy_counter"
    assert energy.energy_j == pytest.approx(300 * result.duration_s, rel=0.05)
    assert energy.integrals_j["power_instant_w"] == pytest.approx(energy.energy_j, rel=0.05)
    # Nearly every sample polled (the student framework kept 17 of ~800): half at least, on a machine loaded by
    # another test's processes; a 0.5 s window of a 10 ms sensor changes ~50 times.
    assert energy.samples > 0.5 * energy.expected_samples and energy.sensor_updates > 20
    assert energy.power_w["mean"] == pytest.approx(300, rel=0.01)


def test_averaged_field_lags_a_power_step_and_undercounts() -> None:
    # Idle 80 W for 1 s, then 400 W: a 30 s trailing average has not caught up in a window of the next seconds. (A
    # 1 s average with the step at 0.3 s caught up once the sampler's start took 0.4 s on a loaded machine.)
    fake = FakeNvml(schedule=[(0.0, 80.0), (1.0, 400.0)], average_s=30.0)
    _, _, energy = _session(fake, seconds=0.5, before=1.05)
    assert energy.energy_j == pytest.approx(400 * energy.duration_s, rel=0.05)
    assert energy.integrals_j["power_average_w"] < 0.8 * energy.energy_j


def test_uuid_not_index_selects_the_gpu() -> None:
    fake = FakeNvml()
    _session(fake, seconds=0.05)
    assert fake.uuids == ["GPU-1234-abcd"]
    assert nvml_uuid("GPU-x") == "GPU-x" and nvml_uuid("MIG-y") == "MIG-y"


def test_missing_instant_field_falls_back_to_average_with_a_note() -> None:
    _, trace, energy = _session(FakeNvml(unsupported={"instant"}), seconds=0.2)
    assert "power_instant_w" not in trace.channels and "power_average_w" in trace.channels
    assert any("no instant power field" in n for n in energy.notes)
    assert energy.source == "energy_counter"  # the counter still rules


def test_missing_counter_falls_back_to_the_instant_integral() -> None:
    result, _, energy = _session(FakeNvml(unsupported={"nvmlDeviceGetTotalEnergyConsumption"}), seconds=0.3)
    assert energy.source == "power_instant_w integral"
    assert energy.energy_j == pytest.approx(300 * result.duration_s, rel=0.05)
    assert any("energy counter unreadable" in n for n in energy.notes)


def test_nvml_errors_mid_run_leave_gaps_and_notes_not_a_crash() -> None:
    # The counter works at the window start, then fails; the poller's reads fail after 20 calls.
    fake = FakeNvml(fail_after={"nvmlDeviceGetTotalEnergyConsumption": 1, "nvmlDeviceGetFieldValues": 20})
    _, trace, energy = _session(fake, seconds=0.3, before=0.0)
    assert any("a power read failed" in n for n in trace.notes)
    assert any("energy counter unreadable" in n for n in trace.notes)
    # Neither counter nor a trace covering the window: unavailable, with the reasons.
    assert energy.status == "unavailable" and "energy counter unreadable" in energy.reason


def _flat_trace(interval_s: float, samples: int, watts: float = 200.0) -> PowerTrace:
    trace = PowerTrace(interval_s=interval_s)
    for i in range(samples):
        trace.add(i * interval_s, {"power_instant_w": watts})
    return trace


def test_counter_going_backwards_falls_back_to_the_trace() -> None:
    trace = _flat_trace(0.1, 11)
    energy = window_energy("nvml", trace, 0.2, 0.8, (1000.0, 10.0))
    assert energy.source == "power_instant_w integral" and energy.energy_j == pytest.approx(120.0)
    assert any("went backwards" in n for n in energy.notes)


def test_a_counter_that_did_not_move_is_no_reading_and_its_note_stays_with_its_window() -> None:
    # A window shorter than the counter's ~100 ms update reads 0 J: that is no measurement (it divided by zero
    # in the validity check). The trace's integral stands in, and the note belongs to that window alone.
    trace = _flat_trace(0.01, 101)
    short = window_energy("nvml", trace, 0.20, 0.27, (5.0, 5.0))
    assert short.source == "power_instant_w integral" and short.energy_j == pytest.approx(14.0)
    assert any("did not move in this 0.070 s window" in n for n in short.notes)
    window = WindowResult(0.0, 0.07, 0.20, 0.27, iterations=3, counter_j=(5.0, 5.0))
    validity = check(window, short, idle_power_w=None, min_window_s=0.0)  # divided by the 0 J before
    assert "counter_vs_instant_disagreement" not in validity.facts  # no counter reading to compare
    later = window_energy("nvml", trace, 0.3, 0.9, (5.0, 125.0))
    assert later.source == "energy_counter" and later.energy_j == pytest.approx(120.0)
    assert not later.notes and not trace.notes  # nothing of the short window's fallback carried over


def test_a_sample_missing_a_field_keeps_every_channel_aligned_with_the_timestamps() -> None:
    # One NVML field failing its own return leaves it out of that read; a channel first seen late has no past.
    trace = PowerTrace(interval_s=0.1)
    trace.add(0.0, {"power_instant_w": 100.0})
    trace.add(0.1, {"power_instant_w": 100.0, "power_average_w": 90.0})
    trace.add(0.2, {"power_average_w": 90.0})  # the instant field failed this once
    trace.add(0.3, {"power_instant_w": 300.0, "power_average_w": 90.0})
    assert all(len(values) == len(trace.times) == 4 for values in trace.channels.values())
    assert trace.channels["power_average_w"][0] != trace.channels["power_average_w"][0]  # NaN before it appeared
    # The instant channel over 0-0.3 s: 100 W to 0.1 s, then a ramp to 300 W across the missing read.
    assert trace.integral_j("power_instant_w", 0.0, 0.3) == pytest.approx(10.0 + 0.2 * 200.0)
    assert trace.updates("power_instant_w", 0.0, 0.3) == 1  # the gap is not a change
    assert trace.stats_w("power_instant_w", 0.0, 0.3)["max"] == 300.0


def test_a_poller_stalled_once_leaves_a_gap_not_a_burst_of_reads() -> None:
    # Catching up on missed deadlines read back to back and hid a stall from the coverage check.
    interval, reads = 0.01, []

    def read() -> tuple[float, dict[str, float]]:
        reads.append(time.perf_counter())
        if len(reads) == 5:
            time.sleep(0.3)
        return reads[-1], {"power_rapl_w": 10.0}

    trace = PowerTrace()
    poller = Poller(read, interval, trace)
    poller.start()
    time.sleep(0.6)
    poller.stop()
    after = trace.times[5:11]  # the samples after the stalled fifth read
    gaps = [b - a for a, b in zip(after, after[1:])]
    assert len(gaps) == 5 and min(gaps) >= interval / 2  # waits never end early; a catch-up burst reads in microseconds
    expected = (trace.times[-1] - trace.times[0]) / interval
    assert len(trace.times) < 0.8 * expected  # the 0.3 s stall shows as missing samples


def test_trapezoid_integral_interpolates_at_the_window_edges() -> None:
    trace = PowerTrace()
    for t, w in [(0.0, 0.0), (1.0, 100.0), (2.0, 100.0)]:
        trace.add(t, {"p": w})
    # 0.5-1.0 s ramps 50 -> 100 W (37.5 J), 1.0-1.5 s holds 100 W (50 J).
    assert trace.integral_j("p", 0.5, 1.5) == pytest.approx(87.5)
    assert trace.integral_j("p", 0.0, 2.0) == pytest.approx(150.0)
    assert trace.integral_j("p", -1.0, 1.0) is None  # not covered


def _rapl_tree(root: Path, package_uj: int, dram_uj: int, max_uj: int = 1000) -> None:
    for folder, name, value in [("intel-rapl:0", "package-0", package_uj), ("intel-rapl:0/intel-rapl:0:0", "core", 5),
                                ("intel-rapl:0/intel-rapl:0:1", "dram", dram_uj)]:
        path = root / folder
        path.mkdir(parents=True, exist_ok=True)
        (path / "name").write_text(name + "\n")
        (path / "energy_uj").write_text(f"{value}\n")
        (path / "max_energy_range_uj").write_text(f"{max_uj}\n")


def test_rapl_sums_package_and_dram_and_survives_counter_wrap(tmp_path: Path) -> None:
    # The kernel exposes subzones both nested and flat; here flat, as in sysfs.
    _rapl_tree(tmp_path, package_uj=900, dram_uj=100)
    for sub in ("intel-rapl:0:0", "intel-rapl:0:1"):
        (tmp_path / "intel-rapl:0" / sub).rename(tmp_path / sub)
    sampler = RaplSampler(root=tmp_path)
    assert sampler.available() is None
    zones = {z.name for z in sampler._zones}
    assert zones == {"intel-rapl:0:package-0", "intel-rapl:0:1:dram"}  # core is inside the package
    # An Intel client's platform zone holds the packages: it would count them twice.
    (tmp_path / "intel-rapl:1").mkdir()
    for name, text in (("name", "psys\n"), ("energy_uj", "7\n"), ("max_energy_range_uj", "1000\n")):
        (tmp_path / "intel-rapl:1" / name).write_text(text)
    assert sampler.available() is None and {z.name for z in sampler._zones} == zones
    start = sampler.energy_j()
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("100\n")  # wrapped: 900 -> 1000 -> 100
    (tmp_path / "intel-rapl:0:1" / "energy_uj").write_text("150\n")
    assert (sampler.energy_j() - start) * 1e6 == pytest.approx(200 + 50)


def test_a_sampler_started_again_keeps_its_companion_and_draws_no_point_over_the_gap(tmp_path: Path) -> None:
    """task=layers runs several sessions on one sampler: NVML's nvidia-smi companion was dropped after the first, and
    RAPL's first reading of the next session averaged over the time between the two."""
    class Companion(NoSampler):  # nvidia-smi, which this machine does not have
        def __init__(self) -> None:
            super().__init__()
            self.starts = 0

        def start(self) -> None:
            self.starts += 1

    companion = Companion()
    nvml = NvmlSampler("1234-abcd", interval_s=0.005, nvml=FakeNvml(), companion=companion)
    for _ in range(2):
        nvml.start()
        trace = nvml.stop()
    assert companion.starts == 2 and len(trace.companions) == 1

    _rapl_tree(tmp_path, package_uj=0, dram_uj=0, max_uj=10**9)
    rapl = RaplSampler(root=tmp_path, interval_s=0.05)
    rapl.start()
    time.sleep(0.2)
    first = rapl.stop()
    ended = first.times[-1]
    time.sleep(0.5)  # between the sessions
    rapl.start()
    time.sleep(0.2)
    trace = rapl.stop()
    assert not [t for t in trace.times if ended < t < ended + 0.4], trace.times  # none stamped in the gap


def test_rapl_power_is_stamped_in_the_middle_of_the_interval_it_averages(tmp_path: Path) -> None:
    _rapl_tree(tmp_path, package_uj=0, dram_uj=0, max_uj=10**9)
    sampler = RaplSampler(root=tmp_path)
    assert sampler.available() is None
    first, values = sampler._read()
    assert values == {}  # nothing to average over yet
    time.sleep(0.2)
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("2000000\n")  # 2 J over the interval
    before = time.perf_counter()
    stamp, values = sampler._read()
    after = time.perf_counter()
    assert first < stamp < before and (first + before) / 2 - 0.01 < stamp < (first + after) / 2 + 0.01
    assert values["power_rapl_w"] == pytest.approx(2.0 / (2 * (stamp - first)), rel=0.05)


def test_rapl_unreadable_is_a_reason_not_a_crash(tmp_path: Path) -> None:
    assert "no RAPL zones" in RaplSampler(root=tmp_path).available()


def test_sampler_selection_on_this_cpu_machine() -> None:
    auto = select_sampler("auto", CPU)
    assert isinstance(auto, NoSampler) and "no energy sensor for cpu" in auto.reason
    # RAPL advised only where it reads (followed, it was refused in turn here: no zones).
    advice = "use sampler=rapl, auto or none" if RaplSampler().available() is None else "use sampler=auto or none"
    with pytest.raises(ConfigError, match=f"measures a CUDA GPU but this run is on cpu; {advice}"):
        select_sampler("nvml", CPU)
    with pytest.raises(ConfigError, match="valid: auto, nvml, nvidia_smi, rapl, none"):
        select_sampler("smi", CPU)
    # The host's energy never stands for a GPU's (refused before anything asks for a GPU: this machine has none).
    with pytest.raises(ConfigError, match="sampler=rapl measures the host CPU's packages, not the cuda:0 this run is on"):
        select_sampler("rapl", torch.device("cuda", 0))
    if not Path("/sys/class/powercap/intel-rapl:0/energy_uj").exists():
        with pytest.raises(ConfigError, match="sampler=rapl cannot run here"):
            select_sampler("rapl", CPU)


def test_window_reports_energy_unavailable_on_this_machine() -> None:
    sampler = select_sampler("auto", CPU)
    sampler.start()
    with MeasurementWindow(CPU, sampler) as window:
        time.sleep(0.02)
    trace = sampler.stop()
    result = window.result
    energy = window_energy(sampler.name, trace, result.t0, result.t1, result.counter_j)
    assert energy.status == "unavailable" and energy.energy_j is None and energy.reason.startswith("no energy sensor for cpu: ")
    assert energy_metrics(energy, None, result.duration_s, 10) == {}


def _window(duration: float, before: dict | None = None, after: dict | None = None) -> WindowResult:
    return WindowResult(0.0, duration, 10.0, 10.0 + duration, 100, (0.0, 1.0), before or {}, after or {})


def _energy(joules: float, duration: float, instant: float | None = None, updates: int = 60, samples: int = 400, expected: int = 400) -> WindowEnergy:
    return WindowEnergy("measured", "nvml", energy_j=joules, source="energy_counter", duration_s=duration,
                        integrals_j={"power_instant_w": instant if instant is not None else joules},
                        samples=samples, expected_samples=expected, sensor_updates=updates)


def test_a_clean_window_is_valid() -> None:
    facts = {"temperature_c": 50, "sm_clock_mhz": 1980, "clock_event_reasons": 0x4, "power_limit_w": 700, "other_processes": 0}
    validity = check(_window(6.0, facts, facts), _energy(1800.0, 6.0), idle_power_w=80.0, min_window_s=5.0)
    assert validity.valid, validity.reasons
    assert validity.facts["gpu_temperature_start_c"] == 50 and validity.facts["poll_coverage"] == 1.0


@pytest.mark.parametrize(
    ("window", "energy", "idle", "expected"),
    [
        (_window(2.0), _energy(600.0, 2.0), None, "shorter than the minimum 5 s"),
        (_window(6.0), _energy(1800.0, 6.0, updates=12), None, "only 12 sensor updates"),
        # A reading that never changed in the window is the fewest updates of all, not "not counted".
        (_window(6.0), _energy(1800.0, 6.0, updates=0), None, "only 0 sensor updates"),
        (_window(6.0), _energy(1800.0, 6.0, samples=300), None, "the poller got 75.0% of the expected samples"),
        (_window(6.0), _energy(1800.0, 6.0, instant=1700.0), None, "disagree by 5.6%"),
        (_window(6.0, after={"clock_event_reasons": 0x40}), _energy(1800.0, 6.0), None, "hardware thermal slowdown"),
        (_window(6.0, {"sm_clock_mhz": 1980}, {"sm_clock_mhz": 1500}), _energy(1800.0, 6.0), None, "SM clock drifted"),
        (_window(6.0, after={"other_processes": 2}), _energy(1800.0, 6.0), None, "2 other process(es)"),
        (_window(6.0, after={"power_limit_w": 250}), _energy(1800.0, 6.0), None, "above the power limit"),
        (_window(6.0), _energy(300.0, 6.0), 80.0, "below the idle baseline"),
        (_window(1.0), _energy(50.0, 1.0, updates=19, samples=20, expected=20), None,
         "only 19 sensor updates in the window (need 20): the sampler polled 20 times in this 1.00 s window, too few to "
         "see them; measure longer (trials.min_duration_s=1.05 or more) or poll faster (sampler.interval_ms=47.6 or less"),
        # The sensor, not the polls, limited them (NVML's ~100 ms): polling faster changes nothing, the advice is the
        # sensor's period times the updates needed (it was 0.332 s or 12 ms polls for this 0.25 s window of 16 polls).
        (_window(0.25), _energy(50.0, 0.25, updates=2, samples=16, expected=16), None,
         "only 2 sensor updates in the window (need 20): the sensor updated about every 125 ms, which polling faster "
         "does not change; measure longer (trials.min_duration_s=2.62 or more)"),
        (_window(0.08), _energy(50.0, 0.08, updates=0, samples=5, expected=5), None,
         "the sensor's reading never changed in this 0.08 s window, so it updates more slowly than that; measure longer "
         "(trials.min_duration_s of 21 sensor periods or more: about 2.1 s for NVML's ~100 ms)"),
    ],
)
def test_each_validity_check_flags_with_a_reason(window, energy, idle, expected) -> None:
    validity = check(window, energy, idle_power_w=idle, min_window_s=5.0)
    assert not validity.valid and any(expected in r for r in validity.reasons), validity.reasons


def test_rapl_polls_no_faster_than_its_floor_and_says_so_and_is_not_advised_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sampler.interval_ms=20 with RAPL polled every 50 ms unsaid (the run logged 20), and a window with too few polls
    advised sampler.interval_ms=47.9, which changed nothing."""
    _rapl_tree(tmp_path, package_uj=0, dram_uj=0)
    sampler = RaplSampler(root=tmp_path, interval_s=0.02)
    assert sampler.interval_s == 0.05 and sampler.trace.notes == [
        "RAPL polled every 50 ms, its fastest, not every 20 ms (sampler.interval_ms)"]
    assert RaplSampler(root=tmp_path, interval_s=0.1).trace.notes == []
    # Under sampler=auto too: its interval_ms (15 ms, NVML's) is the run's param, so the poll it was not is said.
    monkeypatch.setattr(samplers, "RaplSampler", functools.partial(RaplSampler, tmp_path))
    auto = select_sampler("auto", CPU, 0.015)
    assert isinstance(auto, RaplSampler) and auto.interval_s == 0.05 and auto.trace.notes == [
        "RAPL polled every 50 ms, its fastest, not every 15 ms (sampler.interval_ms)"]
    energy = replace(_energy(50.0, 1.0, updates=19, samples=20, expected=20), fastest_poll_s=sampler.trace.fastest_s)
    (reason,) = check(_window(1.0), energy, idle_power_w=None, min_window_s=0.5).reasons
    assert reason.endswith("measure longer (trials.min_duration_s=1.05 or more)")


@pytest.mark.parametrize("cap_at", ["before", "after"])
def test_a_clock_drift_while_the_power_cap_holds_the_clocks_is_a_note_not_a_reason(cap_at: str) -> None:
    """At the power limit the driver moves the SM clock between any two reads: benign, but said."""
    before = {"sm_clock_mhz": 1845, "clock_event_reasons": 0, "power_limit_w": 700}
    after = {"sm_clock_mhz": 1635, "clock_event_reasons": 0, "power_limit_w": 700}
    (before if cap_at == "before" else after)["clock_event_reasons"] = 0x4
    at_limit = _energy(6.0 * 690, 6.0)  # 690 W on average against a 700 W limit
    validity = check(_window(6.0, before, after), at_limit, idle_power_w=None, min_window_s=5.0)
    assert validity.valid, validity.reasons
    assert validity.notes == ("SM clock drifted from 1845 to 1635 MHz while the software power cap held the clocks at 690 W (limit 700 W)",)
    # The cap's bit in a window well below the limit does not explain a drift: flagged.
    below = check(_window(6.0, before, after), _energy(6.0 * 300, 6.0), idle_power_w=None, min_window_s=5.0)
    assert not below.valid and not below.notes
    assert below.reasons == ("SM clock drifted from 1845 to 1635 MHz at 300 W (limit 700 W), power-cap event seen",)
    # The same drift with a thermal slowdown beside the cap still flags the window (the slowdown's reason).
    after = after | {"clock_event_reasons": 0x4 | 0x20}
    flagged = check(_window(6.0, before, after), at_limit, idle_power_w=None, min_window_s=5.0)
    assert not flagged.valid and any("software thermal slowdown" in r for r in flagged.reasons)


def test_a_slowdown_in_the_middle_of_a_window_is_seen_by_nvmls_cumulative_clock_event_times() -> None:
    """The reasons' bits are clean at both ends; the counters, read at the same ends, saw 300 ms of thermal slowdown."""
    fake = FakeNvml(schedule=[(0.0, 400.0)], update_s=0.01, clock_event_reasons=0x4)
    sampler = NvmlSampler("1234-abcd", interval_s=0.005, nvml=fake)
    sampler.start()
    try:
        with MeasurementWindow(CPU, sampler) as window:
            time.sleep(0.5)
            fake.clock_event_ns["HW_THERM_SLOWDOWN"] += 300_000_000  # mid-window, gone by its end
            fake.clock_event_ns["SW_POWER_CAP"] += 450_000_000
    finally:
        trace = sampler.stop()
    result = window.result
    energy = window_energy(sampler.name, trace, result.t0, result.t1, result.counter_j)
    validity = check(result, energy, idle_power_w=None, min_window_s=0.1)
    assert result.before["clock_event_reasons"] == result.after["clock_event_reasons"] == 0x4  # nothing at the ends
    # 0.3 s (and 0.45 s) over the time between the two reads of the counters, ~0.5 s (longer on a loaded machine).
    span_s = result.after["clock_event_read_s"] - result.before["clock_event_read_s"]
    assert span_s >= 0.5
    assert validity.facts["clock_event_share_hardware_thermal"] == pytest.approx(0.3 / span_s)
    assert validity.facts["clock_event_share_power_cap"] == pytest.approx(0.45 / span_s)
    assert validity.facts["clock_event_share_software_thermal"] == 0.0
    reason = next(r for r in validity.reasons if "hardware thermal slowdown held the clocks back for 300.0 ms" in r)
    assert "of the window" in reason
    assert not any("power cap" in r for r in validity.reasons)  # the cap is the normal state under load


def test_clock_event_times_judge_a_short_hold_a_note_and_skip_what_the_gpu_does_not_keep() -> None:
    times = lambda ns, read_s: {"clock_event_ns_software_thermal": ns, "clock_event_read_s": read_s}  # noqa: E731
    energy = _energy(1800.0, 6.0)
    short = check(_window(6.0, times(0.0, 1.0), times(30e6, 7.0)), energy, None, 5.0)  # 30 ms of 6 s: 0.5%
    assert short.valid and short.notes == ("software thermal slowdown held the clocks back for 30.0 ms, 0.50% of the window (at most 1% passes)",)
    long = check(_window(6.0, times(0.0, 1.0), times(90e6, 7.0)), energy, None, 5.0)  # 1.5%
    assert long.reasons == ("software thermal slowdown held the clocks back for 90.0 ms, 1.50% of the window",)
    restarted = check(_window(6.0, times(5e9, 1.0), times(0.0, 7.0)), energy, None, 5.0)  # a driver reload: no reading
    assert restarted.valid and "clock_event_share_software_thermal" not in restarted.facts
    # A GPU or driver without the fields: the snapshot holds none of them, and nothing is judged on them.
    fake = FakeNvml(clock_event_ns={})
    sampler = NvmlSampler("1234-abcd", nvml=fake)
    assert sampler.available() is None
    assert not any(k.startswith("clock_event_") and k != "clock_event_reasons" for k in sampler.snapshot())


def test_utilization_counts_only_the_samples_whose_whole_period_lies_in_the_window() -> None:
    """Samples every 0.2 s: the one stamped 0.1 s after the window's start covers 0.1 s before it (the run's own
    work up to its sync); the one stamped at start + 0.2 s is the first wholly inside; none past the end counts."""
    from types import SimpleNamespace

    fake = FakeNvml()
    start = 1000.0
    stamps = {0.1: 90, 0.2: 0, 0.4: 5, 0.6: 0, 0.8: 7}  # seconds after start -> %
    fake.nvmlDeviceGetSamples = lambda handle, kind, since_us: (1, [  # noqa: ARG005
        SimpleNamespace(timeStamp=int((start + t) * 1e6), sampleValue=SimpleNamespace(uiVal=v)) for t, v in stamps.items()])
    sampler = NvmlSampler("1234-abcd", nvml=fake)
    assert sampler.available() is None
    assert sampler.utilization(start, start + 0.7) == [0.0, 5.0, 0.0]
    fake.nvmlDeviceGetSamples = lambda *_: (1, [SimpleNamespace(timeStamp=int((start + t) * 1e6), sampleValue=None)  # unlike NVML's
                                                for t in (0.2, 0.4)])
    assert sampler.utilization(start, start + 0.7) is None  # cannot tell, not a crash


def test_net_energy_subtracts_the_idle_baseline() -> None:
    metrics = energy_metrics(_energy(1800.0, 6.0), 80.0, duration_s=6.0, samples=600)
    assert metrics["idle_power_w"] == pytest.approx(80.0)
    assert metrics["energy_net_j"] == pytest.approx(1800 - 480)
    assert metrics["energy_per_sample_mj"] == pytest.approx(3000.0)
    assert metrics["samples_per_j"] == pytest.approx(600 / 1800)


def test_trace_files_are_written(tmp_path: Path) -> None:
    trace = PowerTrace()
    for i in range(50):
        trace.add(i * 0.1, {"power_instant_w": 100.0 + i, "power_average_w": 100.0})
    write_csv(trace, tmp_path / "t.csv", origin=1.0)
    write_png(trace, tmp_path / "t.png", [("measurement window", 1.0, 4.0)], (0.0, 0.5), "test", origin=1.0)
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert lines[0] == "t_s,power_average_w,power_instant_w" and lines[1].startswith("-1.0000,")
    assert len(lines) == 51 and (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    # nvidia-smi polled beside NVML: its samples are in the CSV too (the PNG drew them, the CSV left them out).
    smi = PowerTrace()
    for i in range(5):
        smi.add(i * 1.0 + 0.05, {"power_smi_w": 90.0})
    trace.companions.append(smi)
    write_csv(trace, tmp_path / "both.csv", origin=1.0)
    import pandas as pd

    both = pd.read_csv(tmp_path / "both.csv")
    assert list(both.columns) == ["t_s", "power_average_w", "power_instant_w", "power_smi_w"] and len(both) == 55
    assert both["power_smi_w"].notna().sum() == 5 and both["power_instant_w"].notna().sum() == 50
    assert both["t_s"].is_monotonic_increasing


def test_polling_runs_in_its_own_process_and_leaves_none_behind() -> None:
    import psutil

    fake = FakeNvml()
    sampler = NvmlSampler("1234-abcd", interval_s=0.005, nvml=fake)
    sampler.start()
    children = psutil.Process(os.getpid()).children()
    assert any("eaq.measure.poll_process" in command_line(c) for c in children)
    for _ in range(6):  # six samples at least, each taken after the last wait began (not "by now", on a busy machine)
        wait_for_sample(sampler, limit_s=30)
    trace = sampler.stop()
    assert len(trace.times) >= 6
    assert "nvmlDeviceGetFieldValues" not in fake.calls  # the parent never polled: the child did
    # No polling process left (other children may live on: Inductor's compile workers, after a compiled test).
    assert not any("eaq.measure.poll_process" in command_line(c) for c in psutil.Process(os.getpid()).children())


def test_the_trace_margin_waits_for_one_sample_past_the_edge_not_a_fixed_time() -> None:
    sampler = NvmlSampler("1234-abcd", interval_s=0.015, nvml=FakeNvml(schedule=[(0.0, 300.0)]))
    sampler.start()
    try:
        # Without it the child's first sample can come after the window opened (seen here); the child's start takes
        # what the machine gives it, so this first wait is not timed.
        wait_for_sample(sampler)
        with MeasurementWindow(CPU, sampler) as window:
            time.sleep(0.2)
        waited = wait_for_sample(sampler)
        assert waited < TRACE_MARGIN_S / 3, waited  # about one polling interval, not the old fixed 0.3 s
    finally:
        trace = sampler.stop()
    result = window.result
    assert result is not None and trace.times[0] < result.t0 and trace.times[-1] > result.t1
    # Covered on both sides: the window's energy has its trace integral to cross-check the counter.
    assert "power_instant_w" in window_energy(sampler.name, trace, result.t0, result.t1, result.counter_j).integrals_j


def test_the_trace_margin_gives_up_on_a_sensor_that_stopped_delivering() -> None:
    sampler = NvmlSampler("1234-abcd", interval_s=0.005, nvml=FakeNvml())
    sampler.start()
    try:
        sampler.companion = NoSampler()  # a companion whose trace never grows (nvidia-smi gone quiet)
        assert 0.1 <= wait_for_sample(sampler, limit_s=0.1) < 0.2
    finally:
        sampler.companion = None
        sampler.stop()
    assert wait_for_sample(NoSampler()) == 0.0  # no sensor: nothing to wait for


def test_overhead_check_pairs_blocks_and_sees_a_slow_sampler() -> None:
    from eaq.measure.overhead import sampler_overhead

    class SlowingSampler(NoSampler):
        """Stands for a sampler that costs the loop: each step is 5 ms slower while it runs."""

        def start(self) -> None:
            active.append(True)

        def stop(self) -> PowerTrace:
            active.pop()
            return self.trace

    active: list[bool] = []
    # Steps of 10 and 15 ms: with 2 and 3 ms ones, a loaded 2-core CI machine's sleep overshoot read +85% for +50%.
    step = lambda _: time.sleep(0.010 + (0.005 if active else 0.0))  # noqa: E731
    cost = sampler_overhead(step, [0], CPU, SlowingSampler, pairs=4, iters=10)
    assert cost.pairs == 4 and 30 < cost.overhead_pct < 70, cost  # ~+50% by construction
    free = sampler_overhead(lambda _: time.sleep(0.010), [0], CPU, NoSampler, pairs=4, iters=10)
    assert abs(free.overhead_pct) < 15, free


def test_overhead_check_stops_a_sampler_it_started_when_the_step_raises() -> None:
    """A sampler without pause is started for each "on" block: a step failing inside one (out of memory, Ctrl-C) left
    it polling (nvidia-smi's process, RAPL's thread) until the process ended."""
    from eaq.measure.overhead import sampler_overhead

    running: list[int] = []

    class Counting(NoSampler):
        def start(self) -> None:
            running.append(1)

        def stop(self) -> PowerTrace:
            running.pop()
            return self.trace

    calls = iter(range(10_000))

    def step(_: object) -> None:
        if next(calls) == 15 and running:  # inside the first "on" block
            raise RuntimeError("CUDA out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        sampler_overhead(step, [0], CPU, Counting, pairs=2, iters=10)
    assert running == []


def test_the_overhead_spread_stays_within_the_ratios_measured() -> None:
    from eaq.measure.overhead import half_iqr_pct

    assert half_iqr_pct([0.0, 0.02]) == pytest.approx(0.5)  # quartiles 0.5% and 1.5%, not -0.5% and 2.5%
    assert half_iqr_pct([0.0, 0.01, 0.02, 0.03, 0.04]) == pytest.approx(1.0)
    assert math.isnan(half_iqr_pct([0.01]))  # one pair: no spread to tell, not 0


def test_overhead_check_freezes_a_pausable_sampler_instead_of_restarting_it() -> None:
    from eaq.measure.overhead import sampler_overhead

    fake = FakeNvml()
    made: list[NvmlSampler] = []

    def make() -> NvmlSampler:
        made.append(NvmlSampler("1234-abcd", interval_s=0.005, nvml=fake))
        return made[-1]

    cost = sampler_overhead(lambda _: time.sleep(0.001), [0], CPU, make, pairs=3, iters=10)
    assert len(made) == 1 and cost.pairs == 3  # one polling process for the whole check
    assert abs(cost.overhead_pct) < 50
    assert len(made[0].trace.times) > 0


def test_a_long_session_keeps_polling_past_a_pipe_full_of_samples() -> None:
    # ~2000 samples pickle to far more than a 64 KB pipe holds: the child must keep them
    # until asked rather than block on a full pipe and stop sampling.
    sampler = NvmlSampler("1234-abcd", interval_s=0.001, nvml=FakeNvml())
    sampler.start()
    time.sleep(2.0)
    trace = sampler.stop()
    assert len(trace.times) > 1500
    assert max(b - a for a, b in zip(trace.times, trace.times[1:])) < 0.1


def test_roofline_calibration_needs_the_sensor_updates_any_window_needs() -> None:
    # The calibration window is short (trials.roofline_window_s); too short for 20 sensor updates is an error, not a peak.
    sampler = lambda update_s: NvmlSampler("1234-abcd", interval_s=0.005, nvml=FakeNvml(schedule=[(0.0, 500.0)], update_s=update_s))  # noqa: E731
    with pytest.raises(EaqError, match="raise trials.roofline_window_s"):
        calibrate(CPU, "float32", sampler(0.05), min_duration_s=0.3, size=64)  # 6 updates
    # ~60 updates: some missed by a poller the machine's load holds back still leave 20.
    peak = calibrate(CPU, "float32", sampler(0.02), min_duration_s=1.2, size=64)
    assert peak is not None and peak.duration_s >= 1.2 and peak.power_mean_w == pytest.approx(500, rel=0.05)



def test_the_calibration_window_opens_on_a_device_already_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The counter read at the window's start is up to one update (NVML's ~100 ms) old: the device sat idle while the
    sampler started, right before the window, and that idle stretch counted as the window's (the peak read 0.3-2.5%
    high under a fake counter of 100 ms updates). Products now run without a break for PRELOAD_S before it opens."""
    from eaq.measure import roofline

    products: list[float] = []
    opened: list[float] = []
    monkeypatch.setattr(roofline, "_matmul_step", lambda *_: lambda: products.append(time.perf_counter()))

    class Window(MeasurementWindow):
        def __enter__(self) -> MeasurementWindow:
            entered = super().__enter__()
            opened.append(self._t0)
            return entered

    monkeypatch.setattr(roofline, "MeasurementWindow", Window)
    nvml = FakeNvml(schedule=[(0.0, 500.0)], update_s=0.02)
    assert calibrate(CPU, "float32", NvmlSampler("1234-abcd", interval_s=0.005, nvml=nvml), min_duration_s=1.2, size=8)
    before = [t for t in products if t < opened[0]]
    loaded = [t for t in before if t >= before[-1] - roofline.PRELOAD_S * 0.9]
    assert loaded[0] - before[-1] <= -roofline.PRELOAD_S * 0.8  # products for (nearly) PRELOAD_S before the window
    assert max(b - a for a, b in zip(loaded, loaded[1:])) < 0.02 and opened[0] - before[-1] < 0.02  # without a break


def test_a_calibration_window_another_process_shared_or_a_slowdown_held_is_no_peak() -> None:
    """The device's checks judge the calibration too: its peak would be every later run's roofline. Windows of 1 s:
    0.3 s held ~30 sensor updates, of which a poller a loaded CI machine held back saw 18 (the 20-update check spoke
    first)."""
    busy = FakeNvml(schedule=[(0.0, 500.0)], processes=[os.getpid(), 4242])
    with pytest.raises(EaqError, match=r"is no peak: 1 other process\(es\) were using the GPU; nothing was cached"):
        calibrate(CPU, "float32", NvmlSampler("1234-abcd", interval_s=0.005, nvml=busy), min_duration_s=1.0, size=64)
    hot = FakeNvml(schedule=[(0.0, 500.0)], clock_event_reasons=0x40)
    with pytest.raises(EaqError, match=r"clocks were held back by hardware thermal slowdown"):
        calibrate(CPU, "float32", NvmlSampler("1234-abcd", interval_s=0.005, nvml=hot), min_duration_s=1.0, size=64)


def test_other_processes_on_the_gpu_do_not_count_this_one_under_a_pid_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    from eaq.measure.nvml import other_processes

    # On the host NVML lists our own PID: the others are the rest.
    assert other_processes([100, 200], own=100, holds_context=True) == 1
    # In a container (its own PID namespace) NVML lists host PIDs and ours is not among them; we hold a
    # context on the GPU we measure, so one listed process is us. Without a context, every listed one is another.
    assert other_processes([5123], own=7, holds_context=True) == 0
    assert other_processes([5123, 5200], own=7, holds_context=True) == 1
    assert other_processes([5123], own=7, holds_context=False) == 1
    assert other_processes([], own=7, holds_context=True) == 0
    # Through the sampler's snapshot, this process holding no CUDA context (on the lent GPU an earlier test's work
    # opened one; then a listed process may be us, as above): our PID and one other.
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    fake = FakeNvml()
    fake.processes = [os.getpid(), 4242]
    sampler = NvmlSampler("1234-abcd", interval_s=0.01, nvml=fake)
    sampler.start()
    try:
        assert sampler.snapshot()["other_processes"] == 1
        fake.processes = [4242]
        assert sampler.snapshot()["other_processes"] == 1
    finally:
        sampler.stop()


def _nvidia_smi_sampling(script: str, folder: Path, monkeypatch: pytest.MonkeyPatch):
    """The nvidia_smi sampler, half a second after its start, over a stand-in nvidia-smi (this machine has none)."""
    from eaq.measure.nvidia_smi import NvidiaSmiSampler

    fake = folder / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    sampler = NvidiaSmiSampler("GPU-0000", interval_s=0.02)
    sampler.start()
    time.sleep(0.5)
    return sampler


def test_what_nvidia_smi_says_on_stderr_and_its_early_exit_are_in_the_trace(tmp_path: Path, monkeypatch) -> None:
    # It fails the way a wrong --id does.
    sampler = _nvidia_smi_sampling("echo 'No devices were found' >&2\nexit 6", tmp_path, monkeypatch)
    # Said before stop(): a window whose energy is taken from the live trace (the idle baseline) carries it.
    assert "nvidia-smi exited with status 6 before it was stopped" in sampler.trace.notes
    assert "nvidia-smi said: No devices were found" in sampler.trace.notes
    # Nothing feeds its trace any more: no wait for a sample (it waited FIRST_SAMPLE_S at each call, ~9 s a run).
    assert wait_for_sample(sampler) < 0.5 * FIRST_SAMPLE_S
    trace = sampler.stop()
    assert not trace.times and trace.notes.count("nvidia-smi said: No devices were found") == 1
    assert trace.notes.count("nvidia-smi exited with status 6 before it was stopped") == 1  # said once


def test_a_poller_that_cannot_start_leaves_a_note_and_the_counter_still_measures() -> None:
    # The polling process fails to open the GPU (its second handle request fails; the parent's first succeeded):
    # the window has no trace and says why, and its energy still comes from the counter read at its ends.
    fake = FakeNvml(fail_after={"nvmlDeviceGetHandleByUUID": 1})
    sampler = NvmlSampler("1234-abcd", interval_s=0.01, nvml=fake)
    sampler.start()
    try:
        # Nothing feeds the trace: no wait for a sample (it waited FIRST_SAMPLE_S at each call, ~9 s a run).
        assert wait_for_sample(sampler) < 0.5 * FIRST_SAMPLE_S
        with MeasurementWindow(CPU, sampler) as window:
            time.sleep(0.3)
    finally:
        trace = sampler.stop()
    assert not trace.times and any(note.startswith("no power trace: ") for note in trace.notes), trace.notes
    result = window.result
    energy = window_energy("nvml", trace, result.t0, result.t1, result.counter_j)
    assert energy.source == "energy_counter" and energy.energy_j == pytest.approx(300.0 * result.duration_s, rel=0.15)
    assert energy.sensor_updates is None and energy.expected_samples == 0
    # The updates and coverage it could not check are said, not passed over in silence.
    verdict = check(result, energy, None, 0.2)
    assert verdict.valid and any("were not counted (no power trace)" in note for note in verdict.notes), verdict.notes


def test_an_nvidia_smi_stopped_by_eaq_leaves_no_note(tmp_path: Path, monkeypatch) -> None:
    # It prints a reading every 20 ms until it is stopped, as the real one does.
    trace = _nvidia_smi_sampling("while true; do echo 250.5; sleep 0.02; done", tmp_path, monkeypatch).stop()
    assert len(trace.times) > 5 and not trace.notes, trace.notes


def test_a_trace_read_while_its_poller_appends_cuts_its_columns_to_one_length() -> None:
    # A poller thread appends the time first and the values after: a read in between saw one more time than values.
    trace = PowerTrace()
    for i in range(5):
        trace.add(float(i), {"power_instant_w": 100.0 + (i % 2)})
    trace.times.append(5.0)  # the next sample, half written
    assert trace.integral_j("power_instant_w", 0.5, 3.5) == pytest.approx(3 * 100.5, rel=0.01)
    assert trace.updates("power_instant_w", 0.0, 5.0) == 4
    assert trace.stats_w("power_instant_w", 0.0, 5.0)["mean"] == pytest.approx(100.4)


def test_a_comparison_sampler_that_cannot_start_stops_the_polling_process_it_follows() -> None:
    class Missing:  # nvidia-smi not on PATH: its start raises, after NVML's polling process is up
        name = "nvidia_smi"

        def start(self) -> None:
            raise FileNotFoundError("nvidia-smi")

    sampler = NvmlSampler("1234-abcd", interval_s=0.005, nvml=FakeNvml())
    sampler.companion = Missing()
    with pytest.raises(FileNotFoundError):
        sampler.start()
    assert sampler._poll is None  # stopped, not left polling until the process exits


class _SlowPoller:
    """A sampler polled every ``interval_s`` on its own thread, its first sample ``first_s`` after start (nvidia-smi
    at sampler.interval_ms=500, which starts NVML itself before its first line)."""

    name = "nvidia_smi"

    def __init__(self, interval_s: float, first_s: float = 0.0) -> None:
        import threading

        self.trace, self.interval_s, self.first_s = PowerTrace(interval_s=interval_s), interval_s, first_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        self._stop.wait(self.first_s)
        while not self._stop.is_set():
            self.trace.add(time.perf_counter(), {"power_smi_w": 100.0})
            self._stop.wait(self.interval_s)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> PowerTrace:
        self._stop.set()
        self._thread.join()
        return self.trace

    def energy_j(self) -> None:
        return None  # no counter: the window's energy is the trace's integral

    def snapshot(self) -> dict[str, float]:
        return {}


def test_the_trace_margin_waits_a_slow_polls_interval_and_a_late_first_sample() -> None:
    """At 0.5 s polls the 0.3 s margin gave up before the sample past a window's end (the window read unavailable in
    4 of 10 tries); a first sample 1 s after start came after the idle window had opened."""
    sampler = _SlowPoller(0.5, first_s=1.0)
    sampler.start()
    try:
        assert wait_for_sample(sampler) >= 0.9 and sampler.trace.times
        with MeasurementWindow(CPU, sampler) as window:
            time.sleep(0.6)
        wait_for_sample(sampler)
    finally:
        trace = sampler.stop()
    result = window.result
    assert result is not None and trace.times[0] < result.t0 and trace.times[-1] > result.t1
    assert window_energy(sampler.name, trace, result.t0, result.t1, result.counter_j).energy_j == pytest.approx(100.0 * result.duration_s)


class _SlowSensor:
    """A reader factory that takes longer to open its sensor than the start may wait (nvmlInit on a lost GPU)."""

    def __call__(self):  # type: ignore[no-untyped-def]
        time.sleep(30)
        return lambda: {"power_instant_w": 1.0}


def test_a_polling_process_that_does_not_start_in_time_is_killed_at_the_limit(monkeypatch) -> None:
    from eaq.measure import poll_process

    monkeypatch.setattr(poll_process, "START_TIMEOUT_S", 1.0)
    started = time.perf_counter()
    with pytest.raises(RuntimeError, match="did not start within 1 s"):
        poll_process.PollProcess(_SlowSensor(), 0.01, PowerTrace()).start()
    assert time.perf_counter() - started < 5  # not the sensor's 30 s


class _HangingSensor:
    """A reader factory whose reads hang after 1 s (a GPU fallen off the bus mid-run)."""

    def __call__(self):  # type: ignore[no-untyped-def]
        opened = time.perf_counter()

        def read() -> dict[str, float]:
            if time.perf_counter() - opened > 1.0:
                time.sleep(30)
            return {"power_instant_w": 1.0}

        return read


def test_a_polling_process_whose_read_hangs_is_stopped_at_the_limit_and_said(monkeypatch) -> None:
    """A drain waited without end for a child stuck in a read, before any bound of the run's own could apply."""
    from eaq.measure import poll_process

    monkeypatch.setattr(poll_process, "STOP_TIMEOUT_S", 1.0)
    trace = PowerTrace()
    poller = poll_process.PollProcess(_HangingSensor(), 0.01, trace)
    poller.start()
    poller.drain()
    assert len(trace.times) >= 1 and not trace.notes  # answered while it reads
    time.sleep(1.5)
    started = time.perf_counter()
    poller.drain()
    poller.drain()  # stopped: nothing more to wait for
    poller.stop()
    assert time.perf_counter() - started < 5  # not the read's 30 s
    assert trace.notes == ["the power-polling process did not answer within 1 s (a sensor read hung) and was stopped: "
                           "no samples after it"]


def test_an_aligned_window_spans_whole_counter_steps() -> None:
    # A counter that steps every 100 ms: a 0.25 s window opened anywhere holds 2 or 3 steps (-20% or +20% of 120 W);
    # opened and closed on its updates, whole steps over their own time.
    fake = FakeNvml(schedule=[(0.0, 120.0)], update_s=0.1)
    sampler = NvmlSampler("1234-abcd", interval_s=0.01, nvml=fake)
    sampler._open()
    for _ in range(3):
        with MeasurementWindow(CPU, sampler, aligned=True) as window:
            time.sleep(0.25)
        result = window.result
        start, end = result.counter_j
        # Whole counter steps (12 J each) over about their own time: each end just after an update of the counter
        # (the fake's updates fall on whole 100 ms from its creation), not at any phase of one. The window notices an
        # update late by however long its loop waited for the CPU: within 40% of a step, where a window opened
        # anywhere falls there 40% of the time at each end (a tighter bound on the rate measured the machine's load).
        steps = round((end - start) / (120.0 * 0.1))
        assert steps >= 2 and (end - start) == pytest.approx(steps * 12.0)
        phases = [(t - fake.origin) % 0.1 for t in (result.t0, result.t1)]
        assert all(phase < 0.04 for phase in phases), phases


def test_an_unavailable_windows_reason_says_first_that_nothing_covered_it() -> None:
    """The session's notes alone read as the reason, down to "energy from the power trace instead", for a window
    the trace did not cover."""
    trace = PowerTrace(interval_s=0.015)
    trace.note("energy counter unreadable (NVML error 999); energy from the power trace instead")
    for i in range(50):
        trace.add(i * 0.015, {"power_instant_w": 300.0})  # the samples end at 0.735 s
    energy = window_energy("nvml", trace, 0.5, 3.0, (None, None))
    assert energy.status == "unavailable" and energy.reason.startswith("the sampler recorded no counter and no power samples")
    assert "NVML error 999" in energy.reason
    # No sensor at all (sampler=none, or auto without one): its reason alone, not a sensor that missed the window.
    none = select_sampler("none", torch.device("cpu"))
    none.start()
    assert window_energy(none.name, none.stop(), 0.5, 3.0, (None, None)).reason == "sampler=none was chosen"
