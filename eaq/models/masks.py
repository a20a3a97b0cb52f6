"""Transformers' attention-mask decisions while eaq captures a CUDA graph: the eager pass's.

Hugging Face models skip building an attention mask when none is needed (no mask passed, or
one of all ones) and let SDPA take ``is_causal`` or no mask at all, which keeps its fast
kernels. Whether they may skip is decided in ``transformers.masking_utils`` (e.g.
``_ignore_bidirectional_mask_sdpa``, ``_ignore_causal_mask_sdpa``), which refuse to skip while
``is_tracing(padding_mask)`` is true: reading a mask's values on the host is not allowed while
tracing. Up to at least transformers 5.17, that check was ``is_tracing(padding_mask)`` even when
``padding_mask`` is None, and ``transformers.utils.import_utils.is_tracing`` is true whenever a
CUDA stream is capturing (``is_cuda_stream_capturing()``). So a pass given no mask at all builds
a full mask while it is captured as a CUDA graph, and none eagerly: the graph runs another
computation than the eager passes. On the 2026-11-25 H100 diagnostics (transformers 5.17.0,
``docs/results/2026-11-25-h100-diag``), DistilBERT-base's graphed pass at batch 64 took 5.17 ms
against 1.85 ms of eager kernels (bf16): SDPA fell back to its math kernels on the materialised
mask (an fp32 GEMM of 688 us per pass, a float softmax, ``isneginf``); GPT-2-small's graphed pass
built a causal mask (+52 us) and ran cuDNN's SDPA with it (374 vs 231 us per pass). transformers
5.24 checks ``padding_mask is not None and is_tracing(padding_mask)`` instead: with no mask
tensor there is nothing on the host to read, so tracing cannot matter.

``eager_mask_decisions`` gives ``masking_utils`` that newer meaning of ``is_tracing`` for as long
as it is held: ``is_tracing(None)`` is False, and a real tensor is judged as before (while
capturing, a given mask is still built, never read on the host). On transformers that already
check for None, it changes nothing; where ``masking_utils`` has no ``is_tracing``, nothing to
correct. It is meant for eaq's own captures of an eager model (task=layers: the whole pass and
every replay, whose energies are compared with eager profiles and must be the same computation),
not for the benchmark's compiled models: there Dynamo, not stream capture, makes transformers
5.17 build the mask, and that is what a user of 5.17 with ``torch.compile`` gets, so it is what
the benchmark should measure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from transformers import masking_utils


@contextmanager
def eager_mask_decisions() -> Iterator[None]:
    """While held, ``transformers.masking_utils.is_tracing(None)`` is False (see the module's docstring)."""
    judged: Callable[..., bool] | None = getattr(masking_utils, "is_tracing", None)
    if judged is None:
        yield
        return

    def is_tracing(tensor: torch.Tensor | None = None) -> bool:
        return tensor is not None and judged(tensor)

    masking_utils.is_tracing = is_tracing
    try:
        yield
    finally:
        masking_utils.is_tracing = judged


__all__ = ["eager_mask_decisions"]
