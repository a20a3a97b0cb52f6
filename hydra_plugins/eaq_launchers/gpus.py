"""``hydra/launcher=gpus``: Hydra's joblib launcher, its jobs one per GPU slot (eaq/slots.py), and one sentence where a
worker process of it is killed.

joblib cannot lose a worker (the out-of-memory killer's SIGKILL, a kill by hand) and go on: it stops the others, their
runs under way with them, and the error came out as a 47-line traceback of joblib's and Hydra's, after which the
sweep's own records closed (the runs under way KILLED, the parent FAILED). This launcher says it in a sentence that
names what to do.
"""

from __future__ import annotations

import re
import sys
from typing import Sequence

from hydra.core.utils import JobReturn
from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher

# joblib's words for the workers' ends: "The exit codes of the workers are {SIGKILL(-9)}".
EXIT_CODES = re.compile(r"exit codes of the workers are \{([^}]*)\}")


class GpusLauncher(JoblibLauncher):
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from joblib.externals.loky.process_executor import TerminatedWorkerError

        try:
            return super().launch(job_overrides, initial_job_idx)
        except TerminatedWorkerError as error:
            codes = EXIT_CODES.search(str(error))
            print(f"error: the sweep stopped: a worker process of hydra/launcher=gpus ended without its job "
                  f"({'exit ' + codes.group(1) if codes else 'killed'}: out of memory, or a signal sent to it), and "
                  "joblib stops the other workers with it: the runs under way are recorded KILLED and the sweep's "
                  "parent run FAILED. The same command again measures only what did not finish (resume).",
                  file=sys.stderr)
            raise SystemExit(1) from error
