"""On a GPU: which PIDs NVML lists, whether this process is among them, and what eaq counts as other processes.

eaq flags a window when another process holds a context on the measured GPU. NVML lists host PIDs; in a
container with its own PID namespace this process's PID is not among them (eaq.measure.nvml.other_processes).
Run from the repository root: python docs/results/2026-11-26-h100-nvml-processes/check.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import torch

from eaq.measure.samplers import select_sampler


def listed(sampler) -> list[int]:
    nvml, handle = sampler._nvml, sampler._handle
    return [p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)]


def main() -> None:
    device = torch.device("cuda:0")
    torch.zeros(1, device=device)  # this process's context on the GPU
    sampler = select_sampler("nvml", device, 0.015, False)
    sampler.start()
    found: dict[str, object] = {"pid": os.getpid(), "pid_namespace": os.readlink("/proc/self/ns/pid")}
    try:
        found["alone"] = {"nvml_pids": listed(sampler), "other_processes": sampler.snapshot().get("other_processes")}
        # A second process with its own context on the same GPU: eaq must count exactly one other.
        other = subprocess.Popen([sys.executable, "-c", "import torch, time; torch.zeros(1, device='cuda:0'); "
                                  "print('ready', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
        assert other.stdout is not None and other.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        found["with_another"] = {"other_pid": other.pid, "nvml_pids": listed(sampler),
                                 "other_processes": sampler.snapshot().get("other_processes")}
        other.kill()
        other.wait()
        time.sleep(1.0)
        found["after_it_ended"] = {"nvml_pids": listed(sampler), "other_processes": sampler.snapshot().get("other_processes")}
    finally:
        sampler.stop()
    print(json.dumps(found, indent=1))
    assert found["alone"]["other_processes"] == 0 and found["with_another"]["other_processes"] == 1, found


if __name__ == "__main__":
    main()
