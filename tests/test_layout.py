"""The rooms of eaq/ import only downward (../shared/DESIGN.md, the README's layout).

Read from the source, every import of every module, inside functions too: a room importing one it may not
fails here with the module and the import, so a new dependency is a decision, not an accident.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

# What each room (a folder or a top-level module of eaq/) may import of eaq: the DESIGN's rules as the code holds
# them. measure/ knows nothing of models, MLflow or Hydra; tracking/ and report/ never touch models or precisions;
# nothing but run.py reaches tasks/, and tasks/ alone wires the rooms together.
BASE = {"errors", "files"}
ALLOWED = {
    # The one pair that imports both ways, both below everything else: the window syncs through device.py, and
    # device.py names the GPUs through measure's NVML reader (eaq.measure.nvml.device_summaries).
    "measure": BASE | {"device"},
    "device": BASE | {"measure"},
    "config": BASE | {"measure"},
    "data": BASE | {"config"},
    "models": BASE | {"config", "data"},
    "precision": BASE | {"device"},
    "evaluate": BASE | {"models"},
    "workloads": BASE | {"measure"},
    "layers": BASE | {"evaluate", "measure", "models", "precision"},
    "slots": BASE | {"measure"},
    "tracking": BASE | {"measure", "slots"},
    "diff": BASE | {"tracking"},
    "rerun": BASE | {"diff", "tracking"},  # reads a store as diff does
    "report": BASE | {"metrics", "rerun", "tracking"},
    "group_choices": BASE | {"config"},
    "tasks": BASE | {"config", "data", "device", "evaluate", "exit", "layers", "measure", "models", "precision", "slots", "tracking",
                     "workloads"},
    "run": BASE | {"config", "exit", "group_choices", "slots", "tasks"},
}
# Third-party libraries a room must not import: what it must know nothing of.
FORBIDDEN = {
    "measure": {"transformers", "mlflow", "hydra", "omegaconf", "torchao"},
    "workloads": {"mlflow", "hydra", "omegaconf"},
    "tracking": {"transformers", "torchao"},
    "report": {"torch", "transformers", "torchao"},
}


def _imports(path: Path) -> list[str]:
    """Every module ``path`` imports, by its full name (``from eaq import tasks`` is ``eaq.tasks``); a relative import
    reads as ``relative:<module>``, which no room may use (a room is named in full where it imports another)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                names.append(f"relative:{node.module or ''}")
            elif node.module == "eaq":
                names += [f"eaq.{alias.name}" for alias in node.names]
            elif node.module:
                names.append(node.module)
    return names


def test_each_room_imports_only_the_rooms_below_it() -> None:
    package = REPO / "eaq"
    wrong = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).parts
        room = parts[0] if len(parts) > 1 else path.stem
        for name in _imports(path):
            top, _, rest = name.partition(".")
            if name.startswith("relative:"):
                wrong.append(f"{path.relative_to(REPO)} imports {name.removeprefix('relative:') or '.'} relatively")
            elif top == "eaq" and rest:
                target = rest.split(".")[0]
                if target != room and target not in ALLOWED.get(room, BASE):
                    wrong.append(f"{path.relative_to(REPO)} imports {name}")
            elif top in FORBIDDEN.get(room, ()):
                wrong.append(f"{path.relative_to(REPO)} imports {name}, which {room}/ must know nothing of")
    assert not wrong, "\n".join(wrong)
