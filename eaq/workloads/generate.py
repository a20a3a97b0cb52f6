"""Greedy generation with a KV cache, split into the two steps serving pays for: prefill and decode.

Prefill runs the prompt through the model once, fills the KV cache and picks the first
new token (time to first token); each decode step feeds the last token back and picks the
next one. The number of new tokens is fixed: the end-of-sequence token is never chosen,
exactly as ``transformers`` ``generate(min_new_tokens=N, max_new_tokens=N)`` masks it, so
every precision generates the same amount of work. Nothing else changes the scores: a
generation config's repetition penalty or banned words, which ``generate`` applies, are not
(``unapplied_settings`` names them, and the run warns).

A decode step does no host sync: the chosen token, the position and the output buffer
stay on the device, so a measurement window can run thousands of steps back to back.
``Decoder.advance`` is that step and reads no Python state that changes from step to step
(the token's column in the output comes from the position tensor, not a Python count), so
it can be captured once as a CUDA graph and replayed: a compiled step called from Python
costs the host more than the GPU's work (an H100, the 1.1B Llama shape with int4 weights:
3.7 ms a step for 1.25 ms of kernels, most of it dynamo's guards and Inductor's wrapper),
and a replay costs one launch. ``Decoder`` cycles through the ``new_tokens - 1`` decode
steps of one prompt batch, restarting from the same prefilled cache state each time (a
DynamicCache is cropped back to the prompt, its sliding-window layers set back to what they
held after it; a StaticCache is simply written from the prompt's end again, its later
positions masked by ``cache_position``), so no prefill work enters a decode window.
Restarts run from Python, between replays.

The DynamicCache is built from the model's config, as ``generate`` builds it: a
sliding-window layer keeps only its window, so an eager decode step attends over what a
user's ``generate`` attends over. A cache built without the config kept every position: the
whole context's work and KV bytes, not ``generate``'s (on an H100, the 1.1B shape with a
256-token window over 2048-token prompts: an fp32 step took 1.9x ``generate``'s; bf16's about
the same time; docs/results/2026-11-27-h100-session29).

``static=True`` gives a StaticCache of fixed shape: what a compiled decode step (and CUDA
graphs) needs, since every step then has the same tensor shapes.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping

import torch
from torch import nn
from transformers import DynamicCache, PretrainedConfig, PreTrainedModel, StaticCache

from eaq.errors import ConfigError


def eos_ids(vocab_size: int, *configs: object) -> list[int]:
    """End-of-sequence ids in the vocabulary, to mask (a random-weight model may name one past its vocabulary):
    those of the model's config and of its generation config, which ``generate`` masks (Llama-3-Instruct's holds
    ``<|eot_id|>`` as well)."""
    ids: list[int] = []
    for config in configs:
        eos = getattr(config, "eos_token_id", None)
        ids += eos if isinstance(eos, list) else [eos] if eos is not None else []
    return sorted({i for i in ids if 0 <= i < vocab_size})


# What a generation config may set that ``generate(do_sample=False)`` applies and eaq's greedy pick does not (it masks
# end-of-sequence ids only), with each setting's value that changes nothing: processors of the scores (penalties, banned,
# suppressed or forced tokens, classifier-free guidance, a watermark) and searches other than greedy (beam, group beam,
# contrastive, DoLa); and sampling itself (Llama-3-Instruct ships do_sample=True: its plain generate() samples).
# Sampling's own settings (temperature, top_p) are absent: with do_sample=False they change no pick.
# A decoder-only model's generate() applies encoder_repetition_penalty too, to the prompt's tokens.
UNAPPLIED = {"do_sample": False, "repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0, "no_repeat_ngram_size": 0,
             "encoder_no_repeat_ngram_size": 0, "bad_words_ids": None, "suppress_tokens": None, "begin_suppress_tokens": None,
             "sequence_bias": None, "forced_bos_token_id": None,
             "forced_eos_token_id": None, "exponential_decay_length_penalty": None, "guidance_scale": 1.0,
             "watermarking_config": None, "num_beams": 1, "num_beam_groups": 1, "penalty_alpha": None, "dola_layers": None}


def unapplied_settings(generation_config: object | None) -> list[str]:
    """The model's generation settings that its ``generate`` applies and eaq's decode does not, as ``name=value``.

    eaq generates plain greedy tokens (end-of-sequence masked), so every precision does the same work per token and
    is compared under the same decoding; where these are set, its tokens may differ from the model's own
    ``generate`` (Qwen2.5-Instruct ships repetition_penalty=1.05), and a user comparing them should know why.
    """
    found = {name: getattr(generation_config, name, neutral) for name, neutral in UNAPPLIED.items()}
    return [f"{name}={value}" for name, value in found.items() if value not in (UNAPPLIED[name], None, [], {})]


# Layers whose state is an attention KV cache; any other kind (convolution, linear attention, state-space) keeps a
# state that Decoder.restart cannot rewind to the prompt's.
# "attention" is transformers 4's name in hybrids (GraniteMoE-Hybrid: mamba and attention).
ATTENTION_LAYERS = frozenset({"full_attention", "sliding_attention", "attention"})


def check_generation(config: PretrainedConfig, seq_len: int, new_tokens: int, static: bool, positions: int | None = None) -> None:
    """Refuse, before any work, a generation the model cannot run as asked.

    - More positions than its position table holds (``positions``: eaq.models.position_limit, None where positions
      are computed, rotary or ALiBi, which run past a config's max_position_embeddings): the prompt's ``seq_len`` and
      one per decode step (the last token is picked, never fed back), so ``seq_len + new_tokens - 1``.
    - Layers that are not attention (``config.layer_types``: a hybrid model's convolutions or linear attention):
      their state is no KV cache, and no restart between measured sequences could rewind it.
    - ``static`` (a compiled decode step) over sliding-window attention layers: their static
      cache rolls once full and keeps a host-side count of what it holds, so a decode window
      that restarts each sequence from the prompt's cache (Decoder.restart) would attend over
      the wrong keys, and a recorded step would freeze that count.
    """
    others = sorted(set(getattr(config, "layer_types", None) or ()) - ATTENTION_LAYERS)
    if others:
        raise ConfigError(
            f"this model has layers of kind {', '.join(others)} (config.layer_types), which keep a state beside or instead "
            "of an attention KV cache; workload=generate restarts each measured sequence from the prompt's KV cache and "
            "cannot rewind that state. It measures attention-only causal LMs (GPT-2, Llama, Mistral, Qwen, ...); use "
            "workload=forward for this model."
        )
    used = seq_len + new_tokens - 1
    if positions is not None and used > positions:
        raise ConfigError(
            f"seq_len={seq_len} and workload.new_tokens={new_tokens} feed the model {used} positions (the last token is "
            f"never fed back) and it has {positions}: lower seq_len or workload.new_tokens so that seq_len + new_tokens is "
            f"at most {positions + 1}."
        )
    if static:
        # GPT-Neo names its local layers in attention_layers (window_size), which the cache does not read: its static
        # cache held every position and the compiled step attended over keys eager generation masks (tokens 58% unlike
        # eager's), once the sequence outgrows the window.
        window = getattr(config, "window_size", None)
        if "local" in (getattr(config, "attention_layers", None) or ()) and window is not None and used > window:
            raise ConfigError(
                f"this model's local attention layers (config.attention_layers, window_size={window}) attend over the last "
                f"{window} positions, a window the static KV cache compile=true decodes over does not apply, and this "
                f"generation feeds {used}: keep seq_len + workload.new_tokens at most {window + 1}, or measure this "
                "model's generation with compile=false (a dynamic cache)."
            )
        layers = StaticCache(config=config, max_cache_len=seq_len + new_tokens).layers  # allocates on first use only
        if any(getattr(layer, "is_sliding", False) for layer in layers):
            raise ConfigError(
                f"this model has sliding-window attention layers (sliding_window={getattr(config, 'sliding_window', None)}): "
                "their static KV cache, which compile=true decodes over, rolls once full and counts its length on the host, "
                "so eaq cannot restart it from the prompt's state between measured sequences. Measure this model's "
                "generation with compile=false (a dynamic cache)."
            )


def cache_bytes(cache: DynamicCache | StaticCache) -> int:
    """Bytes held by a cache's key and value tensors (a StaticCache holds its whole length)."""
    return sum(cache_bytes_of(layer) for layer in cache.layers)


def cache_bytes_of(layer: object) -> int:
    """Bytes held by one cache layer's key and value tensors."""
    return sum(t.numel() * t.element_size() for t in (getattr(layer, "keys", None), getattr(layer, "values", None)) if t is not None)


def read_layers(cache: DynamicCache | StaticCache, config: PretrainedConfig) -> list[object]:
    """The cache layer each of the model's attention layers reads a step, after the prefill filled the cache. A layer
    that shares another's keys and values (Gemma 3n's last layers) holds none of its own and is never filled: it reads
    the last filled layer of its kind (sliding or full) before it, as transformers maps them; counted as none, its KV
    traffic was left out of the roofline's bytes per step. Before transformers 5.2x such layers had no cache layer at
    all (4 of Gemma 3n's 6 there): the kinds ``config.layer_types`` gives the layers past the cache's read alike."""
    kinds = [kind == "sliding_attention" for kind in getattr(config, "layer_types", None) or ()]
    layers = [(getattr(layer, "is_sliding", False), layer) for layer in cache.layers]
    read, last = [], {}
    for sliding, layer in [*layers, *((kind, None) for kind in kinds[len(layers):])]:
        if layer is not None and getattr(layer, "keys", None) is not None and layer.keys.shape[-2]:
            last[sliding] = layer
        if sliding in last:
            read.append(last[sliding])
    return read


NO_KV_CACHE = ("{model} cannot be measured generating: {why}, and workload=generate decodes each token over the "
               "prompt's attention KV cache, as causal LMs that keep one do (GPT-2, Llama, Mistral, Qwen, ...); use "
               "workload=forward for this model.")


NO_STATIC_CACHE = ("{model} fails to run its prompt into a static KV cache ({error}), the cache compile=true decodes "
                   "over at a fixed shape: its attention code does not read one under this transformers version; run it "
                   "with compile=false (an eager decode over a growing cache).")


def inner_model(model: Callable[..., object]) -> Callable[..., object]:
    """The transformers model inside ``model`` (a wrapper's forward, autocast's ``*args, **kwargs``, names nothing)."""
    modules = model.modules() if isinstance(model, nn.Module) else ()
    return next((m for m in modules if isinstance(m, PreTrainedModel)), model)


def forward_parameters(model: Callable[..., object]) -> Mapping[str, inspect.Parameter]:
    """The parameters the forward of the transformers model inside ``model`` names."""
    inner = inner_model(model)
    return inspect.signature(getattr(inner, "forward", inner)).parameters


def cache_argument(model: Callable[..., object]) -> str:
    """The name the model's forward takes its KV cache by: ``cache`` since transformers 5.2x, where ``past_key_values``
    warns on every call (and goes in 5.40); ``past_key_values`` before. Read from the transformers model inside
    ``model``, as a model of its own code names it."""
    named = [name for name in ("cache", "past_key_values") if name in forward_parameters(model)]
    if not named:
        # RWKV (its own state), XLNet (mems), Reformer, OpenAI-GPT (none) take **kwargs and dropped the cache: every
        # decode step ran one token with no context, measured as generation.
        raise ConfigError(NO_KV_CACHE.format(model=type(inner_model(model)).__name__,
                                             why="its forward takes no KV cache (past_key_values or cache)"))
    return named[0]


class Generator:
    """Greedy generation of ``new_tokens`` tokens: ``model`` runs prefill, ``runner`` (the model, or it compiled) decode."""

    def __init__(
        self,
        model: Callable[..., object],
        runner: Callable[..., object],
        config: PretrainedConfig,
        seq_len: int,
        new_tokens: int,
        device: torch.device,
        static: bool = False,
        generation_config: object | None = None,
    ) -> None:
        """``generation_config``: the model's (``model.generation_config``), whose end-of-sequence ids are masked too."""
        check_generation(config, seq_len, new_tokens, static)
        self.model, self.runner, self.config = model, runner, config
        self.cache_arg = cache_argument(model)
        # Only a forward that names it (transformers 4's Bloom and BART refused it): without it, prefill's head
        # scores every prompt position, as that model's generate does.
        self.keep = {"logits_to_keep": 1} if "logits_to_keep" in forward_parameters(model) else {}
        self.seq_len, self.new_tokens, self.static = seq_len, new_tokens, static
        self.positions = torch.arange(seq_len + new_tokens, device=device)
        self.eos = torch.tensor(eos_ids(config.vocab_size, config, generation_config), dtype=torch.long, device=device)

    def new_cache(self) -> DynamicCache | StaticCache:
        if self.static:
            return StaticCache(config=self.config, max_cache_len=self.seq_len + self.new_tokens)
        return DynamicCache(config=self.config)

    def pick(self, logits: torch.Tensor) -> torch.Tensor:
        """The greedy token of each row from the last position's logits, EOS excluded; shape (batch, 1)."""
        scores = logits[:, -1, :].float()  # as generate scores them: float32
        if self.eos.numel():
            scores = scores.index_fill(-1, self.eos, float("-inf"))
        return scores.argmax(-1, keepdim=True)

    def prefill(self, input_ids: torch.Tensor, cache: DynamicCache | StaticCache | None = None) -> torch.Tensor:
        """Run the prompt into ``cache`` (a fresh DynamicCache if none, a static generator's too: the prefill window
        times an eager prefill as any run has it, where a fresh StaticCache also allocated and zeroed a whole-length
        buffer per layer each time) and return the first new token."""
        try:
            out = self._into(input_ids, cache if cache is not None else DynamicCache(config=self.config))
        except AttributeError as error:  # xLSTM: "'DynamicCache' object has no attribute 'rnn_state'"
            if "Cache' object has no attribute" not in str(error):
                raise
            why = f"it keeps its state in a cache of its own kind ({error})"
            raise ConfigError(NO_KV_CACHE.format(model=type(inner_model(self.model)).__name__, why=why)) from error
        except (RuntimeError, ValueError, IndexError) as error:
            # Under transformers 4.57, MPT, CTRL, XGLM and DeepSeek-V3 keep the cache's whole length in their masks
            # or write by their own counters: a StaticCache's prefill fails in their attention. Said so only where the
            # same prompt runs into a growing cache (out of memory, a bad id: the error as it is).
            if not isinstance(cache, StaticCache) or isinstance(error, torch.OutOfMemoryError):
                raise
            try:
                self._into(input_ids, DynamicCache(config=self.config))
            except Exception:
                raise error from None
            raise ConfigError(NO_STATIC_CACHE.format(model=type(inner_model(self.model)).__name__,
                                                     error=str(error).splitlines()[0])) from error
        return self.pick(out.logits)

    def _into(self, input_ids: torch.Tensor, cache: DynamicCache | StaticCache) -> object:
        """The model's pass over the prompt into ``cache``: the prefill's, and the growing-cache check of its refusal."""
        return self.model(input_ids=input_ids, **{self.cache_arg: cache}, cache_position=self.positions[: input_ids.shape[1]],
                          use_cache=True, **self.keep)

    def generate(self, input_ids: torch.Tensor) -> torch.Tensor:
        """All ``new_tokens`` tokens of each prompt, (batch, new_tokens): for quality, outside any window."""
        decoder = Decoder(self, input_ids)
        for _ in range(decoder.steps):
            decoder.step()
        return decoder.tokens.clone()

    def generate_all(self, batches: list[dict[str, torch.Tensor]]) -> torch.Tensor:
        """``generate`` over quality batches, rows concatenated: the reference's and the precision's alike."""
        return torch.cat([self.generate(b["input_ids"]) for b in batches])


class Decoder:
    """Decode steps of one prompt batch, cycling from the same prefilled state; ``step()`` is one token per row."""

    def __init__(self, generator: Generator, input_ids: torch.Tensor) -> None:
        self.g = generator
        self.cache = generator.new_cache()
        batch, prompt = input_ids.shape
        if prompt != generator.seq_len:
            raise ValueError(f"prompts must be {generator.seq_len} tokens long, got {prompt}")
        # tokens[:, 0] comes from prefill; each decode step writes the next column.
        self.tokens = torch.empty(batch, generator.new_tokens, dtype=torch.long, device=input_ids.device)
        self.tokens[:, :1] = generator.prefill(input_ids, self.cache)
        self.first = self.tokens[:, :1].clone()
        self.steps = generator.new_tokens - 1
        # The decode inputs live in fixed tensors updated in place: a compiled step sees the
        # same shapes and addresses every call, and nothing is copied from the host.
        self.token = self.first.clone()
        self.position = generator.positions[prompt : prompt + 1].clone()
        self.done = 0
        self.kv_bytes_after_prefill = cache_bytes(self.cache)
        # A sliding-window layer's state after the prompt: once its window is full, crop cannot bring back what rolled
        # out of it, so restart sets the layer back to these (its updates make new tensors: they stay as they are).
        self._prefilled = [(layer, layer.keys, layer.values, layer.cumulative_length)
                           for layer in self.cache.layers if getattr(layer, "is_sliding", False)] if not generator.static else []
        read = read_layers(self.cache, generator.config)
        self._kv_read_static = sum(cache_bytes_of(layer) for layer in read)
        # Per layer read: bytes per cached position after the prompt, and the window it is held to (None: every one).
        self._kv_layers = [(cache_bytes_of(layer) / layer.keys.shape[-2], getattr(layer, "sliding_window", None)
                            if getattr(layer, "is_sliding", False) else None) for layer in read]
        self._advance: Callable[[], object] = self.advance

    def restart(self) -> None:
        """Back to the prefilled state: the first token, the position after the prompt, the cache of the prompt."""
        if not self.g.static and self.done:
            for layer, keys, values, length in self._prefilled:
                layer.keys, layer.values, layer.cumulative_length = keys, values, length
            # A negative count removes that many positions from the end on every transformers 5.x
            # (a positive one meant an absolute length before 5.2x, and is refused after).
            for layer in self.cache.layers:
                if not getattr(layer, "is_sliding", False):
                    layer.crop(-self.done)
        for layer in self.cache.layers if self.g.static else ():
            # Newer static layers write where their own device-side counter says (older ones at
            # cache_position): rewound in place, so a compiled step keeps its addresses.
            if isinstance(counter := getattr(layer, "cumulative_length", None), torch.Tensor):
                counter.fill_(self.g.seq_len)
        self.token.copy_(self.first)
        self.position.fill_(self.g.seq_len)
        self.done = 0

    def advance(self) -> None:
        """One decode step on the device alone: what a CUDA graph of the step records.

        Feeds the last token at ``position``, picks the next, writes it into its column of
        ``tokens`` and moves the position on. Every index is read from the position tensor,
        so each replay of a recorded step writes the next column, as this call does.
        """
        out = self.g.runner(input_ids=self.token, cache_position=self.position, use_cache=True, **{self.g.cache_arg: self.cache})
        chosen = self.g.pick(out.logits)
        # The token fed sits at position seq_len + k - 1 and was column k - 1: the next is column k.
        self.tokens.index_copy_(1, self.position - (self.g.seq_len - 1), chosen)
        self.token.copy_(chosen)
        self.position.add_(1)

    def replay_with(self, run: Callable[[], object]) -> None:
        """Make ``step`` call ``run`` (a CUDA graph's replay of ``advance``) instead of ``advance``.

        Only over a StaticCache: a DynamicCache grows every step, and a recorded step would
        replay the shapes and addresses of the one step it recorded.
        """
        if not self.g.static:
            raise ValueError("a recorded decode step needs a StaticCache (Generator(static=True)): a DynamicCache changes shape every step")
        self.restart()  # whatever recording ran, the next step starts a sequence
        self._advance = run

    def ready(self) -> None:
        """Back to the prefilled state where a whole sequence has been generated: what a timed loop runs between
        steps (run_timed's ``between``), so the first step of each sequence is timed as a step, not with the cache's
        rewind (on a GPU a fill per layer beside one graph replay: the p99 of a short sequence was the harness's)."""
        if self.done == self.steps:
            self.restart()

    def step(self, _: object = None) -> None:
        """One decode step (``ready`` first, where no timed loop ran it). The argument is ignored."""
        self.ready()
        self._advance()
        self.done += 1

    def kv_bytes_read_per_step(self) -> float:
        """KV-cache bytes a decode step's attention reads, on average over a sequence.

        A StaticCache is read whole every step (later positions masked, not skipped); a
        DynamicCache holds the prompt plus the tokens so far: step k reads seq_len + k + 1 positions,
        a sliding-window layer at most its window.
        """
        if self.g.static:
            return float(self._kv_read_static)
        return sum(per * min(self.g.seq_len + k + 1, window or math.inf)
                   for k in range(self.steps) for per, window in self._kv_layers) / self.steps
