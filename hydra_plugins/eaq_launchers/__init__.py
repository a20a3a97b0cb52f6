"""eaq's Hydra launchers (Hydra finds launcher plugins only under the ``hydra_plugins`` namespace)."""
