"""Layer analysis, energy side: the grouping, replay, attribution and the task=layers run."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from torch import nn
from transformers import AutoConfig, AutoModelForSequenceClassification

from eaq.config import ModelConfig
from eaq.layers.components import TYPES, find_components
from eaq.models import load_model

CONF = Path(__file__).resolve().parents[1] / "conf"
DISTILBERT_TINY = dict(vocab_size=128, dim=32, n_layers=2, n_heads=2, hidden_dim=64, num_labels=2)


def tiny(kind: str) -> nn.Module:
    """The test presets (conf/model/<kind>.yaml) as eaq loads them, or a DistilBERT-shaped classifier."""
    if kind == "distilbert":
        return AutoModelForSequenceClassification.from_config(AutoConfig.for_model("distilbert", **DISTILBERT_TINY)).eval()
    cfg = ModelConfig(**OmegaConf.to_container(OmegaConf.load(CONF / "model" / f"{kind}.yaml")))
    return load_model(cfg, with_tokenizer=False).model


@pytest.mark.parametrize("kind", ["bert_tiny_random", "gpt2_tiny_random", "distilbert"])
def test_components_cover_every_parameterised_module_once(kind: str) -> None:
    model = tiny(kind)
    components = find_components(model)
    owned = [m for c in components for m in c.modules]
    parameterised = [n for n, m in model.named_modules() if next(m.parameters(recurse=False), None) is not None]
    assert sorted(owned) == sorted(parameterised)  # every one, and none twice
    assert {c.type for c in components} <= set(TYPES)
    blocks = {c.block for c in components if c.block is not None}
    assert blocks == {0, 1}
    for c in components:
        # Each root's parameterised modules are the component's own: calling it runs nothing else.
        assert c.roots, c.name
        for root in c.roots:
            inside = {f"{root}.{n}" if n else root for n, m in model.get_submodule(root).named_modules()
                      if next(m.parameters(recurse=False), None) is not None}
            assert inside <= set(c.modules), (c.name, root)
    by_name = {c.name: c for c in components}
    assert {"embeddings", "head", "block.1.attention", "block.1.ffn", "block.1.layer_norm"} <= set(by_name)
    assert "other" not in {c.type for c in components}


def test_gpt2_and_bert_names_land_where_the_docs_say() -> None:
    gpt2 = {c.name: c for c in find_components(tiny("gpt2_tiny_random"))}
    assert gpt2["block.0.attention"].roots == ("transformer.h.0.attn",)
    assert gpt2["block.0.ffn"].roots == ("transformer.h.0.mlp",)
    assert gpt2["layer_norm"].modules == ("transformer.ln_f",) and gpt2["layer_norm"].block is None
    assert gpt2["head"].modules == ("lm_head",)
    bert = {c.name: c for c in find_components(tiny("bert_tiny_random"))}
    assert bert["block.0.layer_norm"].modules == ("encoder.layer.0.attention.output.LayerNorm", "encoder.layer.0.output.LayerNorm")
    assert bert["block.0.ffn"].roots == ("encoder.layer.0.intermediate", "encoder.layer.0.output.dense")
    assert bert["head"].modules == ("pooler.dense",)


def test_unrecognised_modules_are_reported_as_other_not_dropped() -> None:
    model = nn.Sequential()
    model.add_module("proj_in", nn.Linear(4, 4))
    model.add_module("blocks", nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)))
    components = find_components(model)
    assert [(c.name, c.type, c.modules) for c in components] == [
        ("other", "other", ("proj_in",)), ("block.0.other", "other", ("blocks.0",)), ("block.1.other", "other", ("blocks.1",))
    ]
