"""Does a GPU's idle power depend on whether the measuring process holds a CUDA context?

The idle baseline taken ahead of a sweep's runs reads NVML alone, with no CUDA context
(eaq/tasks/idle.py), while a run measures its own with its context open. The run reuses the
ahead one only if temperature and SM clock match (eaq.measure.idle.stale_reason); this checks
the power itself. Alternating processes, each measuring ``SECONDS`` of idle through eaq's own
window and NVML sampler: "none" imports no torch, "context" opens a context first.

  python3 docs/results/2026-11-25-h100-sweep-time/idle_context.py [ROUNDS] [SECONDS]   (defaults 3, 5)

Prints one line per process and the mean of each kind.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

GAP_S = 2.0

CHILD = """
import json, sys, time
from eaq.measure.energy import window_energy
from eaq.measure.nvml import NvmlSampler
from eaq.measure.samplers import wait_for_sample
from eaq.measure.window import MeasurementWindow
from eaq.slots import visible_gpus
device = None
if sys.argv[1] == "context":
    import torch
    torch.zeros(1, device="cuda:0")  # opens the context, as a run's device setup does
    device = torch.device("cuda:0")
sampler = NvmlSampler(visible_gpus()[0], 0.015)
sampler.start()
wait_for_sample(sampler)
with MeasurementWindow(device, sampler) as window:
    time.sleep(float(sys.argv[2]))
trace = sampler.stop()
energy = window_energy(sampler.name, trace, window.result.t0, window.result.t1, window.result.counter_j)
print(json.dumps({"kind": sys.argv[1], "power_w": energy.energy_j / energy.duration_s, **window.result.before}))
"""


def main(rounds: int, seconds: float) -> None:
    found: dict[str, list[float]] = {"none": [], "context": []}
    # cuda:0 is NVML's first GPU only in NVML's order, which eaq.run sets for its runs too.
    env = {**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    for round_ in range(rounds):
        for kind in ("none", "context") if round_ % 2 == 0 else ("context", "none"):  # neither always follows the other
            time.sleep(GAP_S)  # the previous process's context gone, the device settled
            out = subprocess.run([sys.executable, "-c", CHILD, kind, str(seconds)], capture_output=True, text=True, check=True, env=env)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            found[kind].append(row["power_w"])
            print(json.dumps(row))
    for kind, watts in found.items():
        print(f"{kind}: mean {statistics.mean(watts):.2f} W over {len(watts)} windows ({', '.join(f'{w:.2f}' for w in watts)})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, float(sys.argv[2]) if len(sys.argv) > 2 else 5.0)
