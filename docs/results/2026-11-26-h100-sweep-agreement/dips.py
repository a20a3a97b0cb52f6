"""Where host-bound windows lose power, per protocol: DistilBERT fp16 windows cut into half-seconds.

    python docs/results/2026-11-26-h100-sweep-agreement/dips.py

A host-bound fp16 window at this shape draws 380-420 W; when the host slows, the GPU waits and power falls
(the slow default runs of 0220 spent 2-3 s at 280-290 W). For every call folder with power traces
(``traces.tgz``, from 0220 on), every DistilBERT fp16 run's 5 s window is cut into ten half-seconds; a
half-second whose mean instant power is below DIP_W is a dip. Counted per protocol (agreement.py's labels):
runs, runs with a dip, dipped half-seconds. Dips cluster within a run, so the half-seconds are not independent
observations; the run counts are the safer reading.
"""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path

import pandas as pd

from agreement import HERE, protocol

DIP_W = 330.0
COLUMNS = ["run_id", "params.model.name", "params.precision.name"]
HALVES = [(k / 2, k / 2 + 0.5) for k in range(10)]  # the 5 s window, t = 0 at its start


def halves(trace: Path) -> list[float]:
    power = pd.read_csv(trace)
    return [power.loc[(power.t_s >= a) & (power.t_s < b), "power_instant_w"].mean() for a, b in HALVES]


def main() -> None:
    counts: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for archive in sorted(HERE.glob("*/traces.tgz")):
            call = archive.parent
            runs = pd.concat({f.name.removesuffix("-runs.csv"): pd.read_csv(f, usecols=COLUMNS) for f in call.glob("*-runs.csv")},
                             names=["sweep"]).reset_index(level="sweep")
            runs = runs[(runs["params.model.name"] == "distilbert-base-random") & (runs["params.precision.name"] == "fp16")]
            where = Path(tmp) / call.name
            with tarfile.open(archive) as tar:
                tar.extractall(where, filter="data")
            for _, run in runs.iterrows():
                trace = next(where.glob(f"eaq-*/mlartifacts/{run.run_id}/artifacts/power_trace.csv"), None)
                if trace is None:
                    continue
                dips = sum(w < DIP_W for w in halves(trace))
                tally = counts.setdefault(protocol(run.sweep), [0, 0, 0])
                tally[0] += 1
                tally[1] += dips > 0
                tally[2] += dips
    rows = [{"protocol": p, "fp16 runs": n, "runs with a dip": with_dip, "dipped half-seconds": f"{dips} of {10 * n}"}
            for p, (n, with_dip, dips) in counts.items()]
    print(pd.DataFrame(rows).to_markdown(index=False))


if __name__ == "__main__":
    main()
