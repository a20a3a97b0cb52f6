"""``python -m eaq.report.table --uri sqlite:///outputs/mlflow.db [--preset energy]``: runs as a table.

Reads MLflow only. Prints Markdown (or CSV with ``--csv``) with one row per finished
benchmark run: its config choices and the chosen metrics.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
import sys

import mlflow
import pandas as pd

from eaq.report.aggregate import QUALITY_DIGITS
from eaq.report.frame import RANDOM_SOURCE, UNDER_WAY, configuration_param, ended_parents
from eaq.tracking.failures import reported
from eaq.tracking.redact import redact
from eaq.tracking.run_logger import PARENT_TAG
from eaq.tracking.store import existing_experiment, read_store

CONFIG = ("params.model.name", "params.precision.name", "params.batch_size", "params.seq_len", "params.trial")
PRESETS: dict[str, tuple[str, ...]] = {
    "default": (*CONFIG, "metrics.latency_mean_ms", "metrics.throughput_samples_per_s", "metrics.energy_per_sample_mj",
                "metrics.power_mean_w", "metrics.idle_power_w", "tags.eaq.valid"),
    # Issue 3's evidence: the four energy figures side by side, with the checks behind them.
    "energy": (*CONFIG, "metrics.latency_mean_ms", "metrics.window_duration_s", "metrics.energy_total_j",
               "metrics.energy_instant_integral_j", "metrics.energy_average_integral_j", "metrics.energy_smi_integral_j",
               "metrics.idle_power_w", "metrics.power_mean_w", "metrics.energy_per_sample_mj",
               "metrics.energy_net_per_sample_mj", "metrics.sensor_updates", "metrics.poll_coverage",
               "metrics.counter_vs_instant_disagreement", "metrics.roofline_efficiency", "metrics.peak_flop_per_j",
               "metrics.isolation_overhead_s", "metrics.warmup_duration_s", "tags.eaq.valid", "tags.eaq.valid.reasons"),
    "precision": (*CONFIG, "params.compile", "params.cuda_graphs", "metrics.latency_mean_ms",
                  "metrics.throughput_samples_per_s", "metrics.energy_per_sample_mj", "metrics.energy_net_per_sample_mj",
                  "metrics.roofline_efficiency", "metrics.quantized_linear_layers", "metrics.linear_layers",
                  "metrics.model_size_mb", "metrics.memory_peak_gpu_mb", "metrics.kernel_lowp_gemms",
                  "metrics.kernel_float_gemms", "metrics.kernel_host_copies", "tags.eaq.kernel_check", "tags.eaq.valid"),
    "generate": (*CONFIG, "params.compile", "params.cuda_graphs", "params.workload.new_tokens",
                 "metrics.time_to_first_token_mean_ms", "metrics.time_per_output_token_mean_ms",
                 "metrics.time_per_output_token_p99_ms", "metrics.decode_tokens_per_s", "metrics.prefill_energy_per_prefill_mj",
                 "metrics.decode_energy_per_token_mj", "metrics.decode_energy_net_per_token_mj", "metrics.decode_power_mean_w",
                 "metrics.decode_bandwidth_fraction", "metrics.decode_bandwidth_limit_ms", "metrics.peak_bandwidth_gb_per_s",
                 "metrics.quantized_linear_layers", "metrics.model_size_mb", "metrics.memory_peak_gpu_mb",
                 "metrics.quality_generated_match_rate", "tags.eaq.decode.cuda_graph", "tags.eaq.valid", "tags.eaq.valid.reasons"),
    # Issue 11's front: energy per sample against drift from fp32 (trials.fidelity_on_synthetic on
    # synthetic ids), uniform precisions and mixed plans alike; the fidelity a head has is shown.
    "front": (*CONFIG, "metrics.latency_mean_ms", "metrics.energy_per_sample_mj", "metrics.energy_net_per_sample_mj",
              "metrics.power_mean_w", "metrics.quantized_linear_layers", "metrics.linear_layers",
              "metrics.quality_agreement_with_fp32", "metrics.quality_kl_from_fp32", "metrics.quality_top1_agreement_with_fp32",
              "metrics.quality_cosine_to_fp32_mean", "metrics.counter_vs_instant_disagreement", "tags.eaq.valid",
              "tags.eaq.valid.reasons"),
    "overhead": (*CONFIG, "params.sampler.name", "metrics.latency_mean_ms", "metrics.latency_p50_ms",
                 "metrics.latency_std_ms", "metrics.window_iterations", "metrics.poll_coverage"),
}
DEFAULT_COLUMNS = PRESETS["default"]
# The kind of run (``workload.name``) each preset's metrics describe, and the runs it lists: a forward pass's latency per
# batch, energy per sample and window are never logged by a generation run, nor generation's per-token figures by a
# forward run, so a run of the other kind was a row of empty cells beside defaults (workload.new_tokens 128) that
# buried the runs asked for. ``--columns``, and a preset not named here, list every run.
WORKLOADS = {"default": "forward", "energy": "forward", "precision": "forward", "generate": "generate", "front": "forward",
             "overhead": "forward"}
WORKLOAD = "params.workload.name"
# The preset that lists each kind of run (the first of WORKLOADS), named where another preset leaves such runs out.
LISTED_BY = {workload: next(p for p, w in WORKLOADS.items() if w == workload) for workload in WORKLOADS.values()}


def runs_table(uris: Sequence[str], experiment: str = "eaq", columns: tuple[str, ...] = DEFAULT_COLUMNS,
               settings: bool = False, every_status: bool = False) -> pd.DataFrame:
    """FINISHED benchmark runs of one or more stores (a table measured in parts, one store each).

    ``settings``: every parameter of the runs' configuration besides ``columns`` too (eaq.report.frame.configuration_param:
    a random model's architecture, the protocol, ...), for a reader that must not average two configurations.
    ``every_status``: the runs that did not finish too, with columns ``status`` and ``running`` (under way while its
    sweep is: eaq.report.frame.ended_parents), for a reader that says why a configuration has no figure; a run killed
    before it logged its model and precision belongs to no configuration and is left out."""
    found = []
    for uri in uris:
        client = read_store(uri)
        existing_experiment(client, experiment, uri, "--uri", "pass another --experiment NAME", "--experiment ")
        mlflow.set_tracking_uri(uri)
        runs = mlflow.search_runs(experiment_names=[experiment], filter_string="tags.`eaq.kind` = 'benchmark'")
        if runs.empty:
            continue
        if not every_status:
            found.append(runs[runs["status"] == "FINISHED"])
            continue
        logged = [c for c in ("params.model.name", "params.precision.name") if c in runs.columns]
        runs = runs.dropna(subset=logged) if len(logged) == 2 else runs.iloc[:0]
        under_way = runs["status"].isin(UNDER_WAY)
        parents = runs.get(f"tags.{PARENT_TAG}", pd.Series(index=runs.index, dtype=object))
        ended = ended_parents(client, set(parents[under_way].dropna()))
        found.append(runs.assign(running=under_way & ~parents.isin(ended)))
    if not found:
        return pd.DataFrame()
    runs = pd.concat(found, ignore_index=True).drop_duplicates("run_id")  # a store named twice counts once
    if {"params.model.weights", "params.model.name_or_path"} <= set(runs.columns):  # as the report names it (frame)
        runs.loc[runs["params.model.weights"] == "random", "params.model.name_or_path"] = RANDOM_SOURCE
    present = [c for c in columns if c in runs.columns] + (["status", "running"] if every_status else [])
    if settings:
        present += sorted(c for c in runs.columns if c.startswith("params.") and c not in present
                          and configuration_param(c.removeprefix("params.")))
    table = runs[present].rename(columns=lambda c: c.split(".", 1)[-1])  # params.x -> x; status, running as they are
    for number in ("batch_size", "seq_len", "trial"):  # MLflow params are strings: sort 1, 32, 256
        if number in table.columns:
            table[number] = pd.to_numeric(table[number])
    keys = [c for c in ("model.name", "precision.name", "compile", "batch_size", "sampler.name", "trial") if c in table.columns]
    return table.sort_values(keys)


@reported()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].replace("``", ""))
    parser.add_argument("--uri", nargs="+", default=["sqlite:///outputs/mlflow.db"], help="one or more MLflow stores")
    parser.add_argument("--experiment", default="eaq")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="default", help="a named set of columns")
    parser.add_argument("--columns", nargs="*", help="MLflow columns (params.x, metrics.y, tags.z); overrides --preset")
    parser.add_argument("--csv", action="store_true")
    args = parser.parse_args(argv)
    columns = tuple(args.columns or PRESETS[args.preset])
    workload = None if args.columns else WORKLOADS.get(args.preset)
    table = runs_table(args.uri, args.experiment, columns if workload is None else (*columns, WORKLOAD))
    if not len(table.index):
        print(f"no finished benchmark runs in experiment {args.experiment!r} at {redact(' '.join(args.uri))}", file=sys.stderr)
        return 1
    # A misspelled --columns name was left out unsaid, and with every name misspelled the runs read as "no runs".
    if missing := [c for c in args.columns or () if c.split(".", 1)[-1] not in table.columns]:
        print(f"no run of these has {', '.join(missing)} (names as MLflow's: params.x, metrics.y, tags.z; "
              "docs/metrics.md lists the metrics and tags)", file=sys.stderr)
        if len(missing) == len(args.columns):
            return 2
    if workload is not None:
        table, others = of_workload(table, workload, keep=WORKLOAD in columns)
        if not others.empty:  # on stderr: --csv output stays a table
            left = ", ".join(f"{n} {kind} run{'s' * (n != 1)}"
                             + (f" (--preset {LISTED_BY[kind]} lists them)" if kind in LISTED_BY else "")
                             for kind, n in others.value_counts().sort_index().items())
            print(f"--preset {args.preset} lists {workload} runs only; left out: {left}", file=sys.stderr)
        if table.empty:
            return 1
    # A quality figure to its own digits: bf16's cosine of 0.9999938 read "1", as fp32's, in the front preset.
    digits = [f".{QUALITY_DIGITS}g" if c.startswith("quality_") else ".4g" for c in table.columns]
    print(table.to_csv(index=False) if args.csv else table.to_markdown(index=False, floatfmt=digits))
    return 0


def of_workload(table: pd.DataFrame, workload: str, keep: bool) -> tuple[pd.DataFrame, pd.Series]:
    """``runs_table``'s rows of one workload, and the workload of each other row; runs logged before the workload group
    existed (no ``workload.name``) were forward passes. Its column is dropped unless ``keep``."""
    column = WORKLOAD.split(".", 1)[1]
    ran = table[column].fillna("forward") if column in table else pd.Series("forward", index=table.index)
    mine = table[ran == workload]
    return (mine if keep or column not in mine else mine.drop(columns=column)), ran[ran != workload]


if __name__ == "__main__":
    sys.exit(main())
