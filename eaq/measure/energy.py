"""A window's energy from what the sampler saw: counter delta first, trace integrals as checks."""

from __future__ import annotations

from dataclasses import dataclass, field

from eaq.measure.trace import PowerTrace

# Trace channel used when a sampler has no counter, best first.
PRIMARY_CHANNELS = ("power_instant_w", "power_rapl_w", "power_smi_w", "power_average_w")


@dataclass(frozen=True)
class WindowEnergy:
    status: str  # "measured" or "unavailable"
    sampler: str
    reason: str = ""
    energy_j: float | None = None
    # What energy_j is: "energy_counter" or "<channel> integral".
    source: str = ""
    # Integral of each trace channel over the window, for cross-checks (J).
    integrals_j: dict[str, float] = field(default_factory=dict)
    power_w: dict[str, float] = field(default_factory=dict)
    duration_s: float = 0.0
    samples: int = 0
    expected_samples: int = 0
    # The sampler's fastest poll interval (PowerTrace.fastest_s): what "poll faster" may ask.
    fastest_poll_s: float = 0.0
    # Changes of the primary power reading in the window; None where the trace has no power channel to count on.
    # 0 is a count: a reading that never changed in a window that measured energy.
    sensor_updates: int | None = None
    notes: tuple[str, ...] = ()


def window_energy(
    sampler: str, trace: PowerTrace, t0: float, t1: float, counter_j: tuple[float | None, float | None]
) -> WindowEnergy:
    """``counter_j`` is the cumulative counter read at the window's start and end.

    A counter that did not move is no reading: it updates every ~100 ms on an H100, so a
    shorter window can fall between two updates and read 0 J. That, and a counter that went
    backwards, fall back to the trace's integral and say so in this window's notes only (the
    session's notes, the sampler's fallbacks and failed reads, come with every window).
    """
    integrals = trace.integrals_j(t0, t1)
    primary = next((ch for ch in PRIMARY_CHANNELS if ch in trace.channels), None)
    start, end = counter_j
    energy, source, own = None, "", []
    if start is not None and end is not None:
        if end > start:
            energy, source = end - start, "energy_counter"
        elif end < start:
            own.append("the energy counter went backwards (reset or wrap); energy from the power trace instead")
        else:
            own.append(f"the energy counter did not move in this {t1 - t0:.3f} s window (it updates every ~0.1 s "
                       "on recent GPUs); energy from the power trace instead")
    if energy is None and primary in integrals:
        energy, source = integrals[primary], f"{primary} integral"
    notes = (*trace.notes, *own)
    if energy is None:
        # Why there is no figure comes first; the session's notes (a fallback to the trace, say) after it. Where no
        # sensor was used (sampler=none, or auto with none here: the stand-in's names) its note is the reason: nothing
        # failed to record.
        no_sensor = sampler in ("none", "auto")
        reason = "; ".join(notes if no_sensor else ("the sampler recorded no counter and no power samples covering the window", *notes))
        return WindowEnergy(status="unavailable", sampler=sampler, reason=reason, duration_s=t1 - t0, notes=notes)
    duration = t1 - t0
    return WindowEnergy(
        status="measured",
        sampler=sampler,
        energy_j=energy,
        source=source,
        integrals_j=integrals,
        power_w=trace.stats_w(primary, t0, t1) if primary else {},
        duration_s=duration,
        samples=trace.between(t0, t1),
        expected_samples=int(duration / trace.interval_s) if trace.interval_s else 0,
        fastest_poll_s=trace.fastest_s,
        sensor_updates=trace.updates(primary, t0, t1) if primary else None,
        notes=notes,
    )


def energy_metrics(
    energy: WindowEnergy, idle_w: float | None, duration_s: float, samples: int, prefix: str = "", sample: str = "sample"
) -> dict[str, float]:
    """The energy block of a window's metrics (empty when unavailable); names in eaq/metrics.py.

    ``idle_w``: the device's idle power from the run's idle baseline (eaq.measure.idle), if any.
    ``prefix`` and ``sample`` name the window and its unit of work, for runs with more than
    one window (generation: ``decode_energy_per_token_mj``); ``idle_power_w`` is the run's,
    unprefixed. Every figure keeps its name's shape, so no window loses the cross-checks.
    """
    if energy.energy_j is None:
        return {}
    total = energy.energy_j
    metrics = {
        f"{prefix}energy_total_j": total,
        f"{prefix}energy_per_{sample}_mj": total / samples * 1e3,
        f"{prefix}{sample}s_per_j": samples / total if total > 0 else float("nan"),
        f"{prefix}power_mean_w": total / duration_s,
    }
    if "std" in energy.power_w:
        metrics |= {f"{prefix}power_{stat}_w": energy.power_w[stat] for stat in ("std", "min", "max")}
    for channel, joules in energy.integrals_j.items():
        metrics[f"{prefix}energy_{channel.removeprefix('power_').removesuffix('_w')}_integral_j"] = joules
    if idle_w is not None:
        net = total - idle_w * duration_s
        metrics |= {"idle_power_w": idle_w, f"{prefix}energy_net_j": net, f"{prefix}energy_net_per_{sample}_mj": net / samples * 1e3}
    return metrics
