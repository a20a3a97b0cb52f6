"""Can NVML tell an idle window in which another process used the GPU? Run on the GPU machine: python3 probe_idle.py

This process opens a CUDA context and stays idle for three 2 s windows; in the second, a child process (started
before it, CUDA already up) runs matmuls for ~0.6 s in the window's middle and exits before its end. For each window:
nvmlDeviceGetSamples(GPU_UTILIZATION_SAMPLES) since the window's start (value type, count, spacing, busy samples),
the compute processes at both ends, and the energy counter's mean power.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pynvml as nv
import torch


def child() -> None:
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    print("ready", flush=True)
    sys.stdin.readline()  # go
    end = time.perf_counter() + 0.6
    while time.perf_counter() < end:
        a @ a
        torch.cuda.synchronize()
    print("done", flush=True)


def window(h, seconds: float, during=None) -> dict:
    torch.cuda.synchronize()
    start_us, e0, p0 = int(time.time() * 1e6), nv.nvmlDeviceGetTotalEnergyConsumption(h), time.perf_counter()
    procs0 = [p.pid for p in nv.nvmlDeviceGetComputeRunningProcesses(h)]
    if during:
        during()
    time.sleep(max(0.0, seconds - (time.perf_counter() - p0)))
    procs1 = [p.pid for p in nv.nvmlDeviceGetComputeRunningProcesses(h)]
    e1, p1 = nv.nvmlDeviceGetTotalEnergyConsumption(h), time.perf_counter()
    out = {"seconds": p1 - p0, "mean_w": (e1 - e0) / 1e3 / (p1 - p0), "processes_start": procs0, "processes_end": procs1}
    for name in ("GPU_UTILIZATION", "MEMORY_UTILIZATION"):
        try:
            kind, samples = nv.nvmlDeviceGetSamples(h, getattr(nv, f"NVML_{name}_SAMPLES"), start_us)
            values = [(s.timeStamp - start_us) / 1e6 for s in samples]
            vals = [s.sampleValue.uiVal for s in samples]
            out[name] = {"value_type": kind, "count": len(samples), "t_first_s": values[:1], "t_last_s": values[-1:],
                         "spacing_s": (values[-1] - values[0]) / max(len(values) - 1, 1) if values else None,
                         "busy": [(round(t, 3), v) for t, v in zip(values, vals) if v], "max": max(vals, default=None)}
        except nv.NVMLError as exc:
            out[name] = f"error {exc}"
    return out


def main() -> None:
    if sys.argv[1:] == ["child"]:
        return child()
    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    torch.ones(1, device="cuda")
    report = {"uuid": nv.nvmlDeviceGetUUID(h), "driver": nv.nvmlSystemGetDriverVersion(),
              "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    time.sleep(1.0)
    report["quiet_1"] = window(h, 2.0)
    proc = subprocess.Popen([sys.executable, __file__, "child"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"

    def busy_middle() -> None:
        time.sleep(0.7)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "done"
        proc.stdin.close()
        proc.wait(timeout=30)

    report["child_in_middle"] = window(h, 2.0, busy_middle)
    report["quiet_2"] = window(h, 2.0)
    print(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
