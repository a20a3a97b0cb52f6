"""Read-only views of what MLflow holds: tables of runs. Never imports models."""
