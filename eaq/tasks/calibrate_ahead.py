"""The roofline calibrations a sweep plans ahead of its runs (``eaq.tasks.ahead``), measured in a fork of the sweep's
server.

A fork, as a run's process is (``eaq.tasks.isolation``), not an interpreter of its own: that one imported torch again,
and on a fresh H200 host its imports took 13 s, while the fork server, started as the sweep started, had them
already (the sweep's first run waited 14.3 s at the device gate; docs/results/2026-11-29-h200-session41). Its own
module, apart from the Hydra hook that plans it, so that what runs in the fork imports no Hydra sweeper.
"""

from __future__ import annotations

import logging
import os
import pickle
import time

log = logging.getLogger(__name__)


def calibrate(plan: bytes) -> None:
    """Measure what ``plan`` holds (pickled by ``eaq.tasks.ahead.Plan``), one line each in the log."""
    from eaq.tasks.roofline import ensure_calibration  # preloaded by the fork server

    log.info("working ahead of the runs (pid %d)", os.getpid())
    for cfg in pickle.loads(plan):  # noqa: S301 (the sweep's own plan)
        started = time.perf_counter()
        try:
            outcome = ensure_calibration(cfg)
        except Exception as exc:  # noqa: BLE001  (the run measures it itself, and says why it fails)
            outcome = f"failed, left to the run: {exc}"
        log.info("%s on %s: %s (%.2f s)", cfg.precision.name, cfg.device, outcome, time.perf_counter() - started)
