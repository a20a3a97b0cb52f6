"""Evidence that a precision really changed what is stored: bytes and dtypes, not labels; and of those bytes, the
ones a decode step reads (its memory bound)."""

from __future__ import annotations

from collections import Counter

import torch
from torch import nn


def _named_leaves(tensor: torch.Tensor, name: str = "") -> list[tuple[str, torch.Tensor]]:
    """(its name in the subclass holding it, the plain tensor) for each plain tensor behind ``tensor``: torchao keeps
    int8 data and scales inside a tensor subclass; a plain tensor is its own only leaf."""
    flatten = getattr(type(tensor), "__tensor_flatten__", None)
    if flatten is None or type(tensor) in (torch.Tensor, nn.Parameter):
        return [(name, tensor)]
    names, _ = tensor.__tensor_flatten__()
    return [leaf for inner in names for leaf in _named_leaves(getattr(tensor, inner), inner)]


def _leaf_tensors(tensor: torch.Tensor) -> list[torch.Tensor]:
    """Plain tensors behind a tensor subclass."""
    return [leaf for _, leaf in _named_leaves(tensor)]


def _leaves(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return [leaf for t in tensors for leaf in _leaf_tensors(t.data if isinstance(t, nn.Parameter) else t)]


def _stored(model: nn.Module) -> list[torch.Tensor]:
    return _leaves([*model.parameters(), *model.buffers()])


def _storage_key(leaf: torch.Tensor) -> tuple[str, int]:
    """Where a tensor's bytes live: tied weights (an LM head sharing the token table) have one key, so count once."""
    return str(leaf.device), leaf.untyped_storage().data_ptr()


def model_size_bytes(model: nn.Module) -> int:
    """Bytes of the storages behind parameters and buffers; tied weights count once."""
    seen: dict[tuple[str, int], int] = {}
    for leaf in _stored(model):
        seen[_storage_key(leaf)] = leaf.untyped_storage().nbytes()
    return sum(seen.values())


def stored_bytes_read(model: nn.Module, rows: int) -> int:
    """Bytes of the stored tensors a pass reads when it looks up at most ``rows`` rows in each embedding table.

    A decode step's memory bound is what it reads, not what is stored: a Linear layer reads its whole weight, an
    embedding lookup only the rows of its tokens (or positions: one row for a batch at one position, so ``rows``
    is an upper bound there). So an embedding table counts whole only where another module holds the same storage
    (a tied LM head, as in GPT-2), and otherwise for ``rows`` rows: Llama's untied 32000-row input table is 6% of
    the 1.1B shape's bytes, of which a batch-1 step reads one row. A model that multiplies by a table's weight
    outside any module (``F.linear(h, self.wte.weight)``) would be counted for rows only: none of eaq's presets do.
    A mixture of experts' routed experts count for the most a step's tokens can choose (``routed_experts_unread``).
    """
    if rows < 1:
        raise ValueError(f"rows is the most rows a pass looks up in a table, at least 1, not {rows}")
    read = model_size_bytes(model) - routed_experts_unread(model, rows)
    whole = {_storage_key(leaf) for module in model.modules() if not isinstance(module, nn.Embedding)
             for leaf in _leaves([*module.parameters(recurse=False), *module.buffers(recurse=False)])}
    looked_up: set[tuple[str, int]] = set()
    for table in (m for m in model.modules() if isinstance(m, nn.Embedding)):
        weight = table.weight.data
        if type(weight) is not torch.Tensor:
            continue  # a tensor subclass (a quantized table): its layout is not rows; counted whole
        key = _storage_key(weight)
        if key in whole or key in looked_up:
            continue  # read whole by another module (a tied head), or counted already
        looked_up.add(key)
        read -= weight.nbytes - min(rows, table.num_embeddings) * weight[0].nbytes
    return read


def routed_experts_unread(model: nn.Module, rows: int) -> int:
    """Bytes of a mixture of experts' routed experts that a pass of ``rows`` tokens cannot read.

    Each token runs ``num_experts_per_tok`` (k) of a layer's E experts, so a pass reads at most min(E, rows * k) of
    them per layer (an upper bound at rows > 1, as an embedding's rows): at batch 1 a decode step of the H200 run's
    Mixtral shape (8 experts of 2816, top 2; docs/results/2026-11-29-h200-session42) reads 384 MB of its weights,
    where counting every expert made it 1215 MB. Hugging
    Face names a layer's routed experts ``experts``: one module holding a 3-D tensor per projection whose first
    dimension is the expert (transformers 5), or a list of E expert modules (transformers 4); a shared expert
    (Qwen2-MoE's ``shared_expert``, DeepSeek's ``shared_experts``) runs for every token and is read whole. A model
    whose config names no ``num_experts_per_tok`` (top-1 routers name it otherwise) counts its experts whole.
    """
    config = getattr(model, "config", None)
    if hasattr(config, "get_text_config"):
        config = config.get_text_config()
    per_token = getattr(config, "num_experts_per_tok", None)
    if not isinstance(per_token, int) or per_token < 1:
        return 0
    unread = 0
    for name, module in model.named_modules():
        if name.rpartition(".")[2] != "experts":
            continue
        if isinstance(module, nn.ModuleList):
            experts, size = len(module), model_size_bytes(module)
        else:
            stacked = [t for t in module.parameters(recurse=False) if t.ndim >= 3]
            if not stacked:
                continue
            experts = stacked[0].shape[0]
            size = sum(leaf.untyped_storage().nbytes() for leaf in _leaves(stacked))
        unread += size * (experts - min(experts, rows * per_token)) // experts
    return unread


def weight_dtypes(model: nn.Module) -> dict[str, int]:
    """How many stored values each type holds, e.g. {'torch.int8': 21M, 'torch.float32': 4M}.

    torchao's int4 formats pack eight int4 weights into each int32 of their ``qdata``, which counted as int32
    elements read as a model mostly bf16 ("bfloat16=79.0%, int32=21.0%" for DistilBERT with 37 of 38 layers
    int4): an int4 weight counts its logical shape's values as int4 (not the packed storage, which pads the
    input features to a multiple of 1024: ``model_size_mb`` counts those bytes), its scales as what they are.
    """
    counts: Counter[str] = Counter()
    for tensor in [*model.parameters(), *model.buffers()]:
        counts.update(tensor_dtypes(tensor.data if isinstance(tensor, nn.Parameter) else tensor))
    return dict(counts)


def tensor_dtypes(tensor: torch.Tensor) -> Counter[str]:
    """One tensor's stored values by type, as ``weight_dtypes`` counts them (an int4 weight's as int4)."""
    counts: Counter[str] = Counter()
    int4 = type(tensor).__name__.startswith("Int4")
    if int4:
        counts["int4"] += tensor.numel()
    for name, leaf in _named_leaves(tensor):
        if not (int4 and name == "qdata"):
            counts[str(leaf.dtype)] += leaf.numel()
    return counts


def is_quantized(layer: nn.Linear) -> bool:
    """Whether a Linear layer's weight is a quantized tensor subclass (torchao's), not a plain tensor."""
    return type(layer.weight.data) not in (torch.Tensor, nn.Parameter)


def linear_coverage(model: nn.Module) -> tuple[int, int]:
    """(Linear layers whose weight is a quantized tensor subclass, all Linear layers)."""
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    return sum(map(is_quantized, linears)), len(linears)


# Layers whose weights are not matmul weights outside Linear layers: Linear layers themselves, and tables looked up.
TABLES = (nn.Linear, nn.Embedding, nn.EmbeddingBag)


def matrices_outside_linear(model: nn.Module, dims: int = 2, skip: tuple[type, ...] = TABLES) -> dict[str, torch.Tensor]:
    """Weights of at least ``dims`` dimensions that no layer of a class in ``skip`` holds, by name: a mixture of
    experts' fused experts (one 3-D tensor per projection, run by grouped or batched matmuls), a router's weight, a
    convolution's kernel. A quantizer of Linear layers leaves them in float, and the Linear coverage count does not
    see them."""
    return {f"{name}.{key}" if name else key: tensor for name, module in model.named_modules() if not isinstance(module, skip)
            for key, tensor in module.named_parameters(recurse=False) if tensor.ndim >= dims}


def tied_linears(model: nn.Module) -> set[str]:
    """Linear layers whose weight is an embedding table (an LM head tied to the token table): quantized, such a
    layer is untied, the float table kept beside a quantized copy, so every quantizer leaves it in the base dtype."""
    tables = {id(m.weight) for m in model.modules() if isinstance(m, (nn.Embedding, nn.EmbeddingBag))}
    return {name for name, m in model.named_modules() if isinstance(m, nn.Linear) and id(m.weight) in tables}


def outside_linear_share(model: nn.Module, outside: dict[str, torch.Tensor] | None = None) -> float:
    """The share of the model's matmul weights (Linear layers' and ``matrices_outside_linear``) outside Linear layers."""
    outside = matrices_outside_linear(model) if outside is None else outside
    held = sum(t.numel() for t in outside.values())
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    return held / (held + linear) if held + linear else 0.0


def proof(model: nn.Module) -> dict[str, float | str]:
    """What gets recorded with every run."""
    quantized, linears = linear_coverage(model)
    dtypes = weight_dtypes(model)
    total = sum(dtypes.values()) or 1
    return {
        "model_size_mb": model_size_bytes(model) / 1e6,
        "quantized_linear_layers": quantized,
        "linear_layers": linears,
        "weights_outside_linear_share": outside_linear_share(model),
        "stored_dtypes": ", ".join(f"{k.removeprefix('torch.')}={v / total:.1%}" for k, v in sorted(dtypes.items())),
    }
