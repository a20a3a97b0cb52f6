"""workload=generate: greedy generation as transformers does it, prefill and decode in disjoint windows, per-token figures."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import transformers
from omegaconf import OmegaConf
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import AutoConfig, AutoModelForCausalLM, GPTNeoConfig, PretrainedConfig

from conftest import CONF, all_runs, run_eaq
from eaq.config import ModelConfig
from eaq.errors import ConfigError, EaqError
from eaq.evaluate import generation_agreement
from eaq.measure.energy import PRIMARY_CHANNELS
from eaq.measure.graphs import as_graph
from eaq.measure.nvml import NvmlSampler
from eaq.measure.warmup import warm_up
from eaq.metrics import METRIC_NAMES, documented_tag
from eaq.tasks.benchmark import energy_record
from eaq.models import load_model
from eaq.precision import get_precision
from eaq.precision.proof import decode_bytes_counted, model_size_bytes, routed_experts, stored_bytes_read
from eaq.measure.phases import Phases
from eaq.measure.samplers import wait_for_sample
from eaq.tasks.compile import compile_model
from eaq.workloads.windows import generate_metrics, measure_generate
from eaq.models import position_limit
from eaq.workloads.generate import Decoder, Generator, cache_argument, check_generation
from fake_nvml import FakeNvml

CPU = torch.device("cpu")
PROMPT, NEW = 12, 9


def preset(name: str, **architecture: object) -> torch.nn.Module:
    """A model preset of conf/model as eaq loads it (architecture fields overridden to keep it tiny)."""
    fields = OmegaConf.to_container(OmegaConf.load(CONF / "model" / f"{name}.yaml"))
    fields["architecture"] |= architecture
    return load_model(ModelConfig(**fields), with_tokenizer=False).model.eval()


def prompts(model: torch.nn.Module, batch: int = 3, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, model.config.vocab_size, (batch, PROMPT), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(("name", "parameters"), [("llama_1b_random", 1_100_048_384), ("llama_7b_random", 6_738_415_616)])
def test_the_llama_presets_have_the_parameters_of_the_models_they_copy(name: str, parameters: int) -> None:
    # TinyLlama-1.1B's and Llama-2-7B's counts, on the meta device: shapes without memory.
    fields = OmegaConf.to_container(OmegaConf.load(CONF / "model" / f"{name}.yaml"))
    model = load_model(ModelConfig(**fields), with_tokenizer=False, device=torch.device("meta")).model
    assert sum(p.numel() for p in model.parameters()) == parameters


TINY_LLAMA = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}


# (preset, tied Llama head, precision, the table a step only looks up). GPT-2's token table is its LM head's weight
# (read whole), its position table looked up; Llama's token table is looked up unless tied to the head, and int8
# leaves a tied head tied (in the base dtype: quantized, it would be untied), so the table is read whole there too.
@pytest.mark.parametrize(("name", "tie", "precision", "looked_up"), [
    ("gpt2_tiny_random", False, "fp32", "transformer.wpe"), ("llama_1b_random", False, "fp32", "model.embed_tokens"),
    ("llama_1b_random", True, "fp32", None), ("llama_1b_random", True, "int8", None),
    ("llama_1b_random", False, "int8", "model.embed_tokens"),
])
def test_a_decode_step_reads_every_weight_but_the_embedding_rows_it_does_not_look_up(
    name: str, tie: bool, precision: str, looked_up: str | None
) -> None:
    model = preset(name, **(TINY_LLAMA | {"tie_word_embeddings": tie} if name.startswith("llama") else {}))
    model = get_precision(precision, CPU).apply(model, CPU)
    size = model_size_bytes(model)
    table = model.get_submodule(looked_up).weight if looked_up else None
    for rows in (1, 16):
        expected = size if table is None else size - table.nbytes + rows * table[0].nbytes
        assert stored_bytes_read(model, rows) == expected
        # torch.compile's wrapper holds the same modules (wrapping compiles nothing yet)
        assert stored_bytes_read(compile_model(model, cuda_graphs=False, tuning=False), rows) == expected
    assert stored_bytes_read(model, 10**9) == size  # more rows than a table has: read whole, no more
    with pytest.raises(ValueError, match="at least 1"):
        stored_bytes_read(model, 0)


TINY_MOE = {"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "num_experts_per_tok": 1, "tie_word_embeddings": False}


# (architecture, its own fields, which parameters are routed experts). Qwen2-MoE's shared expert runs for every
# token; GPT-OSS's experts have biases, one row per expert; JetMoE's experts (in its FFN and its attention) are no
# module named experts.
@pytest.mark.parametrize(("architecture", "fields", "routed"), [
    ("mixtral", {"num_local_experts": 4}, ".experts."),
    ("qwen2_moe", {"num_experts": 4, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 64}, ".experts."),
    ("gpt_oss", {"num_local_experts": 4, "head_dim": 8, "layer_types": ["full_attention"] * 2}, ".experts."),
    ("jetmoe", {"num_local_experts": 4, "kv_channels": 8}, "_linear."),
])
def test_a_decode_step_reads_only_the_experts_its_tokens_can_choose(architecture: str, fields: dict, routed: str) -> None:
    """A step of r tokens runs at most min(E, r * k) of a layer's E routed experts: counting all of them put a
    batch-1 step of the H200 run's Mixtral shape (8 experts, top 2) at 1216 MB where it reads 386 MB."""
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(architecture, **(TINY_MOE | fields)))
    experts = sum(p.nbytes for name, p in model.named_parameters() if routed in name)
    table = model.get_input_embeddings().weight
    assert 0 < experts < model_size_bytes(model) and architecture != "qwen2_moe" or any(
        ".shared_expert." in name for name, _ in model.named_parameters())
    for rows, chosen in ((1, 1), (2, 2), (3, 3), (4, 4), (9, 4)):  # k=1 of 4 experts: min(4, rows) read
        expected = model_size_bytes(model) - table.nbytes + rows * table[0].nbytes - experts * (4 - chosen) // 4
        assert stored_bytes_read(model, rows) == expected
    assert "(min(4, batch x 1) of 4 per layer read)" in decode_bytes_counted(model)
    # amp wraps the model (fp32 weights, no config of its own): the same bytes, found through the model inside.
    wrapped = get_precision("amp_bf16", CPU).apply(model, CPU)
    assert stored_bytes_read(wrapped, 1) == stored_bytes_read(model, 1) and decode_bytes_counted(wrapped) == decode_bytes_counted(model)
    model.config.num_experts_per_tok = 2
    assert stored_bytes_read(model, 1) == model_size_bytes(model) - table.nbytes + table[0].nbytes - experts // 2
    # A config naming no experts per token (transformers' own configs validate it as an int): every expert counts.
    unknown = replace(routed_experts(model), per_token=None)
    assert unknown.unread(1) == 0 and unknown.counted().startswith(" (every routed expert: the config names none of num_experts_per_tok, moe_top_k, moe_topk")


def test_experts_found_in_no_stacked_weights_are_read_whole_and_the_tag_says_so() -> None:
    """DBRX keeps each projection's experts in one 2-D weight (E x its hidden size rows): nothing tells a step's
    rows apart, so every byte counts, and the tag says why (not as a model whose experts were left out)."""
    config = AutoConfig.for_model("dbrx", vocab_size=64, d_model=32, n_layers=1, n_heads=4,
                                  attn_config={"kv_n_heads": 2, "rope_theta": 10000.0},
                                  ffn_config={"ffn_hidden_size": 64, "moe_num_experts": 4, "moe_top_k": 1})
    model = AutoModelForCausalLM.from_config(config)
    table = model.get_input_embeddings().weight
    assert stored_bytes_read(model, 1) == model_size_bytes(model) - table.nbytes + table[0].nbytes
    assert "(every routed expert: the config names 4 per layer, but no weights stacked by expert were found)" in (
        decode_bytes_counted(model))
    dense = preset("llama_1b_random", **TINY_LLAMA)
    assert decode_bytes_counted(dense) == "stored weights less the embedding rows a step does not look up, plus the KV cache read"


@pytest.mark.parametrize("static", [False, True], ids=["dynamic-cache", "static-cache"])
@pytest.mark.parametrize("name", ["gpt2_tiny_random", "llama_1b_random"])
@torch.inference_mode()
def test_greedy_fp32_generation_equals_transformers_generate(name: str, static: bool) -> None:
    model = preset(name, **(TINY_LLAMA if name.startswith("llama") else {}))
    ids = prompts(model)
    expected = model.generate(
        ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=NEW, min_new_tokens=NEW, pad_token_id=0
    )[:, PROMPT:]
    tokens = Generator(model, model, model.config, PROMPT, NEW, CPU, static=static).generate(ids)
    assert tokens.shape == (3, NEW)  # exactly the asked number of new tokens
    assert torch.equal(tokens, expected)


@pytest.mark.parametrize(("architecture", "fields"), [
    ("mpt", {"d_model": 32, "n_layers": 2, "n_heads": 4}),
    ("ctrl", {"n_embd": 32, "n_layer": 2, "n_head": 4, "dff": 64}),
    ("xglm", {"d_model": 32, "num_layers": 2, "attention_heads": 4, "ffn_dim": 64}),
])
@torch.inference_mode()
def test_a_model_whose_attention_cannot_read_a_static_cache_is_refused_or_decodes_as_over_a_dynamic_one(
        architecture: str, fields: dict) -> None:
    """Under transformers 4.57 these models' prefill into a StaticCache (compile=true's) ended in a shape error of
    their attention; under 5.x they read one and decode the dynamic cache's tokens."""
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(architecture, vocab_size=64, **fields)).eval()
    ids = prompts(model)
    static = Generator(model, model, model.config, PROMPT, NEW, CPU, static=True)
    try:
        tokens = static.generate(ids)
    except ConfigError as error:
        assert transformers.__version__.startswith("4.")
        assert f"{type(model).__name__} fails to run its prompt into a static KV cache (" in str(error)
        assert str(error).endswith("run it with compile=false (an eager decode over a growing cache).")
    else:
        assert torch.equal(tokens, Generator(model, model, model.config, PROMPT, NEW, CPU).generate(ids))
    # An error the prompt meets in a growing cache too (an id past the vocabulary) is its own, not the static cache's.
    past = ids.clone()
    past[0, 0] = model.config.vocab_size
    with pytest.raises(IndexError):
        static.generate(past)


@torch.inference_mode()
def test_a_model_that_numbers_its_own_positions_generates_what_its_full_forward_picks() -> None:
    """RoBERTa as a decoder counts positions from padding_idx + 1 in its own forward; transformers' generate hands it
    positions from 0 (another model's tokens). eaq passes no positions: each new token is the argmax of the model's
    forward over the whole sequence so far, as recomputing it without a cache picks."""
    config = AutoConfig.for_model("roberta", vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=64, is_decoder=True, max_position_embeddings=PROMPT + NEW + 2)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    ids = prompts(model).clamp(min=2)  # no padding id (1) in the prompt: the model numbers a pad as no position
    sequence = ids
    for _ in range(NEW):
        scores = model(sequence).logits[:, -1]
        scores[:, config.eos_token_id] = float("-inf")  # never chosen, as generate's min_new_tokens masks it
        sequence = torch.cat([sequence, scores.argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(Generator(model, model, model.config, PROMPT, NEW, CPU).generate(ids), sequence[:, PROMPT:])


@torch.inference_mode()
def test_a_generation_may_use_every_position_the_model_has_and_no_more() -> None:
    # The last new token is picked and never fed back: 12 + 9 tokens use positions 0..19 of a 20-position GPT-2.
    model = preset("gpt2_tiny_random", n_positions=PROMPT + NEW - 1)
    for static in (False, True):
        assert Generator(model, model, model.config, PROMPT, NEW, CPU, static=static).generate(prompts(model)).shape == (3, NEW)
    with pytest.raises(ConfigError, match=r"feed the model 21 positions .* it has 20.*at most 21"):
        check_generation(model.config, PROMPT, NEW + 1, static=False, positions=position_limit(model))
    # Rotary positions are computed: a Llama runs past its config's max_position_embeddings, and is not refused there.
    llama = preset("llama_1b_random", num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=PROMPT)
    assert position_limit(llama) is None
    assert Generator(llama, llama, llama.config, PROMPT, NEW, CPU).generate(prompts(llama)).shape == (3, NEW)


@torch.inference_mode()
def test_sliding_window_models_generate_over_a_dynamic_cache_and_refuse_a_static_one() -> None:
    # A sliding-window static cache rolls and counts its length on the host: it cannot be restarted from the
    # prompt's state, so compile=true (a static cache) is refused before any work; a dynamic cache decodes as
    # transformers does, the prompt longer than the window.
    model = preset("llama_1b_random", **TINY_LLAMA, model_type="mistral", sliding_window=PROMPT - 4)
    with pytest.raises(ConfigError, match=r"sliding-window attention layers \(sliding_window=8\).*compile=false"):
        Generator(model, model, model.config, PROMPT, NEW, CPU, static=True)
    ids = prompts(model)
    expected = model.generate(
        ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=NEW, min_new_tokens=NEW, pad_token_id=0
    )[:, PROMPT:]
    generator = Generator(model, model, model.config, PROMPT, NEW, CPU)
    assert torch.equal(generator.generate(ids), expected)
    # The decode steps attend over the window alone, as generate's cache holds it: a cache of every position gave the
    # same tokens (the mask hid the rest) for the work of the whole context. Each restart sets the window back to the
    # prompt's, though the sequence rolled past it.
    window = model.config.sliding_window
    decoder = Decoder(generator, ids)
    for _ in range(3 * decoder.steps):
        decoder.step()
        assert all(layer.keys.shape[-2] < window for layer in decoder.cache.layers)
        assert decoder.done < decoder.steps or torch.equal(decoder.tokens, expected)
    # The bytes a step reads: the window's (window - 1 cached, and the new token), not seq_len + k + 1 positions.
    per_position = decoder.kv_bytes_after_prefill / (window - 1)
    assert decoder.kv_bytes_read_per_step() == pytest.approx(per_position * window)
    assert all(getattr(layer, "is_sliding", False) for layer in decoder.cache.layers)  # the config's layers, as generate's
    # GPT-Neo's local layers are named in attention_layers, which the cache does not read: a static cache decoded
    # other tokens than eager's, measured as if they were the same.
    neo = GPTNeoConfig(num_layers=2, hidden_size=32, num_heads=2, vocab_size=100, max_position_embeddings=64,
                                    attention_types=[[["global", "local"], 1]], window_size=4)
    with pytest.raises(ConfigError, match=r"local attention layers \(config.attention_layers, window_size=4\).*compile=false"):
        check_generation(neo, PROMPT, NEW, static=True)
    check_generation(neo, PROMPT, NEW, static=False)
    check_generation(neo, 3, 2, static=True)  # 4 positions: within the window, local attention is global


@torch.inference_mode()
def test_layers_sharing_another_layers_kv_cache_count_its_bytes_in_a_steps_reads() -> None:
    """Gemma 3n's last layers attend over an earlier layer's keys and values and hold none: the roofline's bytes per
    step left their KV traffic out (4 of 6 layers counted here)."""
    gemma3n = pytest.importorskip("transformers.models.gemma3n")
    config = gemma3n.Gemma3nTextConfig(
        vocab_size=128, vocab_size_per_layer_input=128, hidden_size=32, hidden_size_per_layer_input=8, intermediate_size=64,
        num_hidden_layers=6, num_attention_heads=2, num_key_value_heads=1, head_dim=16, laurel_rank=4, altup_num_inputs=2,
        num_kv_shared_layers=2, activation_sparsity_pattern=[0.0] * 6, sliding_window=64, max_position_embeddings=128,
        layer_types=["sliding_attention", "full_attention"] * 3)
    model = gemma3n.Gemma3nForCausalLM(config).eval()
    ids = prompts(model)
    generator = Generator(model, model, model.config, PROMPT, NEW, CPU)
    decoder = Decoder(generator, ids)
    filled = [layer for layer in decoder.cache.layers if layer.keys is not None and layer.keys.shape[-2]]
    # The last two share layers 2 and 3's: held by the cache and never filled (transformers 5.2x), or not held (5.17).
    assert len(decoder.cache.layers) in (4, 6) and len(filled) == 4
    per_position = filled[0].keys.numel() * filled[0].keys.element_size() * 2 / PROMPT  # every layer alike here
    steps = decoder.steps
    expected = 6 * per_position * sum(PROMPT + k + 1 for k in range(steps)) / steps  # the window (64) never binds
    assert decoder.kv_bytes_read_per_step() == pytest.approx(expected)
    assert decoder.kv_bytes_after_prefill == pytest.approx(4 * per_position * PROMPT)  # what the cache holds: 4 layers'


@torch.inference_mode()
def test_the_generation_configs_end_of_sequence_ids_are_masked_as_generate_masks_them() -> None:
    # Llama-3-Instruct's generation config names <|eot_id|> beside the config's end-of-text: generate masks both.
    model = preset("gpt2_tiny_random")
    ids = prompts(model)
    free = Generator(model, model, model.config, PROMPT, NEW, CPU).generate(ids)
    model.generation_config.eos_token_id = [5, int(free[0, 0])]
    expected = model.generate(
        ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=NEW, min_new_tokens=NEW, pad_token_id=0
    )[:, PROMPT:]
    tokens = Generator(model, model, model.config, PROMPT, NEW, CPU, generation_config=model.generation_config).generate(ids)
    assert torch.equal(tokens, expected) and not torch.equal(tokens, free)


def test_a_model_with_layers_that_are_not_attention_is_refused_naming_them() -> None:
    # A hybrid's convolution layers keep a state no restart to the prompt's KV cache could rewind.
    config = AutoConfig.for_model("lfm2", vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, layer_types=["conv", "full_attention"])
    with pytest.raises(ConfigError, match=r"layers of kind conv \(config.layer_types\).*workload=forward"):
        check_generation(config, PROMPT, NEW, static=False)
    # transformers 4 names a hybrid's attention layers "attention" (GraniteMoE-Hybrid): not named among the others.
    with pytest.raises(ConfigError, match=r"layers of kind (mamba|linear_attention) \(config.layer_types\)"):
        check_generation(PretrainedConfig(layer_types=["attention", "mamba"]), PROMPT, NEW, static=False)


@torch.inference_mode()
def test_a_causal_lm_whose_forward_keeps_all_logits_generates_as_generate_does() -> None:
    """TrOCR's decoder names no logits_to_keep (it takes **kwargs and drops it); Bloom's and BART's under transformers 4
    refused it, which prefill passed to every model: now only to a forward that names it."""
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(
        "trocr", vocab_size=64, d_model=32, decoder_layers=1, decoder_attention_heads=2, decoder_ffn_dim=64)).eval()
    ids = prompts(model)
    expected = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=NEW,
                              min_new_tokens=NEW, pad_token_id=0)[:, PROMPT:]
    generator = Generator(model, model, model.config, PROMPT, NEW, CPU, generation_config=model.generation_config)
    assert generator.keep == {} and torch.equal(generator.generate(ids), expected)
    gpt2 = preset("gpt2_tiny_random")
    assert Generator(gpt2, gpt2, gpt2.config, PROMPT, NEW, CPU).keep == {"logits_to_keep": 1}  # the head scores one position


@pytest.mark.parametrize(("architecture", "fields", "why"), [
    ("rwkv", {"hidden_size": 32, "num_hidden_layers": 2}, r"its forward takes no KV cache \(past_key_values or cache\)"),
    ("openai-gpt", {"n_embd": 32, "n_layer": 1, "n_head": 2}, r"its forward takes no KV cache"),
    # Its forward takes cache_params before transformers 5.2x, a cache it expects of its own kind since.
    ("xlstm", {"hidden_size": 32, "num_hidden_layers": 1, "num_heads": 2},
     r"(its forward takes no KV cache|it keeps its state in a cache of its own kind \('DynamicCache' object)"),
])
def test_a_model_that_keeps_no_kv_cache_is_refused_not_decoded_without_context(architecture: str, fields: dict, why: str) -> None:
    """RWKV and OpenAI-GPT took the cache through **kwargs and dropped it: every decode step ran its one token with no
    prompt (RWKV's tokens matched generate's 31%), measured and logged as generation; xLSTM failed in its forward."""
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(architecture, vocab_size=64, **fields)).eval()
    with pytest.raises(ConfigError, match=f"cannot be measured generating: {why}.*workload=forward"):
        Generator(model, model, model.config, PROMPT, NEW, CPU).generate(prompts(model, batch=1))


@torch.inference_mode()
def test_eos_is_never_chosen_so_every_sequence_has_the_asked_length() -> None:
    model = preset("gpt2_tiny_random")
    ids = prompts(model)
    free = Generator(model, model, model.config, PROMPT, NEW, CPU).generate(ids)
    # Make the token greedy decoding picks first the model's end-of-sequence token: it must be passed over.
    model.config.eos_token_id = int(free[0, 0])
    tokens = Generator(model, model, model.config, PROMPT, NEW, CPU).generate(ids)
    assert tokens.shape == (3, NEW) and not (tokens == model.config.eos_token_id).any()


@pytest.mark.parametrize("static", [False, True], ids=["dynamic-cache", "static-cache"])
@torch.inference_mode()
def test_decode_restarts_from_the_same_prefilled_state(static: bool) -> None:
    model = preset("gpt2_tiny_random")
    ids = prompts(model)
    generator = Generator(model, model, model.config, PROMPT, NEW, CPU, static=static)
    once = generator.generate(ids)
    decoder = Decoder(generator, ids)
    for _ in range(3 * decoder.steps + 4):  # three whole sequences and part of a fourth
        decoder.step()
    decoder.restart()
    for _ in range(decoder.steps):
        decoder.step()
    assert torch.equal(decoder.tokens, once)


def test_generation_agreement_counts_matches_and_the_first_divergence() -> None:
    reference = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    tokens = torch.tensor([[1, 2, 9, 4], [5, 6, 7, 8]])
    assert generation_agreement(tokens, reference) == {
        "quality_generated_match_rate": 7 / 8,
        "quality_first_divergence_mean_tokens": (2 + 4) / 2,
        "quality_first_divergence_min_tokens": 2,
    }


class Recorder(torch.nn.Module):
    """Calls a model and records when each call started and ended (perf_counter, the windows' clock), and the type of
    the KV cache it was given: a wrapper, as amp's, whose model inside names the cache argument."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model, self.calls, self.caches = model, [], []

    def forward(self, **kwargs: object) -> object:
        start = time.perf_counter()
        out = self.model(**kwargs)
        self.calls.append((start, time.perf_counter()))
        self.caches.append(type(kwargs[cache_argument(self.model)]).__name__)
        return out


@pytest.mark.parametrize("static", [False, True], ids=["dynamic-cache", "static-cache"])
@torch.inference_mode()
def test_prefill_and_decode_windows_are_disjoint_cover_the_work_and_give_consistent_per_token_figures(static: bool) -> None:
    model = preset("gpt2_tiny_random")
    batch, update_s, watts, min_window_s = 2, 0.005, 300.0, 0.5
    prefill, decode = Recorder(model), Recorder(model)
    generator = Generator(prefill, decode, model.config, PROMPT, NEW, CPU, static=static)
    batches = [prompts(model, batch, seed) for seed in range(2)]
    sampler = NvmlSampler("1234-abcd", interval_s=update_s, nvml=FakeNvml(schedule=[(0.0, watts)], update_s=update_s))
    sampler.start()
    try:
        def warm(run: object, inputs: list) -> object:
            return warm_up(run, inputs, CPU, 2, settle=False)

        # As the benchmark does: the trace holds a sample before the first window and after the last, whatever
        # the machine's load delays the poller by (the trace's integrals need a sample on either side).
        wait_for_sample(sampler)
        w = measure_generate(generator, batches, CPU, sampler, iters=3, min_window_s=min_window_s, warm_up=warm, phases=Phases())
        wait_for_sample(sampler)
    finally:
        trace = sampler.stop()
    p, d = w.prefill, w.decode
    assert p.t1 <= d.t0  # disjoint, prefill first
    assert w.start_unix_s == p.start_unix_s < d.start_unix_s  # the idle baseline's age counts to the first window
    # Every timed prefill runs into a fresh dynamic cache, as the README says, a compiled run's (static=True) too:
    # its fresh static cache allocated and zeroed a whole-length buffer per layer inside each timed prefill.
    timed = [cache for call, cache in zip(prefill.calls, prefill.caches) if p.t0 <= call[0] and call[1] <= p.t1]
    assert timed and set(timed) == {"DynamicCache"}
    assert set(decode.caches) == {"StaticCache" if static else "DynamicCache"}
    inside = lambda calls, win: [c for c in calls if win.t0 <= c[0] and c[1] <= win.t1]  # noqa: E731
    straddling = [c for c in prefill.calls + decode.calls for win in (p, d) if c[0] < win.t0 < c[1] or c[0] < win.t1 < c[1]]
    assert not straddling
    # Each window holds exactly its own work: every prefill of the prefill window, every decode
    # step of the decode window, and nothing of the other.
    assert len(inside(prefill.calls, p)) == p.iterations == len(w.prefill_latencies) >= 3
    assert len(inside(decode.calls, d)) == d.iterations == len(w.decode_latencies)
    assert not inside(prefill.calls, d) and not inside(decode.calls, p)
    # Whole sequences of new_tokens - 1 decode steps, each restarting from the same prefilled cache.
    assert d.iterations % (NEW - 1) == 0 and d.duration_s >= min_window_s
    # Before the window, the warm-up ran every position of a dynamic cache once at least (a new cache length's setup
    # stays out of it; a static cache has one shape), though the warm-up itself was asked for 2 steps; the metrics
    # count those steps.
    between = [c for c in decode.calls if p.t1 <= c[0] and c[1] <= d.t0]
    assert len(between) >= (2 if static else NEW - 1) and w.warmups[1].iterations == len(between)
    assert torch.equal(w.decoder.tokens, Generator(model, model, model.config, PROMPT, NEW, CPU).generate(batches[0]))
    # Per-call latencies fit inside their windows.
    assert sum(w.prefill_latencies) <= p.duration_s and sum(w.decode_latencies) <= d.duration_s

    metrics, energy, validity = generate_metrics(w, batch, sampler.name, trace, watts, min_window_s)
    assert set(metrics) <= METRIC_NAMES
    # Settling (not asked here): the run's verdict is both warm-ups', a prefill still moving as much as a decode.
    assert w.settled is None
    prefill_moving = replace(w, warmups=(replace(w.warmups[0], settled=False), replace(w.warmups[1], settled=True)))
    assert prefill_moving.settled is False and replace(prefill_moving, warmups=(w.warmups[1], w.warmups[1])).settled is None
    assert replace(w, warmups=(replace(w.warmups[0], settled=True),) * 2).settled is True
    # A prefill window the sensor missed (no counter, no trace over it) beside a measured decode: invalid, not half.
    blind = replace(w, prefill=replace(w.prefill, counter_j=(None, None), t0=trace.times[0] - 2, t1=trace.times[0] - 1))
    assert any(r.startswith("prefill: energy unavailable") for r in generate_metrics(blind, batch, sampler.name, trace, watts, min_window_s)[2].reasons)
    # A prefill window whose counter did not move (energy from the trace) beside a decode read from the counter: the
    # run's energy tags are the decode window's, so the prefill's source and note are said among the run's notes.
    still = replace(w, prefill=replace(w.prefill, counter_j=(5.0, 5.0)))
    notes = generate_metrics(still, batch, sampler.name, trace, watts, min_window_s)[2].notes
    assert any(n.startswith("prefill: the energy counter did not move") for n in notes), notes
    assert any(n.startswith("prefill: energy from ") and "the decode window's from energy_counter" in n for n in notes), notes
    assert not any(n.startswith("prefill:") for n in validity.notes)  # both from the counter: nothing to say
    # The other way round, the run's energy (the decode window's) unavailable beside a measured prefill, its figures
    # logged: the run carries a verdict, invalid, not none (which the report counted as valid).
    deaf = replace(w, decode=replace(w.decode, counter_j=(None, None), t0=trace.times[-1] + 1, t1=trace.times[-1] + 2))
    deaf_metrics, deaf_energy, deaf_validity = generate_metrics(deaf, batch, sampler.name, trace, watts, min_window_s)
    tags, figures = energy_record(deaf_energy, deaf_validity)
    assert deaf_energy.energy_j is None and "prefill_energy_total_j" in deaf_metrics
    assert tags["eaq.valid"] == "false" and "decode: energy unavailable" in tags["eaq.valid.reasons"] and figures["valid"] == 0.0
    assert energy_record(replace(deaf_energy), replace(deaf_validity, reasons=()))[0].keys() == {"eaq.energy.reason"}
    # Each window keeps the whole energy block of a forward window: power spread and the trace's cross-check.
    for window in ("prefill", "decode"):
        assert {f"{window}_power_std_w", f"{window}_power_max_w", f"{window}_energy_instant_integral_j", f"{window}_energy_net_j"} <= set(metrics)
    assert metrics["time_per_output_token_p90_ms"] <= metrics["time_per_output_token_p99_ms"]
    tokens = d.iterations * batch
    assert metrics["decode_tokens_per_s"] == pytest.approx(tokens / d.duration_s)
    assert metrics["prefill_tokens_per_s"] == pytest.approx(p.iterations * batch * PROMPT / p.duration_s)
    assert metrics["time_per_output_token_mean_ms"] == pytest.approx(1e3 * sum(w.decode_latencies) / d.iterations)
    # Per-token and per-prefill energy are their window's counter delta divided by the work in it ...
    assert energy.source == "energy_counter" and energy.energy_j == metrics["decode_energy_total_j"]
    assert metrics["decode_energy_per_token_mj"] == pytest.approx(1e3 * metrics["decode_energy_total_j"] / tokens)
    assert metrics["prefill_energy_per_prefill_mj"] == pytest.approx(1e3 * metrics["prefill_energy_total_j"] / p.iterations)
    assert metrics["decode_tokens_per_j"] == pytest.approx(tokens / metrics["decode_energy_total_j"])
    # ... and that delta is the fake GPU's power times the window, to the counter's resolution
    # (one update at each end).
    for total, window in ((metrics["decode_energy_total_j"], d), (metrics["prefill_energy_total_j"], p)):
        assert abs(total - watts * window.duration_s) <= 2 * watts * update_s
    # Idle at the same 300 W: net of idle, decode added about nothing.
    assert abs(metrics["decode_energy_net_per_token_mj"]) * tokens / 1e3 <= 2 * watts * update_s
    assert validity.facts and all(not r.startswith(("prefill: window", "decode: window")) for r in validity.reasons)
    # What each window's check read is logged: the decode window's under the forward pass's names, the prefill's
    # as prefill_<name> (each counts its own window's sensor updates, about its duration over the update period).
    assert set(validity.facts) <= METRIC_NAMES
    # Counted on the trace over that window alone (a loaded machine's poller misses updates, so not a fixed count),
    # and never more than the sensor gave in it: the whole trace's count would be.
    primary = next(channel for channel in PRIMARY_CHANNELS if channel in trace.channels)
    for name, window in (("prefill_sensor_updates", p), ("sensor_updates", d)):
        assert validity.facts[name] == trace.updates(primary, window.t0, window.t1) > 0
        assert validity.facts[name] <= window.duration_s / update_s + 2
    assert validity.facts["prefill_poll_coverage"] > 0 and validity.facts["poll_coverage"] > 0


def test_generate_runs_every_precision_path_from_the_cli_with_quality_against_fp32(out: Path) -> None:
    args = ["model=gpt2_tiny_random", "workload=generate", "workload.new_tokens=6", "dataset=wikitext2", "dataset.max_samples=4",
            "trials=quick", "trials.roofline=true", "batch_size=2", "seq_len=16", "isolate=false"]
    done = run_eaq(out, "-m", "precision=fp32,int8", *args)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = {r.data.tags["eaq.group.precision"]: r for r in all_runs(out) if "eaq.group.precision" in r.data.tags}
    assert {r.info.status for r in runs.values()} == {"FINISHED"}
    fp32, int8 = runs["fp32"].data, runs["int8"].data
    assert runs["int8"].info.run_name == "gpt2-tiny-random-int8-gen6-b2-t1"
    assert fp32.tags["eaq.workload"] == "generate"
    assert fp32.metrics["quality_generated_match_rate"] == 1.0 and fp32.metrics["quality_first_divergence_min_tokens"] == 6
    assert 0 <= int8.metrics["quality_generated_match_rate"] <= 1 and "quality_perplexity" in int8.metrics
    assert int8.metrics["quantized_linear_layers"] > 0
    for m in (fp32.metrics, int8.metrics):
        assert m["decode_window_iterations"] % 5 == 0 and m["decode_window_iterations"] >= 5
        assert m["decode_tokens_per_s"] == pytest.approx(m["decode_window_iterations"] * 2 / m["decode_window_duration_s"])
        assert m["peak_bandwidth_gb_per_s"] > 0
        assert m["decode_bandwidth_fraction"] == pytest.approx(m["decode_bandwidth_limit_ms"] / m["time_per_output_token_mean_ms"])
    for run in runs.values():  # both windows placed: the prefill's, then the decode's (the trace's origin)
        tags = run.data.tags
        start, end = float(tags["eaq.prefill_window.start_unix_s"]), float(tags["eaq.prefill_window.end_unix_s"])
        assert start < end <= float(tags["eaq.window.start_unix_s"]) < float(tags["eaq.window.end_unix_s"])
        assert end - start == pytest.approx(run.data.metrics["prefill_window_duration_s"], abs=2e-3)
    # The decode roofline: the weights a step reads (2 rows of the position table, not all of it) plus a KV cache
    # of at most 2 layers x (key, value) x 2 prompts x (16 + 6) positions x 64 fp32 values.
    for name, run in runs.items():
        weights = stored_bytes_read(get_precision(name, CPU).apply(preset("gpt2_tiny_random"), CPU), 2)
        assert 0 < run.data.metrics["decode_bytes_per_step_mb"] * 1e6 - weights <= 2 * 2 * 2 * (16 + 6) * 64 * 4
        assert run.data.tags["eaq.roofline.decode_bytes"].startswith("stored weights less the embedding rows")
        assert all(map(documented_tag, run.data.tags)), [t for t in run.data.tags if not documented_tag(t)]
    assert "TTFT" in done.stderr + done.stdout and "ms/token" in done.stderr + done.stdout


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model=bert_tiny_random"], "workload=generate needs a causal LM and model.name=bert-tiny-random has head=embedding"),
        (["model=gpt2_tiny_random", "dataset=sample"], "use dataset=wikitext2 (real text; your own as one stream: dataset=wikitext2 dataset.path=FILE) or dataset=synthetic"),
        (["model=gpt2_tiny_random", "dataset=synthetic", "workload.new_tokens=1"], "leaves no decode step"),
        (["model=gpt2_tiny_random", "dataset=synthetic", "seq_len=500", "workload.new_tokens=20"], "at most 513"),
        (["model=gpt2_tiny_random", "dataset=wikitext2", "dataset.path={short}", "seq_len=64"],
         "dataset=wikitext2 holds 5 tokens, fewer than one prompt of seq_len=64: lower seq_len to at most 5"),
    ],
)
def test_generate_refuses_what_it_cannot_measure_with_a_sentence(
    out: Path, tmp_path: Path, overrides: list[str], message: str
) -> None:
    short = tmp_path / "short.txt"
    short.write_text("a text of five words")  # five tokens of MiniLM's vocabulary
    done = run_eaq(out, "workload=generate", "trials=quick", "isolate=false", "batch_size=1", *(o.format(short=short) for o in overrides))
    assert done.returncode == 2 and message in done.stderr, done.stderr[-2000:]
    assert "loaded " not in done.stdout + done.stderr  # each refused before the weights load (a 7B's take minutes)


def test_generate_refuses_from_the_config_before_reading_a_weight(out: Path, tmp_path: Path) -> None:
    # A folder with the config and no weights: the refusal is the config's (a 7B's weights take minutes to read or
    # draw), where the load would fail on the missing weights file.
    folder = tmp_path / "config-only"
    preset("gpt2_tiny_random").config.save_pretrained(folder)
    done = run_eaq(out, "workload=generate", "trials=quick", "isolate=false", "batch_size=1", "model=gpt2_tiny_random",
                   "model.weights=pretrained", f"model.name_or_path={folder}", "dataset=synthetic", "seq_len=500",
                   "workload.new_tokens=20")
    assert done.returncode == 2 and "feed the model 519 positions" in done.stderr and "at most 513" in done.stderr, done.stderr[-2000:]


def test_a_generation_config_edited_beside_the_weights_gets_a_new_generated_reference(out: Path, tmp_path: Path) -> None:
    # Its end ids are never chosen, so they change the fp32 model's tokens; they are not in the weights' fingerprint.
    folder = tmp_path / "gpt2"
    AutoModelForCausalLM.from_config(preset("gpt2_tiny_random").config).save_pretrained(folder)  # Conv1D, as saved
    common = ["workload=generate", "workload.new_tokens=4", "trials=quick", "isolate=false", "batch_size=1", "seq_len=8",
              "model=gpt2_tiny_random", "model.weights=pretrained", f"model.name_or_path={folder}", "dataset=synthetic",
              "trials.fidelity_on_synthetic=true", "dataset.max_samples=1"]
    assert run_eaq(out, *common).returncode == 0
    config = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps(config | {"eos_token_id": [5]}))
    second = run_eaq(out, *common)
    assert second.returncode == 0, second.stderr[-2000:]
    assert len(list((out / "cache").glob("fp32-reference-*"))) == 3  # one forward reference, two generated ones


@torch.inference_mode()
def test_compiled_decode_over_a_static_cache_generates_the_eager_tokens() -> None:
    model = preset("gpt2_tiny_random")
    ids = prompts(model, batch=2)
    eager = Generator(model, model, model.config, PROMPT, NEW, CPU).generate(ids)
    compiled = Generator(model, compile_model(model, cuda_graphs=False, tuning=False), model.config, PROMPT, NEW, CPU, static=True)
    decoder = Decoder(compiled, ids)
    for _ in range(2 * decoder.steps):  # two sequences: the second starts from the rewound static cache
        decoder.step()
    assert torch.equal(decoder.tokens, eager)


class ScalarReads(TorchDispatchMode):
    """Counts tensor-to-Python reads (``.item()``, ``bool(t)``, ``nonzero``), each a host sync on a GPU."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        reads = (torch.ops.aten.item.default, torch.ops.aten._local_scalar_dense.default, torch.ops.aten.is_nonzero.default,
                 torch.ops.aten.nonzero.default)
        if func in reads:
            self.reads.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("static", [False, True], ids=["dynamic-cache", "static-cache"])
@pytest.mark.parametrize("name", ["gpt2_tiny_random", "llama_1b_random"])
@torch.inference_mode()
def test_prefill_and_decode_steps_read_nothing_back_to_the_host(name: str, static: bool) -> None:
    model = preset(name, **(TINY_LLAMA if name.startswith("llama") else {}))
    generator = Generator(model, model, model.config, PROMPT, NEW, CPU, static=static)
    decoder = Decoder(generator, prompts(model))
    with ScalarReads() as seen:
        generator.prefill(prompts(model))
        for _ in range(2 * decoder.steps + 1):  # across a restart too
            decoder.step()
    assert seen.reads == []


class OpLog(TorchDispatchMode):
    """Every op a call dispatches, with what a CUDA graph would freeze of it: shapes and Python arguments."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, tuple[object, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        frozen = torch.utils._pytree.tree_map(lambda a: ("tensor", tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a,
                                              (args, kwargs or {}))
        self.ops.append((str(func), frozen))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", ["gpt2_tiny_random", "llama_1b_random"])
@torch.inference_mode()
def test_a_decode_step_dispatches_the_same_ops_with_the_same_python_arguments_at_every_position(name: str) -> None:
    # A CUDA graph records one step's kernels with their arguments and replays them unchanged:
    # the step is correct on every replay only if nothing in it depends on which step it is,
    # except through tensors it updates in place (the position, the token, the cache).
    model = preset(name, **(TINY_LLAMA if name.startswith("llama") else {}))
    decoder = Decoder(Generator(model, model, model.config, PROMPT, NEW, CPU, static=True), prompts(model))
    logs = []
    for _ in range(decoder.steps):
        with OpLog() as log:
            decoder.advance()
        logs.append(log.ops)
    assert logs[0] and all(ops == logs[0] for ops in logs[1:])


@pytest.mark.parametrize("name", ["gpt2_tiny_random", "llama_1b_random"])
@torch.inference_mode()
def test_the_recordable_step_cycled_over_restarts_generates_the_tokens_of_transformers_generate(name: str) -> None:
    model = preset(name, **(TINY_LLAMA if name.startswith("llama") else {}))
    ids = prompts(model)
    expected = model.generate(
        ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=NEW, min_new_tokens=NEW, pad_token_id=0
    )[:, PROMPT:]
    decoder = Decoder(Generator(model, model, model.config, PROMPT, NEW, CPU, static=True), ids)
    decoder.advance()  # a recording's stray call: replay_with starts from the prefilled state again
    decoder.replay_with(decoder.advance)  # what measure_generate does where no graph can be recorded
    for sequence in range(3):
        for _ in range(decoder.steps):
            decoder.step()
        assert torch.equal(decoder.tokens, expected), f"sequence {sequence + 1}"


def test_a_recorded_step_needs_a_static_cache() -> None:
    model = preset("gpt2_tiny_random")
    decoder = Decoder(Generator(model, model, model.config, PROMPT, NEW, CPU), prompts(model))
    with pytest.raises(ValueError, match="needs a StaticCache"):
        decoder.replay_with(decoder.advance)


@torch.inference_mode()
def test_measure_generate_fails_when_the_decode_graph_cannot_be_recorded_and_says_why_it_ran_without() -> None:
    model = preset("gpt2_tiny_random")
    generator = Generator(model, model, model.config, PROMPT, NEW, CPU, static=True)
    batches = [prompts(model, 2)]
    warm = lambda run, inputs: warm_up(run, inputs, CPU, 2, settle=False)  # noqa: E731
    sampler = NvmlSampler("1234-abcd", interval_s=0.005, nvml=FakeNvml(schedule=[(0.0, 100.0)], update_s=0.005))
    sampler.start()
    try:
        # Asked for and not recordable (here: no CUDA device): the run fails rather than time eager steps as graphed.
        with pytest.raises(EaqError, match=r"that failed: CUDA graphs need a CUDA device.*cuda_graphs=false"):
            measure_generate(generator, batches, CPU, sampler, iters=3, min_window_s=0.0, warm_up=warm, phases=Phases(), graphs=True)
        plain = measure_generate(generator, batches, CPU, sampler, iters=3, min_window_s=0.0, warm_up=warm, phases=Phases())
    finally:
        sampler.stop()
    assert plain.decode_graph == "not asked for"
    # A static cache has one shape: no pass over every position first, and the warm-up counts only what it ran.
    assert plain.warmups[1].iterations == 2
    assert torch.equal(plain.decoder.tokens, Generator(model, model, model.config, PROMPT, NEW, CPU).generate(batches[0]))


class Calls:
    """Counts calls of a model: a replayed graph runs none of its Python."""

    def __init__(self, model: Callable[..., object]) -> None:
        self.model, self.count = model, 0

    def __call__(self, **kwargs: object) -> object:
        self.count += 1
        return self.model(**kwargs)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="records a CUDA graph")
@pytest.mark.parametrize("compiled", [False, True], ids=["eager-model", "compiled-model"])
@pytest.mark.parametrize("name", ["gpt2_tiny_random", "llama_1b_random"])
@torch.inference_mode()
def test_on_cuda_the_recorded_decode_step_replays_the_tokens_of_the_step_run_from_python(name: str, compiled: bool) -> None:
    cuda = torch.device("cuda")
    model = preset(name, **(TINY_LLAMA if name.startswith("llama") else {})).to(cuda)
    ids = prompts(model).to(cuda)
    runner = Calls(compile_model(model, cuda_graphs=False, tuning=False) if compiled else model)
    generator = Generator(model, runner, model.config, PROMPT, NEW, cuda, static=True)
    from_python = Decoder(generator, ids)
    for _ in range(2 * from_python.steps):
        from_python.step()
    recorded = Decoder(generator, ids)
    graph = as_graph(recorded.advance, cuda, True, reset=recorded.restart)
    assert graph.reason is None
    recorded.replay_with(graph.run)
    calls = runner.count
    for _ in range(3 * recorded.steps):  # three sequences, two restarts between replays
        recorded.step()
    assert runner.count == calls  # no Python of the model (no dynamo guard) ran per replayed step
    torch.cuda.synchronize()
    assert torch.equal(recorded.tokens, from_python.tokens)


def test_the_runs_closing_line_gives_token_figures_in_tokens_and_scores_to_four_decimals() -> None:
    from eaq.tasks.job import summary_line
    from eaq.tasks.result import TaskResult

    metrics = {"time_to_first_token_mean_ms": 7.9, "time_per_output_token_mean_ms": 7.5, "time_per_output_token_p50_ms": 5.6,
               "time_per_output_token_p99_ms": 13.8, "decode_tokens_per_s": 132.7, "model_size_mb": 8.3,
               "memory_peak_rss_mb": 400.0, "quality_perplexity": 30512.25, "quality_perplexity_tokens": 282743.0,
               "quality_first_divergence_mean_tokens": 32.5, "quality_token_agreement_with_fp32": 0.96875}
    line = summary_line("r", TaskResult(metrics, {"eaq.energy.reason": "no sensor"}))
    assert "perplexity 30512.2500, perplexity_tokens 282743, first_divergence_mean_tokens 32.5, " in line
    assert "token_agreement_with_fp32 0.9688" in line

    measured = {**metrics, "decode_energy_per_token_mj": 41.5, "decode_power_mean_w": 310.0}
    tags = {"eaq.energy.source": "nvml", "eaq.valid": "false", "eaq.valid.reasons": "idle drifted"}
    line = summary_line("r", TaskResult(measured, tags))
    assert line.endswith("41.50 mJ/token at 310 W (nvml), INVALID (idle drifted)")  # the verdict said once
    assert "INVALID" not in summary_line("r", TaskResult(measured, {**tags, "eaq.valid": "true"}))


@pytest.mark.parametrize("name", ["gpt2_tiny_random", "llama_1b_random"])
def test_the_cache_argument_is_the_transformers_models_own_through_a_wrapper(name: str) -> None:
    """autocast's wrapper takes ``*args, **kwargs``: read there, the name fell back to ``past_key_values``, which
    transformers 5.2x warns about on every call (and drops in 5.40)."""
    import inspect

    from eaq.precision.native import AutocastModel
    from eaq.workloads.generate import cache_argument

    model = preset(name, **(TINY_LLAMA if name.startswith("llama") else {}))
    own = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    assert cache_argument(model) == cache_argument(AutocastModel(model, "cpu", torch.bfloat16)) == own
    assert cache_argument(torch.compile(AutocastModel(model, "cpu", torch.bfloat16))) == own  # compiled: not run


def test_generation_settings_that_generate_applies_and_greedy_decode_does_not_are_named() -> None:
    """eaq's fp32 tokens equal generate()'s only where the generation config changes no score (Qwen2.5-Instruct's
    repetition_penalty=1.05 does): the settings that would are named, so the run can say why the tokens differ."""
    from transformers import GenerationConfig

    from eaq.workloads.generate import unapplied_settings

    assert unapplied_settings(GenerationConfig()) == unapplied_settings(None) == []
    assert unapplied_settings(preset("gpt2_tiny_random").generation_config) == []
    found = unapplied_settings(GenerationConfig(repetition_penalty=1.05, suppress_tokens=[3], temperature=0.7, do_sample=True))
    # Sampling named once: its plain generate() samples; its temperature changes no greedy pick.
    assert found == ["do_sample=True", "repetition_penalty=1.05", "suppress_tokens=[3]"]
    searches = unapplied_settings(GenerationConfig(num_beams=4, penalty_alpha=0.6, top_k=4, guidance_scale=1.0))
    assert searches == ["num_beams=4", "penalty_alpha=0.6"]  # beam and contrastive search; guidance 1.0 is none
    # Applied by a decoder-only model's generate() to the prompt's tokens: named, where it was not.
    assert unapplied_settings(GenerationConfig(encoder_repetition_penalty=5.0)) == ["encoder_repetition_penalty=5.0"]
