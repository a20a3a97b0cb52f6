"""A sweep's jobs, as Hydra's basic sweeper will launch them: read in the sweep's own process (its progress count,
its summary, the calibrations ahead), which imports neither MLflow nor torch."""

from __future__ import annotations

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf


BASIC = f"{BasicSweeper.__module__}.{BasicSweeper.__name__}"


def job_overrides(config: DictConfig) -> list[list[str]]:
    """Each job's overrides, as the basic sweeper will split them (a named sweep's params first).

    Read unresolved: an override may hold an interpolation (``dataset.path=${hydra:runtime.cwd}/x``) that only a
    job's config resolves; reading the list resolved stopped every such sweep at its start ("HydraConfig was not set").
    """
    params = config.hydra.sweeper.get("params")
    named = OmegaConf.to_container(params, resolve=False) if params is not None else {}
    task = OmegaConf.to_container(config.hydra.overrides.task, resolve=False)
    # With the config loader, as the basic sweeper parses them: a glob() sweep (precision=glob([fp*])) lists the group's
    # options through it, and without it every such sweep stopped at its start ("ConfigLoader is not set").
    hydra = GlobalHydra.instance()
    parser = OverridesParser.create(config_loader=hydra.config_loader() if hydra.is_initialized() else None)
    parsed = parser.parse_overrides([*(f"{k}={v}" for k, v in named.items()), *task])
    return [list(job) for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def count_jobs(config: DictConfig) -> int | None:
    """How many jobs the basic sweeper will launch: the product of the sweep's value lists.

    None when that cannot be told (another sweeper, an override it cannot parse here).
    """
    if config.hydra.sweeper.get("_target_", BASIC) != BASIC:
        return None  # another sweeper chooses its own jobs (Optuna's trials): no count to hold the sweep to
    try:
        return len(job_overrides(config))
    except Exception:  # a sweep the basic sweeper's rules do not describe: no total, no estimate
        return None
