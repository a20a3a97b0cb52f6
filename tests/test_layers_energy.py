"""Layer analysis, energy side: the grouping, replay, attribution and the task=layers run."""

from __future__ import annotations

import csv
import dataclasses
import math
import time
import weakref
from pathlib import Path

import pytest
import torch
import transformers
import yaml
from omegaconf import OmegaConf
from torch import nn
from transformers import (
    AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSequenceClassification, T5Config, T5EncoderModel,
    T5ForSequenceClassification, XLNetConfig, XLNetLMHeadModel,
)

from eaq.config import ModelConfig
from eaq.layers.components import TYPES, Component, find_blocks, find_components, unmeasured
from eaq.errors import DeviceError
from eaq.layers import attribution as attribution_module
from eaq.layers.attribution import OUTSIDE, PassTimes, component_flops, profile_times
from eaq.layers.plan import split_type_savings
from eaq.layers import energy as energy_module
from eaq.layers import replay as replay_module
from eaq.layers.energy import (
    BLOCK_OPS, GRAPH_SLOWER_LIMIT, MODEL_GLUE, ComponentEnergy, Settings, measure_components, measure_passes, without_cache,
    without_full_mask,
)
from eaq.measure.graphs import Step, as_graph
from eaq.layers.replay import TypeReplay, capture, recording_outputs, replay, stubbed
from eaq.models.masks import eager_mask_decisions
from eaq.measure.idle import ReusePolicy, idle_baseline
from eaq.measure.nvml import NvmlSampler
from eaq.measure.samplers import NoSampler, wait_for_sample
from eaq.layers.tables import COMPONENT_COLUMNS, IMPACT_DETAIL_COLUMNS, OUTSIDE_COLUMNS, SAVING_COLUMNS, TYPE_COLUMNS, TYPE_SAVING_COLUMNS, Impacts, component_rows, energy_shares, type_rows
from eaq.metrics import METRIC_NAMES, documented_tag
from conftest import FAST, all_runs, run_eaq, store
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack
from transformers import masking_utils
from fake_nvml import FakeNvml
from eaq.models import load_model

CPU = torch.device("cpu")
CONF = Path(__file__).resolve().parents[1] / "conf"
DISTILBERT_TINY = dict(vocab_size=128, dim=32, n_layers=2, n_heads=2, hidden_dim=64, num_labels=2)


def tiny(kind: str) -> nn.Module:
    """The test presets (conf/model/<kind>.yaml) as eaq loads them, or a DistilBERT-shaped classifier."""
    if kind == "distilbert":
        return AutoModelForSequenceClassification.from_config(AutoConfig.for_model("distilbert", **DISTILBERT_TINY)).eval()
    if kind in HUB_TINY:  # architectures eaq has no preset of, grouped by the same name rules
        return AutoModelForCausalLM.from_config(AutoConfig.for_model(kind, **HUB_TINY[kind])).eval()
    cfg = ModelConfig(**OmegaConf.to_container(OmegaConf.load(CONF / "model" / f"{kind}.yaml")))
    return load_model(cfg, with_tokenizer=False).model


def own_parameters(model: nn.Module) -> list[str]:
    """Names of the modules holding parameters of their own: what the grouping must cover once each."""
    return [n for n, m in model.named_modules() if next(m.parameters(recurse=False), None) is not None]


# Qwen3 normalises queries and keys inside its attention (q_norm, k_norm); OPT keeps fc1/fc2 in the block itself.
HUB_TINY = {
    "qwen3": dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=8),
    "opt": dict(vocab_size=64, hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4, word_embed_proj_dim=32),
    # Low-rank attention with norms inside it (q_a_layernorm, kv_a_layernorm); block 1 a mixture of experts.
    "deepseek_v3": dict(vocab_size=64, hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=4, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=4,
                        qk_nope_head_dim=4, v_head_dim=8, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
                        first_k_dense_replace=1, n_group=1, topk_group=1),
    # Norms inside the attention and FFN that no name rule listed: BitNet's sub-norms before the output projections,
    # StableLM-2's per-head query/key norms (q_layernorm.norms.<head>).
    "bitnet": dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2),
    "stablelm": dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, qk_layernorm=True),
    # A mixture of experts under block_sparse_moe (as in every GraniteMoE variant), not mlp.
    "granitemoe": dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2),
}


@pytest.mark.parametrize("kind", ["bert_tiny_random", "gpt2_tiny_random", "distilbert", *HUB_TINY])
def test_components_cover_every_parameterised_module_once(kind: str) -> None:
    model = tiny(kind)
    components = find_components(model)
    owned = [m for c in components for m in c.modules]
    parameterised = own_parameters(model)
    assert sorted(owned) == sorted(parameterised)  # every one, and none twice
    assert {c.type for c in components} <= set(TYPES)
    blocks = {c.block for c in components if c.block is not None}
    assert blocks == {0, 1}
    for c in components:
        # Each root's parameterised modules are the component's own: calling it runs nothing else.
        assert c.roots, c.name
        for root in c.roots:
            inside = {f"{root}.{n}" if n else root for n in own_parameters(model.get_submodule(root))}
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
    # A query/key norm is part of the attention's forward: the whole attention module stays its one root.
    qwen3 = {c.name: c for c in find_components(tiny("qwen3"))}
    assert qwen3["block.0.attention"].roots == ("model.layers.0.self_attn",)
    assert {"model.layers.0.self_attn.q_norm", "model.layers.0.self_attn.k_norm"} <= set(qwen3["block.0.attention"].modules)
    assert qwen3["block.0.layer_norm"].modules == ("model.layers.0.input_layernorm", "model.layers.0.post_attention_layernorm")
    deepseek = {c.name: c for c in find_components(tiny("deepseek_v3"))}
    for block in (0, 1):
        assert deepseek[f"block.{block}.attention"].roots == (f"model.layers.{block}.self_attn",)
        assert f"model.layers.{block}.self_attn.kv_a_layernorm" in deepseek[f"block.{block}.attention"].modules
        assert deepseek[f"block.{block}.ffn"].roots == (f"model.layers.{block}.mlp",)
    opt = {c.name: c for c in find_components(tiny("opt"))}
    assert opt["block.0.ffn"].roots == ("model.decoder.layers.0.fc1", "model.decoder.layers.0.fc2")
    bert = {c.name: c for c in find_components(tiny("bert_tiny_random"))}
    assert bert["block.0.layer_norm"].modules == ("encoder.layer.0.attention.output.LayerNorm", "encoder.layer.0.output.LayerNorm")
    assert bert["block.0.ffn"].roots == ("encoder.layer.0.intermediate", "encoder.layer.0.output.dense")
    assert bert["head"].modules == ("pooler.dense",)


def test_a_norm_inside_an_attention_or_ffn_module_is_part_of_it_and_a_residual_norm_is_not() -> None:
    """BitNet's attn_sub_norm and ffn_sub_norm and StableLM-2's per-head q_layernorm.norms.<i> were layer norms: the
    attention's (FFN's) roots shrank to its projections, and the rotary embedding and attention product (the
    activation) ran in no component."""
    for kind, norms in (("bitnet", {"attention": ["self_attn.attn_sub_norm"], "ffn": ["mlp.ffn_sub_norm"]}),
                        ("stablelm", {"attention": [f"self_attn.{n}_layernorm.norms.{h}" for n, heads in (("q", 4), ("k", 2))
                                                    for h in range(heads)], "ffn": []})):
        found = {c.name: c for c in find_components(tiny(kind))}
        for block in (0, 1):
            layer = f"model.layers.{block}"
            assert found[f"block.{block}.attention"].roots == (f"{layer}.self_attn",), kind
            assert found[f"block.{block}.ffn"].roots == (f"{layer}.mlp",), kind
            for kind_of, inside in norms.items():
                assert {f"{layer}.{n}" for n in inside} <= set(found[f"block.{block}.{kind_of}"].modules), kind
            assert found[f"block.{block}.layer_norm"].modules == (f"{layer}.input_layernorm", f"{layer}.post_attention_layernorm")
    # ALBERT's attention module holds the residual add and its norm after it, named bare: a layer norm, so the
    # attention's roots stop before the residual add (zeroing the whole module would zero the residual stream).
    albert = AutoModel.from_config(AutoConfig.for_model("albert", vocab_size=64, embedding_size=16, hidden_size=32,
                                                        intermediate_size=64, num_hidden_layers=2, num_attention_heads=4))
    layer = "encoder.albert_layer_groups.0.albert_layers.0"
    found = {c.name: c for c in find_components(albert)}
    assert f"{layer}.attention.LayerNorm" in found["block.0.layer_norm"].modules
    assert f"{layer}.attention" not in found["block.0.attention"].roots


def test_a_mixture_of_experts_under_block_sparse_moe_is_the_ffn() -> None:
    found = {c.name: c for c in find_components(tiny("granitemoe"))}
    assert "other" not in {c.type for c in found.values()}
    ffn = found["block.0.ffn"]
    assert ffn.roots == ("model.layers.0.block_sparse_moe",)  # one branch, router and experts: ablation zeroes it whole
    assert ffn.modules == ("model.layers.0.block_sparse_moe.router", "model.layers.0.block_sparse_moe.experts")


@pytest.mark.parametrize("cls", [T5EncoderModel, T5ForSequenceClassification])
def test_t5s_relative_position_bias_feed_forward_and_head_land_in_their_components(cls: type) -> None:
    """T5 looks its relative position bias up (an Embedding) inside block 0's attention, calls its feed-forward
    DenseReluDense, and its classifier classification_head: rules for embeddings, FFN and head missed all three."""
    model = cls(T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                         num_labels=2)).eval()
    components = find_components(model)
    by_name = {c.name: c for c in components}
    assert sorted(m for c in components for m in c.modules) == sorted(own_parameters(model))
    assert "other" not in {c.type for c in components}
    stack = "transformer.encoder" if cls is T5ForSequenceClassification else "encoder"
    attention = by_name["block.0.attention"]
    assert attention.roots[0] == f"{stack}.block.0.layer.0.SelfAttention"  # one root: the bias lookup is inside it
    assert f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias" in attention.modules
    assert by_name["block.1.ffn"].roots[0] == f"{stack}.block.1.layer.1.DenseReluDense"
    if cls is T5ForSequenceClassification:
        assert by_name["head"].modules == ("classification_head.dense", "classification_head.out_proj")


@pytest.mark.parametrize("model_type, cls, head", [
    ("gpt_neox_japanese", "GPTNeoXJapaneseForCausalLM", ["embed_out"]),  # was embeddings: "embed" in its name
    ("biogpt", "BioGptForCausalLM", ["output_projection"]),
    ("trocr", "TrOCRForCausalLM", ["output_projection"]),
    ("whisper", "WhisperForCausalLM", ["proj_out"]),
    ("xlm", "XLMWithLMHeadModel", ["pred_layer.proj"]),
    ("xlm", "XLMForSequenceClassification", ["sequence_summary.summary"]),
    ("xlnet", "XLNetForSequenceClassification", ["logits_proj", "sequence_summary.summary"]),
    ("electra", "ElectraForCausalLM", ["generator_lm_head", "generator_predictions.dense",
                                       "generator_predictions.LayerNorm"]),
    ("opt", "OPTForCausalLM", ["model.decoder.project_out", "lm_head"]),  # OPT-350m's widths: 512 words, 1024 blocks
])
def test_lm_heads_and_classifier_summaries_under_their_own_names_are_the_head(model_type: str, cls: str, head: list[str]) -> None:
    """These heads fell to "other" (and GPT-NeoX-Japanese's to embeddings), so a model had no head component: its LM
    head, often the largest single part of a small LM's energy, was read as unrecognised. Default configurations on the
    meta device: only names and classes matter here."""
    import transformers

    config = transformers.AutoConfig.for_model(model_type, **({"word_embed_proj_dim": 512} if model_type == "opt" else {}))
    with torch.device("meta"):
        model = getattr(transformers, cls)(config)
    components = find_components(model)
    assert sorted(m for c in components for m in c.modules) == sorted(own_parameters(model))
    by_name = {c.name: c for c in components}
    assert sorted(by_name["head"].modules) == sorted(head)
    if model_type == "opt":
        assert "model.decoder.project_in" in by_name["embeddings"].modules
    # XLNet's own mask embedding is a parameter of the model holding every block: "other", as documented.
    assert [c.modules for c in components if c.type == "other"] == ([("transformer",)] if model_type == "xlnet" else [])


def test_mpnets_relative_position_table_outside_attention_is_an_embedding_not_an_ablated_branch() -> None:
    """MPNet (all-mpnet-base-v2) looks its relative position bias up once, in its encoder, outside every attention
    module: it was the block-less component "attention", and its ablation zeroed the position bias as a branch."""
    from transformers import MPNetConfig, MPNetModel

    model = MPNetModel(MPNetConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=64)).eval()
    components = find_components(model)
    assert sorted(m for c in components for m in c.modules) == sorted(own_parameters(model))
    (table,) = [c for c in components if "encoder.relative_attention_bias" in c.modules]
    assert table.type == "embeddings" and table.block is None
    assert all(c.block is not None for c in components if c.type == "attention")


def test_xlms_parallel_lists_give_each_block_its_own_layer_norms() -> None:
    """XLM and FlauBERT keep their stack as parallel lists (attentions, layer_norm1, ffns, layer_norm2): the norms,
    bare numbered layers, were one block-less layer norm of every block's, beside numbered attention and FFN."""
    from transformers import XLMConfig, XLMModel

    model = XLMModel(XLMConfig(vocab_size=64, emb_dim=32, n_layers=3, n_heads=4)).eval()
    components = find_components(model)
    assert sorted(m for c in components for m in c.modules) == sorted(own_parameters(model))
    norms = {c.name: c.modules for c in components if c.type == "layer_norm"}
    assert norms == {"layer_norm": ("layer_norm_emb",),
                     **{f"block.{i}.layer_norm": (f"layer_norm1.{i}", f"layer_norm2.{i}") for i in range(3)}}


BLOCK_ROOTS = {"bert_tiny_random": "encoder.layer", "gpt2_tiny_random": "transformer.h", "distilbert": "distilbert.transformer.layer"}


@pytest.mark.parametrize("kind", list(BLOCK_ROOTS))
def test_a_block_replayed_with_its_components_stubbed_runs_its_own_ops_alone(kind: str) -> None:
    model = tiny(kind)
    batch = _batch(model)
    components = find_components(model)
    blocks = find_blocks(components, model)
    assert [(b.name, b.roots) for b in blocks] == [(f"block.{i}", (f"{BLOCK_ROOTS[kind]}.{i}",)) for i in (0, 1)]
    for block in blocks:  # a block owns exactly the modules of its components
        assert sorted(block.modules) == sorted(m for c in components if c.block == block.block for m in c.modules)
    seen: dict[str, object] = {}
    handles = [model.get_submodule(b.roots[0]).register_forward_hook(lambda _m, _a, out, r=b.name: seen.setdefault(r, out))
               for b in blocks]
    outputs: dict[str, list[object]] = {}
    with recording_outputs(model, [c for c in components if c.block is not None], outputs):
        calls = capture(model, [*components, *blocks], lambda: model(**batch))
    for handle in handles:
        handle.remove()
    with torch.inference_mode():
        whole_ops = _ops(lambda: replay(model, calls[blocks[0].name]))
        with stubbed(model, outputs):
            for block in blocks:  # the block's own ops on its components' real outputs: its real output, exactly
                (replayed,) = replay(model, calls[block.name])
                torch.testing.assert_close(replayed, seen[block.name], rtol=0, atol=0)
            own_ops = _ops(lambda: replay(model, calls[blocks[0].name]))
        # ... and none of its components' work: no matrix product, softmax or normalisation runs.
        work = ("mm", "addmm", "bmm", "softmax", "layer_norm", "scaled_dot_product")
        assert any(w in op for op in whole_ops for w in work)
        assert own_ops and not [op for op in own_ops if any(w in op for w in work)], own_ops
        assert any("add" in op for op in own_ops)  # the residual adds
    # Stubs are removed on exit: the block computes again.
    with torch.inference_mode():
        assert _ops(lambda: replay(model, calls[blocks[0].name])) == whole_ops


def test_cuda_graphs_fall_back_to_eager_off_cuda_and_say_why() -> None:
    calls = []
    step = as_graph(lambda: calls.append(1), CPU, enabled=True)
    assert step.reason == "CUDA graphs need a CUDA device and this run is on cpu"
    step.run()
    assert calls == [1]  # the eager callable itself, not a stand-in
    assert as_graph(lambda: None, CPU, enabled=False).reason == "not asked for"


def test_a_mask_that_masks_nothing_is_dropped_and_the_outputs_stay_the_same() -> None:
    model = tiny("bert_tiny_random")
    batch = _batch(model)
    full = batch | {"attention_mask": torch.ones_like(batch["input_ids"])}
    unmasked = without_full_mask(full)
    assert "attention_mask" not in unmasked and unmasked["input_ids"] is full["input_ids"]
    with torch.inference_mode():
        torch.testing.assert_close(model(**unmasked).last_hidden_state, model(**full).last_hidden_state)
    padded = full | {"attention_mask": full["attention_mask"].clone()}
    padded["attention_mask"][0, -1] = 0
    assert without_full_mask(padded) is padded  # padding: the mask stays


class OpList(TorchDispatchMode):
    """The operations dispatched while active, in order: what two passes run, compared op by op."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def _ops(run: object) -> list[str]:
    with torch.inference_mode(), OpList() as seen:
        run()  # type: ignore[operator]
    return seen.ops


@pytest.fixture
def capturing(monkeypatch: pytest.MonkeyPatch) -> None:
    """As while a CUDA graph is being captured, for transformers (its is_cuda_stream_capturing asks torch)."""
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)


def test_while_capturing_a_pass_given_no_mask_is_not_taken_as_traced(capturing: None) -> None:
    # transformers up to 5.17 asked is_tracing(None) before skipping the mask, true while capturing;
    # is_tracing itself still says so in 5.24 (which asks only for a real mask).
    assert masking_utils.is_tracing(None)
    with eager_mask_decisions():
        assert not masking_utils.is_tracing(None)
        assert masking_utils.is_tracing(torch.ones(2, 8, dtype=torch.bool))  # a given mask is never read on the host
    assert masking_utils.is_tracing(None)  # given back on exit


@pytest.mark.parametrize("kind", ["bert_tiny_random", "gpt2_tiny_random", "distilbert"])
def test_a_pass_captured_by_eaq_runs_the_eager_operations(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The oracle: the operations a forward pass dispatches. A pass given no mask (as task=layers
    # times them) must run the same ones while captured as eagerly; on transformers 5.17 it built
    # a full mask while capturing (the 2026-11-25 H100 diagnostics).
    model = tiny(kind)
    ids = _batch(model)["input_ids"]
    eager = _ops(lambda: model(input_ids=ids))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    if _ops(lambda: model(input_ids=ids)) == eager:  # no guard: what the installed transformers runs while capturing
        pytest.skip(f"transformers {transformers.__version__} takes the eager pass's mask path while capturing "
                    f"{kind}: nothing for eaq's guard to change (5.17, the GPU image's, built a full mask: "
                    "docs/results/2026-11-25-h100-layers)")
    with eager_mask_decisions():
        assert _ops(lambda: model(input_ids=ids)) == eager


def test_every_graph_task_layers_captures_takes_the_eager_mask_decisions(monkeypatch: pytest.MonkeyPatch) -> None:
    # The whole pass, each type's replay and each component alone: what transformers sees while each is captured.
    seen: list[bool] = []

    def fake_capture(fn, device, enabled):  # type: ignore[no-untyped-def]
        with monkeypatch.context() as capture_now:
            capture_now.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
            seen.append(masking_utils.is_tracing(None))
        return Step(fn, "test double")

    monkeypatch.setattr(replay_module, "as_graph", fake_capture)
    model = tiny("gpt2_tiny_random")
    batch = _batch(model)
    components = find_components(model)
    with torch.inference_mode():
        measure_components(model, components, lambda: model(**batch), CPU, NoSampler(reason="none"), SETTINGS, 2)
    blocks = find_blocks(components, model)
    types = {c.type for c in components} | {"block"}
    assert len(seen) == 1 + len(components) + len(blocks) + len(types) and not any(seen)


def test_stubs_leave_a_module_as_they_found_it_even_when_the_replay_fails() -> None:
    model = tiny("gpt2_tiny_random")
    wrapped = model.get_submodule("transformer.h.0.mlp")
    wrapper = wrapped.forward  # an instance-level forward, as a wrapper (accelerate's hooks) sets one
    wrapped.forward = wrapper
    plain = model.get_submodule("transformer.h.0.attn")
    with pytest.raises(RuntimeError, match="replay failed"):
        with stubbed(model, {"transformer.h.0.mlp": ["mlp out"], "transformer.h.0.attn": [("a", None), ("b", None)]}):
            assert wrapped(torch.zeros(1)) == "mlp out"
            assert [plain(None)[0], plain(None)[0], plain(None)[0]] == ["a", "b", "a"]  # in turn, as recorded
            raise RuntimeError("replay failed")
    assert wrapped.__dict__["forward"] is wrapper and "forward" not in plain.__dict__


def _attention_ops(model: nn.Module, batch: dict[str, object]) -> tuple[list[str], list[str]]:
    """The operations of the first attention in the pass, and of its replay on the captured inputs."""
    components = find_components(model)
    attention = next(c for c in components if c.type == "attention")
    root = model.get_submodule(attention.roots[0])
    in_situ: list[OpList] = []
    before = root.register_forward_pre_hook(lambda *_: in_situ.append(OpList().__enter__()))
    after = root.register_forward_hook(lambda *_: in_situ[-1].__exit__(None, None, None))
    with torch.inference_mode():
        model(**batch)
    before.remove()
    after.remove()
    calls = capture(model, components, lambda: model(**batch))
    return in_situ[0].ops, _ops(lambda: replay(model, calls[attention.name][:1]))


def test_without_the_kv_cache_attention_runs_in_the_pass_what_its_replay_runs() -> None:
    # GPT-2 fills a KV cache by default, which replay leaves out: in the pass, attention also copied
    # its keys and values (on the 2026-11-24 H100 run ~0.85 ms per pass, fp8's replay capture 0.92).
    model = tiny("gpt2_tiny_random")
    batch = _batch(model)
    in_situ, replayed = _attention_ops(model, batch)
    assert in_situ != replayed  # the oracle sees the cache's copies
    assert without_cache(model, batch) == batch | {"use_cache": False}
    in_situ, replayed = _attention_ops(model, without_cache(model, batch))
    assert in_situ == replayed
    with torch.inference_mode():  # the same outputs: the cache was never read
        torch.testing.assert_close(model(**without_cache(model, batch)).logits, model(**batch).logits, rtol=0, atol=0)
    distilbert = tiny("distilbert")  # its forward takes no use_cache: left alone
    assert without_cache(distilbert, batch) is batch


@pytest.mark.parametrize("sensor", [True, False])
def test_a_graphed_whole_pass_far_slower_than_its_eager_kernels_makes_the_run_invalid(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, sensor: bool,
) -> None:
    # What hid the mask built only while capturing for a day: DistilBERT's graph 5.18 ms vs 1.87 ms of kernels.
    # Without a sensor (a GPU whose NVML gives no energy) the times compare different computations all the same:
    # the reason was only a warning in the log.
    model = tiny("bert_tiny_random")
    batch = _batch(model)
    forward = lambda: model(**batch)  # noqa: E731
    profiled: list[PassTimes] = []

    def profiling(*args, **kwargs) -> PassTimes:  # type: ignore[no-untyped-def]
        profiled.append(profile_times(*args, **kwargs))
        return profiled[-1]

    def graphed_slowly(fn, device, enabled):  # type: ignore[no-untyped-def]
        if fn is not forward:
            return Step(fn, "test double")
        # "Graphed" (no reason), and slower than the limit allows: it waits the limit times the eager pass's kernels,
        # then runs them. Relative to the profiled time, since a loaded host can stretch that to any length.
        return Step(lambda: (time.sleep(GRAPH_SLOWER_LIMIT * profiled[-1].whole_s), fn()))

    monkeypatch.setattr(energy_module, "profile_times", profiling)
    monkeypatch.setattr(replay_module, "as_graph", graphed_slowly)
    sampler = (NvmlSampler("1234-abcd", interval_s=0.005, nvml=FakeNvml(schedule=[(0.0, 300.0)], update_s=0.005))
               if sensor else NoSampler(reason="none"))
    with torch.inference_mode():
        found = measure_components(model, find_components(model), forward, CPU, sampler, SETTINGS, 2)
    assert found.tags["eaq.valid"] == "false" and ("eaq.energy.reason" in found.tags) is not sensor
    assert f"above {GRAPH_SLOWER_LIMIT}x" in found.tags["eaq.valid.reasons"]
    assert "CUDA graph took" in caplog.text


@pytest.mark.parametrize("parallel", [True, False])
def test_a_block_that_changes_a_stubbed_output_in_place_flags_its_block_ops(parallel: bool) -> None:
    """Falcon's parallel-attention block adds its attention output into its MLP's in place: replayed with the MLP
    stubbed, the stub's recorded tensor grew by one attention output per replay (4.47 after 100, from a scale of
    0.056), and the block-ops window ran on drifting values, untold. Falcon's sequential block adds out of place."""
    from transformers import FalconConfig, FalconForCausalLM

    torch.manual_seed(0)
    model = FalconForCausalLM(FalconConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                           parallel_attn=parallel, new_decoder_architecture=False, bias=True)).eval()
    ids = torch.randint(0, 64, (2, 8))
    with torch.inference_mode():
        found = measure_components(model, find_components(model), lambda: model(input_ids=ids), CPU,
                                   NoSampler(reason="none"), SETTINGS, 2)
    drifted = "a block changed its components' recorded outputs in place" in found.tags.get("eaq.valid.reasons", "")
    assert drifted is parallel and (found.tags.get("eaq.valid") == "false") is parallel


def test_a_profiler_that_sees_no_time_fails_before_any_window_with_what_to_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # What a GPU without CUPTI gives: ranges with no device time. Attribution cannot split by zero time, and the
    # run must say so before it measures, not after its windows.
    model = tiny("bert_tiny_random")
    batch = _batch(model)
    monkeypatch.setattr(attribution_module, "_range_seconds", lambda event, device: 0.0)
    sampler = NvmlSampler("1234-abcd", interval_s=0.005, nvml=FakeNvml(schedule=[(0.0, 300.0)], update_s=0.005))
    with torch.inference_mode(), pytest.raises(DeviceError, match=r"no CPU time for the whole pass on cpu.*CUPTI"):
        measure_components(model, find_components(model), lambda: model(**batch), CPU, sampler, SETTINGS, 2)
    assert not sampler.trace.times  # the sampler never started: no window was measured


class _Wrapped(nn.Module):
    """A block holding one layer and nothing else (a Mamba block of its mixer alone)."""

    def __init__(self) -> None:
        super().__init__()
        self.mixer = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mixer(x)


class _BareLayers(nn.Module):
    """Numbered blocks of one layer each, and a final norm: each block's module is its one component's root. Beside
    them a list of bare projections (Gemma 3n's altup projections), numbered but no blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.projections = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])
        self.layers = nn.ModuleList([_Wrapped() for _ in range(2)])
        self.ln_f = nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = sum(p(x) for p in self.projections)
        for layer in self.layers:
            x = x + layer(x)
        return self.ln_f(x)


class _Containers(nn.Module):
    """A list of projections its forward iterates (Gemma 3n's altup projections), and numbered blocks held by lists
    of layers (Funnel's): neither container is ever called."""

    def __init__(self) -> None:
        super().__init__()
        self.projections = nn.ModuleDict({"up": nn.Linear(8, 8), "down": nn.Linear(8, 8)})
        self.blocks = nn.ModuleList([nn.ModuleList([nn.Linear(8, 8) for _ in range(2)]) for _ in range(2)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = sum(p(x) for p in self.projections.values())
        for block in self.blocks:
            for layer in block:
                x = x + layer(x)
        return x


def test_a_container_is_never_a_root_and_a_block_it_holds_has_its_own_ops_unmeasured_not_zero() -> None:
    """A ModuleList root's hooks never fired: its component had no calls, no time and no energy, unsaid; a block held
    by one recorded its own ops (the residual adds) as 0."""
    model = _Containers()
    x = torch.randn(4, 8)
    components = find_components(model)
    roots = {c.name: c.roots for c in components}
    assert roots == {"other": ("projections.up", "projections.down"), "block.0.other": ("blocks.0.0", "blocks.0.1"),
                     "block.1.other": ("blocks.1.0", "blocks.1.1")}
    assert find_blocks(components, model) == []
    with torch.inference_mode():
        found = measure_components(model, components, lambda: model(x), CPU, NoSampler(reason="test"), SETTINGS, 4)
    assert all(found.times.components[name] > 0 for name in roots)  # every root was called, so timed
    assert found.outside.time_s[BLOCK_OPS] is None
    assert found.tags["eaq.layers.block_ops"].startswith("not measured: block(s) 0, 1 are held by a ModuleList")


def test_a_block_whose_module_is_a_components_root_is_no_block_and_no_range_closes_another() -> None:
    model = _BareLayers()
    x = torch.randn(4, 8)
    components = find_components(model)
    assert [(c.name, c.block, c.roots) for c in components] == [
        ("other", None, ("projections.0", "projections.1")), ("block.0.other", 0, ("layers.0",)),
        ("block.1.other", 1, ("layers.1",)), ("layer_norm", None, ("ln_f",))]
    assert find_blocks(components, model) == []  # nothing runs in them beside their components
    with torch.inference_mode():
        found = measure_components(model, components, lambda: model(x), CPU, NoSampler(reason="test"), SETTINGS, 4)
    assert found.times.blocks == {} and found.outside.time_s[BLOCK_OPS] == 0
    # Two stacks sharing an index: the one whose block is a component's root drops out, the other stays.
    stacks = [Component("block.0.ffn", "ffn", 0, ("encoder.0", "decoder.0.ffn"), ("encoder.0", "decoder.0.ffn")),
              Component("block.0.attention", "attention", 0, ("decoder.0.attn",), ("decoder.0.attn",))]
    holder = nn.Module()
    holder.encoder = nn.ModuleList([nn.Linear(2, 2)])
    holder.decoder = nn.ModuleList([nn.ModuleDict({"ffn": nn.Linear(2, 2), "attn": nn.Linear(2, 2)})])
    assert find_blocks(stacks, holder) == []  # decoder.0, a ModuleDict, is never called
    holder.decoder = nn.ModuleList([nn.Module()])
    holder.decoder[0].ffn, holder.decoder[0].attn = nn.Linear(2, 2), nn.Linear(2, 2)
    assert [b.roots for b in find_blocks(stacks, holder)] == [("decoder.0",)]
    # A block given such a root anyway: its range and the component's nest on the one module, and the block has
    # no op of its own.
    block = Component("block.0", "block", 0, ("layers.0",), ("layers.0",))
    with torch.inference_mode():
        times = profile_times(model, components, lambda: model(x), CPU, passes=2, blocks=[block])
    assert times.blocks == {"block.0": 0.0} and times.components["block.0.other"] > 0


class _OpenRanges(attribution_module.record_function):
    """torch's profiler range, counting those entered and not yet exited."""

    open = 0

    def __enter__(self) -> object:
        type(self).open += 1
        return super().__enter__()

    def __exit__(self, *exc: object) -> None:
        type(self).open -= 1
        super().__exit__(*exc)


def test_a_root_that_raises_leaves_no_flop_counter_on_the_dispatch_stack_and_no_range_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The counter and the ranges were exited by the root's forward hook alone, which a forward that raises never
    reaches: the FLOP counter stayed on torch's dispatch stack, counting every op the process ran after."""
    model = nn.Sequential(nn.Linear(8, 8))
    components = find_components(model)
    wrong = torch.randn(2, 5)  # not 8 features: the Linear raises inside its root
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        component_flops(model, components, lambda: model(wrong))
    assert _get_current_dispatch_mode_stack() == []
    # Profiling: the unprofiled pass and the profiler's warm-up pass run, the first counted pass raises.
    monkeypatch.setattr(attribution_module, "record_function", _OpenRanges)
    inputs = iter([torch.randn(2, 8), torch.randn(2, 8), wrong])
    with torch.inference_mode(), pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        profile_times(model, components, lambda: model(next(inputs)), CPU, passes=2)
    assert _OpenRanges.open == 0
    assert next(inputs, None) is None  # it failed where meant to, in a pass with the component's range open
    # And the counter still counts when nothing fails.
    assert component_flops(model, components, lambda: model(torch.randn(2, 8))) == {"other": 2 * 2 * 8 * 8}


class _WaitsOnTheHost(nn.Module):
    """A layer whose forward waits in Python before its op: host work between ops, as hooks and the profiler's own."""

    def __init__(self, wait_s: float) -> None:
        super().__init__()
        self.wait_s = wait_s
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(self.wait_s)
        return self.fc(x)


def test_on_a_cpu_a_range_counts_the_time_of_its_ops_as_a_gpu_counts_its_kernels() -> None:
    wait_s = 0.2
    model = nn.Sequential(_WaitsOnTheHost(wait_s))
    x = torch.randn(4, 8)
    components = find_components(model)
    with torch.inference_mode():
        times = profile_times(model, components, lambda: model(x), CPU, passes=2)
    # The wait is in the pass's host time, and in no op: neither the component's time nor the whole pass's.
    assert times.host_s >= wait_s
    assert 0 < times.components["block.0.other"] <= times.whole_s < wait_s


def test_on_a_cpu_the_profilers_first_pass_is_not_counted() -> None:
    # The first pass of every profiler session runs the profiler's set-up with its ops: here, work in a range of the
    # model's own in the first profiled pass (the second call: one unprofiled pass runs before the profiler starts).
    model = tiny("bert_tiny_random")
    batch = _batch(model)
    setup_s, calls = 2.0, []  # far above a tiny pass's time on a loaded machine

    def forward() -> object:
        calls.append(None)
        if len(calls) == 2:
            with torch.autograd.profiler.record_function("set-up"):
                time.sleep(setup_s)
        return model(**batch)

    with torch.inference_mode():
        times = profile_times(model, find_components(model), forward, CPU, passes=2)
    assert len(calls) == 4 and times.whole_s < setup_s / 2


def test_on_a_cpu_a_profiled_pass_slower_than_the_windows_is_said(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    # The profiler slows a CPU's ops, so attribution's shares come from a slower pass than the window's: the run says
    # how much slower, and says nothing where it was not.
    model = tiny("bert_tiny_random")
    batch = _batch(model)
    for host_s, said in ((1.0, True), (0.0, False)):  # a second per profiled pass: far slower than this pass's window

        def profiling(*args, host_s: float = host_s, **kwargs) -> PassTimes:  # type: ignore[no-untyped-def]
            return dataclasses.replace(profile_times(*args, **kwargs), host_s=host_s)

        monkeypatch.setattr(energy_module, "profile_times", profiling)
        sampler = NvmlSampler("1234-abcd", interval_s=0.005, nvml=FakeNvml(schedule=[(0.0, 300.0)], update_s=0.005))
        caplog.clear()
        with torch.inference_mode():
            result = measure_components(model, find_components(model), lambda: model(**batch), CPU, sampler, SETTINGS, 2)
        ratio = result.times.host_s / result.whole_s_per_pass
        note = "on a CPU the profiler's bookkeeping with every op"
        assert (note in result.tags.get("eaq.valid.notes", "")) is said and (note in caplog.text) is said
        assert not said or f"({ratio:.2f}x)" in result.tags["eaq.valid.notes"]


def test_unrecognised_modules_are_reported_as_other_not_dropped() -> None:
    model = nn.Sequential()
    model.add_module("proj_in", nn.Linear(4, 4))
    model.add_module("blocks", nn.Sequential(nn.Sequential(nn.Linear(4, 4)), nn.Sequential(nn.Linear(4, 4))))
    model.add_module("adapters", nn.ModuleList([nn.Linear(4, 4)]))  # numbered, a bare layer: no block
    model.add_module("output", nn.ModuleList([nn.Linear(4, 4)]))  # nor an FFN, as a block's "output" is (BERT's)
    components = find_components(model)
    assert [(c.name, c.type, c.modules) for c in components] == [
        ("other", "other", ("proj_in", "adapters.0", "output.0")), ("block.0.other", "other", ("blocks.0.0",)),
        ("block.1.other", "other", ("blocks.1.0",))
    ]


def _batch(model: nn.Module, rows: int = 2, length: int = 8) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (rows, length), generator=generator)
    mask = torch.ones_like(ids)
    mask[0, length // 2 :] = 0  # padding, so a wrong or missing attention mask changes the outputs
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("kind", ["bert_tiny_random", "gpt2_tiny_random", "distilbert"])
def test_replaying_a_component_on_its_captured_input_reproduces_its_output(kind: str) -> None:
    model = tiny(kind)
    batch = _batch(model)
    components = find_components(model)
    seen: dict[str, list[object]] = {}
    handles = [
        model.get_submodule(root).register_forward_hook(lambda _m, _a, out, r=root: seen.setdefault(r, []).append(out))
        for c in components for root in c.roots
    ]
    calls = capture(model, components, lambda: model(**batch))
    for handle in handles:
        handle.remove()
    with torch.inference_mode():
        for c in components:
            assert calls[c.name], c.name
            replayed = replay(model, calls[c.name])
            originals = [seen[call.root].pop(0) for call in calls[c.name]]
            # The same kernels on the same inputs on a CPU: bit for bit.
            torch.testing.assert_close(replayed, originals, rtol=0, atol=0, msg=f"{kind} {c.name}")
        # The mask went along as a kwarg: replaying attention without it gives other outputs.
        attention = next(c for c in components if c.type == "attention")
        call = calls[attention.name][0]
        if call.kwargs.get("attention_mask") is not None:
            unmasked = model.get_submodule(call.root)(*call.args, **(call.kwargs | {"attention_mask": None}))
            assert not torch.equal(unmasked[0], replay(model, [call])[0][0])


SETTINGS = Settings(iters=3, min_window_s=0.3, idle_s=0.2, warmup_iters=2, replay_iters=3, replay_min_s=0.3, profile_passes=2)


def _at_300_w(kind: str) -> tuple[list[Component], ComponentEnergy]:
    """A test preset's components, measured on a GPU at a steady 300 W (the NVML test double):
    every window's energy is 300 W x its time."""
    model = tiny(kind)
    batch = _batch(model)
    components = find_components(model)
    sampler = NvmlSampler("1234-abcd", interval_s=0.005, nvml=FakeNvml(schedule=[(0.0, 300.0)], update_s=0.005))
    with torch.inference_mode():
        return components, measure_components(model, components, lambda: model(**batch), CPU, sampler, SETTINGS, 2)


def test_a_component_no_hook_can_time_alone_has_empty_cells_not_zero_and_no_share() -> None:
    """XLNet's attention keeps its weights on ``rel_attn`` itself, which also holds the block's layer norm: nothing
    times, counts or replays the attention alone, and its cells read 0 ms, 0 mJ, a share of 0 (and its work was
    called the residual adds)."""
    model = XLNetLMHeadModel(XLNetConfig(vocab_size=64, d_model=32, n_layer=2, n_head=4, d_inner=64)).eval()
    components = find_components(model)
    # And "other": the model's own mask embedding, a parameter of ``transformer`` itself, which holds every component.
    assert [c.name for c in components if not c.roots] == ["other", "block.0.attention", "block.1.attention"]
    # Its feed-forward under ``ff`` and LM head ``lm_loss`` fell to "other" by the name rules.
    by_name = {c.name: c for c in components}
    assert by_name["block.1.ffn"].roots == ("transformer.layer.1.ff.layer_1", "transformer.layer.1.ff.layer_2")
    assert "transformer.layer.1.ff.layer_norm" in by_name["block.1.layer_norm"].modules
    assert by_name["head"].modules == ("lm_loss",) and by_name["other"].modules == ("transformer",)
    batch = {"input_ids": _batch(model)["input_ids"]}
    sampler = NvmlSampler("1234-abcd", interval_s=0.005, nvml=FakeNvml(schedule=[(0.0, 300.0)], update_s=0.005))
    with torch.inference_mode():
        found = measure_components(model, components, lambda: model(**batch), CPU, sampler, SETTINGS, 2)
    shares, basis = energy_shares(components, found)
    flops = component_flops(model, components, lambda: model(**batch))
    rows = {r["component"]: r for r in component_rows(components, flops, flops, found, shares, Impacts({}, {}))}
    for name in ("block.0.attention", "block.1.attention"):
        empty = ("flops_per_pass", "time_ms_per_pass", "energy_replay_mj_per_pass", "energy_attribution_mj_per_pass")
        assert [rows[name][column] for column in empty] == [None] * 4 and math.isnan(shares[name])
    measured = [shares[c.name] for c in components if c.roots]
    assert basis == "replay" and sum(measured) == pytest.approx(1.0) and all(share > 0 for share in measured)
    attention = next(t for t in type_rows(list(rows.values()), Impacts({}, {})) if t["type"] == "attention")
    assert attention["energy_replay_mj_per_pass"] is None  # a type of unmeasured components is no sum of zeros


class _ScaledAttention(nn.Module):
    """An attention module with a parameter of its own (a learned output scale) beside its projection and the residual
    stream's norm (named bare, so a layer norm): the module holds two components, so it is no root."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(8))
        self.q = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.q(x) * self.scale)


def test_a_member_under_none_of_its_components_roots_is_said_unmeasured() -> None:
    """The attention's own scale runs in no root: its component is timed by its projection alone, which was unsaid
    (only components with no root at all were named)."""
    model = nn.Module()
    model.layers = nn.ModuleList([nn.Module()])
    model.layers[0].attention = _ScaledAttention()
    by_name = {c.name: c for c in find_components(model)}
    attention = by_name["block.0.attention"]
    assert attention.modules == ("layers.0.attention", "layers.0.attention.q") and attention.roots == ("layers.0.attention.q",)
    assert unmeasured(list(by_name.values())) == {
        "block.0.attention": "layers.0.attention under none of its roots: its figures leave out their own work"}
    xlnet = find_components(XLNetLMHeadModel(XLNetConfig(vocab_size=64, d_model=32, n_layer=2, n_head=4, d_inner=64)))
    assert set(unmeasured(xlnet)) == {"other", "block.0.attention", "block.1.attention"}  # no root: all empty


def test_attribution_sums_to_the_window_energy_and_replay_sees_each_type(monkeypatch: pytest.MonkeyPatch) -> None:
    windows: list[TypeReplay] = []  # each type's replay window, as measure_components got it (called through)
    replay_by_type = energy_module.replay_by_type

    def recording(*args, **kwargs) -> list[TypeReplay]:  # type: ignore[no-untyped-def]
        windows.extend(found := replay_by_type(*args, **kwargs))
        return found

    monkeypatch.setattr(energy_module, "replay_by_type", recording)
    components, found = _at_300_w("bert_tiny_random")
    assert found.whole_j == pytest.approx(300.0 * found.whole_s_per_pass, rel=0.05)
    assert set(found.attribution_j) == {c.name for c in components} | {OUTSIDE}
    assert sum(found.attribution_j.values()) == pytest.approx(found.whole_j, rel=1e-9)
    assert found.attribution_j[OUTSIDE] >= 0
    # Attribution's capture is, by construction, the share of the pass's time inside components (an identity of the
    # method, kept so that a change of the method shows here).
    assert found.metrics["layers_capture_ratio_attribution"] == pytest.approx(found.times.captured, rel=1e-9)
    assert 0 < found.times.captured <= 1
    # Replay: every component measured, positive, and its type's parts sum to 300 W x the replay time per pass.
    assert set(found.replay_j) == {c.name for c in components}
    assert all(j is not None and j > 0 for j in found.replay_j.values())
    # ... and a type's parts sum to the steady 300 W over its window's time per pass (a window's joules not divided by
    # its passes, or by the wrong count, is off by a factor). Not each part against its own replay time: that comes
    # from a timing loop apart from the window, which a loaded CI host stretched 66-fold.
    typed = [w for w in windows if w.type != "block"]
    assert {name for w in typed for name in w.seconds_alone} == set(found.replay_j)
    for window in typed:
        assert sum(found.replay_j[name] for name in window.seconds_alone) == pytest.approx(
            300.0 * window.window.duration_s / window.window.iterations, rel=0.05), window.type
    assert found.metrics["layers_capture_ratio_replay"] > 0
    # The idle baseline is 300 W too: net of idle, the whole window is about nothing.
    assert abs(found.whole_net_j) < 0.1 * found.whole_j
    # With energy measured, shares come from replay and the tables carry both methods.
    shares, basis = energy_shares(components, found)
    assert basis == "replay" and sum(shares.values()) == pytest.approx(1.0)
    params = {c.name: 1 for c in components}
    rows = component_rows(components, params, params, found, shares, Impacts({}, {}))
    assert all(r["energy_replay_mj_per_pass"] > 0 and r["energy_attribution_mj_per_pass"] >= 0 for r in rows)
    assert all(r["sensitivity_impact"] is None and r["ablation_kl"] is None for r in rows)  # not measured: empty
    types = type_rows(rows, Impacts({}, {}))
    assert sum(t["energy_attribution_mj_per_pass"] for t in types) == pytest.approx(
        1e3 * (found.whole_j - found.attribution_j[OUTSIDE]))
    # The work outside components is its own entry: the blocks' own ops (measured) and the model's
    # glue (the remainder) make up exactly attribution's outside share and the profiled time's.
    outside = found.outside
    assert outside.attribution_j[BLOCK_OPS] + outside.attribution_j[MODEL_GLUE] == pytest.approx(found.attribution_j[OUTSIDE])
    assert outside.time_s[BLOCK_OPS] + outside.time_s[MODEL_GLUE] == pytest.approx(
        found.times.whole_s - sum(found.times.components.values()))
    assert outside.time_s[BLOCK_OPS] > 0  # BERT's residual adds run in the block, outside its components' roots
    assert outside.replay_j[BLOCK_OPS] > 0  # replayed alone (components stubbed), not a difference of two windows
    # The glue is what the components and the block ops leave of the whole pass, by replay too.
    assert outside.replay_j[MODEL_GLUE] == pytest.approx(
        found.whole_j - sum(found.replay_j.values()) - outside.replay_j[BLOCK_OPS])
    assert all(v is not None for v in [*outside.replay_j.values(), *outside.replay_net_j.values()])
    # With the blocks' own ops, capture = 1 - glue / whole, a measurement (never 1 by construction).
    assert found.metrics["layers_capture_ratio_replay_with_blocks"] == pytest.approx(
        1 - outside.replay_j[MODEL_GLUE] / found.whole_j)
    assert found.metrics["layers_time_capture_ratio_with_blocks"] > found.times.captured
    assert found.tags["eaq.layers.cuda_graphs"].startswith("off")


def test_attribution_counts_the_blocks_once_and_leaves_the_glue_non_negative() -> None:
    # GPT-2 holds most of its work outside blocks (the LM head, the final norm): the case where the
    # H100 run of 2026-11-24 counted attribution's outside share as a block, giving the blocks the
    # whole pass and the glue minus the head (capture with blocks 1.46).
    components, found = _at_300_w("gpt2_tiny_random")
    times, outside, whole_j = found.times, found.outside, found.whole_j
    beside = sum(times.components[c.name] for c in components if c.block is None)
    assert beside > 0  # the head and the final norm run outside every block
    joules_per_s = whole_j / times.whole_s
    # The blocks' own ops get the blocks' time less their components' (a block's profiled figure), never more.
    assert all(t >= 0 for t in times.blocks.values())
    assert outside.attribution_j[BLOCK_OPS] == pytest.approx(joules_per_s * sum(times.blocks.values()))
    assert outside.attribution_j[MODEL_GLUE] >= -1e-9 * whole_j
    # Attribution splits energy by time: its capture with blocks is the time's, not above 1.
    assert found.metrics["layers_capture_ratio_attribution_with_blocks"] == pytest.approx(
        found.metrics["layers_time_capture_ratio_with_blocks"])
    assert found.metrics["layers_capture_ratio_attribution_with_blocks"] <= 1 + 1e-9


def test_a_reused_idle_baseline_nets_the_windows_as_a_measured_one(tmp_path: Path) -> None:
    # task=layers takes the benchmark's idle store: a baseline measured by the first run, reused by the next.
    model = tiny("bert_tiny_random")
    batch = _batch(model)
    components = find_components(model)
    settings = dataclasses.replace(SETTINGS, idle_s=0.2, idle_store=(tmp_path / "idle.json", ReusePolicy()))
    found = []
    for _ in range(2):
        sampler = NvmlSampler("1234-abcd", interval_s=0.005, nvml=FakeNvml(schedule=[(0.0, 300.0)], update_s=0.005))
        with torch.inference_mode():
            found.append(measure_components(model, components, lambda: model(**batch), CPU, sampler, settings, 2))
    assert found[0].tags["eaq.idle"].startswith("measured in this run") and found[1].tags["eaq.idle"].startswith("reused")
    for run in found:  # idle is 300 W as the load: net of it, the whole window is about nothing
        assert abs(run.whole_net_j) < 0.1 * run.whole_j


def test_layers_reuse_the_idle_baseline_a_benchmark_run_stored(tmp_path: Path) -> None:
    # One mechanism for both tasks (eaq.measure.idle): a baseline stored by an earlier run is reused while it stands.
    fake = FakeNvml(schedule=[(0.0, 300.0)], update_s=0.005)
    sampler = lambda: NvmlSampler("1234-abcd", interval_s=0.005, nvml=fake)  # noqa: E731
    store = (tmp_path / "idle.json", ReusePolicy())
    benchmark_sampler = sampler()
    benchmark_sampler.start()
    try:
        stored, _, tags = idle_baseline(CPU, benchmark_sampler, 0.2, store)
    finally:
        benchmark_sampler.stop()
    assert stored is not None and tags["eaq.idle"].startswith("measured in this run")
    model = tiny("bert_tiny_random")
    batch = _batch(model)
    settings = dataclasses.replace(SETTINGS, idle_store=store)
    with torch.inference_mode():
        found = measure_components(model, find_components(model), lambda: model(**batch), CPU, sampler(), settings, 2)
    assert found.tags["eaq.idle"].startswith("reused") and found.tags["eaq.idle.measured_unix_s"] == f"{stored.measured_unix_s:.3f}"
    fake.temperature_c += 10  # a warmer device: the stored baseline no longer stands, the layers run measures its own
    with torch.inference_mode():
        found = measure_components(model, find_components(model), lambda: model(**batch), CPU, sampler(), settings, 2)
    assert "temperature moved" in found.tags["eaq.idle"]


def test_without_an_energy_sensor_times_are_measured_and_energy_is_unavailable() -> None:
    model = tiny("gpt2_tiny_random")
    batch = _batch(model)
    components = find_components(model)
    with torch.inference_mode():
        found = measure_components(model, components, lambda: model(**batch), CPU, NoSampler(reason="no sensor here"), SETTINGS, 2)
    assert found.whole_j is None and found.tags["eaq.energy"] == "unavailable"
    assert "no sensor here" in found.tags["eaq.energy.reason"]
    assert all(v is None for v in [*found.replay_j.values(), *found.attribution_j.values()])
    assert "layers_capture_ratio_replay" not in found.metrics and "layers_capture_ratio_attribution" not in found.metrics
    assert all(found.times.components[c.name] > 0 for c in components)
    assert found.metrics["layers_whole_model_time_ms"] > 0


def _csv(client, run_id: str, path: str, tmp: Path) -> list[dict[str, str]]:
    local = client.download_artifacts(run_id, path, str(tmp))
    with open(local, newline="") as f:
        return list(csv.DictReader(f))


def test_task_layers_leaves_a_finished_run_with_the_tables_and_metrics(out: Path, tmp_path: Path) -> None:
    done = run_eaq(out, "task=layers", *FAST, "trials.cooldown_s=1")
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = all_runs(out)
    client = store(out)
    assert run.info.status == "FINISHED"
    tags, metrics = run.data.tags, run.data.metrics
    assert metrics["phase_cooldown_s"] >= 1  # the sweep's pause between runs, as the benchmark's (accepted and unheard)
    assert tags["eaq.kind"] == "layers" and tags["eaq.group.layers"] == "default"
    assert run.data.params["task"] == "layers"
    # This CPU has no energy sensor: shares of time, energy unavailable, never 0.
    assert tags["eaq.energy"] == "unavailable" and tags["eaq.layers.share_basis"] == "time"
    assert set(metrics) <= METRIC_NAMES
    assert {f"energy_share_{t}" for t in TYPES} <= METRIC_NAMES
    assert all(map(documented_tag, tags)), [t for t in tags if not documented_tag(t)]
    assert "layers_capture_ratio_replay" not in metrics and metrics["layers_whole_model_time_ms"] > 0
    # layers.cuda_graphs is on by default; on this CPU every window ran eagerly, and the tag says why.
    assert tags["eaq.layers.cuda_graphs"].startswith("eager where not graphed: CUDA graphs need a CUDA device")
    outside = _csv(client, run.info.run_id, "layers/outside.csv", tmp_path)
    assert tuple(outside[0]) == OUTSIDE_COLUMNS and [r["entry"] for r in outside] == ["block_ops", "model_glue"]
    assert all(float(r["time_ms_per_pass"]) != 0 and r["energy_replay_mj_per_pass"] == "" for r in outside)
    assert metrics["layers_block_ops_time_ms"] == pytest.approx(float(outside[0]["time_ms_per_pass"]))
    rows = _csv(client, run.info.run_id, "layers/components.csv", tmp_path)
    assert tuple(rows[0]) == COMPONENT_COLUMNS
    model = tiny("bert_tiny_random")
    parameterised = own_parameters(model)
    listed = [m for r in rows for m in r["modules"].split(";")]
    assert sorted(listed) == sorted(parameterised)  # every parameterised module, once
    assert all(r["energy_replay_mj_per_pass"] == "" and r["energy_attribution_mj_per_pass"] == "" for r in rows)
    assert all(float(r["time_ms_per_pass"]) > 0 for r in rows)
    assert sum(float(r["energy_share"]) for r in rows) == pytest.approx(1.0)
    assert sum(int(r["params"]) for r in rows) == sum(p.numel() for p in model.parameters())
    # Ablation exists for attention and FFN only: a layer norm's cell is empty, not 0.
    assert {r["type"] for r in rows if r["ablation_impact"] != ""} == {"attention", "ffn"}
    # Each change's figures beside its score, empty where the model and data have none: an embedding model has no
    # top-1 to agree on, the shipped sentences no labels or perplexity (filled: test_layers_impact).
    assert any(r["sensitivity_impact"] != "" for r in rows)
    assert all(r[column] == "" for r in rows for column in IMPACT_DETAIL_COLUMNS)
    types = _csv(client, run.info.run_id, "layers/component_types.csv", tmp_path)
    assert tuple(types[0]) == TYPE_COLUMNS
    assert [t["type"] for t in types] == [t for t in TYPES if any(r["type"] == t for r in rows)]
    for t in types:
        assert metrics[f"energy_share_{t['type']}"] == pytest.approx(float(t["energy_share"]))
        for method in ("sensitivity", "ablation"):  # the whole type changed at once, as a metric where measured
            cell = t[f"{method}_impact"]
            assert (f"{method}_impact_{t['type']}" in metrics) == (cell != "")
            assert cell == "" or metrics[f"{method}_impact_{t['type']}"] == pytest.approx(float(cell))
        members = [r for r in rows if r["type"] == t["type"]]
        assert float(t["time_ms_per_pass"]) == pytest.approx(sum(float(r["time_ms_per_pass"]) for r in members))
    correlation = _csv(client, run.info.run_id, "layers/correlation.csv", tmp_path)
    assert {c["scope"] for c in correlation} >= {"all"} and {c["method"] for c in correlation} == {"pearson", "spearman"}
    assert "base:" in Path(client.download_artifacts(run.info.run_id, "layers/plan.yaml", str(tmp_path))).read_text()
    # Its phases account for its wall time as a benchmark's do (the analysis was in none: 0.8 s of 4 s unexplained).
    phases = {k: v for k, v in metrics.items() if k.startswith("phase_")}
    assert {"phase_load_s", "phase_impact_s", "phase_components_s", "phase_artifacts_s", "phase_plan_s"} <= set(phases)
    unexplained = metrics["run_wall_s"] - sum(phases.values()) - metrics["isolation_overhead_s"]
    assert 0 <= unexplained < 0.1 + 0.05 * metrics["run_wall_s"], (unexplained, metrics["run_wall_s"], phases)


def test_task_layers_with_measured_savings_plans_from_both_precisions_costs(out: Path, tmp_path: Path) -> None:
    # Any quality fits: the savings alone decide what is lowered.
    done = run_eaq(out, "task=layers", *FAST, "layers.saving=measured", "layers.budget=impact", "layers.budget_limit=1e9")
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = all_runs(out)
    client = store(out)
    saving = _csv(client, run.info.run_id, "layers/plan_saving.csv", tmp_path)
    components = _csv(client, run.info.run_id, "layers/components.csv", tmp_path)
    assert tuple(saving[0]) == SAVING_COLUMNS and [r["component"] for r in saving] == [r["component"] for r in components]
    assert {r["basis"] for r in saving} == {"time"} and {r["unit"] for r in saving} == {"ms"}  # no sensor on this CPU
    for row in saving:  # both measured, and the saving is their difference
        assert float(row["base_per_pass"]) > 0 and float(row["target_per_pass"]) > 0
        assert float(row["saving_per_pass"]) == pytest.approx(float(row["base_per_pass"]) - float(row["target_per_pass"]))
    plan = yaml.safe_load(Path(client.download_artifacts(run.info.run_id, "layers/plan.yaml", str(tmp_path))).read_text())
    assert plan["meta"]["saving"].startswith("measured")
    # The target's layers per component: those it can lower have some; embeddings and norms, unchanged by it, none.
    layers = {r["type"]: int(r["target_layers"]) for r in saving}
    assert layers["embeddings"] == layers["layer_norm"] == 0 and layers["attention"] > 0 and layers["ffn"] > 0
    # The unchanged components' "savings" are the noise a lowerable one's is read against.
    noise = max(abs(float(r["saving_per_pass"])) for r in saving if not int(r["target_layers"]))
    for row in saving:
        if int(row["target_layers"]):
            assert (row["valid"] == "true") == (abs(float(row["saving_per_pass"])) > noise), (row, noise)
    # Exactly the components with a Linear layer int8 takes (attention, FFN, head) that it made cheaper, beyond the noise.
    cheaper = {r["component"] for r in saving if r["valid"] == "true" and float(r["saving_per_pass"]) > 0}
    assert {r["component"] for r in saving if int(r["target_layers"])} >= cheaper
    assert set(plan["meta"].get("components", [])) == cheaper
    assert bool(plan["layers"]) == bool(cheaper) and (cheaper or "so none is lowered" in plan["meta"]["saving"])
    assert plan["meta"]["saving"] in run.data.tags["eaq.layers.plan"] and "lowerable components cheaper in int8" in plan["meta"]["saving"]
    assert run.data.tags["eaq.layers.saving.energy"] == "unavailable"  # the target's measurement, recorded as such


def test_a_components_measured_saving_within_the_unchanged_components_noise_is_unknown() -> None:
    """layers.saving=measured lowered a component 45.8 ms "cheaper" in int8 beside an unchanged embedding 97.6 ms
    "cheaper" (pure noise), where layers.saving=compiled read such savings against the base's drift."""
    from eaq.layers.tables import told_apart

    layers = {"embeddings": 0, "block.0.layer_norm": 0, "block.0.attention": 4, "block.0.ffn": 2, "block.1.ffn": 2}
    measured = {"embeddings": 0.0976, "block.0.layer_norm": -0.0442, "block.0.attention": 0.1853, "block.0.ffn": 0.0458,
                "block.1.ffn": -0.2671}
    saving, noise = told_apart(layers, measured)
    assert noise == pytest.approx(0.0976)
    assert saving["block.0.attention"] == 0.1853 and saving["block.1.ffn"] == -0.2671  # told apart, either way
    assert math.isnan(saving["block.0.ffn"])
    assert saving["embeddings"] == 0.0976  # unchanged: never a candidate, its figure kept as measured
    # Every component lowerable: no noise to read, each saving as measured.
    assert told_apart({"a": 1}, {"a": 0.001}) == ({"a": 0.001}, None)


def test_a_types_saving_within_the_bases_drift_is_flagged_and_a_larger_one_is_not() -> None:
    """A loaded CPU moved the base pass 81-99.7% between its two windows, and savings of that size chose a plan, its
    rows valid ("not checked (no energy)" without a sensor, "true" with one)."""
    from eaq.layers.energy import PassCost
    from eaq.layers.tables import type_saving_rows

    base = (PassCost(1.0, 10.0), PassCost(1.2, 12.0))  # the base's drift: +0.2 s, +2 J
    rows, basis, saved = type_saving_rows({"ffn": 4, "attention": 8}, base,
                                          {"ffn": PassCost(0.5, 5.0), "attention": PassCost(1.05, 10.5)})
    # attention's 0.5 J is not told apart from the base's 2 J drift: unknown, so no plan lowers it as cheaper.
    assert basis == "compiled_energy" and saved["ffn"] == pytest.approx(6.0) and math.isnan(saved["attention"])
    valid = {row["type"]: row["valid"] for row in rows}
    assert valid["ffn"] == "true"
    assert valid["attention"] == ("its saving (500 mJ per pass) is within the base's drift between its first and last "
                                  "windows (+2000 mJ)")
    rows, basis, _ = type_saving_rows({"ffn": 4}, (PassCost(1.0, None), PassCost(1.2, None)), {"ffn": PassCost(1.15, None)})
    assert basis == "compiled_time" and rows[0]["valid"].startswith("its saving (-50 ms per pass) is within")


def test_task_layers_with_compiled_savings_measures_the_compiled_pass_per_type_lowered(out: Path, tmp_path: Path) -> None:
    # Synthetic ids: an all-ones mask, which the eager analysis's passes drop and the compiled savings' keep.
    done = run_eaq(out, "task=layers", *FAST, "dataset=synthetic", "layers.saving=compiled", "compile_tuning=false",
                   "layers.budget=impact", "layers.budget_limit=1e9")
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = all_runs(out)
    client = store(out)
    by_type = _csv(client, run.info.run_id, "layers/plan_saving_by_type.csv", tmp_path)
    assert tuple(by_type[0]) == TYPE_SAVING_COLUMNS
    # The types with Linear layers int8 takes, each built with exactly those quantized (read from the built model).
    assert {r["type"]: int(r["layers"]) for r in by_type} == {"attention": 8, "ffn": 4, "head": 1}
    assert len({r["base_per_pass"] for r in by_type}) == 1  # one compiled base (first and last window) against each
    for row in by_type:
        assert row["basis"] == "time" and float(row["lowered_per_pass"]) > 0
        # The base measured twice, the change between recorded: finite, and above -1 (a later pass takes some time).
        # How far it moved is the machine's: two tests at once on a 2-core CPU moved it 633-fold.
        # In the row's unit (its message says it so): once in ms, as a ratio.
        drift = float(row["base_drift"])
        assert -float(row["base_per_pass"]) * 2 < drift < math.inf
        assert float(row["saving_per_pass"]) == pytest.approx(float(row["base_per_pass"]) - float(row["lowered_per_pass"]))
        within = abs(float(row["saving_per_pass"])) <= abs(drift)
        assert not within or f"within the base's drift between its first and last windows ({drift:+.4g} ms)" in row["valid"]
        assert row["valid"].startswith("its saving (") == within and (within or row["valid"] == "not checked (no energy)")
    plan = yaml.safe_load(Path(client.download_artifacts(run.info.run_id, "layers/plan.yaml", str(tmp_path))).read_text())
    assert plan["meta"]["saving_basis"] == "compiled_time"
    # The weights it was chosen on, which precision=mixed checks before it applies the plan.
    assert plan["meta"]["model"]["name"] == "bert-tiny-random" and plan["meta"]["model"]["weights"].endswith(", seed 0, drawn on cpu")
    # Lowered: the types compiled cheaper by more than the base's drift (within it, as on a loaded CPU, not told apart).
    saving_types = {r["type"] for r in by_type if float(r["saving_per_pass"]) > 0 and not r["valid"].startswith("its saving (")}
    components = {r["component"]: r["type"] for r in _csv(client, run.info.run_id, "layers/components.csv", tmp_path)}
    # Any quality fits: every component of the types compiled cheaper, and nothing else.
    assert set(plan["meta"].get("components", [])) == {c for c, kind in components.items() if kind in saving_types}
    flagged = [r for r in by_type if r["valid"] != "not checked (no energy)"]
    assert run.data.tags["eaq.layers.saving.valid"] == ("false" if flagged else "not checked (no energy)")
    # The benchmark's pass, its all-ones mask kept; no CUDA graphs on a CPU.
    assert run.data.tags["eaq.layers.saving.pass"] == "compiled; inputs: attention_mask, input_ids"
    assert plan["meta"]["saving_share_estimated"] == pytest.approx(  # a share of the compiled base pass
        sum(float(r["saving_per_pass"]) for r in by_type if r["type"] in saving_types) / float(by_type[0]["base_per_pass"]),
        rel=1e-3) if saving_types else plan["meta"]["saving_share_estimated"] == 0.0
    if unknown := {r["type"] for r in by_type if r["valid"].startswith("its saving (")}:  # counted by component
        told = sum(kind in unknown for kind in components.values())
        assert f"({told} not told apart from the measurements' noise: not lowered)" in plan["meta"]["saving"]


def test_passes_are_built_outside_their_windows_one_at_a_time() -> None:
    built: list[weakref.ref] = []

    def builder(name: str):
        def build():
            assert all(model() is None for model in built)  # every earlier pass (and its model) is gone by now
            time.sleep(0.3)  # a compilation: never inside a window
            model = nn.Linear(8, 8)
            built.append(weakref.ref(model))
            return lambda: model(torch.ones(1, 8))
        return build

    found = measure_passes({name: builder(name) for name in ("base", "lowered", "base again")}, CPU,
                           NoSampler(reason="no sensor here"), SETTINGS)
    assert list(found) == ["base", "lowered", "base again"] and len(built) == 3
    for cost in found.values():  # 0.3 s windows of tiny passes: a build inside one would add 0.1 s or more a pass
        assert cost.seconds < 0.01 and cost.joules is None and cost.reasons == ()


def test_a_types_compiled_saving_is_split_over_its_components_by_their_cost() -> None:
    members = {"ffn": ["f0", "f1"], "attention": ["a0"]}
    split = split_type_savings(members, {"ffn": 3.0, "attention": -1.0}, {"f0": 0.1, "f1": 0.2, "a0": 0.5})
    assert split == pytest.approx({"f0": 1.0, "f1": 2.0, "a0": -1.0})
    assert split_type_savings({"ffn": ["f0", "f1"]}, {"ffn": 2.0}, {"f0": 0.0, "f1": 0.0}) == {"f0": 1.0, "f1": 1.0}


def test_task_layers_measures_savings_only_from_the_plans_base(out: Path) -> None:
    done = run_eaq(out, "task=layers", *FAST, "layers.saving=measured", "precision=fp16")
    assert done.returncode == 2
    # int8 on a CPU lowers from fp32 alone: "(or set layers.base=fp16)", once offered here, was refused next.
    assert "precision=fp16 but the base is fp32; run it with precision=fp32.\n" in done.stderr, done.stderr[-2000:]
    # A target that is the base lowers nothing: every sensitivity 0.
    done = run_eaq(out, "task=layers", *FAST, "layers.base=fp16", "layers.target=fp16", "layers.plan=false")
    assert done.returncode == 2 and "layers.target=fp16 is the base the components are lowered from" in done.stderr
    done = run_eaq(out, "task=layers", *FAST, "layers.saving=mesured")
    assert done.returncode == 2 and "layers.saving='mesured' is not valid: use one of assumed, measured, compiled" in done.stderr


def test_task_layers_in_a_multirun_under_one_parent(out: Path) -> None:
    done = run_eaq(out, "-m", "task=layers", "layers.impact=false", "model=bert_tiny_random,gpt2_tiny_random",
                   "trials=quick", "batch_size=2", "seq_len=16", "isolate=false")
    assert done.returncode == 0, done.stderr[-3000:]
    runs = all_runs(out)
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == 2 and {r.info.status for r in children} == {"FINISHED"}
    assert len({r.data.tags["mlflow.parentRunId"] for r in children}) == 1
    assert {r.data.tags["eaq.kind"] for r in children} == {"layers"}
    gpt2 = next(r for r in children if r.data.params["model.name"] == "gpt2-tiny-random")
    assert gpt2.data.tags["eaq.layers.impact"] == "not measured: layers.impact=false"
    assert gpt2.data.tags["eaq.layers.plan"].startswith("not made: layers.impact=false")  # layers.plan=true, its default
    assert gpt2.data.metrics["energy_share_head"] > 0
    # The sweep's answer on screen: its capture ratios (an empty line stood where a benchmark sweep's table goes).
    shown = done.stdout.split("layer analysis: capture ratio per method", 1)[-1]
    assert "| gpt2-tiny-random-fp32-b2-s16 " in shown and "| time " in shown, done.stdout[-3000:]


def test_task_layers_refuses_a_compiled_model_before_loading(out: Path) -> None:
    done = run_eaq(out, "task=layers", "compile=true", *FAST)
    assert done.returncode == 2
    assert "task=layers hooks and replays the eager model's modules" in done.stderr


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        # An autocast region holds around the whole model only: components replayed alone would run fp32.
        (["precision=amp_bf16"], "outside the autocast region amp_bf16 puts around the whole model"),
        # The format components are lowered to must run for real here, as the run's own precision must.
        # Named by the setting the user wrote, not as "precision=fp8".
        # The formats named are those the setting takes that run here (amp_bf16, fp16 with a plan, the base: refused).
        (["layers.target=fp8"], "layers.target=fp8: precision=fp8 runs on cuda, not on cpu; on cpu it can be int8, "
                                "int8_weight_only."),
        (["layers.target=fp8", "layers.plan=false"], "on cpu it can be int8, int8_weight_only, fp16, bf16."),
        # None computes in a bf16 base here (int8 on the CPU computes in float32): the base that would, named.
        (["layers.target=fp8", "layers.base=bf16"], "on cpu none computes in layers.base=bf16: set layers.base=fp32 for "
                                                    "int8, int8_weight_only."),
        (["layers.target=int9"], "layers.target='int9' is not valid: use one of int8, int8_weight_only, fp8, "
                                 "int4_weight_only, fp32, fp16, bf16."),
        # int8 on the CPU computes with fp32 activations: its layers cannot sit in a bf16 model.
        (["layers.base=bf16"], "int8 on cpu computes with activations in float32, not the base bf16; set layers.base=fp32."),
        # It was accepted and did nothing.
        (["precision.kernel_check=true"], "task=layers records what each layer stores"),
        # Named as set (not Python's None), with an example any model and data can measure.
        (["layers.budget_limit=0.5"], "layers.budget_limit=0.5 without layers.budget: set both (e.g. layers.budget=impact "
                                      "layers.budget_limit=0.01), or neither for the default."),
        (["layers.budget=impact"], "layers.budget=impact without layers.budget_limit: set both"),
    ],
)
def test_task_layers_refuses_what_its_components_cannot_run_before_loading(out: Path, overrides: list[str], message: str) -> None:
    done = run_eaq(out, "task=layers", *overrides, *FAST)
    assert done.returncode == 2 and message in done.stderr, done.stderr[-2000:]
    assert "loaded " not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("overrides", "needs"),
    [
        # Perplexity needs raw text: the shipped sentences are not (the default there is an impact budget).
        # It said "dataset=sample (no labels)": labels are not what perplexity lacks.
        (["model=gpt2_tiny_random", "layers.budget=perplexity_pct", "layers.budget_limit=1"],
         "a causal LM (model.head=causal_lm) on raw text, e.g. dataset=wikitext2; this run has model.head=causal_lm and "
         "dataset=sample (kind text, not raw text)."),
        # Labels alone do not make accuracy: an embedding model on SST-2 has no class to be right about.
        (["model=minilm", "dataset=sst2", "layers.budget=accuracy_points", "layers.budget_limit=0.5"],
         "a sequence classifier (model.head=sequence_classification) on labelled data, e.g. dataset=sst2; this run has "
         "model.head=embedding and dataset=sst2."),
    ],
)
def test_task_layers_refuses_a_budget_its_model_or_data_cannot_measure_before_loading(
        out: Path, overrides: list[str], needs: str) -> None:
    done = run_eaq(out, "task=layers", *overrides, "trials=quick", "batch_size=2", "seq_len=16")
    assert done.returncode == 2, done.stderr[-2000:]
    assert needs in done.stderr and "layers.budget=impact" in done.stderr
    assert "loaded " not in done.stdout + done.stderr


def test_minilm_with_eaqs_linear_classifier_runs_without_a_mask_as_with_an_all_ones_one() -> None:
    # The layers task drops an all-ones mask (graphed and eager passes then take one attention path).
    model = tiny("minilm_sst2")
    ids = torch.randint(1000, 2000, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, model(ids, torch.ones_like(ids)).logits)
        assert list(without_full_mask({"input_ids": ids, "attention_mask": torch.ones_like(ids)})) == ["input_ids"]


def test_minilm_with_eaqs_linear_classifier_groups_its_pooler_and_classifier_as_the_head() -> None:
    model = tiny("minilm_sst2")  # real weights: all-MiniLM-L6-v2 + the shipped SST-2 head
    components = {c.name: c for c in find_components(model)}
    parameterised = own_parameters(model)
    assert sorted(m for c in components.values() for m in c.modules) == sorted(parameterised)
    assert "other" not in {c.type for c in components.values()}
    assert components["head"].modules == ("encoder.pooler.dense", "classifier")
    assert components["head"].roots == ("encoder.pooler", "classifier")
    assert {c.block for c in components.values() if c.block is not None} == set(range(6))
    assert [m for c in components.values() for m in c.modules if m.startswith("encoder.embeddings")] == list(
        components["embeddings"].modules)


def test_an_idle_baseline_is_measured_without_an_energy_counter(tmp_path: Path) -> None:
    # A GPU before Volta (or nvidia-smi) has no counter: the trace's integral is the idle energy, and it needs a
    # sample past the idle window's end.
    fake = FakeNvml(schedule=[(0.0, 120.0)], update_s=0.005, unsupported={"nvmlDeviceGetTotalEnergyConsumption"})
    sampler = NvmlSampler("1234-abcd", interval_s=0.005, nvml=fake)
    sampler.start()
    try:
        wait_for_sample(sampler)  # as a run does: the trace starts before the idle window (a busy CI host starts it late)
        baseline, _, tags = idle_baseline(CPU, sampler, 0.2, None)
    finally:
        sampler.stop()
    assert baseline is not None, tags
    assert baseline.power_w == pytest.approx(120.0, rel=0.05)
