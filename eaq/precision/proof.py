"""Evidence that a precision really changed what is stored: bytes and dtypes, not labels; and of those bytes, the
ones a decode step reads (its memory bound)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

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
    A mixture of experts' routed experts count for the most a step's tokens can choose (``RoutedExperts``).
    """
    if rows < 1:
        raise ValueError(f"rows is the most rows a pass looks up in a table, at least 1, not {rows}")
    experts = routed_experts(model)
    read = model_size_bytes(model) - (experts.unread(rows) if experts else 0)
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


# How Hugging Face configs name a mixture of experts' routed experts per layer (E) and per token (k); DBRX keeps both
# in a sub-config (ffn_config: moe_num_experts, moe_top_k), HunYuan-MoE's k is moe_topk under transformers 4.
EXPERT_COUNT = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
EXPERTS_PER_TOKEN = ("num_experts_per_tok", "moe_top_k", "moe_topk")


def _config_int(config: object, names: tuple[str, ...]) -> int | None:
    """The first of ``names`` the config (or one of its sub-configs) sets to a positive int."""
    subs = [v for v in vars(config).values() if hasattr(v, "to_dict")] if config is not None else []
    for holder in (config, *subs):
        for name in names:
            value = getattr(holder, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


@dataclass(frozen=True)
class RoutedExperts:
    """A mixture of experts' routed experts, as a pass reads them: each token runs k of a layer's E experts, so a
    pass of r tokens reads at most min(E, r * k) of them per layer (an upper bound at r > 1, as an embedding's rows).

    At batch 1 a decode step of the H200 run's Mixtral shape (8 experts of 2816, top 2;
    docs/results/2026-11-29-h200-session42) reads 384 MB of its weights, where counting every expert made it 1215 MB.
    """

    count: int  # E, from the config
    per_token: int | None  # k, from the config (None: not named there, so every expert counts)
    sizes: tuple[int, ...]  # bytes of each group of E experts found (one per layer and projection module)

    def unread(self, rows: int) -> int:
        """Bytes of the routed experts a pass of ``rows`` tokens cannot choose (0 where k is unknown)."""
        if self.per_token is None:
            return 0
        chosen = min(self.count, rows * self.per_token)
        return sum(size * (self.count - chosen) // self.count for size in self.sizes)

    def counted(self) -> str:
        """How a decode step's bytes count these experts, a clause of the tag eaq.roofline.decode_bytes."""
        if not self.sizes:
            return f" (every routed expert: the config names {self.count} per layer, but no weights stacked by expert were found)"
        if self.per_token is None:
            return f" (every routed expert: the config names none of {', '.join(EXPERTS_PER_TOKEN)}, its experts per token)"
        return f" and the routed experts its tokens cannot choose (min({self.count}, batch x {self.per_token}) of {self.count} per layer read)"


def routed_experts(model: nn.Module) -> RoutedExperts | None:
    """The routed experts of a mixture of experts (None: the config names no expert count, a dense model).

    Found by shape, not by name: a module holding tensors of three or more dimensions whose first is E (transformers
    5 stacks each projection's experts so; GraniteMoE's and JetMoE's ``input_linear``/``output_linear`` too), its
    other tensors of first dimension E with them (GPT-OSS's per-expert biases), or a list of E modules named
    ``experts`` (transformers 4). A router's weight (E rows) sits in its own Linear layer and a shared expert
    (Qwen2-MoE's ``shared_expert``, DeepSeek's ``shared_experts``) runs for every token: both are read whole.
    """
    # The config of the transformers model inside (amp's autocast wrapper has none of its own).
    config = next((m.config for m in model.modules() if hasattr(getattr(m, "config", None), "to_dict")), None)
    if hasattr(config, "get_text_config"):
        config = config.get_text_config()
    count = _config_int(config, EXPERT_COUNT)
    if count is None or count < 2:
        return None
    sizes: list[int] = []
    lists = [name for name, m in model.named_modules()
             if isinstance(m, nn.ModuleList) and len(m) == count and name.rpartition(".")[2] == "experts"]
    for name in lists:
        sizes.append(model_size_bytes(model.get_submodule(name)))
    for name, module in model.named_modules():
        if isinstance(module, (*TABLES, nn.modules.conv._ConvNd)) or any(name.startswith(f"{held}.") for held in lists):
            continue
        own = list(module.parameters(recurse=False))
        if any(t.ndim >= 3 and t.shape[0] == count for t in own):
            sizes.append(sum(leaf.untyped_storage().nbytes() for leaf in _leaves([t for t in own if t.shape[0] == count])))
    return RoutedExperts(count, _config_int(config, EXPERTS_PER_TOKEN), tuple(sizes))


def decode_bytes_counted(model: nn.Module) -> str:
    """What ``stored_bytes_read`` counts for this model, in words (the tag eaq.roofline.decode_bytes)."""
    experts = routed_experts(model)
    return f"stored weights less the embedding rows a step does not look up{experts.counted() if experts else ''}, plus the KV cache read"


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
