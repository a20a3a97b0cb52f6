"""Read evaluation texts: one sentence per line, from eaq's own file or the user's."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from eaq.config import DatasetConfig
from eaq.errors import DataError


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
        raise DataError(f"dataset.path={path!r} does not exist or is not a file; pass a text file with one sentence per line.")
    try:
        return file.read_text(encoding="utf-8"), str(file)
    except UnicodeDecodeError as exc:
        line = file.read_bytes()[: exc.start].count(b"\n") + 1
        raise DataError(f"{file}, line {line}: the file is not valid UTF-8; save it as UTF-8.") from exc


def load_texts(cfg: DatasetConfig) -> list[str]:
    """The non-empty lines of the dataset file, at most ``max_samples`` of them."""
    text, name = _read(cfg.path)
    lines = [line.strip() for line in text.splitlines()]
    texts = [line for line in lines if line]
    if not texts:
        raise DataError(f"{name} has no text: expected one sentence per line.")
    return texts[: cfg.max_samples] if cfg.max_samples else texts
