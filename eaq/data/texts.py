"""Read evaluation examples: texts and, where the file has them, integer labels.

Formats (``dataset.kind``): ``text`` (one example per line, eaq's own file or the
user's), ``raw`` (the whole file as one stream, for perplexity), ``tsv`` (a header row
naming ``text_column`` and ``label_column``, GLUE style, no quoting), ``jsonl`` (one JSON
object per line with those keys). A malformed file fails with a sentence naming the file,
the line and what was expected.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from eaq.config import DatasetConfig
from eaq.errors import DataError

log = logging.getLogger(__name__)


@dataclass
class Examples:
    texts: list[str]
    # One integer class per text, or None for unlabelled data.
    labels: list[int] | None
    # Where they came from (a file path, or the name of a file eaq ships).
    source: str


def _read(path: str) -> tuple[str, str]:
    """Return (text, display name); ``package:<file>`` reads a file shipped inside eaq.data."""
    if path.startswith("package:"):
        name = path.removeprefix("package:")
        resource = resources.files("eaq.data").joinpath(name)
        if not resource.is_file():
            raise DataError(f"dataset.path={path!r}: eaq ships no file {name!r}; use package:sample_sentences.txt.")
        return resource.read_text(encoding="utf-8"), name
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataError(f"dataset.path={path!r} does not exist or is not a file; pass a {_WHAT} file.")
    try:
        return file.read_text(encoding="utf-8-sig"), str(file)  # a byte-order mark (a spreadsheet's export) is no text
    except UnicodeDecodeError as exc:
        line = file.read_bytes()[: exc.start].count(b"\n") + 1
        raise DataError(f"{file}, line {line}: the file is not valid UTF-8; save it as UTF-8.") from exc


_WHAT = "text, raw text, TSV or JSONL"


def _lines(text: str) -> list[str]:
    """The file's lines: split at line ends only. ``str.splitlines`` also splits at characters a line may hold
    (U+2028, a form feed, ...): a text file's two lines read as four examples, and a JSONL line whose string held
    U+2028 unescaped (``json.dumps(..., ensure_ascii=False)`` writes it so) was refused as a broken object. The file
    was read in text mode, so its ``\r\n`` line ends are ``\n`` already."""
    return text.split("\n")


def _label(value: object, name: str, line: int, column: str) -> int:
    """A class label written as a whole number, 1 or 1.0 (a float column's export); 0.5, true or text are refused."""
    try:
        number = float(str(value))
        if isinstance(value, bool) or number != int(number):
            raise ValueError
        return int(number)
    except (ValueError, OverflowError):
        raise DataError(f"{name}, line {line}: {column}={value!r} is not an integer class label.") from None


def _text(value: object, name: str, line: int, column: str) -> str:
    """A text field that is a string: null or a list read as the text 'None' or "['a', 'b']" and was scored."""
    if not isinstance(value, str):
        raise DataError(f"{name}, line {line}: {column}={value!r} is not a text (a string); fix or drop that row.")
    return value


def _check_columns(columns: list[str], where: str, cfg: DatasetConfig, labelled: bool) -> None:
    """Refuse, naming the columns there are and the setting to change, data lacking the configured text column (or
    label column, where ``labelled``)."""
    wanted = [cfg.text_column, *([cfg.label_column] if labelled and cfg.label_column else [])]
    missing = [c for c in wanted if c not in columns]
    if missing:
        hint = "set dataset.text_column=<one of them>" if cfg.text_column in missing else "set dataset.label_column=<one of them>, or null for unlabelled data"
        raise DataError(f"{where} has no column {', '.join(map(repr, missing))}; it has {columns}: {hint}.")


def _tsv(text: str, name: str, cfg: DatasetConfig) -> Examples:
    lines = _lines(text)
    header = lines[0].split("\t")
    _check_columns(header, f"{name}, line 1: the header", cfg, labelled=True)
    text_at, label_at = header.index(cfg.text_column), header.index(cfg.label_column) if cfg.label_column else None
    texts, labels = [], []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(header):
            raise DataError(f"{name}, line {number}: {len(fields)} tab-separated fields, expected {len(header)} as in the header.")
        texts.append(fields[text_at].strip())
        if label_at is not None:
            labels.append(_label(fields[label_at], name, number, cfg.label_column or ""))
    return Examples(texts, labels if label_at is not None else None, name)


def _jsonl(text: str, name: str, cfg: DatasetConfig) -> Examples:
    texts, labels = [], []
    for number, line in enumerate(_lines(text), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{name}, line {number}: not a JSON object ({exc.msg}).") from None
        if not isinstance(record, dict) or cfg.text_column not in record:
            keys = f" (it has {sorted(record)}: set dataset.text_column=<one of them>)" if isinstance(record, dict) else ""
            raise DataError(f"{name}, line {number}: expected a JSON object with key {cfg.text_column!r}{keys}.")
        texts.append(_text(record[cfg.text_column], name, number, cfg.text_column))
        if cfg.label_column:
            if cfg.label_column not in record:
                raise DataError(f"{name}, line {number}: expected key {cfg.label_column!r} (set dataset.label_column=null for unlabelled data).")
            labels.append(_label(record[cfg.label_column], name, number, cfg.label_column))
    return Examples(texts, labels if cfg.label_column else None, name)


def _from_hub(cfg: DatasetConfig) -> Examples:
    """``cfg.hub`` = "name[:config]:split", read with the `datasets` library."""
    assert cfg.hub is not None
    *names, split = cfg.hub.split(":")
    try:
        import datasets
    except ImportError:
        raise DataError(
            f"dataset.path={cfg.path!r} does not exist and reading dataset.hub={cfg.hub!r} needs the `datasets` "
            f"library; install it (pip install 'eaq[hub]') or pass dataset.path=<local file>."
        ) from None
    try:
        rows = datasets.load_dataset(*names, split=split)
    except Exception as exc:  # offline, unknown name, no such split: all end the same way for the user
        raise DataError(
            f"dataset.hub={cfg.hub!r} could not be loaded ({type(exc).__name__}: {exc}); it reads name[:config]:split "
            f"(e.g. glue:sst2:validation); without the hub, pass dataset.path=<local file> (the preset's default is {cfg.path!r})."
        ) from exc
    return _hub_examples({name: rows[name] for name in rows.column_names}, cfg)


def _hub_examples(columns: dict[str, list], cfg: DatasetConfig) -> Examples:
    """The examples of a hub split's ``columns`` (name: values), read as a local file of ``cfg.kind`` is read: labels
    only for the labelled kinds (tsv, jsonl), each a whole number; a missing column named with those there are."""
    assert cfg.hub is not None
    labelled = cfg.kind in ("tsv", "jsonl") and cfg.label_column is not None
    _check_columns(list(columns), f"dataset.hub={cfg.hub!r}", cfg, labelled)
    empty = (f"dataset.hub={cfg.hub!r} has no text in its column {cfg.text_column!r}: expected at least one example; "
             "choose another split or column (dataset.text_column), or pass dataset.path=<local file>.")
    if cfg.kind == "raw":
        # Its rows keep their newlines, but a blank line of the file (WikiText's " \n": 1,467 of wiki.test.raw's 4,358
        # lines) is an empty row: joined as they are, the hub's stream would not be the file's.
        stream = "".join(row or " \n" for row in columns[cfg.text_column])
        if not stream.strip():  # as a file of no text: refused, not a tokenizer's IndexError
            raise DataError(empty)
        return Examples([stream], None, cfg.hub)
    labels = [_label(v, cfg.hub, row, cfg.label_column) for row, v in enumerate(columns[cfg.label_column], start=1)] if labelled else None
    texts = [_text(t, cfg.hub, row, cfg.text_column) for row, t in enumerate(columns[cfg.text_column], start=1)]
    # As the file of the kind reads: a TSV's fields and a text file's lines stripped (GLUE's SST-2 sentences end in a
    # space, which a BPE tokenizer makes a token of its own, and hashed as another dataset than the file's), a text
    # file's empty lines dropped; a JSONL string kept as it is.
    if cfg.kind == "text":
        texts = [t.strip() for t in texts if t.strip()]
    elif cfg.kind == "tsv":
        texts = [t.strip() for t in texts]
    if not texts:
        raise DataError(empty)
    return Examples(texts, labels, cfg.hub)


def examples_digest(examples: Examples) -> str:
    """A hash of the examples' texts and labels: what a cached tokenization, reference or figure of them depends on.

    JSON, not the texts joined: a text holding a newline must not hash as two texts.
    """
    return hashlib.sha256(json.dumps([examples.texts, examples.labels]).encode()).hexdigest()


def load_examples(cfg: DatasetConfig) -> Examples:
    """The examples of the dataset file (or hub dataset), at most ``max_samples`` of them."""
    assert cfg.path is not None or cfg.hub is not None  # validated: text kinds need a source
    if cfg.hub and (cfg.path is None or not Path(cfg.path).expanduser().exists()):
        if cfg.path is not None:  # said, and the run's tag eaq.data.source says it too: a mistyped path reads the hub
            log.warning("dataset.path=%s does not exist: reading dataset.hub=%s instead", cfg.path, cfg.hub)
        examples = _from_hub(cfg)
        limit = cfg.max_samples if cfg.kind != "raw" else None
        if limit:
            examples = Examples(examples.texts[:limit], examples.labels[:limit] if examples.labels else None, examples.source)
        return examples
    assert cfg.path is not None
    text, name = _read(cfg.path)
    if not text.strip():
        raise DataError(f"{name} has no text: expected a {_WHAT} file with at least one example.")
    if cfg.kind == "tsv":
        examples = _tsv(text, name, cfg)
    elif cfg.kind == "jsonl":
        examples = _jsonl(text, name, cfg)
    elif cfg.kind == "raw":
        return Examples([text], None, name)  # one stream; max_samples applies to token rows
    else:
        examples = Examples([line.strip() for line in _lines(text) if line.strip()], None, name)
    if not examples.texts:
        raise DataError(f"{name} has no examples after its header: expected at least one row.")
    limit = cfg.max_samples
    if limit:
        examples = Examples(examples.texts[:limit], examples.labels[:limit] if examples.labels else None, name)
    return examples
