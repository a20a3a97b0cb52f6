"""``python -m eaq.run``: compose the config from ``conf/`` and run one benchmark job.

``-m`` sweeps: ``python -m eaq.run -m precision=fp32,int8 trial=1,2,3``.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

from eaq.slots import ORDER
from eaq.tasks.isolation import start_server

if __name__ == "__main__" and "isolate=false" not in sys.argv[1:]:
    # Before anything else: the fork server's imports (torch, transformers, torchao: 14 s
    # on the H100 machine) then run while this process imports Hydra and MLflow and sets
    # the sweep up (8 s there), instead of after. Not in the server, which imports this
    # module as its main (not as __main__). The server keeps the environment it starts with,
    # so CUDA numbers GPUs as NVML and nvidia-smi do from here on: hydra/launcher=gpus needs
    # it (eaq.slots.pin_device_order refuses another order), and device=cuda:N then means
    # the GPU nvidia-smi calls N.
    os.environ.setdefault(ORDER, "PCI_BUS_ID")  # a user's own order stands; slots refuse it later, in one sentence
    start_server()

import hydra  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from eaq.config import register_schemas  # noqa: E402
from eaq.group_choices import unknown_choice  # noqa: E402
from eaq.slots import slot_count  # noqa: E402
from eaq.tasks.job import run_job  # noqa: E402

register_schemas()
# Job and sweep folders are named by the second and the process (conf/config.yaml): two
# launches in the same second must not share a folder, and with it a sweep's parent run.
OmegaConf.register_new_resolver("eaq.pid", os.getpid, use_cache=True, replace=True)
# hydra/launcher=gpus runs as many jobs at once as there are GPU slots (eaq/slots.py).
OmegaConf.register_new_resolver("eaq.gpu_slots", slot_count, replace=True)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> str:
    return run_job(cfg)


def exit_without_teardown(code: object) -> NoReturn:
    """Exit as ``sys.exit(code)`` would, but without the interpreter tearing its objects down.

    After a sweep's last output, clearing the ~390,000 objects Hydra, MLflow, pandas and
    matplotlib leave in this process took 1.2-1.3 s of a 1.8-2.0 s tail on this project's
    CPU machine (strace: no system call in it), every sweep. It writes nothing: the steps
    of a normal exit before it run as the interpreter runs them, in its order, through the
    same (private) functions: threading's shutdown (its exit hooks, which stop thread pools
    such as MLflow's, then a wait for every thread that is not a daemon), the exit handlers
    (the parent run's close on a sweep that stopped early, the fork server's stop,
    logging's flush and close of its files); then stdout and stderr are flushed.
    """
    if code is not None and not isinstance(code, int):  # sys.exit("message"): printed, status 1
        print(code, file=sys.stderr)
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (``| head``) or stream: nothing left to deliver
            pass
    os._exit(code or 0)


if __name__ == "__main__":
    if error := unknown_choice(sys.argv[1:]):
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    try:
        main()
    except SystemExit as stop:  # Hydra's and eaq's own exits (a failed run, a sweep with failures)
        exit_without_teardown(stop.code)
    exit_without_teardown(0)
