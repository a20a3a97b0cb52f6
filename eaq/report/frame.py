"""MLflow -> one tidy DataFrame: a row per run of an experiment or of one sweep.

Everything else in the report (aggregates, figures, HTML) starts from this frame, so
what a run "is" for the report is decided once here: its configuration (model,
precision, shape, compile mode and compiler settings, CUDA graphs, workload, where it ran, trial), its
status and validity, and its metrics.
Unlike ``runs_table`` (finished runs only, for tables), the frame keeps FAILED and KILLED
runs too, because the report must say how many of each configuration did not finish.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
import pandas as pd

from eaq.errors import EaqError
from eaq.metrics import METRIC_NAMES
from eaq.tracking.find import find_sweep
from eaq.tracking.flatten import BESIDE_THE_MEASUREMENT, COMPILER_DEFAULTS, NOT_MEASUREMENT, reads_group
from eaq.tracking.run_logger import PARENT_TAG, SUPERSEDED_TAG, every_run, sweep_runs
from eaq.tracking.store import check_active, existing_experiment, read_store

# The configuration of a run: what a row of an aggregate is keyed by (trial is what varies within one).
# CUDA graphs, the compiler's settings (tuned or Inductor's defaults, its pattern matcher on or off) and
# the workload (a forward pass, or generating N tokens) change what a run measures as much as compiling
# does: runs that differ in them are never averaged together.
# So do the device, the dataset and the sampler, where the weights came from (SETTING), and every other parameter
# of the measurement (``configuration_param``): they share one key, ``setting``, which names only those that vary
# among the frame's runs, as most reports hold one of each. Two mixed plans are two precisions
# (``plan_names``), so each is compared with the uniform precisions as one of them.
CONFIG_KEYS = ("model", "precision", "batch_size", "seq_len", "compile", "compile_tuning", "compile_pattern_matcher",
               "cuda_graphs", "workload", "setting")
# Where configurations compete (a ranking, a front): the keys but the precision and how it ran.
SCOPE_KEYS = ("model", "batch_size", "seq_len", "workload", "setting")
# Where a run ran and on what: the device's name (two cards of one model are one device; an H100 and an H200 are
# two), the dataset, the sampler asked for (``auto`` resolves by the device, which the device's name tells), and
# where the weights came from (``model.name_or_path``: two folders under one model name are two models).
SETTING = ("device_name", "dataset", "sampler", "source")
# Every other parameter a run logs is part of its configuration, a setting named "<parameter>=<value>" where it varies:
# the protocol (a sweep comparing warm-up rules), a random model's architecture and seed, the data file and how many of
# its examples, the sampler's interval, the batches quality is computed on. Not those of where a run is logged or how
# it is scheduled (eaq.tracking.flatten.NOT_MEASUREMENT), the trial (what varies within a configuration), the device's
# index (its name is a SETTING: two cards of one model are one device), what a column holds already, nor what only
# adds figures beside the windows or decides what is reused (the plan's path: PARAMS' plan hash tells plans apart).
# precision.kernel_check is a setting: its fp32 copy of the model, kept on the host for the check after the window,
# is in the run's memory peak (an int8 DistilBERT on a CPU peaked at 1120-1132 MB with it, 678-730 without).
# The data file's path neither: it is built from the folder a run is launched in (conf/dataset), so one file read from
# two checkouts has two paths; the file's contents are the tag eaq.data.sha256 (DATA).
BESIDE = BESIDE_THE_MEASUREMENT | {"trial", "task", "precision.plan", "dataset.path"}
# The examples' contents (eaq.data.examples_digest), a setting where it varies as the parameters are.
DATA = "eaq.data.sha256"


def configuration_param(name: str, kind: str | None = "benchmark") -> bool:
    """Whether a logged parameter is one of a run's settings (above), beside the columns PARAMS names: ``layers.*``
    only of a layer analysis (``kind``), a benchmark reading none of them (eaq.tracking.flatten.as_read)."""
    group = name.split(".")[0]
    return name not in PARAMS and name not in BESIDE and group not in NOT_MEASUREMENT and reads_group(kind, group)


PARAMS = {"model.name": "model", "precision.name": "precision", "batch_size": "batch_size", "seq_len": "seq_len",
          "compile": "compile", "compile_tuning": "compile_tuning", "compile_pattern_matcher": "compile_pattern_matcher",
          "cuda_graphs": "cuda_graphs", "trial": "trial", "workload.name": "workload", "workload.new_tokens": "new_tokens",
          "dataset.name": "dataset", "sampler.name": "sampler", "model.name_or_path": "source"}
# Where a random-weight model's weights came from: drawn, not read (its architecture and seed are settings of their own).
RANDOM_SOURCE = "random weights"
TAGS = {"eaq.kind": "kind", "eaq.valid": "valid", "eaq.valid.reasons": "valid_reasons", "eaq.energy": "energy",
        "eaq.energy.reason": "energy_reason", "eaq.error": "error", "mlflow.parentRunId": "parent_run_id",
        "eaq.env.device_name": "device_name", "eaq.precision.plan_sha256": "plan_sha256",
        "eaq.precision.plan_applies_sha256": "plan_applies_sha256",
        "eaq.window.start_unix_s": "window_start_unix_s", "eaq.prefill_window.start_unix_s": "prefill_start_unix_s",
        "eaq.prefill_window.end_unix_s": "prefill_end_unix_s"}
KINDS = ("benchmark", "layers")
# Quality figures where less is better (the rest: more is better).
LOWER_IS_BETTER = {"quality_perplexity", "quality_kl_from_fp32"}
# MLflow's statuses of a run under way. A run whose process was killed without a chance to mark it (SIGKILL, a lost
# host) stays RUNNING for good: it counts as running only while its sweep does (column ``running``), else as failed.
UNDER_WAY = ("RUNNING", "SCHEDULED")
# The metrics the report's tables and figures read.
REPORTED = ("latency_mean_ms", "throughput_samples_per_s", "energy_per_sample_mj", "energy_net_per_sample_mj", "power_mean_w",
            "model_size_mb", "memory_peak_rss_mb", "memory_peak_gpu_mb", "time_to_first_token_mean_ms",
            "time_per_output_token_mean_ms", "decode_tokens_per_s", "decode_energy_per_token_mj",
            "decode_energy_net_per_token_mj", "prefill_energy_per_prefill_mj")


# Why a sweep of calibrations alone has no report (its end says so, and so does the report asked for it).
CALIBRATIONS_ONLY = ("task=calibrate measures the device, not a model: each run logged the peaks it measured "
                     "(peak_bandwidth_gb_per_s, and peak_flop_per_j where a sensor measures energy), and paths.cache_dir "
                     "keeps them for the runs that use them, but those measured beside other jobs (tag "
                     "eaq.calibration.cached says why)")


def fetch_runs(uri: str, experiment: str | None = None, sweep: str | None = None, option: str = "--uri") -> list:
    """The benchmark and layer-analysis runs of one sweep (its parent run id: its children and the runs it reused)
    or of one experiment; ``option``: the tool's option naming the store (eaq.tracking.store.read_store)."""
    client = read_store(uri, option)
    if sweep is not None:
        # Its folder, parent run id or name, as eaq.diff --sweep takes them (the name is the one the MLflow UI lists).
        parent = find_sweep(client, sweep, ", or --experiment NAME")
        if (kind := parent.data.tags.get("eaq.kind")) != "sweep":  # it has no children: "no runs; run into it first"
            raise EaqError(f"--sweep {sweep} is no sweep's parent run (eaq.kind={kind}); pass a sweep's folder or its "
                           "parent run's id or name (tag eaq.kind=sweep), or --experiment NAME for every run of an experiment.")
        runs = sweep_runs(client, parent)
        if not runs:  # a deleted experiment's runs are searched for by no one: its parent's own tells
            check_active(client, client.get_experiment(parent.info.experiment_id).name, uri, option, "pass another --sweep")
    else:
        name = experiment or "eaq"
        found = existing_experiment(client, name, uri, option, "pass another --experiment NAME", "--experiment ")
        runs = every_run(client, [found.experiment_id])
    measured = [r for r in runs if r.data.tags.get("eaq.kind") not in ("sweep", "report")]  # their parents and reports
    if measured and all(r.data.tags.get("eaq.kind") == "calibrate" for r in measured):  # "no runs; run into it" read wrong
        scope = f"--sweep {sweep}" if sweep is not None else f"--experiment {experiment or 'eaq'}"
        raise EaqError(f"{scope} holds calibrations alone, so there is no report: {CALIBRATIONS_ONLY}.")
    return [r for r in runs if r.data.tags.get("eaq.kind") in KINDS and SUPERSEDED_TAG not in r.data.tags]


def compiler_settings(frame: pd.DataFrame, compiled: pd.Series) -> None:
    """The compiler's settings (eaq.tracking.flatten.COMPILER_DEFAULTS) as booleans, in place: a run logged before a
    setting existed, and a run that compiled nothing (the settings did nothing to what it measured; a layers run's
    compiled savings: its plan), read as the default, so neither splits one configuration in two."""
    for flag, default in COMPILER_DEFAULTS.items():
        value = frame[flag].map({"True": True, "true": True, "False": False, "false": False}).fillna(default).astype(bool)
        frame[flag] = value.mask(~compiled, default)


def plan_names(precision: pd.Series, file_sha256: pd.Series, applies_sha256: pd.Series | None = None) -> pd.Series:
    """``mixed`` where the runs hold one plan; ``mixed-<the plan's hash, 8 digits>`` for each where they hold several:
    a plan is a precision, compared with the uniform ones as they are with each other (the file's name would not
    tell two apart: the layers task writes every plan as layers/plan.yaml).

    A plan is the hash of what it applies (``applies_sha256``: its base and layers), so two files of one choice are
    one precision; a run logged before that tag takes the one another run of its file carries (a sweep resumed across
    the change stays one precision), else its file's hash (``file_sha256``)."""
    applies = pd.Series(index=precision.index, dtype=object) if applies_sha256 is None else applies_sha256
    known = applies.groupby(file_sha256).transform("first") if file_sha256.notna().any() else applies
    key = applies.fillna(known).fillna(file_sha256)
    mixed = (precision == "mixed") & key.notna()
    if key[mixed].nunique() < 2:
        return precision
    return precision.mask(mixed, "mixed-" + key.fillna("").astype(str).str[:8])


def splits_runs(found: pd.Series, finished: pd.Series) -> bool:
    """Whether runs' values of a setting (``found``) tell them apart: two values, or a value and a finished run that
    recorded none (an older eaq's device), whose measured figures must not be averaged with another device's."""
    return found.nunique() > 1 or bool(found.notna().any() and (found.isna() & finished).any())


def sole_value(values: pd.Series) -> object:
    """The one value ``values`` hold, missing ones aside, else None: what a run that recorded nothing of a setting is
    taken to have had, where every other run of its configuration agrees."""
    return values.dropna().iloc[0] if values.nunique() == 1 else None


def setting(frame: pd.DataFrame, columns: tuple[str, ...] = SETTING) -> pd.Series:
    """Each run's values of the ``columns`` that vary (SETTING: among the runs; any other: among the runs of one
    scope and setting), as words ("" where none varies): what tells two otherwise equal configurations apart, and
    nothing more, in a label.

    Judged per kind, so layer-analysis runs do not rename the benchmark's configurations. A run that failed before
    it logged a value (runs logged before the device's name was tagged at a run's start, or whose device could not
    be told ahead: eaq.tracking.environment.device_name) takes the value its configuration's other runs recorded,
    where they recorded one, and is counted with them; where they recorded several, which one it was is unknown and
    it stays apart, unnamed. So does a parameter a run predates, finished or not; but a finished run that recorded
    no device (an older eaq's) stays apart: its figures are measured, and averaging them with another device's would
    mix two devices. A run with no parameters is of no configuration.
    """
    known = frame["model"].notna() & frame["precision"].notna()
    keys = [k for k in CONFIG_KEYS if k != "setting"]
    words = pd.Series("", index=frame.index, dtype=object)
    for _, runs in frame[known].groupby("kind", dropna=False):
        values = runs[list(columns)].copy()
        for column in columns:
            # Its configuration, as far as the run recorded it; a protocol parameter a run predates is filled from
            # the runs of its configuration whatever other parameters it predates.
            same = [*keys, *(c for c in columns if c != column and c in SETTING)]
            only = runs.groupby(same, dropna=False)[column].transform(sole_value)
            if column in SETTING:  # where a run ran: told by a run that finished, else unknown, not its neighbours'
                only = only.where(runs["status"] != "FINISHED")
            values[column] = values[column].fillna(only)
        finished = runs["status"] == "FINISHED"
        splits = lambda found: splits_runs(found, finished[found.index])  # noqa: E731

        # Where a run ran names it wherever runs differ in it; another parameter, where it differs among the runs of
        # one scope (a model, shape and workload, compared across precisions) on one device, dataset, sampler and
        # source: a random model's architecture differs between models, and an older eaq's runs on another device
        # lack a newer parameter, neither of which splits a comparison. Named for every run, so that the
        # configurations of a scope share their words.
        by_scope = [runs[k] for k in SCOPE_KEYS if k != "setting"] + [values[k] for k in SETTING]
        varying = [c for c in columns if (splits(values[c]) if c in SETTING else
                                          any(splits(v) for _, v in values[c].groupby(by_scope, dropna=False)))]
        if varying:
            words[runs.index] = values[varying].fillna("").astype(str).agg(" ".join, axis=1).str.split().str.join(" ")
    return words


def ended_sweeps(client: MlflowClient, runs: list) -> set[str]:
    """The parent runs of runs still marked under way whose sweep is no longer: ended, deleted, or gone."""
    return ended_parents(client, {r.data.tags.get(PARENT_TAG) for r in runs if r.info.status in UNDER_WAY} - {None})


def ended_parents(client: MlflowClient, parents: set[str]) -> set[str]:
    """Of these sweeps' parent run ids, those that are no longer under way: ended, deleted, or gone."""
    ended = set()
    for parent in parents:
        try:
            found = client.get_run(parent)
        except MlflowException as error:  # gone; any other failure (a server's hiccup) is the report's to say
            if error.error_code != "RESOURCE_DOES_NOT_EXIST":
                raise
            ended.add(parent)
            continue
        if found.info.status not in UNDER_WAY or found.info.lifecycle_stage == "deleted":
            ended.add(parent)
    return ended


def _worst(quality: str) -> float:
    """The worst value of a quality figure (per LOWER_IS_BETTER): what a run that logged it as not a number measured.
    Outputs gone non-finite (fp16 overflowing) give a NaN perplexity or cosine; read as a figure the run lacked, the
    broken precision was "not measured" on quality and ranked best on energy. An infinite one is read back from
    MLflow's SQL store as the largest float, which counts as infinite here too."""
    return math.inf if quality in LOWER_IS_BETTER else -math.inf


def runs_frame(runs: list, ended: set[str] = frozenset()) -> pd.DataFrame:
    """One row per run: ids, configuration, status, validity tags, env tags and every documented metric.

    ``ended``: sweeps that ended (``ended_sweeps``); their runs still marked under way are not ``running``."""
    rows, params = [], set()
    for run in runs:
        row: dict[str, object] = {"run_id": run.info.run_id, "run_name": run.info.run_name, "status": run.info.status,
                                  "start_time": run.info.start_time, "artifact_uri": run.info.artifact_uri}
        row |= {column: run.data.params.get(param) for param, column in PARAMS.items()}
        if run.data.params.get("model.weights") == "random":  # its model.name_or_path gave the tokenizer alone
            row["source"] = RANDOM_SOURCE
        row |= {column: run.data.tags.get(tag) for tag, column in TAGS.items()}
        row |= {tag: value for tag, value in run.data.tags.items() if tag.startswith("eaq.env.")}
        settings = {name: value for name, value in run.data.params.items()
                    if configuration_param(name, run.data.tags.get("eaq.kind"))}
        if DATA in run.data.tags:
            settings[DATA] = run.data.tags[DATA]
        params |= settings.keys()
        row |= settings
        # NaN, inf and the largest float (an inf as MLflow's SQL store gives it back) all fail the comparison.
        row |= {name: _worst(name) if name.startswith("quality_") and not abs(value) < sys.float_info.max else value
                for name, value in run.data.metrics.items() if name in METRIC_NAMES}
        rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    # Every metric the report reads is a column, empty where no run logged it (generation runs log
    # per-token figures, not latency_mean_ms): "not measured" rather than a missing column.
    frame = frame.reindex(columns=[*frame.columns, *(m for m in REPORTED if m not in frame.columns)])
    for number in ("batch_size", "seq_len", "trial"):  # params are strings in MLflow: sort 1, 8, 32 as numbers
        frame[number] = pd.to_numeric(frame[number], errors="coerce")
    for flag in ("compile", "cuda_graphs"):  # runs logged before a flag existed ran without it
        frame[flag] = frame[flag].fillna("False").map({"True": True, "true": True}).fillna(False).astype(bool)
    compiler_settings(frame, frame["compile"])
    # "forward", or "generate<new tokens>"; runs logged before the workload group were forward passes.
    tokens = pd.to_numeric(frame["new_tokens"], errors="coerce")
    generating = frame["workload"] == "generate"
    frame["workload"] = frame["workload"].fillna("forward").astype(str)
    frame.loc[generating, "workload"] = "generate" + tokens[generating].fillna(0).astype(int).astype(str)
    frame = frame.drop(columns="new_tokens")
    # As words, where they vary: "from ./my-model", "trials.warmup_rule=pairs".
    frame["source"] = frame["source"].map(lambda v: f"from {v}" if isinstance(v, str) else None)
    for column in params:  # as words: "trials.warmup_rule=pairs"
        frame[column] = frame[column].map(lambda v, c=column: f"{c}={v}" if isinstance(v, str) else None)
    frame["precision"] = plan_names(frame["precision"], frame["plan_sha256"], frame["plan_applies_sha256"])
    frame["setting"] = setting(frame, (*SETTING, *sorted(params)))
    frame["running"] = frame["status"].isin(UNDER_WAY) & ~frame["parent_run_id"].isin(ended)
    return frame.sort_values([*CONFIG_KEYS, "trial"], na_position="last").reset_index(drop=True)


def load(uri: str, experiment: str | None = None, sweep: str | None = None, ended: frozenset[str] = frozenset(),
         option: str = "--uri") -> pd.DataFrame:
    """``runs_frame(fetch_runs(...))``, failing with what to do when there is nothing to report.

    ``ended``: sweeps known to have ended though their parent is still open: the sweep's own report at its end
    (every job has returned, and a run left under way by a killed worker is failed, not running)."""
    runs = fetch_runs(uri, experiment, sweep, option)
    frame = runs_frame(runs, ended_sweeps(MlflowClient(tracking_uri=uri), runs) | ended)
    if frame.empty:
        scope = f"sweep {sweep}" if sweep else f"experiment {experiment or 'eaq'}"
        raise EaqError(f"{scope} at {uri} has no benchmark or layers runs; run `python -m eaq.run -m ...` into it first.")
    return frame


def export(frame: pd.DataFrame, out: Path) -> list[Path]:
    """The frame as CSV (for anyone) and Parquet (types kept: numbers stay numbers)."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "runs.csv", out / "runs.parquet"]
    frame.to_csv(written[0], index=False)
    frame.to_parquet(written[1], index=False)
    return written
