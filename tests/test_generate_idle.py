"""A generation run's idle baseline on a real GPU, in a module of its own.

A run's idle baseline is refused while another process holds the GPU, and a test process that has imported eaq's
models holds one (torchao's imports under transformers start CUDA: eaq/tasks/preload.py). This module imports only
torch and the test helpers, so run alone (``pytest tests/test_generate_idle.py``) its runs get a baseline.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import all_runs, run_eaq


@pytest.mark.skipif(not torch.cuda.is_available(), reason="measures an idle baseline with NVML (runs on the lent GPU)")
def test_a_generation_runs_idle_baseline_age_is_counted_to_its_prefill_window(out: Path) -> None:
    """The baseline nets the prefill window's energy as well as decode's: its age runs to the first of the two."""
    if torch.cuda.is_initialized():  # NVML would list this process at the idle window's ends: no baseline then
        pytest.skip("this process holds a CUDA context (another test module imported eaq's models, whose torchao "
                    "imports start one), which refuses the run's idle baseline: run this module alone")
    done = run_eaq(out, "model=gpt2_tiny_random", "workload=generate", "workload.new_tokens=8", "dataset=synthetic",
                   "batch_size=1", "seq_len=32", "trials=quick", "trials.idle_s=1", "trials.min_duration_s=1", "sampler=nvml")
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = all_runs(out)
    tags, metrics = run.data.tags, run.data.metrics
    assert tags["eaq.idle"].startswith("measured in this run ("), tags["eaq.idle"]  # and used
    idle = float(tags["eaq.idle.measured_unix_s"])
    prefill, decode = float(tags["eaq.prefill_window.start_unix_s"]), float(tags["eaq.window.start_unix_s"])
    assert decode - prefill >= 1  # the prefill window's second lies between: one age cannot stand for both
    assert metrics["idle_baseline_age_s"] == pytest.approx(prefill - idle, abs=0.002)
