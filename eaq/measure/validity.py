"""Is a window's energy trustworthy? Each failed check is one readable reason.

Thresholds follow what was measured on an H100 here and in published work (Yang et al.,
SC'24: A100/H100 power readings cover ~25% of each 100 ms period, so short windows mislead).
"""

from __future__ import annotations

from dataclasses import dataclass

from eaq.measure.energy import WindowEnergy
from eaq.measure.window import WindowResult

MIN_SENSOR_UPDATES = 20
MIN_COVERAGE = 0.99
MAX_COUNTER_DISAGREEMENT = 0.03
MAX_CLOCK_DRIFT = 0.10
# A window at or near its power limit: at least this share of it on average.
AT_POWER_LIMIT = 0.9
# NVML clock-event reasons that are expected under load: GPU idle and the software power cap.
POWER_CAP = 0x4
BENIGN_CLOCK_EVENTS = 0x1 | POWER_CAP
CLOCK_EVENT_NAMES = {
    0x2: "applications clocks setting",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock setting",
}

# NVML's cumulative clock-event times (the snapshot's ``clock_event_ns_<label>``), the power cap's aside: a reason
# that held the clocks for more than this share of a window flags it. Held for a share s at any slowdown, the
# window's work rate moves by at most s; a shorter hold is said in the notes.
MAX_CLOCK_EVENT_SHARE = 0.01
CLOCK_EVENT_TIME_NAMES = {
    "sync_boost": "sync boost",
    "software_thermal": "software thermal slowdown",
    "hardware_thermal": "hardware thermal slowdown",
    "hardware_power_brake": "hardware power brake",
}


@dataclass(frozen=True)
class Validity:
    reasons: tuple[str, ...]
    facts: dict[str, float]
    # What a check saw and judged benign (the tag eaq.valid.notes): said, so a reader can disagree.
    notes: tuple[str, ...] = ()

    @property
    def valid(self) -> bool:
        return not self.reasons


def check(window: WindowResult, energy: WindowEnergy, idle_power_w: float | None, min_window_s: float) -> Validity:
    reasons: list[str] = []
    facts: dict[str, float] = {}
    if energy.status != "measured" or energy.energy_j is None:
        return Validity((), facts)
    if window.duration_s < min_window_s:
        reasons.append(f"window {window.duration_s:.2f} s is shorter than the minimum {min_window_s:g} s")
    notes: list[str] = []
    if energy.sensor_updates is None and energy.source == "energy_counter":
        # The counter measured, but no trace shows its updates (the polling process did not start: eaq.energy.notes
        # says why): neither they nor the poll coverage can be checked, and the window's length stands for them.
        notes.append(f"the sensor's updates in this {window.duration_s:.2f} s window were not counted (no power trace), "
                     "nor the poller's coverage")
    if energy.sensor_updates is not None:
        facts["sensor_updates"] = energy.sensor_updates
        if energy.sensor_updates < MIN_SENSOR_UPDATES:
            reasons.append(f"only {energy.sensor_updates} sensor updates in the window (need {MIN_SENSOR_UPDATES})"
                           + _too_few_updates(window.duration_s, energy.sensor_updates, energy.expected_samples,
                                              energy.fastest_poll_s, energy.sampler))
    if energy.expected_samples:
        coverage = energy.samples / energy.expected_samples
        facts["poll_coverage"] = coverage
        if coverage < MIN_COVERAGE:
            reasons.append(f"the poller got {coverage:.1%} of the expected samples (need {MIN_COVERAGE:.0%})")
    instant = energy.integrals_j.get("power_instant_w")
    if energy.source == "energy_counter" and instant and energy.energy_j > 0:
        disagreement = abs(instant - energy.energy_j) / energy.energy_j
        facts["counter_vs_instant_disagreement"] = disagreement
        if disagreement > MAX_COUNTER_DISAGREEMENT:
            reasons.append(f"energy counter and instant-power integral disagree by {disagreement:.1%}")
    device = check_device(window, energy, idle_power_w)
    return Validity((*reasons, *device.reasons), facts | device.facts, (*notes, *device.notes))


def _too_few_updates(duration_s: float, updates: int, polls: int, fastest_s: float = 0.0, sampler: str = "") -> str:
    """What limited the updates, and what to change.

    The polls, where nearly every one saw a change: an update is a change between two polls, so a window of ``polls``
    polls shows ``polls - 1`` at most, however often the sensor itself updates (sampler.interval_ms=250 on a 5 s
    window; RAPL's 50 ms polls on a window of 1 s). Polling faster is offered only down to ``fastest_s``, the sampler's
    floor: below RAPL's it changed nothing. Otherwise the sensor's own period (NVML's ~100 ms), which no poll rate
    changes: the window must be longer, by that period's count (a 0.08 s window of 5 polls and no update was advised
    0.34 s or faster polls; NVML needs about 2.1 s).
    """
    if polls and polls <= MIN_SENSOR_UPDATES and updates >= polls - 2:
        interval_ms = duration_s / polls * 1e3
        needed_s = duration_s / (MIN_SENSOR_UPDATES + 1)
        faster = f" or poll faster (sampler.interval_ms={needed_s * 1e3:.3g} or less)" if needed_s >= fastest_s else ""
        return (f": the sampler polled {polls} times in this {duration_s:.2f} s window, too few to see them; measure "
                f"longer (trials.min_duration_s={(MIN_SENSOR_UPDATES + 1) * interval_ms / 1e3:.3g} or more){faster}")
    if not updates:
        nvml = f": about {(MIN_SENSOR_UPDATES + 1) * 0.1:.2g} s for NVML's ~100 ms" if sampler.startswith("nvml") else ""
        return (f": the sensor's reading never changed in this {duration_s:.2f} s window, so it updates more slowly than "
                f"that; measure longer (trials.min_duration_s of {MIN_SENSOR_UPDATES + 1} sensor periods or more{nvml})")
    period_s = duration_s / updates
    return (f": the sensor updated about every {period_s * 1e3:.0f} ms, which polling faster does not change; measure "
            f"longer (trials.min_duration_s={(MIN_SENSOR_UPDATES + 1) * period_s:.3g} or more)")


def check_device(window: WindowResult, energy: WindowEnergy, idle_power_w: float | None = None) -> Validity:
    """The device's side of ``check`` (clock events and their times, SM clock drift, other processes, the power
    limit, and power below ``idle_power_w``): alone, for a window whose energy is the counter's and whose trace only
    cross-checks it (the roofline calibration's), where the poller's coverage of a host busy with the work is no
    reason to doubt the figure."""
    facts: dict[str, float] = {}
    notes: list[str] = []
    if energy.status != "measured" or energy.energy_j is None:
        return Validity((), facts)
    reasons = _device_reasons(window, energy, idle_power_w, facts, notes)
    return Validity(tuple(reasons), facts, tuple(notes))


def _device_reasons(
    window: WindowResult, energy: WindowEnergy, idle_w: float | None, facts: dict[str, float], notes: list[str]
) -> list[str]:
    reasons = []
    before, after = window.before, window.after
    for name, stem, unit in (("temperature_c", "gpu_temperature", "c"), ("sm_clock_mhz", "sm_clock", "mhz")):
        if name in before and name in after:
            facts[f"{stem}_start_{unit}"], facts[f"{stem}_end_{unit}"] = before[name], after[name]
    events = int(before.get("clock_event_reasons", 0)) | int(after.get("clock_event_reasons", 0))
    bad = [label for bit, label in CLOCK_EVENT_NAMES.items() if events & bit and not bit & BENIGN_CLOCK_EVENTS]
    if bad:
        reasons.append(f"clocks were held back by {', '.join(bad)} at the window's start or end")
    reasons += _clock_event_times(before, after, facts, notes)
    mean_w = energy.energy_j / window.duration_s if energy.energy_j is not None else None
    limit = after.get("power_limit_w")
    clock0, clock1 = before.get("sm_clock_mhz"), after.get("sm_clock_mhz")
    if clock0 and clock1 and abs(clock1 - clock0) / clock0 > MAX_CLOCK_DRIFT:
        drift = f"SM clock drifted from {clock0:.0f} to {clock1:.0f} MHz"
        # Holding the power limit, the driver moves the SM clock all the time: two point reads of it
        # differed by 10-15% in DistilBERT's bf16 replay windows (its whole pass drew 694 W against a
        # 700 W limit), the power-cap event at one end (H100, 2026-11-26, docs/results/2026-11-25-h100-layers).
        # That is the device's normal state at that load, and the counter still integrates its energy.
        # A drift with no power-cap event, or in a window well below the limit, is a change of
        # operating point, and flags the window.
        at = f" at {mean_w:.0f} W (limit {limit:.0f} W)" if mean_w is not None and limit else ""
        if events & POWER_CAP and mean_w is not None and limit and mean_w >= AT_POWER_LIMIT * limit:
            notes.append(f"{drift} while the software power cap held the clocks{at}")
        else:
            # The window's power and whether the cap showed say which case a reader is looking at.
            reasons.append(f"{drift}{at}{', power-cap event seen' if events & POWER_CAP else ''}")
    others = max(before.get("other_processes", 0), after.get("other_processes", 0))
    if others:
        reasons.append(f"{others:.0f} other process(es) were using the GPU")
    if mean_w is not None and limit and mean_w > limit * 1.02:
        reasons.append(f"mean power {mean_w:.0f} W is above the power limit {limit:.0f} W")
    if mean_w is not None and idle_w and mean_w < idle_w * 0.98:
        reasons.append(f"mean power {mean_w:.1f} W is below the idle baseline {idle_w:.1f} W")
    return reasons


def _clock_event_times(before: dict[str, float], after: dict[str, float], facts: dict[str, float], notes: list[str]) -> list[str]:
    """The share of the window each clock-event reason held the clocks, from NVML's cumulative times read at its ends.

    The reasons' bits are read at the two ends only; a thermal slowdown in the middle of a window shows here.
    """
    reasons = []
    span_s = after.get("clock_event_read_s", 0.0) - before.get("clock_event_read_s", 0.0)
    if span_s <= 0:
        return reasons
    for key in sorted(before.keys() & after.keys()):
        if not key.startswith("clock_event_ns_"):
            continue
        label, held_s = key.removeprefix("clock_event_ns_"), (after[key] - before[key]) / 1e9
        if held_s < 0:  # the counter restarted (a driver reload): no reading
            continue
        share = facts[f"clock_event_share_{label}"] = min(held_s / span_s, 1.0)  # rounding of two clocks
        name = CLOCK_EVENT_TIME_NAMES.get(label)
        if name is None or held_s == 0:  # the power cap is the device's normal state under load
            continue
        said = f"{name} held the clocks back for {held_s * 1e3:.1f} ms, {share:.2%} of the window"
        if share > MAX_CLOCK_EVENT_SHARE:
            reasons.append(said)
        else:
            notes.append(f"{said} (at most {MAX_CLOCK_EVENT_SHARE:.0%} passes)")
    return reasons
