"""``python -m eaq.run``: compose the config from ``conf/`` and run one benchmark job.

``-m`` sweeps: ``python -m eaq.run -m precision=fp32,int8 trial=1,2,3``.
"""

from __future__ import annotations

import os
import re
import sys

from eaq.exit import exit_without_teardown, restore_interrupt, stop_on_terminate
from eaq.slots import ORDER, visible_gpus
from eaq.tasks.isolation import start_server

# isolate=false on the command line (also +/++isolate=..., and no/off/0 in any case, as OmegaConf reads a bool): no fork server, whose imports would compete
# for the CPU with the run measuring in this process.
IN_PROCESS = re.compile(r"\+{0,2}isolate=(false|no|off|0)", re.IGNORECASE)
# A sweep handed to submitit (slurm, slurm_local) or to several GPU slots (hydra/launcher=gpus, more than one) runs no
# job in this process: its jobs' processes start their own servers, and this one's (455 MB, 4 s of CPU) competed with
# their start on the host. One slot, or joblib's n_jobs=1, runs the jobs here (joblib runs one worker in its caller).
LAUNCHER = re.compile(r"\+{0,2}hydra/launcher=(.+)")
SLOT_COUNT = re.compile(r"\+{0,2}gpu_slots\.count=(\d+)")


def _sweep_elsewhere(argv: list[str]) -> bool:
    """Whether the command line hands a sweep's jobs to processes other than this one."""
    if not {"-m", "--multirun"} & set(argv):
        return False
    launchers = [m.group(1) for arg in argv if (m := LAUNCHER.fullmatch(arg))]
    launcher = launchers[-1] if launchers else "basic"
    if launcher in ("slurm", "slurm_local"):
        return True
    if launcher != "gpus":
        return False
    counts = [int(m.group(1)) for arg in argv if (m := SLOT_COUNT.fullmatch(arg))]
    return (counts[-1] if counts else len(visible_gpus())) > 1


if __name__ == "__main__":
    restore_interrupt()  # before any process starts: they inherit it
if __name__ == "__main__" and not any(IN_PROCESS.fullmatch(arg) for arg in sys.argv[1:]):
    # Before anything else: the fork server's imports (torch, transformers, torchao: 14 s
    # on the H100 machine) then run while this process imports Hydra and MLflow and sets
    # the sweep up (8 s there), instead of after. Not in the server, which imports this
    # module as its main (not as __main__). The server keeps the environment it starts with,
    # so CUDA numbers GPUs as NVML and nvidia-smi do from here on: hydra/launcher=gpus needs
    # it (eaq.slots.pin_device_order refuses another order), and device=cuda:N then means
    # the GPU nvidia-smi calls N. The jobs of another launcher's sweep inherit the order.
    os.environ.setdefault(ORDER, "PCI_BUS_ID")  # a user's own order stands; slots refuse it later, in one sentence
    if not _sweep_elsewhere(sys.argv[1:]):
        start_server()

import hydra  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from eaq.config import register_schemas  # noqa: E402
from eaq.group_choices import (  # noqa: E402
    unknown_architecture_key, unknown_choice, unknown_config_name, unknown_key, unknown_launcher, unresolvable,
    workload_mismatch, wrong_type,
)
from eaq.slots import slot_count  # noqa: E402

register_schemas()
# Job and sweep folders are named by the second and the process (conf/config.yaml): two
# launches in the same second must not share a folder, and with it a sweep's parent run.
OmegaConf.register_new_resolver("eaq.pid", os.getpid, use_cache=True, replace=True)
# hydra/launcher=gpus runs as many jobs at once as there are GPU slots (eaq/slots.py).
OmegaConf.register_new_resolver("eaq.gpu_slots", slot_count, replace=True)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> str:
    # Imported here, not above: every run's process forked by the isolation server executes this
    # module again (as multiprocessing's __mp_main__) and needs none of the job's MLflow side, so
    # the server need not import it either (1.2 s of its 5 s of imports on the CPU machine).
    from eaq.tasks.job import run_job

    return run_job(cfg)


if __name__ == "__main__":
    if error := (unknown_choice(sys.argv[1:]) or unknown_launcher(sys.argv[1:]) or unknown_config_name(sys.argv[1:])
                 or unknown_key(sys.argv[1:]) or unknown_architecture_key(sys.argv[1:]) or wrong_type(sys.argv[1:])
                 or workload_mismatch(sys.argv[1:]) or unresolvable(sys.argv[1:])):
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    stop_on_terminate()
    try:
        main()
    except SystemExit as stop:  # Hydra's and eaq's own exits (a failed run, a sweep with failures)
        exit_without_teardown(stop.code)
    except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM (stop_on_terminate): the records are closed on the way here
        print(f"stopped by {'SIGTERM' if 'SIGTERM' in str(stop) else 'Ctrl-C'}: a run under way is recorded KILLED (and a "
              "sweep's parent run FAILED); the same command again resumes, skipping the runs that finished.", file=sys.stderr)
        exit_without_teardown(143 if "SIGTERM" in str(stop) else 130)  # the shell's codes for the two signals
    exit_without_teardown(0)
