"""Every relative path a user gives is read against the folder they launched eaq from, whichever folder a job runs in.

``hydra.job.chdir=true`` runs each job in its output folder (a launcher's worker or a cluster node may start elsewhere
still): a plan, data file, model folder or artifact folder named relative to the user would not be found there, or a
local model's name would be read from the hub. The params keep what the user wrote.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from safetensors.torch import save_file

from conftest import CONF
from eaq.config import FILE_SETTINGS, FOLDER_SETTINGS, MODEL_SETTINGS, register_schemas, validate
from eaq.files import from_launch_folder
from eaq.models.load import TOKENIZER_FILES
from eaq.tracking.flatten import READ_FILES
from eaq.tracking.run_logger import PARENT_TAG

register_schemas()


@pytest.mark.parametrize(("value", "hub", "expected"), [
    ("rel/plan.yaml", False, "/launch/rel/plan.yaml"),
    ("./rel/../data.tsv", False, "/launch/rel/../data.tsv"),  # '..' kept: below a symbolic link it is not lexical
    ("/abs/data.tsv", False, "/abs/data.tsv"),
    ("~/data.tsv", False, os.path.expanduser("~/data.tsv")),  # a file eaq reads: the home folder
    ("package:sample_sentences.txt", False, "package:sample_sentences.txt"),  # shipped with eaq
    ("s3://bucket/artifacts", False, "s3://bucket/artifacts"),  # a URI
    ("file:///abs/artifacts", False, "file:///abs/artifacts"),
    (None, False, None),
    ("", False, ""),  # empty: "none given" (model.tokenizer= takes the model's), not the launch folder
    ("", True, ""),
    ("org/name", True, "org/name"),  # no such folder under the launch folder: a hub id
    ("gpt2", True, "gpt2"),
    ("/abs/model", True, "/abs/model"),
])
def test_a_relative_path_is_read_from_the_launch_folder(value: str | None, hub: bool, expected: str | None) -> None:
    assert from_launch_folder(value, "/launch", hub=hub, home=True) == expected


def test_a_folder_hydra_and_the_store_share_is_read_as_they_read_it() -> None:
    # Hydra makes the job and sweep folders, SQLite opens the store and MLflow the artifact folder in the sweep's
    # process from the launch folder, taking a leading ~ as a folder's name: a job reading it as the home folder would
    # write its run into another store than its sweep's parent.
    assert from_launch_folder("~/out", "/launch") == "/launch/~/out"


def test_a_model_name_is_a_local_folder_only_where_the_launch_folder_has_one(tmp_path: Path) -> None:
    (tmp_path / "org" / "name").mkdir(parents=True)
    (tmp_path / "org" / "file").write_text("not a model folder")
    assert from_launch_folder("org/name", tmp_path, hub=True) == str(tmp_path / "org" / "name")
    assert from_launch_folder("org/other", tmp_path, hub=True) == "org/other"
    assert from_launch_folder("org/file", tmp_path, hub=True) == "org/file"  # transformers takes folders only


def test_every_file_the_resume_hash_reads_is_a_setting_validate_anchors() -> None:
    # Two lists, as tracking/ may not import eaq.config: a file the hash reads from the launch folder while the run
    # reads it elsewhere would hash one file and measure another.
    assert set(READ_FILES) <= set(FILE_SETTINGS + MODEL_SETTINGS)


def test_validate_reads_every_path_setting_from_the_launch_folder_and_leaves_the_params_as_written(tmp_path: Path) -> None:
    (tmp_path / "models" / "mine").mkdir(parents=True)
    (tmp_path / "plan.yaml").write_text("base: fp32\nlayers: {}\n")  # precision=mixed's plan must exist (validate)
    given = {"paths.root": "root", "paths.output_dir": "out", "paths.cache_dir": "out/cache", "gpu_slots.dir": "slots",
             "dataset.path": "data/dev.tsv", "precision.plan": "plan.yaml", "model.classifier_head": "head.safetensors",
             "model.name_or_path": "models/mine", "model.tokenizer": "org/tokenizer"}
    assert set(given) == set(FOLDER_SETTINGS + FILE_SETTINGS + MODEL_SETTINGS)  # a path setting added later is tested here too
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=["model=hub", "model.head=sequence_classification", "precision=mixed",
                                           *(f"{k}={v}" for k, v in given.items())])
    before = OmegaConf.to_container(cfg, resolve=True)
    config = validate(cfg, launched_from=tmp_path)
    for setting, value in given.items():
        group, key = setting.split(".")
        # the hub id has no folder under the launch folder: left as given
        expected = value if value == "org/tokenizer" else str(tmp_path / value)
        assert getattr(getattr(config, group), key) == expected, setting
    assert OmegaConf.to_container(cfg, resolve=True) == before  # what the params and the resume hash are made of


def test_without_a_launch_folder_validate_reads_from_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no Hydra job moved this process: its folder is where the user is
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=["paths.root=/x", "dataset.path=data/dev.tsv"])
    assert validate(cfg).dataset.path == str(tmp_path / "data" / "dev.tsv")


def test_a_job_run_in_its_own_folder_reads_the_users_files_from_the_launch_folder(
    tmp_path: Path, saved_model: Path,
) -> None:
    launch = tmp_path / "launch"
    # A local model whose tokenizer is a folder of its own, a classifier head, labelled data and a mixed plan, all named
    # relative to the launch folder; no name is a hub id the hub could answer for (tests run offline).
    shutil.copytree(saved_model, launch / "models" / "tiny",
                    ignore=shutil.ignore_patterns(*TOKENIZER_FILES, "special_tokens_map.json"))
    shutil.copytree(saved_model, launch / "tok")
    (launch / "heads").mkdir()
    save_file({"weight": torch.randn(2, 32), "bias": torch.zeros(2)}, launch / "heads" / "sentiment.safetensors")
    (launch / "data").mkdir()
    rows = ["a fine film", "a dull film", "bright and warm", "cold and grey"] * 2
    (launch / "data" / "dev.tsv").write_text("sentence\tlabel\n" + "".join(f"{t}\t{i % 2}\n" for i, t in enumerate(rows)))
    (launch / "plan.yaml").write_text(yaml.safe_dump({"base": "fp32", "layers": {"encoder.encoder.layer.0.output.dense": "int8"}}))
    relative = {
        "model.name_or_path": "models/tiny", "model.tokenizer": "tok", "model.classifier_head": "heads/sentiment.safetensors",
        "dataset.path": "data/dev.tsv", "precision.plan": "plan.yaml", "tracking.artifact_location": "art",
        "paths.output_dir": "out",  # and with it the store (sqlite:///out/mlflow.db) and the cache (out/cache)
    }
    cmd = [
        sys.executable, "-m", "eaq.run", "hydra.job.chdir=true", "model=hub", "model.name=local",
        "model.head=sequence_classification", "dataset.kind=tsv", "precision=mixed", "sampler=none", "trials=quick",
        "batch_size=4", "seq_len=32", *(f"{k}={v}" for k, v in relative.items()),
    ]
    result = subprocess.run(cmd, cwd=launch, capture_output=True, text=True, timeout=600,
                            env=os.environ | {"PYTHONUNBUFFERED": "1"})
    assert result.returncode == 0, result.stderr[-3000:]

    assert (launch / "out" / "mlflow.db").is_file()
    client = MlflowClient(tracking_uri=f"sqlite:///{launch}/out/mlflow.db")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "FINISHED"
    tags, params = run.data.tags, run.data.params
    assert tags["eaq.model_source"] == str(launch / "models" / "tiny")
    assert tags["eaq.data.source"] == str(launch / "data" / "dev.tsv")
    assert tags["eaq.precision.plan"] == str((launch / "plan.yaml").resolve())
    assert "quality_accuracy" in run.data.metrics  # the head scored the file's labels
    assert run.info.artifact_uri.startswith((launch / "art").resolve().as_uri())
    assert any((launch / "art").rglob("config.yaml"))
    # Nothing the run wrote is in its job folder but Hydra's own files: the cache is under the launch folder.
    (job,) = (launch / "out" / "runs").iterdir()
    assert not (job / "art").exists() and not (job / "out").exists() and any((launch / "out" / "cache").iterdir())
    # The params say what the user wrote.
    assert {k: params[k] for k in relative} == relative


def test_a_sweep_of_jobs_in_their_own_folders_finds_its_folder_and_hashes_the_users_plan(tmp_path: Path) -> None:
    """A relative output folder (and with it the sweep's folder) and plan, under ``hydra.job.chdir=true``: the jobs
    read the sweep's files (its parent run's id, the progress records) from their own folders and stopped the sweep;
    the resume hash read the plan from the job's folder, found none, and an edited plan was skipped as measured."""
    launch = tmp_path / "launch"
    launch.mkdir()
    plan = launch / "plan.yaml"
    plan.write_text(yaml.safe_dump({"base": "fp32", "layers": {"encoder.layer.0.intermediate.dense": "int8"}}))
    cmd = [sys.executable, "-m", "eaq.run", "-m", "hydra.job.chdir=true", "paths.output_dir=out", "model=bert_tiny_random",
           "precision=mixed", "precision.plan=plan.yaml", "sampler=none", "trials=quick", "batch_size=4", "seq_len=32",
           "trial=1,2"]

    def sweep() -> str:
        result = subprocess.run(cmd, cwd=launch, capture_output=True, text=True, timeout=600,
                                env=os.environ | {"PYTHONUNBUFFERED": "1"})
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout + result.stderr

    assert "2 of 2 runs finished" in sweep()
    client = MlflowClient(tracking_uri=f"sqlite:///{launch}/out/mlflow.db")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    (parent,) = [r for r in runs if r.data.tags.get("eaq.kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("eaq.kind") == "benchmark"]
    assert len(children) == 2 and all(r.data.tags.get(PARENT_TAG) == parent.info.run_id for r in children)
    assert "2 skipped" in sweep()  # unchanged: resume finds both
    plan.write_text(yaml.safe_dump({"base": "fp32", "layers": {"encoder.layer.1.intermediate.dense": "int8"}}))
    again = sweep()  # another plan under the same name: measured again
    assert "2 of 2 runs finished" in again and "skipped, already FINISHED" not in again
