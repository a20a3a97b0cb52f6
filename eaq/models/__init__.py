"""Model loading: hub ids, local folders, packaged weights, or random weights from a config."""

from eaq.models.load import (LoadedModel, load_model, load_tokenizer, model_config, model_skeleton, output_classes,
                             position_limit, resolve_location, weights_identity)

__all__ = ["LoadedModel", "load_model", "load_tokenizer", "model_config", "model_skeleton", "output_classes",
           "position_limit", "resolve_location", "weights_identity"]
