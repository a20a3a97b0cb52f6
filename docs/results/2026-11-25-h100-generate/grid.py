"""Issue 16's grid from every store in this folder (2026-11-25): one row per cell, trials merged.

    python docs/results/2026-11-25-h100-generate/grid.py > docs/results/2026-11-25-h100-generate/grid.md

Each store is one machine's (its file name is the machine's id); a cell run on two machines has a
row per run in the store listing (``--runs``) and its range here. Only FINISHED runs of the
generate workload in the grid; below it, the refusals: runs that failed with an UnsupportedPrecisionError
(int8, refused before any step), from these stores and 2026-11-24's.
Eager runs from stores before WHOLE_SEQUENCE_WARMUP are left out of the grid (``--runs`` lists them,
marked superseded): their decode warm-up did not run every KV length the window runs, so their windows
measured cuDNN building an attention graph per new length (the night of 2026-11-25: 76.72 against 15.05
ms per token for one cell). Compiled runs with Inductor's pattern matcher off, and those with torchao's recommended
Inductor settings (``compile_tuning=true``: coordinate-descent tuning; the grid's compiled runs have Inductor's
defaults), are modes of their own. The int8 cells come from ../2026-11-26-h100-int8-decode (calls 2-3 and 4-6: int8 at
a decode step's rows padded for cuBLAS, no longer refused), and with them call 4-6's second runs of other cells (1.1B
bf16 compiled; the 7B cells whose one run was invalid); runs without energy (the kernel-check parts' stores, here and
there) are left out.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from eaq.report.frame import fetch_runs, runs_frame

HERE = Path(__file__).resolve().parent
INT8 = HERE.parent / "2026-11-26-h100-int8-decode"
WHOLE_SEQUENCE_WARMUP = "20261125T190936"  # the first store whose eager runs warmed up over a whole sequence
COLUMNS = {
    "time_per_output_token_mean_ms": "ms/token",
    "decode_energy_per_token_mj": "mJ/token",
    "decode_energy_net_per_token_mj": "net mJ/token",
    "decode_power_mean_w": "W decode",
    "decode_bandwidth_fraction": "bw fraction",
    "time_to_first_token_mean_ms": "TTFT ms",
}


def stores(*folders: Path) -> pd.DataFrame:
    """Every run of the folders' stores, named by its store (the machine's id) and the mode it ran in."""
    found = sorted(store for folder in folders for store in folder.glob("generate-*.db"))
    runs = pd.concat([runs_frame(fetch_runs(f"sqlite:///{store}")).assign(store=store.stem.removeprefix("generate-"))
                      for store in found], ignore_index=True)
    runs["mode"] = runs["compile"].map({True: "compiled", False: "eager"})
    # Each compiler setting away from the grid's adds its words, so a run with both is named by both.
    runs.loc[runs["compile"] & runs["compile_tuning"], "mode"] += ", coordinate-descent tuning"
    runs.loc[runs["compile"] & ~runs["compile_pattern_matcher"], "mode"] += ", no pattern matcher"
    return runs


def frame() -> pd.DataFrame:
    runs = stores(HERE, INT8 / "call2", INT8 / "call3", INT8 / "call6")
    runs = runs[(runs["status"] == "FINISHED") & runs["workload"].str.startswith("generate")
                & runs["decode_energy_per_token_mj"].notna()].copy()
    runs["superseded"] = ~runs["compile"] & (runs["store"] < WHOLE_SEQUENCE_WARMUP)
    return runs


def refusals() -> pd.DataFrame:
    """Runs refused for their precision, with the sentence they failed with."""
    runs = stores(HERE, HERE.parent / "2026-11-24-h100-generate")
    refused = runs[(runs["status"] == "FAILED") & runs["error"].fillna("").str.startswith("UnsupportedPrecisionError")]
    return refused[["model", "mode", "batch_size", "precision", "store", "error"]].sort_values(["model", "batch_size"])


def cell(values: pd.Series) -> str:
    low, high = values.min(), values.max()
    return f"{low:.4g}" if low == high else f"{low:.4g}-{high:.4g}"


def main() -> None:
    runs = frame()
    keys = ["model", "mode", "batch_size", "precision"]
    if "--runs" in sys.argv:
        print(runs[[*keys, "trial", "store", *COLUMNS, "valid", "superseded"]].sort_values(keys).to_markdown(index=False))
        return
    table = runs[~runs["superseded"]].groupby(keys).agg(
        runs=("store", "size"), valid=("valid", lambda v: f"{int(v.sum())}/{len(v)}"),
        **{name: (column, cell) for column, name in COLUMNS.items()},
    )
    print(table.reset_index().rename(columns={"batch_size": "batch"}).to_markdown(index=False))
    print("\nRefused until 2026-11-26, when int8 began to pad a decode step's rows (no step measured; the error each "
          "run failed with):\n")
    print(refusals().rename(columns={"batch_size": "batch"}).to_markdown(index=False))


if __name__ == "__main__":
    main()
