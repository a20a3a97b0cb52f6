"""Write a power trace as CSV and as a PNG with the measurement windows marked."""

from __future__ import annotations

from collections.abc import Sequence
import csv
from pathlib import Path

# A Figure of its own, not pyplot's: no backend or global state to set (this module may be
# used from a notebook), and imported here, at module load, so the fork server loads it
# once for every run instead of each run paying ~0.2 s (eaq/tasks/isolation.py).
from matplotlib.figure import Figure

from eaq.measure.trace import PowerTrace


def write_csv(trace: PowerTrace, path: Path, origin: float) -> None:
    """One row per sample: seconds since ``origin`` (the window start), then each channel in W. A companion's samples
    (nvidia-smi polled beside NVML, which the PNG draws) are rows of their own, in time order, their cells empty in
    the other trace's channels."""
    parts = (trace, *trace.companions)
    channels = sorted({c for part in parts for c in part.channels})
    rows = sorted((t, i, part) for part in parts for i, t in enumerate(part.times))
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["t_s", *channels])
        for t, i, part in rows:
            writer.writerow([f"{t - origin:.4f}", *(f"{part.channels[c][i]:.3f}" if c in part.channels else "" for c in channels)])


def write_png(trace: PowerTrace, path: Path, windows: Sequence[tuple[str, float, float]],
              idle_window: tuple[float, float] | None, title: str, origin: float) -> None:
    """The trace against seconds from ``origin`` (the CSV's), each of ``windows`` (label, start, end) shaded: a
    forward pass's one, or generation's prefill and decode windows (the prefill's, before the origin, is measured too)."""
    fig = Figure(figsize=(9, 3.5), dpi=110)
    ax = fig.subplots()
    for part in (trace, *trace.companions):  # companions: nvidia-smi polled beside NVML
        times = [t - origin for t in part.times]
        for channel, values in sorted(part.channels.items()):
            ax.plot(times, values, linewidth=0.9, label=channel.removesuffix("_w").replace("_", " "))
    for label, start, end in windows:  # the window at the origin green, as the report's trace figure draws it
        ax.axvspan(start - origin, end - origin, color="tab:green" if start == origin else "tab:orange", alpha=0.12,
                   label=label)
    if idle_window:
        ax.axvspan(idle_window[0] - origin, idle_window[1] - origin, color="tab:gray", alpha=0.15, label="idle baseline")
    ax.set_xlabel("time from window start (s)")
    ax.set_ylabel("power (W)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
