"""``python -m eaq.tasks.calibrate_ahead PLAN``: the process that calibrates a sweep's peaks ahead of its runs.

Its own module, apart from the Hydra hook that plans and starts it (``eaq.tasks.ahead``), so
that it imports only what measuring needs: the roofline task and torch. The hook's module brings
Hydra's sweeper (and, until 2026-11-25, MLflow: 1.3 of this process's 2.4 s of imports on this
project's CPU machine), on the critical path of the sweep's first run, which waits at the
device gate for this process to end (docs/results/2026-11-25-h100-sweep-time). The garbage
collector is off while it imports, as in the fork server (eaq.tasks.preload): collections find
nothing to free in fresh modules.
"""

from __future__ import annotations

import gc
import logging
import os
import pickle
import sys
import time
from pathlib import Path

log = logging.getLogger(__name__)


def main(plan: Path) -> None:
    """Measure what ``plan`` holds (pickled by ``eaq.tasks.ahead.Plan``), one line each in the log."""
    calibrations = pickle.loads(plan.read_bytes())
    plan.unlink()  # read once; the sweep's folder keeps what it ran in the log
    gc.disable()
    try:
        from eaq.tasks.roofline import ensure_calibration
    finally:
        gc.enable()

    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    log.info("working ahead of the runs (pid %d)", os.getpid())
    for cfg in calibrations:
        started = time.perf_counter()
        try:
            outcome = ensure_calibration(cfg)
        except Exception as exc:  # noqa: BLE001  (the run measures it itself, and says why it fails)
            outcome = f"failed, left to the run: {exc}"
        log.info("%s on %s: %s (%.2f s)", cfg.precision.name, cfg.device, outcome, time.perf_counter() - started)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
