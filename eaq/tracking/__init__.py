"""MLflow: the store (store.py), one run's lifecycle (run_logger.py), params flattening (flatten.py),
environment, the sweep's callbacks (callbacks.py).

Nothing is imported here: the sweep's Hydra callbacks live in this package and must not pull
MLflow in when Hydra instantiates them (eaq/tracking/callbacks.py).
"""
