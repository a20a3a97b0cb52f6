"""Issue 16's goal 2 restated with what a decode step reads of the embedding tables (2026-11-26).

    python docs/results/2026-11-26-decode-bytes/restate.py > docs/results/2026-11-26-decode-bytes/restate.md

Until 2026-11-26 the decode roofline counted every stored byte as read by every step, the input embedding table
whole included; a step looks up only its batch's rows of an untied table (``eaq.precision.stored_bytes_read``).
The grid's stores keep the old ``decode_bytes_per_step_mb``; this script takes the unread rows off it for the
compiled bf16 cells at batch 1 and 16 of ../2026-11-25-h100-generate, every compiler setting (weights stored in
bf16, 2 bytes a value), and
restates the bandwidth limit and goal 2 (step time over the limit, goal at most 1.5x). The unread bytes come from
each preset's configuration (Llama: the untied token table; GPT-2: the position table, its token table being the
LM head's weight), checked against ``stored_bytes_read`` on the 1.1B and GPT-2-medium presets built on the CPU
(fp32, so twice the bytes); the 7B's is not built here (27 GB in fp32), its table computed the same way.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from omegaconf import OmegaConf

from eaq.config import ModelConfig
from eaq.models import load_model
from eaq.precision import stored_bytes_read
from eaq.precision.proof import model_size_bytes

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
_spec = importlib.util.spec_from_file_location("grid", HERE.parent / "2026-11-25-h100-generate" / "grid.py")
grid = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(grid)  # type: ignore[union-attr]

PRESETS = {"gpt2-medium-random": "gpt2_medium_random", "llama-1b-random": "llama_1b_random", "llama-7b-random": "llama_7b_random"}
BUILT = ("gpt2_medium_random", "llama_1b_random")


def untied_table(architecture: dict) -> tuple[int, int]:
    """(rows, values per row) of the embedding table a step only looks up."""
    if architecture["model_type"] == "gpt2":
        return architecture["n_positions"], architecture["n_embd"]
    assert architecture["model_type"] == "llama" and not architecture["tie_word_embeddings"]
    return architecture["vocab_size"], architecture["hidden_size"]


def unread_bytes(architecture: dict, batch: int, value_bytes: int) -> int:
    rows, width = untied_table(architecture)
    return (rows - batch) * width * value_bytes


def main() -> None:
    architectures = {}
    for name, preset in PRESETS.items():
        fields = OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / "model" / f"{preset}.yaml"))
        architectures[name] = fields["architecture"]
        if preset in BUILT:
            model = load_model(ModelConfig(**fields), with_tokenizer=False, device=torch.device("cpu")).model
            for batch in (1, 16):
                found = model_size_bytes(model) - stored_bytes_read(model, batch)
                assert found == unread_bytes(fields["architecture"], batch, 4), (preset, batch, found)
            print(f"- {preset}: stored_bytes_read on the fp32 preset leaves out {found / 1e6:.2f} MB at batch 16, "
                  "as the configuration says")
            del model
    runs = grid.frame()
    cells = runs[~runs["superseded"] & runs["mode"].str.startswith("compiled") & (runs["precision"] == "bf16")].copy()
    cells["unread_mb"] = [unread_bytes(architectures[m], b, 2) / 1e6 for m, b in zip(cells["model"], cells["batch_size"])]
    cells["bytes_mb_before"] = cells["decode_bytes_per_step_mb"]
    cells["bytes_mb_now"] = cells["bytes_mb_before"] - cells["unread_mb"]
    cells["limit_ms_now"] = cells["decode_bandwidth_limit_ms"] * cells["bytes_mb_now"] / cells["bytes_mb_before"]
    cells["x_limit_before"] = cells["time_per_output_token_mean_ms"] / cells["decode_bandwidth_limit_ms"]
    cells["x_limit_now"] = cells["time_per_output_token_mean_ms"] / cells["limit_ms_now"]
    table = cells.groupby(["model", "mode", "batch_size"]).agg(
        runs=("store", "size"), unread_mb=("unread_mb", "first"),
        bytes_mb_before=("bytes_mb_before", grid.cell), bytes_mb_now=("bytes_mb_now", grid.cell),
        ms_per_token=("time_per_output_token_mean_ms", grid.cell),
        limit_ms_before=("decode_bandwidth_limit_ms", grid.cell), limit_ms_now=("limit_ms_now", grid.cell),
        x_limit_before=("x_limit_before", grid.cell), x_limit_now=("x_limit_now", grid.cell),
    ).reset_index()
    print()
    print(table.rename(columns={"batch_size": "batch"}).to_markdown(index=False))


if __name__ == "__main__":
    main()
