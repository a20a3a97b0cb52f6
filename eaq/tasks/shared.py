"""What the benchmark and the layers task set up alike, so both see the same data and protocol."""

from __future__ import annotations

import logging

import torch
from transformers import PreTrainedTokenizerBase

from eaq.config import EaqConfig
from eaq.errors import ConfigError, DataError
from eaq.data import Batches, Examples, examples_digest, load_examples, make_batches, make_stream, make_synthetic
from eaq.data.token_cache import TokenCache, tokenizer_identity
from eaq.device import draw_key
from eaq.evaluate import check_labels
from eaq.models import LoadedModel, model_config, model_skeleton, output_classes, position_limit, weights_identity
from eaq.precision import Precision, build_precision, require_runnable
from eaq.precision.mixed import MixedPrecision, check_plan_model
from eaq.precision.torchao_quant import TorchaoQuant
from eaq.tasks.isolation import tag_now

log = logging.getLogger(__name__)


def make_inputs(
    cfg: EaqConfig, tokenizer: PreTrainedTokenizerBase | None, examples: Examples | None, device: torch.device
) -> tuple[tuple[Batches, torch.Tensor | None], TokenCache | None]:
    """(The batches, and for raw text the token stream perplexity is computed on), the token cache used.

    Made before the weights load (the tokenizer alone, eaq.models.load_tokenizer; synthetic ids from the
    architecture's config): data that cannot make the run's inputs is refused before a model of gigabytes loads."""
    if examples is None:
        return (synthetic_batches(cfg, model_config(cfg.model).vocab_size, device, cfg.trial), None), None
    assert tokenizer is not None
    cache = TokenCache(
        cfg.paths.cache_dir, tokenizer=tokenizer_identity(tokenizer), data=examples_digest(examples),
        kind=cfg.dataset.kind, seq_len=cfg.seq_len if cfg.dataset.kind != "raw" else None,
    )
    if cfg.dataset.kind == "raw":
        found = make_stream(examples.texts[0], tokenizer, cfg.batch_size, cfg.seq_len, device, cfg.dataset.max_samples, cache)
        # A text shorter than one row (a prompt) stays one short row: refused before the weights load, since the run
        # would time fewer tokens than the seq_len it records (a benchmark or layers run, forward or generating).
        if (tokens := found[0].batches[0]["input_ids"].shape[1]) < cfg.seq_len:
            raise DataError(
                f"dataset={cfg.dataset.name} holds {tokens} tokens, fewer than one "
                f"{'prompt' if cfg.workload.name == 'generate' else 'row'} of seq_len={cfg.seq_len}: lower seq_len to at "
                f"most {tokens}, or use a longer text."
            )
    else:
        found = make_batches(examples.texts, tokenizer, cfg.batch_size, cfg.seq_len, device, examples.labels, cache), None
        if found[0].truncated:
            limit = position_limit(model_skeleton(cfg.model))
            whole = (f"seq_len={found[0].longest} keeps every one whole" if limit is None or found[0].longest <= limit
                     else f"the model's {limit} positions cannot hold the longest")
            log.warning("%d of %d texts are longer than seq_len=%d tokens and were cut to it (the longest has %d): "
                        "quality is scored on the cut texts; %s (data_truncated_texts)",
                        found[0].truncated, found[0].num_texts, cfg.seq_len, found[0].longest, whole)
    return found, cache


def check_positions(cfg: EaqConfig) -> None:
    """Refuse a forward pass of more tokens than the model has positions, from its config before the weights load:
    past them torch's own error ended the run ("The expanded size of the tensor (1024) must match the existing size
    (512)" on BERT, "index out of range in self" on GPT-2). A model whose positions are computed (rotary: Llama) has no
    table and runs longer. Generation checks its own (prompt and new tokens)."""
    limit = position_limit(model_skeleton(cfg.model))
    if limit is not None and cfg.seq_len > limit:
        raise ConfigError(
            f"seq_len={cfg.seq_len} is longer than the {limit} positions {cfg.model.name}'s position table holds: "
            f"lower seq_len to at most {limit}."
        )


def data_metrics(cfg: EaqConfig, batches: Batches) -> dict[str, float]:
    """How many of the texts seq_len cut (a file of texts only: a raw stream is cut into rows, synthetic ids are made
    to the length): the same data file's accuracy at seq_len 16 and 64 differs, and both runs carry one data hash."""
    return {"data_truncated_texts": batches.truncated} if cfg.dataset.kind not in ("raw", "synthetic") else {}


# The seed of the synthetic ids fidelity is measured on (trials.fidelity_on_synthetic): one for
# every trial, so the figures do not depend on the trial, like text's, and one fp32 reference and
# one set of figures per configuration serve all trials (trials.reuse_quality).
FIDELITY_SEED = 0


def synthetic_batches(cfg: EaqConfig, vocab_size: int, device: torch.device, seed: int) -> Batches:
    """``dataset.max_samples`` rows of random token ids (at least a batch), drawn with ``seed``."""
    return make_synthetic(vocab_size, cfg.dataset.max_samples or cfg.batch_size, cfg.batch_size, cfg.seq_len, device, seed)


def run_precision(cfg: EaqConfig, device: torch.device) -> Precision:
    """The run's precision, refused where it cannot run for real on ``device`` (eaq.precision), where a quantized
    format would quantize too little of this model (TorchaoQuant.check) and, a plan, where its layers are not this
    model's: checked on the model's skeleton (meta device), before the model loads.

    A plan's file and hash are set on the run as soon as it is read (``tag_now``), before those checks: a run that
    fails, here or later, is counted with the runs of its plan."""
    precision = build_precision(cfg.precision.name, device, cfg.precision.plan)
    if not isinstance(precision, MixedPrecision):
        require_runnable(precision, device)
        if isinstance(precision, TorchaoQuant):
            precision.check(model_skeleton(cfg.model))
        return precision
    tag_now(precision.plan_tags)
    require_runnable(precision, device)  # a format of the plan this device cannot run
    check_plan_model(precision.plan, cfg.model.name, weights_identity(cfg.model, draw_key(device)),
                     f"precision.plan={cfg.precision.plan}")
    precision.check(model_skeleton(cfg.model))  # and learns its Linear layers, for the roofline's matmul format
    return precision


def check_scored_labels(cfg: EaqConfig, loaded: LoadedModel, batches: Batches) -> None:
    """Refuse labels the classifier cannot have (GLUE's -1) among the rows quality scores, before any pass scores them;
    and a classifier of one output (a reranker's or a regression's score), whose argmax and softmax are the same for
    any score: every precision logged agreement 1 and KL 0 however far its scores drifted."""
    if cfg.model.head != "sequence_classification":
        return
    if (classes := output_classes(loaded.model)) < 2:
        raise ConfigError(
            f"{cfg.model.name} scores {classes} output (num_labels={classes}: a reranker's or a regression's score), which "
            "has no class distribution to compare or classes to be right about; measure it with model.head=embedding "
            "(cosine of its encoder's embeddings to fp32's), or pass a classifier of two or more classes."
        )
    labels = batches.distinct_labels(cfg.trials.quality_max_batches)
    if labels is not None:
        check_labels(labels, classes)


def read_examples(cfg: EaqConfig) -> Examples | None:
    """The run's examples (None for synthetic ids), read before the model loads so a bad file fails first; their
    identity (``data_tags``) is set on the run at once (``tag_now``), so a run that fails later is counted with the
    runs of its data."""
    examples = load_examples(cfg.dataset) if cfg.dataset.kind != "synthetic" else None
    tag_now(data_tags(examples))
    return examples


def data_tags(examples: Examples | None) -> dict[str, str]:
    """Where the examples came from, and their contents' hash (one file read from two paths is one dataset)."""
    return {} if examples is None else {"eaq.data.source": examples.source, "eaq.data.sha256": examples_digest(examples)[:16]}

