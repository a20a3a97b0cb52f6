"""What a run measures is on its MLflow run as soon as the task knows it, so a run that fails later still says it.

Its examples' hash and a mixed plan's used to be set with the result, at the run's end: a run that failed after reading
its data (out of memory in warm-up, a kernel check, a refusal after the model loaded) had neither, and the report and
compare put it in a row of its own wherever the store held runs of two data files or two plans, instead of beside the
runs of its configuration, where its failure should show. Real runs of the CLI on a real store in tmp_path.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from pathlib import Path

import pytest
import yaml

from conftest import CONF, FAST, all_runs, run_eaq
from eaq.config import ModelConfig
from eaq.errors import EaqError
from eaq.models import weights_identity
from eaq.precision.mixed import Plan, save_plan
from eaq.tasks.isolation import run_isolated, tag_now

# A GLUE test split's rows: a classifier refuses their -1 labels after its weights load, well after the data are read.
UNLABELLED = "sentence\tlabel\nit is good\t-1\nit is bad\t-1\n"
SMALL = ["model=bert_tiny_random", "dataset=sst2", "trials=quick", "batch_size=2", "seq_len=16"]


def _only(runs: list, status: str):
    (run,) = [r for r in runs if r.info.status == status]
    return run


@pytest.fixture(scope="module")
def finished_hash(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """(The data file, the eaq.data.sha256 and eaq.data.source a FINISHED run of it carries): an embedding model's run
    reads the labels and scores none of them."""
    folder = tmp_path_factory.mktemp("finished")
    split = folder / "test.tsv"
    split.write_text(UNLABELLED)
    done = run_eaq(folder / "outputs", *SMALL, f"dataset.path={split}")
    assert done.returncode == 0, done.stderr[-2000:]
    tags = _only(all_runs(folder / "outputs"), "FINISHED").data.tags
    return split, tags["eaq.data.sha256"], tags["eaq.data.source"]


@pytest.mark.parametrize("isolate", ["true", "false"])
def test_a_run_failing_after_its_data_are_read_carries_their_hash(
        out: Path, finished_hash: tuple[Path, str, str], isolate: str) -> None:
    split, digest, source = finished_hash
    done = run_eaq(out, *SMALL, "model.head=sequence_classification", f"dataset.path={split}", f"isolate={isolate}")
    assert done.returncode == 2 and "labels run from -1 to -1 and the classifier has 2 classes" in done.stderr, done.stderr[-2000:]
    run = _only(all_runs(out), "FAILED")
    assert (run.data.tags.get("eaq.data.sha256"), run.data.tags.get("eaq.data.source")) == (digest, source)


def test_a_failed_run_is_counted_with_the_runs_of_its_data(out: Path, tmp_path: Path) -> None:
    from eaq.report.aggregate import aggregate
    from eaq.report.compare import COLUMNS, compare
    from eaq.report.frame import load
    from eaq.report.table import runs_table

    files = {}
    for name in ("a", "b"):
        files[name] = tmp_path / f"{name}.txt"
        files[name].write_text("\n".join(f"sentence {i} of file {name}, a few words long" for i in range(8)) + "\n")
        done = run_eaq(out, *FAST, f"dataset.path={files[name]}")
        assert done.returncode == 0, done.stderr[-2000:]
    digests = {r.data.params["dataset.path"]: r.data.tags["eaq.data.sha256"] for r in all_runs(out)}
    # Trial 2 of a's configuration fails after reading a: a folder stands where its token tensors would be cached, so
    # they can be neither read nor written (a cache of its own, paths.cache_dir being no part of the configuration;
    # any failure after the data would do).
    broken = tmp_path / "broken-cache"
    broken.mkdir()
    for cached in (out / "cache").glob("tokens-*.safetensors"):
        (broken / cached.name).mkdir()
    done = run_eaq(out, *FAST, f"dataset.path={files['a']}", "trial=2", f"paths.cache_dir={broken}")
    assert done.returncode == 2 and "set paths.cache_dir=<another folder>" in done.stderr, done.stderr[-2000:]
    failed = _only(all_runs(out), "FAILED")
    assert failed.data.tags.get("eaq.data.sha256") == digests[str(files["a"])]

    table = aggregate(load(f"sqlite:///{out}/mlflow.db", experiment="eaq"), metrics=("latency_mean_ms",))
    rows = sorted(zip(table["setting"], table["runs"], table["failed"], table["n"]))
    assert rows == sorted([(f"eaq.data.sha256={digests[str(files['a'])]}", 2, 1, 1),
                           (f"eaq.data.sha256={digests[str(files['b'])]}", 1, 0, 1)])
    compared = compare(runs_table([f"sqlite:///{out}/mlflow.db"], "eaq", COLUMNS, settings=True, every_status=True), "fp32")
    assert sorted(zip(compared["eaq.data.sha256"], compared["trials"])) == sorted((d, 1) for d in digests.values())


@pytest.mark.parametrize("task", ["benchmark", "layers"])
def test_a_plan_refused_for_its_model_still_carries_its_hash(out: Path, tmp_path: Path, task: str) -> None:
    # Refused before the model loads (chosen on other weights): the run is still one of that plan's.
    preset = yaml.safe_load((CONF / "model" / "bert_tiny_random.yaml").read_text())
    other = weights_identity(ModelConfig(**{**preset, "seed": 1}), "cpu")
    plan = Plan("fp32", {"encoder.layer.0.intermediate.dense": "int8"}, {"model": {"name": "bert-tiny-random", "weights": other}})
    plan_file = save_plan(plan, tmp_path / "plan.yaml")
    done = run_eaq(out, *FAST, f"task={task}", "layers.impact=false", "precision=mixed", f"precision.plan={plan_file}")
    assert done.returncode == 2 and "make a plan for these weights" in done.stderr, done.stderr[-2000:]
    run = _only(all_runs(out), "FAILED")
    assert run.data.tags.get("eaq.precision.plan_sha256") == hashlib.sha256(plan_file.read_bytes()).hexdigest()[:16]
    assert run.data.tags.get("eaq.precision.plan") == str(plan_file)


def test_a_plan_refused_for_the_device_still_carries_its_hash(out: Path, tmp_path: Path) -> None:
    # A format this CPU cannot run (fp8), refused with the plan read and before anything else.
    plan_file = save_plan(Plan("bf16", {"encoder.layer.0.intermediate.dense": "fp8"}), tmp_path / "plan.yaml")
    done = run_eaq(out, *FAST, "precision=mixed", f"precision.plan={plan_file}")
    assert done.returncode == 2 and "a plan's layers can take int8, int8_weight_only on cpu" in done.stderr, done.stderr[-2000:]
    run = _only(all_runs(out), "FAILED")
    assert run.data.tags.get("eaq.precision.plan_sha256") == hashlib.sha256(plan_file.read_bytes()).hexdigest()[:16]


def _tag_then_get_killed() -> None:
    """A task killed as the kernel's out-of-memory killer kills one, after it told its tags."""
    tag_now({"eaq.data.sha256": "0123456789abcdef"})
    os.kill(os.getpid(), signal.SIGKILL)


def test_tags_a_task_told_reach_the_job_though_its_process_is_killed() -> None:
    heard: list[dict[str, str]] = []
    with pytest.raises(EaqError, match="ended without a word"):
        run_isolated("test_early_tags:_tag_then_get_killed", on_tags=heard.append)
    assert heard == [{"eaq.data.sha256": "0123456789abcdef"}]


def _tag_and_end() -> None:
    tag_now({"eaq.data.sha256": "0123456789abcdef"})


def test_the_wait_for_the_tags_a_task_told_last_is_counted_as_isolation() -> None:
    """Tags are set while the task runs, by a thread of the job; one the store is slow to take outlives the task, and
    the job waits for it. That wait is the run's time too: counted in no phase, it must be in isolation_overhead_s."""
    slow_store_s = 1.5

    def set_slowly(tags: dict[str, str]) -> None:
        time.sleep(slow_store_s)

    run_isolated("test_early_tags:_tag_and_end")  # the fork server's imports, once: not this test's wait
    _, overhead_s = run_isolated("test_early_tags:_tag_and_end", on_tags=set_slowly)
    assert overhead_s >= slow_store_s, overhead_s
