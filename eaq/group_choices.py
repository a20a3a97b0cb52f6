"""Unknown config-group choices, refused in one sentence before Hydra starts.

Hydra reports ``precision=int3`` as a multi-line "Could not find" block; eaq's errors are
one sentence naming what is valid. Only plain choices and comma lists (sweeps) of eaq's
own groups are checked; anything else (Hydra's sweep functions, another config dir or
search path) is left to Hydra.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from eaq.config import GROUPS

CONF = Path(__file__).resolve().parent.parent / "conf"
CHOICE = re.compile(rf"^\+?({'|'.join(GROUPS)})=([\w.,-]+)$")
OWN_CONFIG = re.compile(r"^(-cd|--config-dir|-cp|--config-path)(=|$)|^hydra\.searchpath")


def unknown_choice(argv: Sequence[str], conf: Path = CONF) -> str | None:
    """The error sentence for the first choice that has no YAML file in ``conf``, else None."""
    if any(OWN_CONFIG.match(arg) for arg in argv):
        return None
    for arg in argv:
        match = CHOICE.match(arg)
        if not match:
            continue
        group, values = match.groups()
        valid = sorted(p.stem for p in (conf / group).glob("*.yaml"))
        for value in values.split(","):
            if value not in valid:
                return (
                    f"{group}={value} is not an option of the {group} group; valid: {', '.join(valid)} "
                    f"(or add conf/{group}/{value}.yaml)."
                )
    return None
