"""Idle windows on the NVML energy counter, opened and closed anywhere against on its updates (aligned), alternating,
on the lent GPU: the spread of the idle power each gives. Run from the repository root: python3 <this file>."""

from __future__ import annotations

import statistics
import time

import torch

from eaq.measure.nvml import NvmlSampler
from eaq.measure.window import MeasurementWindow

device = torch.device("cuda:0")
torch.cuda.init()
sampler = NvmlSampler(str(torch.cuda.get_device_properties(device).uuid), interval_s=0.015)
sampler.start()
found: dict[bool, list[float]] = {False: [], True: []}
try:
    time.sleep(1.0)
    for _ in range(8):
        for aligned in (False, True):
            with MeasurementWindow(device, sampler, aligned=aligned) as window:
                time.sleep(2.0)
            start, end = window.result.counter_j
            found[aligned].append((end - start) / window.result.duration_s)
finally:
    sampler.stop()
for aligned, watts in found.items():
    spread = (max(watts) - min(watts)) / statistics.mean(watts) * 100
    print(f"{'aligned  ' if aligned else 'unaligned'}: mean {statistics.mean(watts):.2f} W, stdev {statistics.stdev(watts):.2f} W, "
          f"range {min(watts):.2f}-{max(watts):.2f} W ({spread:.1f}% of the mean), n={len(watts)}: "
          + ", ".join(f"{w:.1f}" for w in watts))
