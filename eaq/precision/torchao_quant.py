"""Quantization through torchao: weights really stored in int8 / fp8 / int4, real kernels run.

Nothing is simulated: eligible ``Linear`` weights are replaced by torchao tensors holding
the low-precision data and its scales, and their matmuls dispatch to the format's
kernels (checked by ``eaq.precision.kernel_check``). On a GPU the model is first cast to
bf16 (fp16 before Ampere), the dtype torchao's GPU kernels take activations in; on the
CPU it stays fp32.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from eaq.errors import UnsupportedPrecisionError
from eaq.precision.base import base_dtype, cast, dtype_name, set_tf32
from eaq.precision.proof import TABLES, matrices_outside_linear, outside_linear_share, tied_linears
from eaq.precision.requirements import ADA, AMPERE, TURING, Requirements

# One shape rule for every format: both matrix dimensions in multiples of 16, what fp8's _scaled_mm needs (the
# strictest: CUDA's _int_mm takes multiples of 8, the CPU's and int8 weight-only any shape). One rule keeps the
# formats' coverage the same, so a comparison between them is of the formats, not of which layers each took; a
# layer that does not fit (a 2-way classifier head, a 50257-token LM head, which would also be untied from the
# token table) stays in the base dtype, and the proof's coverage count shows it.
ALIGNMENT = 16
# int4 weights are quantized in groups of this many input features (tinygemm's layout).
INT4_GROUP = 128


def _quantization() -> Any:
    """torchao.quantization, imported only when a model is quantized (it is slow to import)."""
    from torchao import quantization

    return quantization


@dataclass
class TorchaoQuant:
    name: str
    # Builds the torchao config (torchao is imported when it is called, not before).
    config: Callable[[], Any]
    # Dtype of activations and of the layers left unquantized.
    base: torch.dtype
    matmul: str
    requirements: Requirements
    kernels: tuple[str, ...]
    quantized_math: bool
    # Input features must be a multiple of this (int4's group size) on top of ALIGNMENT.
    group: int = 1

    @property
    def float_gemm_dtype(self) -> torch.dtype:
        return self.base

    def refusal(self, module: nn.Module) -> str | None:
        """Why the format's kernel cannot take ``module`` (the shape rule), or None: layers it cannot take stay in
        the base dtype, and a mixed plan that lists one is refused with this reason."""
        if not isinstance(module, nn.Linear):
            kind = type(module).__name__
            return f"it is {'an' if kind[0] in 'AEIOU' else 'a'} {kind}, not a Linear layer"
        if module.in_features % ALIGNMENT or module.out_features % ALIGNMENT:
            return f"its shape {module.in_features}x{module.out_features} is not in multiples of {ALIGNMENT}"
        if module.in_features % self.group:
            return f"its {module.in_features} input features are not a multiple of {self.group} ({self.name}'s group size)"
        return None

    def eligible(self, module: nn.Module) -> bool:
        """The shape rule: which layers the format's kernel takes; the rest stay in the base dtype."""
        return self.refusal(module) is None

    def check(self, model: nn.Module) -> None:
        """Refuse a model the format would not quantize as named; its skeleton (meta device) will do, so the run is
        refused before a weight is read (a mixture of experts is the largest of models)."""
        # Stacks of matrices (3-D and more) outside Linear layers and convolutions: a mixture of experts' fused
        # experts. Where they hold most of the matmul weights, the run would be named for a format most of its
        # weights do not run in; a few (XLNet's segment embeddings) are a layer left in the base dtype, as a
        # classifier head is, and the recorded share says so.
        batched = matrices_outside_linear(model, dims=3, skip=(*TABLES, nn.modules.conv._ConvNd))
        if (share := outside_linear_share(model, batched)) > 0.5:
            names = sorted(batched)
            raise UnsupportedPrecisionError(
                f"precision={self.name} quantizes Linear layers, and this model keeps {share:.0%} of its matmul weights "
                f"in stacked matrices outside them ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}: a mixture "
                f"of experts' fused experts), which would run unquantized in {dtype_name(self.base)}. Measure it in fp32, "
                "bf16, fp16, amp_bf16 or amp_fp16 (every weight cast), or quantize a model whose experts are Linear layers."
            )
        if not any(self.eligible(m) for m in model.modules()):
            shape = f"Linear layers with in and out features in multiples of {ALIGNMENT}"
            if self.group > 1:
                shape += f" and in features in multiples of {self.group}"
            # eaq's rule, not this device's kernel (the CPU's int8 takes any shape): said as such, with what runs.
            raise UnsupportedPrecisionError(
                f"precision={self.name} quantizes no layer of this model: eaq quantizes only {shape} (the shapes "
                "fp8's GPU kernel takes, kept for every format so that formats are compared on the same layers), and "
                "this model has none; measure it in fp32, bf16, fp16, amp_bf16 or amp_fp16 (every weight cast)."
            )

    def apply(self, model: nn.Module, device: torch.device) -> nn.Module:
        self.check(model)
        set_tf32(False)
        model = cast(model, device, self.base)
        tied = tied_linears(model)  # left in the base dtype: quantized, a tied LM head would be untied
        # set_inductor_config=False: compiled runs of every precision get the same Inductor
        # settings (eaq.tasks.compile), not torchao's only for the quantized ones.
        _quantization().quantize_(model, self.config(), filter_fn=lambda m, fqn: self.eligible(m) and fqn not in tied)
        return model


# cuBLAS's integer GEMM (torch._int_mm) takes only more than 16 rows (M > 16).
INT_MM_MIN_ROWS = 17


def _int_mm_on_cuda() -> None:
    """Make torchao's int8 GEMM run cuBLAS's integer kernel on CUDA at every row count, with no copy.

    Three faults of torchao's ``torchao.kernel.intmm.safe_int_mm`` (0.10 through 0.18) on CUDA:

    - It decides whether it is being traced with ``"FakeTensor" in input.__repr__()``. On a
      real CUDA tensor that formats the tensor's values, which copies them to the host: 48
      device->host copies per layer and a host sync each on an H100
      (docs/results/2026-11-22-h100-precision-partial), and eager int8 cost more energy than
      fp32. Here ``isinstance`` decides, and a real CUDA tensor goes straight to
      ``torch._int_mm``.
    - It copies the weight, which torchao passes transposed (a view of its out x in storage), to
      a contiguous in x out tensor on every call, for a cuBLAS of old that multiplied the view
      wrongly. On torch 2.11 the view is exact, and cuBLAS's kernel takes 10-26 us on it where
      the copy's layout takes 31-320 us (one H100, the generation grid's nine layer shapes,
      docs/results/2026-11-26-h100-int8-decode/intmm_rows.txt): the weight goes as it comes.
    - Given 16 rows or fewer, which cuBLAS's kernel refuses, it catches the error and
      multiplies in float32: int8 silently replaced by a float matmul. A generation's decode
      step gives each layer ``batch_size`` rows, a classifier head at a small batch too. Here
      the int8 rows are padded with zero rows to ``INT_MM_MIN_ROWS`` and the padding is cut
      from the int32 result: the integer kernel runs, the result is exact, and the padded rows'
      work is measured as part of int8's cost at that shape (the decode step reads each weight
      once either way).

    Everything else (tracing under torch.compile, fake tensors, the CPU) goes to torchao's own
    function, after the same padding where the tensor is on CUDA. The kernel check still proves
    an integer GEMM ran per layer. Installed once per process, only where int8 runs on CUDA.
    """
    from torch._subclasses.fake_tensor import FakeTensor
    from torchao.kernel import intmm

    torchao_int_mm = intmm.safe_int_mm
    if getattr(torchao_int_mm, "eaq_cuda", False):
        return

    def cuda_int_mm(input: torch.Tensor, mat2: torch.Tensor) -> torch.Tensor:
        cublas_shape = input.shape[1] % 8 == 0 and mat2.shape[1] % 8 == 0
        if cublas_shape and not torch.compiler.is_compiling() and not isinstance(input, FakeTensor):
            return torch._int_mm(input, mat2)
        return torchao_int_mm(input, mat2)

    def safe_int_mm(input: torch.Tensor, mat2: torch.Tensor) -> torch.Tensor:
        return padded_int_mm(cuda_int_mm, input, mat2) if input.is_cuda else torchao_int_mm(input, mat2)

    safe_int_mm.eaq_cuda = True  # type: ignore[attr-defined]
    intmm.safe_int_mm = safe_int_mm


def padded_int_mm(int_mm: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], input: torch.Tensor,
                  mat2: torch.Tensor) -> torch.Tensor:
    """``int_mm(input, mat2)``, ``input`` padded with zero rows to ``INT_MM_MIN_ROWS`` where it has fewer.

    The padding is cut from the result, which stays exact: a zero row's products are zero
    and no other row of the product reads it.
    """
    rows = input.shape[0]
    if rows >= INT_MM_MIN_ROWS:
        return int_mm(input, mat2)
    return int_mm(torch.nn.functional.pad(input, (0, 0, 0, INT_MM_MIN_ROWS - rows)), mat2)[:rows]


def int8(device: torch.device) -> TorchaoQuant:
    """int8 weights per channel, activations quantized to int8 per token at run time, integer GEMMs."""
    def config() -> Any:
        if device.type == "cuda":
            _int_mm_on_cuda()
        return _quantization().Int8DynamicActivationInt8WeightConfig(set_inductor_config=False)

    return TorchaoQuant(
        "int8", config, base_dtype(device), "int8",
        Requirements(min_capability=TURING, torchao=True),  # on CUDA; the CPU's int8 GEMM needs nothing more
        kernels=("_int_mm",), quantized_math=True,
    )


def int8_weight_only(device: torch.device) -> TorchaoQuant:
    """int8 weights per channel; the matmul computes in the base dtype on the int8 weights."""
    base = base_dtype(device)
    return TorchaoQuant(
        "int8_weight_only", lambda: _quantization().Int8WeightOnlyConfig(set_inductor_config=False), base, dtype_name(base),
        Requirements(torchao=True), kernels=(), quantized_math=False,
    )


def fp8(device: torch.device) -> TorchaoQuant:
    """float8 e4m3 weights and activations, scaled per row (activations per token, at run time)."""
    def config() -> Any:
        q = _quantization()
        return q.Float8DynamicActivationFloat8WeightConfig(granularity=q.PerRow(), set_inductor_config=False)

    return TorchaoQuant(
        "fp8", config, torch.bfloat16, "float8_e4m3fn",
        Requirements(devices=("cuda",), min_capability=ADA, torchao=True),
        kernels=("scaled_mm", "f8f8"), quantized_math=True,
    )


def int4_weight_only(device: torch.device) -> TorchaoQuant:
    """int4 weights in groups of 128 (tinygemm tile layout); bf16 activations and math.

    torchao pads each weight's input features to a multiple of 1024 for this layout (and
    the activations on every call), so a 768-wide layer stores and multiplies a third more
    than its shape; ``model_size_mb`` counts the padded bytes.
    """
    def config() -> Any:
        return _quantization().Int4WeightOnlyConfig(
            group_size=INT4_GROUP, int4_packing_format="tile_packed_to_4d", set_inductor_config=False
        )

    return TorchaoQuant(
        "int4_weight_only", config, torch.bfloat16, "bfloat16",
        Requirements(devices=("cuda",), min_capability=AMPERE, torchao=True),
        kernels=("int4pack_mm",), quantized_math=False, group=INT4_GROUP,
    )
