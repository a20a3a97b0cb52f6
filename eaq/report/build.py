"""Build the full report of a sweep or an experiment, and hand it to MLflow.

Shared by ``python -m eaq.report`` and the end-of-sweep callback, so the files a user
builds by hand and the ones a sweep logs are the same files.
"""

from __future__ import annotations

from dataclasses import dataclass
import hashlib
import logging
import math
from pathlib import Path
import shlex
import time

from mlflow.entities import Metric as MlflowMetric
from mlflow.exceptions import MlflowException
from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
from mlflow.tracking import MlflowClient
import pandas as pd

from eaq.errors import EaqError
from eaq.report import aggregate, figures, frame as frames, front, html, layers
from eaq.rerun import logged_command
from eaq.tracking.redact import redact, redact_file

_logger = logging.getLogger(__name__)  # not ``log``: that is the function logging a report onto a run
# The aggregates logged on a sweep's parent run, named <metric>/<configuration>/<stat>: the MLflow UI (3.17)
# groups a run's charts by the part before the last "/", one section per metric and configuration holding
# mean, ci95_low, ci95_high and n; the Overview tab's metrics table lists them sorted, so a metric's rows sit together.
LOGGED = ("latency_mean_ms", "throughput_samples_per_s", "energy_per_sample_mj", *aggregate.GENERATION, *aggregate.QUALITY)
LOGGED_STATS = ("mean", "ci95_low", "ci95_high", "n")
# MLflow refuses a longer metric name.
MAX_METRIC_NAME = 250
# What ratios.csv compares with the baseline: the figures' latency and energy, a forward pass's and generation's (in
# that order: latency, energy per sample, time and energy per output token). Not throughput: its ratio is the
# reciprocal of latency's.
RATIOS = tuple(metric for pair in zip(figures.ROLES["latency"], figures.ROLES["energy"]) for metric in pair)


@dataclass(frozen=True)
class Report:
    """What build() wrote: the folder, its HTML file, the aggregates (for MLflow and the screen) and the figures."""

    out: Path
    html: Path
    table: pd.DataFrame
    figures: list[figures.Figure]
    # The layer analysis' capture ratios (layers.capture_table): a table, or the note that there is no layers run.
    capture: pd.DataFrame | str


def screen(report: Report) -> str:
    """What a sweep's end and ``python -m eaq.report`` print of a report, the same: the compact table (none for layer
    analyses alone, which have no benchmark figure) and the layer analysis' capture ratios."""
    summary = aggregate.compact(report.table)
    parts = [] if summary.empty else [summary.to_markdown(index=False)]
    if not isinstance(report.capture, str):
        parts += ["layer analysis: capture ratio per method, components only and with blocks (mean ± 95% CI half-width)",
                  report.capture.to_markdown(index=False)]
    return "\n".join(parts)


def report_command(uri: str, sweep: str | None, experiment: str | None, out: Path) -> str:
    """The command line that builds this report again, printed by a sweep and written into the HTML."""
    scope = ["--sweep", sweep] if sweep else ["--experiment", experiment or "eaq"]
    # A server's password never lands in a record; quoted, a path with a space is one word (and <redacted> no redirect).
    return shlex.join(["python", "-m", "eaq.report", "--uri", redact(uri), *scope, "--out", str(out)])


def _commands(client: MlflowClient, frame: pd.DataFrame) -> list[str]:
    """One ``python -m eaq.run`` line per configuration, from its first run's recorded Hydra overrides."""
    lines = []
    for _, run in frame.drop_duplicates([*frames.CONFIG_KEYS, "kind"]).iterrows():
        try:
            lines.append(shlex.join(["python", "-m", "eaq.run", *logged_command(run["run_id"], client)]))
        except Exception as error:  # an older run, or an artifact store that moved: say it, list the rest
            lines.append(f"# {run['run_name']}: overrides not recorded ({type(error).__name__})")
    return lines


# What a report writes under its folder: a figure or table of an earlier report that this one does not write (another
# model's overview, a front) must not pass for this one's, in the folder and in what --log uploads.
REPORT_FILES = ("runs.csv", "runs.parquet", "aggregates.csv", "ratios.csv", "front.csv", "layers_capture.csv", "report.html")
FIGURE_FILES = ("*.png", "*.svg")


def written(out: Path) -> list[Path]:
    """The files a report wrote under ``out``, and no other: ``--out`` may be a folder holding more (``--out outputs``
    holds the store and its artifacts, which uploading copied into themselves until the path was too long)."""
    figures_of = out / "figures"
    return ([out / name for name in REPORT_FILES if (out / name).is_file()]
            + sorted(figure for pattern in FIGURE_FILES for figure in figures_of.glob(pattern)))


def _clear(out: Path) -> None:
    """``out`` made, and an earlier report's files in it removed; any other file of the folder is left alone."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file of that name, a read-only place: a traceback here
        raise EaqError(f"--out {out}: the report cannot be written there ({error.strerror}); pass a folder to create "
                       "or one that holds an earlier report.") from None
    for name in REPORT_FILES:
        (out / name).unlink(missing_ok=True)
    for pattern in FIGURE_FILES:
        for figure in (out / "figures").glob(pattern):
            figure.unlink()


def build(uri: str, out: Path, sweep: str | None = None, experiment: str | None = None, baseline: str | None = None,
          trace_run: str | None = None, ended: frozenset[str] = frozenset()) -> Report:
    """Frame, aggregates, ratios, figures and ``report.html`` under ``out``; returns where they are.

    ``ended``: sweeps that have ended though their parent run is still open (eaq.report.frame.load)."""
    frame = frames.load(uri, experiment, sweep, ended)  # first: a store that is not there is said, not created
    client = MlflowClient(tracking_uri=uri)
    if trace_run is not None and trace_run not in set(frame["run_id"]):
        raise EaqError(f"--trace-run {trace_run} is not one of the reported runs; pick a run id from runs.csv.")
    # Of the benchmark runs, which the ratios compare: a layer analysis' fp32 is no baseline for them.
    precisions = sorted(aggregate.benchmark_runs(frame)["precision"].unique())
    if baseline is not None and precisions and baseline not in precisions:  # before the earlier report is cleared
        raise EaqError(f"--baseline {baseline} is not a precision of these runs' benchmarks ({', '.join(precisions)}); "
                       "choose one of them.")
    _clear(out)
    frames.export(frame, out)
    table = aggregate.aggregate(frame)
    table.to_csv(out / "aggregates.csv", index=False)
    # With no run that logged its precision (every one killed at its start), there is nothing to compare with.
    baseline = baseline or ("fp32" if "fp32" in precisions or not precisions else precisions[0])
    ratio = aggregate.ratios(frame, baseline, RATIOS)
    ratio.to_csv(out / "ratios.csv", index=False)
    judged = front.verdicts(frame)
    if isinstance(judged, pd.DataFrame):
        judged.to_csv(out / "front.csv", index=False)
    capture = layers.capture_table(frame)
    if isinstance(capture, pd.DataFrame):
        capture.to_csv(out / "layers_capture.csv", index=False)
    drawn = figures.study(frame, table, baseline, out / "figures", client,
                          lambda: layers.layer_figures(client, frame, out / "figures"), trace_run)
    scope = f"sweep {sweep}" if sweep else f"experiment {experiment or 'eaq'}"
    sections = {"Summary (mean ± 95% CI half-width)": aggregate.compact(table),
                "All aggregates": table, f"Ratios to {baseline} (delta-method 95% CI)": ratio,
                "Energy-quality front per model and shape: dominated, or on it, and whether the trials separate it "
                "(cost ratio, energy where measured; delta-method 95% CI)":
                    front.shown(judged).astype(object).where(judged.notna(), "") if isinstance(judged, pd.DataFrame) else judged,
                "Layer analysis: capture ratio per method, components only and with blocks (mean ± 95% CI half-width)":
                    capture}
    page = html.render(f"eaq report: {scope}", f"{scope} at {redact(uri)}", frame, sections, drawn,
                       [*_commands(client, frame), "# this report:", report_command(uri, sweep, experiment, out)])
    path = out / "report.html"
    path.write_text(page)
    return Report(out, path, table, drawn, capture)


def _fitting(label: str, room: int) -> str:
    """``label`` cut to ``room`` characters where longer, ending in 8 hex digits of its hash, so two long labels that
    share their start stay two names. Joined by "-": an MLflow metric name holds only letters, digits and ``_-. :/``."""
    if len(label) <= room:
        return label
    return f"{label[:room - 9]}-{hashlib.sha256(label.encode()).hexdigest()[:8]}"


def aggregate_metrics(table: pd.DataFrame) -> dict[str, float]:
    """The aggregates as MLflow metrics ``<metric>/<configuration>/<stat>``; a configuration's label cut to fit
    MLflow's longest name (a local weights path, a device and protocol settings make it long), ending in a hash of the
    whole.

    A metric no run of the configuration logged (a forward pass's latency beside a generation's) is left out: n=0
    read as "no trial counted"; one its runs logged and none counted (every trial flagged invalid) is n=0. A figure
    that is not a finite number is left out (NaN is on a parent run only where ``log`` voids an earlier report's figure):
    the bounds of one trial, a quality every trial read as NaN, which the report ranks as -inf (the store kept it as
    -1.8e308)."""
    metrics = {}
    longest_stat = max(map(len, LOGGED_STATS))
    logged = table[table["metric"].isin(LOGGED)]
    for _, row in (logged[logged["logged"] > 0] if len(logged) else logged).iterrows():
        label = _fitting(aggregate.config_label(row), MAX_METRIC_NAME - len(row["metric"]) - longest_stat - 2)
        values = dict(zip(LOGGED_STATS, (row["mean"], row["ci_low"], row["ci_high"], row["n"])))
        metrics |= {f"{row['metric']}/{label}/{stat}": float(v) for stat, v in values.items() if math.isfinite(v)}
    return metrics


def _aggregate_name(name: str) -> bool:
    """Whether ``name`` is one of aggregate_metrics' (``<metric>/<configuration>/<stat>``)."""
    metric, _, rest = name.partition("/")
    return metric in LOGGED and rest.rpartition("/")[2] in LOGGED_STATS and "/" in rest


def log(client: MlflowClient, run_id: str, report: Report) -> None:
    """Aggregated metrics and the report's files onto one run (a sweep's parent, or a summary run)."""
    # Stamped now: MLflow shows a metric's value of the highest (step, timestamp), so a report logged again onto the
    # same run (a resumed sweep's) shows its own figures, not the largest ever logged.
    now = int(time.time() * 1000)
    figures_now = aggregate_metrics(report.table)
    # An earlier report's figure this one has not (fewer trials now: no bounds; a configuration no longer counted)
    # would still show beside this report's: set to NaN, the one value that says "none" (nowhere else on the run).
    figures_now |= {name: math.nan for name in client.get_run(run_id).data.metrics
                    if name not in figures_now and _aggregate_name(name)}
    metrics = [MlflowMetric(name, value, now, 0) for name, value in figures_now.items()]
    for start in range(0, len(metrics), 1000):  # MLflow's batch limit
        client.log_batch(run_id, metrics=metrics[start:start + 1000])
    files = {f"report/{file.relative_to(report.out).as_posix()}": file for file in written(report.out)}
    _drop_stale(client, run_id, set(files))
    for name, file in files.items():
        redact_file(file)  # runs.csv holds artifact URIs, the HTML the runs' errors: as every record, redacted
        client.log_artifact(run_id, str(file), name.rpartition("/")[0])


def _drop_stale(client: MlflowClient, run_id: str, keep: set[str]) -> None:
    """Delete the files under the run's ``report/`` that this report does not write (``keep``: artifact paths): an
    earlier report's ``front.csv`` or figures, logged onto the same run (a resumed sweep's parent, ``--log`` again),
    had stood beside this report as its own. Where the artifact store cannot delete, a warning names them."""
    stale = [f.path for folder in ("report", "report/figures") for f in client.list_artifacts(run_id, folder)
             if not f.is_dir and f.path not in keep]
    if not stale:
        return
    repository = get_artifact_repository(client.get_run(run_id).info.artifact_uri, tracking_uri=client.tracking_uri)
    try:
        for path in stale:
            repository.delete_artifacts(path)
    except (NotImplementedError, MlflowException, OSError) as error:
        _logger.warning("an earlier report's files stay on run %s beside this one's, its artifact store refused to "
                        "delete them (%s): %s", run_id, redact(str(error)), ", ".join(stale))
