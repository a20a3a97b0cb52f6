"""Load a transformers model and its tokenizer from wherever the config points.

Three sources, one function: a Hugging Face hub id (needs the hub or its local cache), a
local directory saved with ``save_pretrained``, or ``package:<module>`` for weights a Python
package ships (the offline default). ``weights: random`` builds the architecture from a
transformers config with seeded random weights, for speed and energy work; runs say so.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import importlib
import json
import logging
import re
import struct
import sys
from dataclasses import dataclass
from typing import Any, BinaryIO
from pathlib import Path
import urllib.error
import urllib.request
import zipfile
from urllib.parse import urlparse

import torch
import transformers
from huggingface_hub import constants as hub_constants
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from safetensors import safe_open
from transformers.utils import cached_file, logging as transformers_logging

from eaq.config import ModelConfig
from eaq.models.conv1d import convert_conv1d
from eaq.models.embedding_classifier import EmbeddingClassifier, load_head
from eaq.errors import ModelLoadError

log = logging.getLogger(__name__)

_AUTO_CLASSES = {
    "embedding": AutoModel,
    "sequence_classification": AutoModelForSequenceClassification,
    "causal_lm": AutoModelForCausalLM,
}


@dataclass
class LoadedModel:
    model: PreTrainedModel | EmbeddingClassifier
    # None when the data needs none (synthetic token ids).
    tokenizer: PreTrainedTokenizerBase | None
    # Where the weights were read from, resolved (a folder, a hub id, or "random").
    source: str


def resolve_location(location: str) -> str:
    """Map ``package:<module>`` to the folder the package ships; leave ids and paths alone."""
    if not location.startswith("package:"):
        return location
    module_name = location.removeprefix("package:")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelLoadError(
            f"{location} needs the Python package {module_name!r}, which is not installed; "
            f"install eaq's dependencies (`pip install -e .`) or pass model.name_or_path=<hub id or folder>."
        ) from exc
    return str(module.get_model_path())


def _head_path(location: str) -> str:
    if location.startswith("package:"):
        path = Path(__file__).parent / "heads" / location.removeprefix("package:")
    else:
        path = Path(location).expanduser()
    if not path.is_file():
        raise ModelLoadError(f"model.classifier_head={location!r} does not exist; pass a safetensors file with weight and bias.")
    return str(path)


def _looks_local(location: str) -> bool:
    return location.startswith((".", "/", "~")) or Path(location).exists() or location.count("/") > 1


# What a saved tokenizer leaves in its folder (one is enough): fast, slow WordPiece/BPE, SentencePiece.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "*.model")


def _check_local(location: str, what: str, named: str | None = None) -> str:
    """The folder with ``~`` expanded (the loader gets what was checked), or an error naming what is missing;
    ``named``: how a file given as the folder is named (its setting), if not as ``what``."""
    path = Path(location).expanduser()
    if not path.exists():
        raise ModelLoadError(f"{what} {location!r} does not exist; pass a folder saved with save_pretrained or a hub id.")
    if path.is_file():  # transformers read a file's path as a hub id: refused after the hub library's retries
        raise ModelLoadError(f"{named or f'{what} {location!r}'} is a file; pass the folder it was saved in ({path.parent}).")
    if not (path / "config.json").exists() and what == "model.name_or_path":
        raise ModelLoadError(
            f"{location!r} is not a model folder (it has no config.json); pass a folder saved with save_pretrained."
        )
    # transformers loads a folder without them as a tokenizer of a few special tokens, without a word: every
    # text would become unknown tokens, and quality be measured on them.
    if what == "the tokenizer folder" and path.is_dir() and not any(next(path.glob(p), None) for p in TOKENIZER_FILES):
        raise ModelLoadError(
            f"{location!r} has no tokenizer files ({', '.join(TOKENIZER_FILES)}): save the tokenizer there too "
            "(tokenizer.save_pretrained(DIR)), or pass model.tokenizer=<hub id or folder>."
        )
    return str(path)


def _load_tokenizer(location: str, setting: str) -> PreTrainedTokenizerBase:
    """The tokenizer at ``location``, which ``setting`` named (``model.tokenizer``, or the model's own folder or id)."""
    resolved = resolve_location(location)
    if _looks_local(resolved):  # a file given as the folder is named by its setting (model.tokenizer, or the model's)
        resolved = _check_local(resolved, "the tokenizer folder", f"{setting}={location}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(resolved, **_hub_options(resolved))
    except OSError as exc:
        raise ModelLoadError(_not_found(location, exc, setting, "tokenizer")) from exc
    # A folder with a tokenizer_config.json alone loads as its special tokens and no word (every text unknown tokens,
    # quality measured on them); a byte-level one (ByT5) has that file alone and a vocabulary of its bytes.
    if len(tokenizer.get_vocab()) <= len(set(tokenizer.all_special_tokens)):
        raise ModelLoadError(
            f"{setting}={location} loads a tokenizer of {len(tokenizer.get_vocab())} special tokens and no word (its "
            "vocabulary file is missing: vocab.txt, vocab.json and merges.txt, tokenizer.json or *.model): every text "
            "would be unknown tokens; save the tokenizer there whole (tokenizer.save_pretrained(DIR))."
        )
    if tokenizer.pad_token is None:  # GPT-2 style tokenizers: pad with end-of-text, masked out anyway
        tokenizer.pad_token = tokenizer.eos_token
    if tokenizer.pad_token is None:  # padding a batch failed in the run's process, on advice no setting can follow
        raise ModelLoadError(
            f"{setting}={location} loads a tokenizer with neither a padding nor an end-of-sequence token, and eaq pads "
            "each batch to seq_len with one of them; use a tokenizer that has either (model.tokenizer=<hub id or folder>)."
        )
    return tokenizer


def _tokenizer_of(cfg: ModelConfig) -> PreTrainedTokenizerBase:
    """``model.tokenizer``'s tokenizer, else the model's own (its folder or hub id), errors naming that setting."""
    return _load_tokenizer(cfg.tokenizer or cfg.name_or_path, "model.tokenizer" if cfg.tokenizer else "model.name_or_path")


# Seconds to wait for the hub to answer one request: well under a second where there is internet.
HUB_PROBE_S = 5.0


@functools.cache
def _hub_unreachable() -> str | None:
    """The hub's host where one request to it (a HEAD of its endpoint, through the proxy the environment names, as the
    hub library's requests go) gets no answer from here, else None (answered, or already offline). Tried once per
    process. A connection alone is not an answer: a firewall that accepts every connection and drops the traffic
    passed a TCP probe, and the retries followed.

    Without it a hub id on a machine without internet met huggingface_hub's five retries, with a warning each: about
    50 s of "Retrying in 8s" before the run could say it was not found. Where the hub cannot be reached the id is read
    from the local cache alone (``local_files_only``), which loads a model downloaded before and fails at once otherwise.
    """
    if hub_constants.HF_HUB_OFFLINE:
        return None
    try:
        urllib.request.urlopen(urllib.request.Request(hub_constants.ENDPOINT, method="HEAD"), timeout=HUB_PROBE_S).close()
    except urllib.error.HTTPError:  # an answer, if not a welcome one: the hub is there
        return None
    except (OSError, ValueError) as error:  # no route, refused, timed out, TLS failed; ValueError: not a URL
        host = urlparse(hub_constants.ENDPOINT).hostname or hub_constants.ENDPOINT
        log.info("the hub (%s) cannot be reached from here (%s): hub ids are read from the local cache", host, error)
        return host
    return None


def _hub_options(location: str) -> dict[str, bool]:
    """``from_pretrained``'s options for ``location``: the local cache alone for a hub id where the hub is unreachable;
    never a checkpoint's own Python code (``trust_remote_code``: left unset, transformers asked on the terminal, which a
    run's process cannot answer, and the code ran where it was answered)."""
    return {"trust_remote_code": False} | ({"local_files_only": True} if not _looks_local(location) and _hub_unreachable() else {})


def _not_found(location: str, error: OSError, setting: str = "model.name_or_path", what: str = "model") -> str:
    """Why ``location`` did not load, with what transformers said: a local folder missing its weights file, or a
    gated hub id, read as "not a local folder and the hub is unreachable" (the cause chained, which no one sees).
    ``setting`` named it and ``what`` it is to hold: the advice is for that setting (a tokenizer that did not load was
    advised to be passed as model.name_or_path, in the model's place)."""
    said = " ".join(str(error).split()).rstrip(".")
    if _looks_local(location):
        saved = "config, weights and tokenizer" if what == "model" else "tokenizer.save_pretrained(DIR)"
        return (f"could not load {setting}={location!r}: {said}; pass a folder with the {what} saved by save_pretrained "
                f"({saved}), or a hub id.")
    host = _hub_unreachable()
    if hub_constants.HF_HUB_OFFLINE:  # no request was made: nothing to guess about the hub
        why = "offline mode is on (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set) and the local cache does not have it"
    elif host:
        why = f"the hub ({host}) cannot be reached from here and the local cache does not have it"
    else:
        why = ("the hub is unreachable, does not have it, or does not give it to you (a gated model: accept its terms "
               "and log in with `hf auth login`)")
    return (
        f"could not load {location!r}: it is not a local folder and {why} (transformers: {said}); "
        f"download it where there is internet (`hf download {location} --local-dir DIR`) and pass {setting}=DIR."
    )


def _location(cfg: ModelConfig) -> str:
    """Where pretrained weights are read from (a folder checked to exist, ``~`` expanded, or a hub id)."""
    location = resolve_location(cfg.name_or_path)
    return _check_local(location, "model.name_or_path") if _looks_local(location) else location


def _unknown_type(model_type: object, where: str) -> str | None:
    """Why a ``model_type`` cannot be built, where the installed transformers does not know it (a newer architecture
    than it, or a typo): transformers says so in a ValueError that reaches the user as a traceback. None if known."""
    if model_type in CONFIG_MAPPING:
        return None
    close = difflib.get_close_matches(str(model_type), list(CONFIG_MAPPING.keys()), n=3, cutoff=0.75)
    return (f"{where} has model_type {model_type!r}, which the installed transformers {transformers.__version__} does "
            "not know" + (f" (close: {', '.join(close)})" if close else "") + "; upgrade transformers "
            "(`pip install -U transformers`) if the architecture is newer than it, or pass a model of a type it knows.")


def model_config(cfg: ModelConfig, location: str | None = None) -> PretrainedConfig:
    """The architecture's configuration, without a weight: what a run can refuse before the model loads or is drawn
    (a 7B shape's weights take minutes on a host). An embedding model with a classifier head has its encoder's.
    ``location``: pretrained weights' folder or hub id as ``_location`` checked it already (else it checks it)."""
    if cfg.weights == "random":
        fields = dict(cfg.architecture)
        model_type = fields.pop("model_type")
        if why := _unknown_type(model_type, "model.architecture"):
            raise ModelLoadError(why)
        try:
            config = AutoConfig.for_model(model_type, **fields)
        except Exception as exc:  # transformers' own checks of a field's type or value (num_hidden_layers=4.0)
            raise ModelLoadError(f"model.architecture does not make a {model_type} config: {' '.join(str(exc).split())}; "
                                 "fix that setting.") from exc
        _unknown_fields(config, fields)
        return config
    try:
        location = location or _location(cfg)
        config = AutoConfig.from_pretrained(location, **_hub_options(location))
    except OSError as exc:
        raise ModelLoadError(_not_found(cfg.name_or_path, exc)) from exc
    except ValueError as exc:  # the config read: its own code asked for, its model_type missing or unknown
        read = PretrainedConfig.get_config_dict(location, **_hub_options(location))[0]
        if "auto_map" in read:
            raise ModelLoadError(f"model.name_or_path={cfg.name_or_path!r} needs its own Python code (its config.json's "
                                 "auto_map names it: a trust_remote_code checkpoint), which eaq does not run; pass a model "
                                 "whose architecture transformers builds itself.") from exc
        model_type = read.get("model_type")
        if model_type is None:
            raise ModelLoadError(f"model.name_or_path={cfg.name_or_path!r}: its config.json names no model_type, which "
                                 "transformers builds the architecture by; save the model with save_pretrained, or add "
                                 "its model_type.") from exc
        if why := _unknown_type(model_type, f"model.name_or_path={cfg.name_or_path!r}"):
            raise ModelLoadError(why) from exc
        raise
    _architecture_matches(cfg, config)
    return config


def _architecture_matches(cfg: ModelConfig, config: PretrainedConfig) -> None:
    """Pretrained weights have their folder's shape: a ``model.architecture`` field that says otherwise (a preset's,
    or ``+model.architecture.num_hidden_layers=1`` given beside ``model=hub``) would be recorded in the run's params
    and do nothing. One that agrees (a random preset run on weights saved from it) is welcome."""
    differing = {k: v for k, v in cfg.architecture.items()
                 if (getattr(config, k, None) if k != "model_type" else config.model_type) != v}
    if differing:
        said = ", ".join(f"{k}={v!r} (the folder's: {getattr(config, k, 'none')!r})" for k, v in sorted(differing.items()))
        raise ModelLoadError(
            f"model.architecture sets {said}, and model.weights=pretrained builds {cfg.name_or_path}'s own shape from its "
            "config.json: drop model.architecture (model=hub carries none), or set model.weights=random to build it.")


def _auto_class(cfg: ModelConfig, config: PretrainedConfig) -> type:
    """The transformers auto class that builds ``cfg.head`` on ``config``'s architecture, checked before it is asked
    (it refuses an architecture without that head, a BERT as a causal LM or a ViT as a classifier, with a
    traceback listing every configuration it knows). A multimodal composite (Gemma 3, LLaVA) is refused: it built,
    and the run stopped on an AttributeError where its vocabulary size was read."""
    if config.get_text_config() is not config:  # its vocabulary, layers and positions are its text model's
        raise ModelLoadError(
            f"{cfg.name}'s architecture ({config.model_type}) is a composite of models (a multimodal one: its text model's "
            "config is within it); eaq measures a text model's inputs and outputs: pass its text model alone, saved "
            "with save_pretrained, or a text-only checkpoint of it."
        )
    if getattr(config, "is_encoder_decoder", False) and cfg.head != "causal_lm":
        # AutoModel builds the whole sequence-to-sequence model, which a pass of input ids alone does not run: T5,
        # Pegasus and Marian failed mid-run, and BART's "embedding" was its decoder's output.
        raise ModelLoadError(
            f"{cfg.name}'s architecture ({config.model_type}) is an encoder-decoder, which eaq's {cfg.head} pass (input ids "
            "alone) does not run as its users do: measure its decoder with model.head=causal_lm (where it has one), or "
            "an encoder-only or decoder-only model."
        )
    # An embedding encoder carrying a classifier head loads as the encoder, then is wrapped.
    auto_class = AutoModel if cfg.classifier_head else _AUTO_CLASSES[cfg.head]
    if type(config) not in auto_class._model_mapping:
        if getattr(config, "is_encoder_decoder", False):  # the heads it has are those refused above (T5)
            raise ModelLoadError(
                f"{cfg.name}'s architecture ({config.model_type}) is an encoder-decoder without a decoder of its own in "
                "transformers (no causal_lm head), the one way eaq measures an encoder-decoder: pass an encoder-only or "
                "decoder-only model.")
        heads = [head for head, other in _AUTO_CLASSES.items() if type(config) in other._model_mapping]
        raise ModelLoadError(
            f"{cfg.name}'s architecture ({config.model_type}) has no {cfg.head!r} head in transformers"
            + (f"; it has: {', '.join(heads)} (model.head=...)" if heads else "; pass a model that has one") + "."
        )
    return auto_class


# Bytes of a weight file (or of one tensor of a safetensors file) read for its identity: this many chunks of this
# size, evenly spaced, where it is larger than they are (a folder of gigabytes is not read whole; weights trained
# anywhere differ in nearly every chunk of the tensors they changed).
IDENTITY_CHUNKS, IDENTITY_CHUNK = 16, 4096


def _sample(handle: BinaryIO, start: int, size: int, digest: Any) -> None:
    """``size`` bytes from ``start``: whole where they are at most IDENTITY_CHUNKS chunks, else those chunks."""
    step = IDENTITY_CHUNK if size <= IDENTITY_CHUNKS * IDENTITY_CHUNK else size // IDENTITY_CHUNKS
    for offset in range(start, start + size, step):
        handle.seek(offset)
        digest.update(handle.read(min(IDENTITY_CHUNK, start + size - offset)))


def _contents(path: Path) -> str:
    """A local model folder or head file by contents, wherever it lies: each file's name, size and sampled bytes.

    A safetensors file is sampled tensor by tensor, after its header (names, dtypes, shapes): two fine-tunes of one
    base that differ only in a small head (a classifier's 768 x 2) had the same sampled chunks of the whole file,
    one identity, and a plan chosen on one ran on the other unrefused.

    Hidden files and folders are left out: ``hf download --local-dir`` writes the time of the download under
    ``.cache/huggingface/``, and a git clone keeps ``.git/``; neither is the model, and with them the same weights
    downloaded twice had two identities (a plan chosen on one refused on the other)."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else [f for f in path.rglob("*")
                                           if not any(part.startswith(".") for part in f.relative_to(path).parts)]
    for file in sorted(f for f in files if f.is_file()):
        size = file.stat().st_size
        digest.update(f"{file.relative_to(path) if file != path else file.name}\0{size}\0".encode())
        with file.open("rb") as handle:
            header = _safetensors_header(handle, size) if file.suffix == ".safetensors" else None
            if header is not None:
                length, tensors = header
                _sample(handle, 0, 8 + length, digest)
                for entry in tensors:
                    begin, end = entry["data_offsets"]
                    _sample(handle, 8 + length + begin, end - begin, digest)
            elif members := _zip_members(handle, size):  # torch.save's format (pytorch_model.bin): a tensor a member
                for name, start, stored in members:
                    digest.update(f"{name}\0{stored}\0".encode())
                    _sample(handle, start, stored, digest)
            else:
                _sample(handle, 0, size, digest)
    return digest.hexdigest()[:16]


def _zip_members(handle: BinaryIO, size: int) -> list[tuple[str, int, int]]:
    """(Name, where its stored bytes start, how many) of each member of a zip file in file order, as torch.save writes
    a checkpoint (pytorch_model.bin: each tensor's storage a member, stored uncompressed); none where it is no zip.
    Sampled member by member, as a safetensors file tensor by tensor: two such checkpoints differing only in a
    classifier had the same 16 chunks of the whole file, and one identity."""
    if size < 22 or not zipfile.is_zipfile(handle):
        return []
    members = []
    with zipfile.ZipFile(handle) as archive:
        for info in sorted(archive.infolist(), key=lambda i: i.header_offset):
            handle.seek(info.header_offset + 26)  # the local header's name and extra field lengths
            name_length, extra_length = struct.unpack("<HH", handle.read(4))
            members.append((info.filename, info.header_offset + 30 + name_length + extra_length, info.compress_size))
    return members


def _safetensors_header(handle: BinaryIO, size: int) -> tuple[int, list[dict[str, Any]]] | None:
    """(The header's length, its tensors in file order) of a safetensors file; None where it is not one (read whole
    or sampled as any file)."""
    try:
        length = int.from_bytes(handle.read(8), "little")
        if not 0 < length <= size - 8:
            return None
        entries = json.loads(handle.read(length))
        tensors = [v for k, v in entries.items() if k != "__metadata__"]
        return length, sorted(tensors, key=lambda v: v["data_offsets"][0])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _source(location: str) -> str:
    """A hub id or ``package:`` weights by name (the same wherever installed); a local folder or file by contents."""
    if location.startswith("package:") or not _looks_local(location):
        return location
    path = Path(location).expanduser()
    return f"local {'file' if path.is_file() else 'folder'} of contents {_contents(path)}" if path.exists() else location


def weights_identity(cfg: ModelConfig, drawn_on: str) -> str:
    """Which weights a run loads, in words that stay the same between runs and machines loading the same ones: a
    pretrained model's source (a hub id or ``package:`` weights by name, a local folder by its files' contents, not
    its path) and classifier head; random weights' architecture, seed and the devices that draw them (``drawn_on``:
    eaq.device.draw_key of the run's device, as ``load_model`` draws them there). What a precision plan records of the
    model it was chosen on, since its quality budget holds for those weights (eaq.precision.mixed.check_plan_model);
    read before the weights load (a few kB of a local folder's files)."""
    if cfg.weights == "random":
        return f"random weights: {json.dumps(cfg.architecture, sort_keys=True)}, seed {cfg.seed}, drawn on {drawn_on}"
    return (f"pretrained weights: {_source(cfg.name_or_path)}"
            + (f", classifier head {_head_source(cfg.classifier_head)}" if cfg.classifier_head else ""))


def _head_source(location: str) -> str:
    """A classifier head by contents, a shipped one too (3 kB): ``python -m eaq.models.fit_head`` writes over the
    shipped file by default, and a head fitted again is another classifier under the same name."""
    if not location.startswith("package:"):
        return _source(location)
    return f"{location} of contents {_contents(Path(_head_path(location)))}"


def _unknown_fields(config: PretrainedConfig, fields: dict[str, Any]) -> None:
    """Refuse a field the architecture's config does not have: transformers keeps any keyword as an attribute of its
    own, so a misspelt one (``num_hidden_layer=4``, GPT-2's ``n_layers``) built the default shape, unsaid, while the
    run's params recorded the setting. A field the config reads and converts (``rope_theta`` into its rope
    parameters) is no attribute left over, so it is not refused."""
    try:
        default = type(config)()
    except Exception:  # a config that cannot be built with no arguments: nothing to tell its own fields by
        return
    known = set(default.to_dict()) | set(type(config).attribute_map)
    if unknown := sorted(k for k in fields if k in vars(config) and not hasattr(default, k)):
        hints = {k: difflib.get_close_matches(k, known, n=1) for k in unknown}
        raise ModelLoadError(
            f"model.architecture.{unknown[0]} is no field of a {config.model_type} config ("
            + "; ".join(f"{k}: did you mean {m[0]}?" if m else f"{k}: no close field" for k, m in hints.items())
            + "); transformers would keep it unused and build the default shape; fix the key.")


def _built(cfg: ModelConfig, auto_class: type, config: PretrainedConfig) -> torch.nn.Module:
    """``auto_class.from_config(config)``; random weights' architecture that the config takes and the model refuses
    (a hidden size no multiple of the heads) said in a sentence, as a config's own refusal is, not a traceback."""
    try:
        return auto_class.from_config(config)
    except (ValueError, TypeError) as exc:
        if cfg.weights != "random":
            raise
        raise ModelLoadError(f"model.architecture does not make a {config.model_type} model: "
                             f"{' '.join(str(exc).split()).rstrip('.')}; fix that setting.") from exc


def model_skeleton(cfg: ModelConfig) -> torch.nn.Module:
    """The model's modules, as ``load_model`` builds them, on the meta device: names, classes and shapes with no
    memory and no weight read, what a precision plan is checked against before the model loads."""
    config = model_config(cfg)
    with torch.device("meta"):
        model = _built(cfg, _auto_class(cfg, config), config)
        if cfg.classifier_head:
            model = EmbeddingClassifier(model, load_head(_head_path(cfg.classifier_head), model.config.hidden_size))
    convert_conv1d(model)
    return model


# The names transformers gives a learned absolute position table (BERT's, RoBERTa's, DistilBERT's; GPT-2's; OPT's,
# BART's, Whisper's; OpenAI GPT's).
POSITION_TABLES = ("position_embeddings", "wpe", "embed_positions", "positions_embed")


def position_limit(model: torch.nn.Module) -> int | None:
    """The tokens ``model``'s learned absolute position table holds (its skeleton will do), or None where positions
    are computed (rotary, ALiBi; a sinusoidal table that grows as needed is no Embedding): a config's
    max_position_embeddings is no limit there (Llama runs past it). Rows a model reserves are not positions:
    RoBERTa's table of 514 rows holds 512 tokens, its rows offset past the padding index; OPT's and BART's of
    max_position_embeddings + 2 rows hold max_position_embeddings, their positions shifted by ``offset``."""
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Embedding) and name.rsplit(".", 1)[-1] in POSITION_TABLES:
            reserved = module.padding_idx + 1 if module.padding_idx is not None else 0
            return module.num_embeddings - reserved - int(getattr(module, "offset", 0))
    return None


def output_classes(model: torch.nn.Module) -> int:
    """The classes a classifier scores: an embedding model's head rows, else its config's ``num_labels``."""
    return model.classifier.out_features if isinstance(model, EmbeddingClassifier) else model.config.num_labels


# What a checkpoint's saved class (config.json's ``architectures``) ends with, and the model.head that loads it whole.
# A masked LM's encoder is an embedding model (its pooler aside, which embeddings never read).
SAVED_HEADS = (("ForSequenceClassification", "sequence_classification"), ("ForCausalLM", "causal_lm"),
               ("LMHeadModel", "causal_lm"), ("ForMaskedLM", "embedding"), ("Model", "embedding"))


def _saved_keys(location: str) -> dict[str, str] | None:
    """{tensor name: its file} of a checkpoint (safetensors or a .bin, one file or an index of shards), None where it
    has none (a hub id not in the cache): what a sequence-to-sequence save holds, read before it loads."""
    options = {k: v for k, v in _hub_options(location).items() if k == "local_files_only"}
    for weights in ("model.safetensors", "pytorch_model.bin"):
        found = {name: cached_file(location, name, _raise_exceptions_for_missing_entries=False, **options)
                 for name in (f"{weights}.index.json", weights)}
        if index := found[f"{weights}.index.json"]:
            shards = json.loads(Path(index).read_text())["weight_map"]
            return {key: str(Path(index).parent / shard) for key, shard in shards.items()}
        if single := found[weights]:
            return dict.fromkeys(_tensors(single), single)
    return None


def _tensors(file: str) -> dict[str, Any]:
    """The tensors of one checkpoint file by name, read as they are asked for (safetensors, or a .bin mapped)."""
    if file.endswith(".safetensors"):
        with safe_open(file, "pt") as tensors:
            return {key: tensors.get_slice(key) for key in tensors.keys()}
    return torch.load(file, map_location="cpu", weights_only=True, mmap=True)


def _decoder_mapping(saved: dict[str, str] | None) -> dict[str, dict[str, str]]:
    """``from_pretrained``'s key_mapping for an encoder-decoder's decoder loaded as a causal LM from a
    sequence-to-sequence save that keeps the decoder's token table once, as the table it shares with the encoder
    (BART saved by transformers 5: ``model.shared.weight``; its base model's save: ``shared.weight``). Loaded without
    it, the decoder's table and tied head were missing, and refused."""
    if saved is None or "model.decoder.embed_tokens.weight" in saved or "decoder.embed_tokens.weight" in saved:
        return {}
    prefix = next((p for p in ("model.", "") if f"{p}shared.weight" in saved), None)
    return {} if prefix is None else {"key_mapping": {rf"^{re.escape(prefix)}shared\.": f"{prefix}decoder.embed_tokens."}}


def _computed(model: torch.nn.Module, key: str) -> bool:
    """Whether ``key`` is a table its module computes rather than learns (Marian's sinusoidal positions, which a
    sequence-to-sequence save leaves out and its decoder as a causal LM builds again, the same): not missing."""
    owner = model.get_submodule(key.rsplit(".", 1)[0]) if "." in key else model
    return "Sinusoidal" in type(owner).__name__


def _add_logits_bias(model: torch.nn.Module, saved: dict[str, str]) -> None:
    """The bias a sequence-to-sequence head adds to its logits (``final_logits_bias``: Marian's converted models have
    one; BART's are zeros), on the causal LM's head, which has none: left out, the decoder computed other logits than
    the checkpoint's, without a word."""
    if "final_logits_bias" not in saved:
        return
    bias = _tensors(saved["final_logits_bias"])["final_logits_bias"][:].reshape(-1).float()
    head = model.get_output_embeddings()
    if bias.any() and head is not None:
        head.bias = torch.nn.Parameter(bias.to(head.weight.device), requires_grad=False)


def _saved_head(config: PretrainedConfig) -> tuple[str | None, str | None]:
    """(The class a checkpoint was saved as, the model.head that loads it whole), each None where unknown."""
    saved = next(iter(getattr(config, "architectures", None) or []), None)
    return saved, next((h for suffix, h in SAVED_HEADS if saved and saved.endswith(suffix)), None)


def _missing_weights(cfg: ModelConfig, missing: list[str], config: PretrainedConfig) -> str:
    """Why a checkpoint without weights for some of the model's parameters is refused, and what loads it whole.

    transformers draws such parameters at random with a warning in its load report: a base encoder loaded as a
    classifier gets a random head, which each trial's seed draws anew, and its accuracy would be reported as the
    pretrained model's."""
    saved, head = _saved_head(config)
    names = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
    # An encoder-decoder is measured as its decoder alone: the head its save names (MarianMTModel: embedding) is refused.
    fits = (f"it was saved as {saved}: use model.head={head}"
            if head and head != cfg.head and not getattr(config, "is_encoder_decoder", False)
            else "pass a checkpoint trained for it")
    return (f"{cfg.name_or_path!r} has no weights for {len(missing)} parameter(s) of a model.head={cfg.head} model "
            f"({names}), which transformers would draw at random: {fits}, or model.weights=random for speed and "
            "energy work on random weights.")


def _check_vocabulary(cfg: ModelConfig, config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase | None) -> None:
    """Refuse a tokenizer with more tokens than the model has embedding rows, before the weights are drawn or read:
    its ids past them ended the first pass in an IndexError (a device-side assert on a GPU, which ends the process's
    CUDA context). Random weights are built to the architecture's vocab_size; pretrained ones came with another
    tokenizer than the one given (model.tokenizer), or were saved beside another model's."""
    if tokenizer is None or config.vocab_size >= len(tokenizer):
        return
    if cfg.weights == "random":
        raise ModelLoadError(f"model.architecture.vocab_size={config.vocab_size} is smaller than the tokenizer's "
                             f"{len(tokenizer)} tokens; raise it to at least {len(tokenizer)}.")
    raise ModelLoadError(
        f"{cfg.name_or_path!r} has {config.vocab_size} token embeddings and its tokenizer "
        f"({cfg.tokenizer or cfg.name_or_path}) {len(tokenizer)} tokens, so the tokenizer is another model's; pass the "
        "model's own (model.tokenizer=<its hub id or folder>)."
    )


# How much the first position's logits may move with the last token (of their largest) in a causal model: a mixture
# of experts routes the tokens of a pass together, so one token's route moves the others' rounding (Mixtral, Qwen2-MoE,
# GraniteMoE: up to 2.7e-7, and they were refused as not causal), where a model attending both ways moved them by
# 2.1e-3 at the least (a 1-layer 32-wide random BERT; 0.22 for BERT-base's shape).
CAUSAL_TOLERANCE = 1e-5


def _sees_later_tokens(model: torch.nn.Module) -> bool:
    """Whether ``model``'s logits at the first position change with the last token (beyond CAUSAL_TOLERANCE): two
    passes of 4 token ids that differ only in the last, on the model's device. Read from what the model computes, not
    from its config: GPT-2's and Llama's say ``is_decoder: false`` and are causal all the same."""
    device = next(model.parameters()).device
    if device.type == "meta":  # shapes without values (a parameter count): nothing to compute, nothing to check
        return False
    ids = torch.tensor([[1, 2, 3, 4]], device=device)
    with torch.inference_mode():
        first = model(input_ids=ids).logits[0, 0]
        other = model(input_ids=torch.cat([ids[:, :-1], ids[:, -1:] + 1], dim=1)).logits[0, 0]
    return bool((first - other).abs().max() > CAUSAL_TOLERANCE * first.abs().max())


def _not_causal(cfg: ModelConfig, model: PreTrainedModel) -> str:
    """Why a model.head=causal_lm model that is not causal is refused, and what loads it as what it is.

    An encoder saved for masked LM (BertForMaskedLM) has every weight of transformers' causal LM class of its
    architecture (BertLMHeadModel), so no weight is missing, and that class attends both ways unless the config says
    ``is_decoder``: each position's prediction would see the token it predicts, and perplexity and next-token
    agreement would score that."""
    saved, head = _saved_head(model.config)
    fits = (f"it was saved as {saved}: use model.head={head}" if head and head != cfg.head
            else "an encoder loads with model.head=embedding; for a causal LM pass a checkpoint or an architecture "
                 "trained or built for one (model_type gpt2 or llama)")
    what = (repr(cfg.name_or_path) if cfg.weights == "pretrained"
            else f"model.architecture (model_type {cfg.architecture.get('model_type')})")
    return (f"{what} loaded with model.head=causal_lm as {type(model).__name__} is not causal: its logits at the first "
            "token change with the last token, so perplexity and next-token agreement would be scored on predictions "
            f"that saw the tokens they predict; {fits}.")


def load_tokenizer(cfg: ModelConfig) -> PreTrainedTokenizerBase:
    """The model's tokenizer alone, so that a run can make its inputs, and refuse data too short for them, before the
    weights load (a 7B's take minutes). Pretrained weights' folder is checked first: a missing model folder is named
    as such, not as a missing tokenizer folder (the tokenizer comes from the same place unless ``model.tokenizer``)."""
    if cfg.weights == "pretrained":
        _location(cfg)
    return _tokenizer_of(cfg)


def load_model(
    cfg: ModelConfig, with_tokenizer: bool = True, device: torch.device | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
) -> LoadedModel:
    """Load in fp32, eval mode; precisions transform the model afterwards.

    Random weights are drawn on ``device``: drawing GPT-2-medium's 355M of them on the host
    took seconds of every run of a GPU sweep. The same seed gives other weights on another device.
    ``tokenizer``: the one ``load_tokenizer`` gave already (the inputs were made with it), used instead of a second.
    """
    if not sys.stderr.isatty():  # a log or a sweep's output: transformers' weight-loading bar is a line per redraw there
        transformers_logging.disable_progress_bar()
    # Random weights read nothing from name_or_path but, when text needs one, its tokenizer.
    # Checked before the tokenizer: name the real problem.
    location = _location(cfg) if cfg.weights == "pretrained" else "random"
    if with_tokenizer and tokenizer is None:
        tokenizer = _tokenizer_of(cfg)
    if cfg.weights == "random":
        config = model_config(cfg)
        auto_class = _auto_class(cfg, config)
        _check_vocabulary(cfg, config, tokenizer)
        device = device or torch.device("cpu")
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), device:
            torch.manual_seed(cfg.seed)
            model = _built(cfg, auto_class, config)
        source = "random"
    else:
        try:
            # Its config first: a quantized checkpoint (GPTQ, AWQ, bitsandbytes, fp8) stays quantized under
            # dtype=float32, so the fp32 reference would not be fp32 and every precision would sit on another.
            config = model_config(cfg, location)
            auto_class = _auto_class(cfg, config)
            _check_vocabulary(cfg, config, tokenizer)
            scheme = getattr(config, "quantization_config", None)
            if scheme is not None:
                method = scheme.get("quant_method") if isinstance(scheme, dict) else getattr(scheme, "quant_method", scheme)
                raise ModelLoadError(
                    f"{cfg.name_or_path!r} is a quantized checkpoint ({method}); eaq applies each precision to the float "
                    "model itself: pass the unquantized model it was made from."
                )
            saved_keys = _saved_keys(location) if getattr(config, "is_encoder_decoder", False) else None
            model, loading = auto_class.from_pretrained(location, dtype=torch.float32, output_loading_info=True,
                                                        **_decoder_mapping(saved_keys), **_hub_options(location))
            if saved_keys is not None:
                _add_logits_bias(model, saved_keys)
        except OSError as exc:
            raise ModelLoadError(_not_found(cfg.name_or_path, exc)) from exc
        except RuntimeError as exc:
            if "ignore_mismatched_sizes" not in str(exc) and "size mismatch" not in str(exc):
                raise
            raise ModelLoadError(
                f"{cfg.name_or_path}'s weights do not have the shapes its config.json gives (transformers' report above "
                "names each tensor): save the folder again with save_pretrained, or fix the config.json it was saved with."
            ) from exc
        # An encoder's pooler, which a checkpoint saved for masked LM (roberta-base) lacks: embeddings and eaq's
        # classifier head mean-pool the last hidden states, and never read it.
        pooled = cfg.head == "embedding" or bool(cfg.classifier_head)
        if missing := sorted(k for k in loading["missing_keys"] if not (pooled and k.startswith("pooler.")
                                                                       or _computed(model, k))):
            raise ModelLoadError(_missing_weights(cfg, missing, model.config))
        saved, head = _saved_head(config)
        if cfg.head == "embedding" and not cfg.classifier_head and head not in (None, "embedding"):
            # Nothing missing, so nothing refused: the checkpoint's own head (a classifier's, a causal LM's tied to
            # its embeddings) is left unread, and the run measures its encoder's embeddings (model=hub's default).
            log.warning("%s was saved as %s and loads as %s without its head (model.head=embedding): the run "
                        "measures the encoder alone; model.head=%s loads it whole", cfg.name_or_path, saved,
                        type(model).__name__, head)
        source = location
    if cfg.classifier_head:
        model = EmbeddingClassifier(model, load_head(_head_path(cfg.classifier_head), model.config.hidden_size))
    converted = convert_conv1d(model)
    if converted:
        log.info("converted %d GPT-2 Conv1D layers to nn.Linear (identical math) so quantizers cover them", converted)
    if tokenizer is not None and (model.config.pad_token_id is None or cfg.head == "sequence_classification"):
        # A decoder's classifier (GPT-2's, Llama's, OPT's) reads each row's last token that is not the config's pad
        # id: the batches are padded with the tokenizer's, and a config keeping another (OPT's 1 beside another
        # tokenizer's 0, a Llama config's 0 beside its EOS padding) scored every padded row at a padding position.
        if model.config.pad_token_id not in (None, tokenizer.pad_token_id):
            log.info("the classifier reads the tokenizer's pad id %s (its config said %s): the batches are padded "
                     "with it", tokenizer.pad_token_id, model.config.pad_token_id)
        model.config.pad_token_id = tokenizer.pad_token_id
    elif tokenizer is None and cfg.head == "sequence_classification" and model.config.pad_token_id is None:
        # Synthetic ids (no tokenizer) pad nothing, and a decoder's classifier (GPT-2's, Llama's) reads each row's last
        # token that is not padding: without a pad id it refuses any batch of more than one row. An id no token has
        # makes every token the row's own, and the last one is read, as in a row alone.
        model.config.pad_token_id = -1
    model.eval()
    if cfg.head == "causal_lm" and _sees_later_tokens(model):
        raise ModelLoadError(_not_causal(cfg, model))
    log.info("loaded %s (%s weights) from %s", cfg.name, cfg.weights, source)
    return LoadedModel(model=model, tokenizer=tokenizer, source=source)
