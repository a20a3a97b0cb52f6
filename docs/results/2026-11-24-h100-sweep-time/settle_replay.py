"""Replay warm-up's settle rules on a real H100 power trace and on simulated noise and ramps.

    python docs/results/2026-11-24-h100-sweep-time/settle_replay.py

The trace (docs/results/2026-11-22-h100-energy, GPT-2-small bf16 b64, NVML instant power
polled every 15 ms) holds the idle baseline, the warm-up from the first pass (a step from
~123 W to ~515 W) and the 5 s window. Latency is not in the trace; the power rule alone
decides here. Prints, for the rule before (two 0.5 s chunks within 3%) and the trend rule
of eaq/measure/warmup.py, when each calls the warm-up settled, and how either behaves on
stationary noise of +-10% per chunk and on ramps.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

from eaq.measure.warmup import BLOCK, CHUNK_S, POWER_TOLERANCE, stationary

TRACE = Path(__file__).parents[1] / "2026-11-22-h100-energy" / "power_trace_gpt2-small_bf16_b64.csv"
CAP_S = 10.0


def chunk_means(times: list[float], watts: list[float], start: float, end: float, chunk_s: float) -> list[float]:
    means, t = [], start
    while t + chunk_s <= end:
        inside = [w for s, w in zip(times, watts) if t <= s < t + chunk_s]
        means.append(sum(inside) / len(inside))
        t += chunk_s
    return means


def old_rule(means: list[float]) -> int | None:
    """Chunks (0.5 s) until two in a row agree within 3%, as warm-up did before."""
    for i in range(1, len(means)):
        if abs(means[i] - means[i - 1]) <= POWER_TOLERANCE * abs(means[i - 1]):
            return i + 1
    return None


def new_rule(means: list[float]) -> int | None:
    for i in range(BLOCK, len(means) + 1):
        if stationary(means[:i], POWER_TOLERANCE):
            return i
    return None


def trace() -> None:
    rows = list(csv.DictReader(TRACE.open()))
    times = [float(r["t_s"]) for r in rows]
    watts = [float(r["power_instant_w"]) for r in rows]
    onset = next(t for t, w in zip(times, watts) if w > 1.5 * watts[0])  # the first pass draws power
    window_end = 5.0
    print(f"trace {TRACE.name}: idle {watts[0]:.0f} W, work starts at {onset:+.2f} s (window 0-5 s)")
    old = old_rule(chunk_means(times, watts, onset, window_end, 0.5))
    new = new_rule(chunk_means(times, watts, onset, window_end, CHUNK_S))
    print(f"  before (2 x 0.5 s within 3%): settled after {old * 0.5 if old else 'never'} s")
    print(f"  trend rule ({BLOCK} x {CHUNK_S} s): settled after {new * CHUNK_S if new else 'never'} s")
    steady = chunk_means(times, watts, 0.0, window_end, CHUNK_S)
    blocks = [stationary(steady[: i + 1], POWER_TOLERANCE) for i in range(BLOCK - 1, len(steady))]
    print(f"  inside the window: {sum(blocks)}/{len(blocks)} sliding blocks of {BLOCK} chunks called stationary")
    waits = [new_rule(steady[start:]) for start in range(len(steady) - 2 * BLOCK + 1)]
    print(f"  starting at each chunk of the window's first {len(waits)}: settled after {', '.join(f'{w * CHUNK_S:.2f}' if w else 'never' for w in waits)} s")
    ramp = chunk_means(times, watts, onset - 0.1, onset + 0.5, 0.05)
    print(f"  the step, 50 ms means from the onset: {', '.join(f'{m:.0f}' for m in ramp)} W")


def simulate(trials: int = 2000, seed: int = 0) -> None:
    rng = random.Random(seed)

    def noisy(level: float, n: int, spread: float) -> list[float]:  # +-spread, uniform
        return [level * (1 + rng.uniform(-spread, spread)) for _ in range(n)]

    for spread, old_chunk in ((0.10, 0.5), (0.05, 0.5)):
        olds, news = [], []
        for _ in range(trials):
            o = old_rule(noisy(330, int(CAP_S / old_chunk), spread))
            n = new_rule(noisy(330, int(CAP_S / CHUNK_S), spread))
            olds.append(o * old_chunk if o else CAP_S)
            news.append(n * CHUNK_S if n else CAP_S)
        for name, got in (("before", olds), ("trend rule", news)):
            got.sort()
            capped = sum(g >= CAP_S for g in got) / trials
            print(f"stationary +-{spread:.0%}: {name:10s} median {got[trials // 2]:.2f} s, p95 {got[int(trials * 0.95)]:.2f} s, hit the 10 s cap {capped:.1%}")
    # Ramps: a fast clock/power ramp (60% over 2 s), and slow ones, under chunk noise.
    for total, over_s, spread in ((0.60, 2.0, 0.05), (0.30, 3.0, 0.02), (0.30, 3.0, 0.10), (0.10, 3.0, 0.10)):
        early_old = early_new = 0
        for _ in range(trials):
            n_old, n_new = int(over_s / 0.5), int(over_s / CHUNK_S)
            ramp = lambda n: [330 * (1 - total + total * i / n) * (1 + rng.uniform(-spread, spread)) for i in range(n)]  # noqa: E731
            early_old += old_rule(ramp(n_old)) is not None
            early_new += new_rule(ramp(n_new)) is not None
        print(f"ramp of {total:.0%} over {over_s:.0f} s, +-{spread:.0%} noise: called settled before it ended: "
              f"before {early_old / trials:.1%}, trend rule {early_new / trials:.1%}")

if __name__ == "__main__":
    trace()
    simulate()
