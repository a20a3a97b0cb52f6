"""Quality: outputs per model head, drift from the fp32 reference, and that reference's cache."""

from eaq.evaluate.fidelity import accuracy, check_labels, fidelity, generation_agreement
from eaq.evaluate.outputs import collect_outputs
from eaq.evaluate.reference import cached_figures, cached_reference, reference_key, weights_fingerprint

__all__ = ["accuracy", "cached_figures", "cached_reference", "check_labels", "collect_outputs", "fidelity", "generation_agreement",
           "reference_key", "weights_fingerprint"]
