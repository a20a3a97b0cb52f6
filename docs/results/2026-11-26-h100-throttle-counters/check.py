"""eaq's own code on the GPU: the idle baseline refuses a window another process used, and a window's validity reads
NVML's cumulative clock-event times. From the repository root, after docs/results/gpu-install.sh:

    python3 docs/results/2026-11-26-h100-throttle-counters/check.py

1. idle_baseline (2 s, NVML sampler, nothing stored) three times: quiet; with a second process running matmuls for
   ~0.6 s in the middle of the window (its CUDA context up before, so the process list at both ends shows it: the
   utilization samples are what judges, read first); quiet again.
2. A 6 s MeasurementWindow of back-to-back bf16 8192^3 matmuls (power-capped on an H100) judged by check().
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

from eaq.measure.energy import window_energy
from eaq.measure.idle import idle_baseline
from eaq.measure.samplers import select_sampler, wait_for_sample
from eaq.measure.validity import check
from eaq.measure.window import MeasurementWindow

CHILD = Path(__file__).with_name("probe_idle.py")  # its "child" mode: context up, "ready"; on "go" 0.6 s of matmuls


def idle(device, sampler, busy_middle: bool) -> dict:
    proc = None
    if busy_middle:
        proc = subprocess.Popen([sys.executable, str(CHILD), "child"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"

        def go() -> None:
            time.sleep(0.7)  # the window opens on the counter's next update (< 0.3 s) and lasts 2 s
            proc.stdin.write("go\n")
            proc.stdin.flush()

        threading.Thread(target=go).start()
    baseline, window, tags = idle_baseline(device, sampler, 2.0, None)
    out = {"power_w": baseline.power_w if baseline else None, "tags": tags,
           "utilization": sampler.utilization(window.start_unix_s, window.end_unix_s),
           "other_processes_ends": [window.before.get("other_processes"), window.after.get("other_processes")]}
    if proc is not None:
        out["child"] = proc.stdout.readline().strip()
        proc.stdin.close()
        proc.wait(timeout=30)
    return out


def main() -> None:
    device = torch.device("cuda")
    torch.ones(1, device=device)
    sampler = select_sampler("nvml", device)
    report = {"gpu": torch.cuda.get_device_name(), "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    sampler.start()
    try:
        wait_for_sample(sampler)
        report["idle_quiet_1"] = idle(device, sampler, False)
        report["idle_child_in_middle"] = idle(device, sampler, True)
        report["idle_quiet_2"] = idle(device, sampler, False)
        a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
        for _ in range(50):
            a @ a
        with MeasurementWindow(device, sampler) as w:
            end, n = time.perf_counter() + 6.0, 0
            while time.perf_counter() < end:
                for _ in range(10):
                    a @ a
                torch.cuda.synchronize()
                n += 10
            w.iterations = n
        wait_for_sample(sampler)
    finally:
        trace = sampler.stop()
    r = w.result
    energy = window_energy(sampler.name, trace, r.t0, r.t1, r.counter_j)
    validity = check(r, energy, report["idle_quiet_2"]["power_w"], 5.0)
    report["matmul_window"] = {"seconds": r.duration_s, "mean_w": energy.energy_j / r.duration_s, "valid": validity.valid,
                               "reasons": validity.reasons, "notes": validity.notes, "facts": validity.facts,
                               "clock_event_ns_before": {k: v for k, v in r.before.items() if k.startswith("clock_event")},
                               "clock_event_ns_after": {k: v for k, v in r.after.items() if k.startswith("clock_event")}}
    print(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
