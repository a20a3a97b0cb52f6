"""Timing, memory and energy measurement. Knows nothing of models, MLflow or Hydra.

Import from the submodules (``eaq.measure.window``, ``eaq.measure.samplers``, ...): this
package stays free of imports so that the sampler's polling process, which imports
``eaq.measure.poll_process``, starts without loading torch.
"""
