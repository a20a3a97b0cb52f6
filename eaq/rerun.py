"""``python -m eaq.rerun RUN [override ...]``: launch a logged run again from its own record.

RUN is a job folder, an MLflow run id or a run name. The run's Hydra overrides
(``.hydra/overrides.yaml``, kept in its folder and as an artifact) are replayed through
``python -m eaq.run``, with any extra overrides after them; ``python -m eaq.diff`` then
shows whether anything differs from the original (the config, or the environment).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from mlflow.tracking import MlflowClient

from eaq.diff import find_job_run
from eaq.errors import EaqError

OVERRIDES = ".hydra/overrides.yaml"


def logged_overrides(ref: str, client: MlflowClient) -> list[str]:
    folder = Path(ref)
    if (folder / OVERRIDES).exists():
        return list(yaml.safe_load((folder / OVERRIDES).read_text()) or [])
    run = find_job_run(client, ref)
    with tempfile.TemporaryDirectory() as tmp:
        return list(yaml.safe_load(Path(client.download_artifacts(run.info.run_id, OVERRIDES, tmp)).read_text()) or [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].strip("`"))
    parser.add_argument("run", help="job folder, run id or run name")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides, applied after the logged ones")
    parser.add_argument("--uri", default="sqlite:///outputs/mlflow.db", help="MLflow tracking store")
    args = parser.parse_args(argv)
    try:
        overrides = logged_overrides(args.run, MlflowClient(tracking_uri=args.uri))
    except EaqError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    command = [sys.executable, "-m", "eaq.run", *overrides, *args.overrides]
    print("rerun:", " ".join(command[1:]))
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
