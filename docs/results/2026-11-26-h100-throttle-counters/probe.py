"""What NVML answers on this GPU for a window's middle: cumulative clock-event (violation) counters and per-process
utilization samples. Run on the GPU machine: python3 probe.py

1. Reads the clock-event reason fields (cumulative ns) and nvmlDeviceGetViolationStatus before and after
   6 s of back-to-back bf16 8192^3 matmuls (a load that holds the power cap on an H100), and after 3 s idle.
2. Starts a second process that runs matmuls for ~1.5 s in the middle of a 4 s stretch of this process's own
   matmuls, then asks nvmlDeviceGetProcessUtilization for the samples since the stretch began.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pynvml as nv
import torch

FIELDS = {
    "power_cap": nv.NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP,
    "thermal_policy": nv.NVML_FI_DEV_PERF_POLICY_THERMAL,
    "sync_boost": nv.NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST,
    "board_limit": nv.NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT,
    "low_utilization": nv.NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION,
    "reliability": nv.NVML_FI_DEV_PERF_POLICY_RELIABILITY,
    "total_app_clocks": nv.NVML_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS,
    "total_base_clocks": nv.NVML_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS,
    "sw_thermal": nv.NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN,
    "hw_thermal": nv.NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN,
    "hw_power_brake": nv.NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN,
}
POLICIES = {"power": 0, "thermal": 1, "sync_boost": 2, "board_limit": 3, "low_utilization": 4, "reliability": 5,
            "total_app_clocks": 10, "total_base_clocks": 11}


def fields(h) -> dict:
    t = time.perf_counter()
    out = {}
    for name, answer in zip(FIELDS, nv.nvmlDeviceGetFieldValues(h, list(FIELDS.values()))):
        out[name] = answer.value.ullVal if answer.nvmlReturn == 0 else f"return {answer.nvmlReturn}"
    out["_read_ms"] = (time.perf_counter() - t) * 1e3
    return out


def violations(h) -> dict:
    out = {}
    for name, policy in POLICIES.items():
        try:
            v = nv.nvmlDeviceGetViolationStatus(h, policy)
            out[name] = {"reference_us": v.referenceTime, "violation_ns": v.violationTime}
        except nv.NVMLError as exc:
            out[name] = f"error {exc}"
    return out


def burn(seconds: float) -> int:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(10):
            a @ a
        n += 10
        torch.cuda.synchronize()
    return n


def delta(a: dict, b: dict) -> dict:
    return {k: (b[k] - a[k] if isinstance(a[k], (int, float)) and isinstance(b[k], (int, float)) else b[k]) for k in a}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        time.sleep(float(sys.argv[2]))
        print("child pid", os.getpid(), "matmuls", burn(float(sys.argv[3])), flush=True)
        return
    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    report = {"driver": nv.nvmlSystemGetDriverVersion(), "name": nv.nvmlDeviceGetName(h), "uuid": nv.nvmlDeviceGetUUID(h),
              "pid": os.getpid(), "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    burn(1.0)  # context and kernels
    f0, v0, t0 = fields(h), violations(h), time.perf_counter()
    report["burn_matmuls"] = burn(6.0)
    f1, v1, t1 = fields(h), violations(h), time.perf_counter()
    time.sleep(3.0)
    f2, v2, t2 = fields(h), violations(h), time.perf_counter()
    report["fields_before"] = f0
    report["burn_fields_delta"] = delta(f0, f1) | {"_seconds": t1 - t0}
    report["idle_fields_delta"] = delta(f1, f2) | {"_seconds": t2 - t1}
    report["violations_before"] = v0
    report["burn_violation_ns_delta"] = {k: (v1[k]["violation_ns"] - v0[k]["violation_ns"]) if isinstance(v0[k], dict) else v0[k] for k in v0}
    report["idle_violation_ns_delta"] = {k: (v2[k]["violation_ns"] - v1[k]["violation_ns"]) if isinstance(v1[k], dict) else v1[k] for k in v1}

    # A second process busy in the middle of this one's stretch only.
    start_us = int(time.time() * 1e6)
    child = subprocess.Popen([sys.executable, __file__, "child", "1.5", "1.5"], stdout=subprocess.PIPE, text=True)
    running_mid = None
    own = burn(2.2)
    running_mid = [p.pid for p in nv.nvmlDeviceGetComputeRunningProcesses(h)]
    own += burn(4.0)
    out, _ = child.communicate(timeout=60)
    report["child"] = out.strip()
    report["running_after"] = [p.pid for p in nv.nvmlDeviceGetComputeRunningProcesses(h)]
    report["running_mid"] = running_mid
    try:
        samples = nv.nvmlDeviceGetProcessUtilization(h, start_us)
        rows = [{"pid": s.pid, "t_s": (s.timeStamp - start_us) / 1e6, "sm": s.smUtil, "mem": s.memUtil} for s in samples]
        report["process_utilization"] = rows
    except nv.NVMLError as exc:
        report["process_utilization"] = f"error {exc}"
    try:
        samples = nv.nvmlDeviceGetProcessUtilization(h, int(time.time() * 1e6) - 10_000_000)
        report["process_utilization_last_10s_pids"] = sorted({s.pid for s in samples})
    except nv.NVMLError as exc:
        report["process_utilization_last_10s_pids"] = f"error {exc}"
    print(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
