"""Layer analysis: where a model's energy goes, component by component, and what each is worth.

components (grouping) -> replay and attribution (energy per component) -> impact,
correlation and a mixed-precision plan. Uses models, precision, measure and evaluate;
knows nothing of MLflow or Hydra (``eaq/tasks/layers.py`` wires it into a run).
"""
