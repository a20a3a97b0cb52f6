"""MLflow: the store, one run's lifecycle, params flattening, environment, sweep callback."""

from eaq.tracking.flatten import config_hash, flatten
from eaq.tracking.run_logger import TrackedRun
from eaq.tracking.store import open_store

__all__ = ["TrackedRun", "config_hash", "flatten", "open_store"]
