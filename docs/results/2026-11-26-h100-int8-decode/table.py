"""The int8 cells of issue 16's generation grid (2026-11-26) beside the grid's other precisions on the same cells.

    python docs/results/2026-11-26-h100-int8-decode/table.py > docs/results/2026-11-26-h100-int8-decode/table.md

Rows: the grid's measured cells (../2026-11-25-h100-generate, grid.py's own selection: finished, eager runs
from before the whole-sequence warm-up left out, Inductor's default settings only) and this folder's int8 runs
with energy measured: call1/ on the code that still copied each int8 weight per call, call2/, call3/ and call6/
(the store of calls 4-6, one machine) without the copy. Runs of the current code are one cell with the grid's, whatever
the machine: call 6's store also holds second runs of other precisions' cells (1.1B bf16 compiled, the 7B cells whose
one run was invalid). The kernel-check runs (sampler=none, their own stores) have no energy and are not rows.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("grid", HERE.parent / "2026-11-25-h100-generate" / "grid.py")
grid = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(grid)  # type: ignore[union-attr]

KEYS = ["model", "mode", "batch_size", "precision", "code"]


def measured(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[(runs["status"] == "FINISHED") & runs["decode_energy_per_token_mj"].notna()]


def main() -> None:
    old = grid.frame()
    current = old[~old["superseded"] & old["mode"].isin(["eager", "compiled"])].assign(code="current")
    copied = measured(grid.stores(HERE / "call1")).assign(code="int8 weight copied per call")
    runs = pd.concat([current, copied], ignore_index=True)
    table = runs.groupby(KEYS).agg(
        runs=("store", "size"), valid=("valid", lambda v: f"{int(v.sum())}/{len(v)}"),
        **{name: (column, grid.cell) for column, name in grid.COLUMNS.items()},
    ).reset_index()
    int8 = current[current["precision"] == "int8"]
    cells = set(map(tuple, int8[["model", "mode", "batch_size"]].drop_duplicates().values))
    table = table[[tuple(row) in cells for row in table[["model", "mode", "batch_size"]].values]]
    print(table.rename(columns={"batch_size": "batch"}).to_markdown(index=False))


if __name__ == "__main__":
    main()
