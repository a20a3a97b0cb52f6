"""Unknown config-group choices, keys and config names, and values of the wrong type, refused in one sentence before
Hydra starts.

Hydra reports ``precision=int3`` as a multi-line "Could not find" block, and a misspelled key
with advice to add it with ``+``; eaq's errors are one sentence naming what is valid. Plain choices, comma lists and
``choice()``/``shuffle()``/``sort()`` lists (sweeps) of eaq's own groups are checked; anything else (``glob()``, another
config dir or search path) is left to Hydra. A config name (``-cn``, a named sweep) is looked for where
Hydra looks: the ``-cd`` folder, then ``conf/``.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
from collections.abc import Sequence
from pathlib import Path

import yaml
from hydra._internal.utils import get_args_parser

from eaq.config import GROUPS, WORKLOADS, unknown_setting

CONF = Path(__file__).resolve().parent.parent / "conf"
CHOICE = re.compile(rf"^\+?({'|'.join(GROUPS)})=([\w.,-]+)$")
GROUP = re.compile(rf"^\+?({'|'.join(GROUPS)})=")
SEARCH_PATH = re.compile(r"^\+{0,2}hydra\.searchpath=")
# An override of a key (no ``~`` or group path): ``model.name=x``; ``++`` sets it as well (or adds it), and ``+`` adds
# it, which eaq.config.validate then refused in every job of a sweep (a FAILED run each): said before anything runs.
SETTING = re.compile(r"^(?:\+\+|\+)?([A-Za-z_][\w.]*)=")
LAUNCHER = re.compile(r"^\+?hydra/launcher=([\w.-]+)$")
# A key of a preset's architecture (a free-form dict: the schema cannot say which keys it has).
ARCHITECTURE_KEY = re.compile(r"^model\.architecture\.(\w+)")
# The whole architecture given as a dict, which Hydra merges into the preset's key by key.
ARCHITECTURE_DICT = re.compile(r"^model\.architecture=(\{.*\})$")


def _hydra_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line as Hydra's own parser reads it (``-cd=x``, ``--config-dir x``, abbreviations alike)."""
    return get_args_parser().parse_known_args(list(argv))[0]


def _searched_elsewhere(args: argparse.Namespace) -> bool:
    """A config path or search path of one's own: configs may come from there, and Hydra decides."""
    return bool(args.config_path or any(SEARCH_PATH.match(o) for o in args.overrides))


def _own_config(args: argparse.Namespace) -> bool:
    """Another config folder or search path: it may hold more options and configs, and Hydra decides there."""
    return bool(args.config_dir) or _searched_elsewhere(args)


def unknown_choice(argv: Sequence[str], conf: Path = CONF) -> str | None:
    """The error sentence for the first choice that has no YAML file in ``conf``, or that adds (``+``) a group the
    config already has (Hydra advised "override precision: int8", the syntax of a defaults list), else None."""
    if _own_config(_hydra_args(argv)):
        return None
    for arg in argv:
        match = GROUP.match(arg)
        if not match:
            continue
        group = match.group(1)
        if arg.startswith("+"):
            return f"{arg}: every run has a {group} (the default's); choose another with {arg[1:]}, without the +."
        valid = sorted(p.stem for p in (conf / group).glob("*.yaml"))
        for value in _chosen(arg):
            if value not in valid:
                return (
                    f"{group}={value} is not an option of the {group} group; valid: {', '.join(valid)} "
                    f"(or add conf/{group}/{value}.yaml)."
                )
    return None


def _chosen(override: str) -> list[str]:
    """The choices a group's override names: a plain value, a comma list, or ``choice(...)``'s (Hydra read an unknown
    one of those at its job, in its words: its traceback's lines, exit 1, and an empty FAILED parent run); none for
    ``glob(...)``, which picks among the files there are, or what Hydra cannot parse (its error says so)."""
    if match := CHOICE.match(override):
        return match.group(2).split(",")
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep

    try:
        parsed = OverridesParser.create().parse_override(override)
    except Exception:  # noqa: BLE001  (Hydra's own parse error says what is wrong, in its words)
        return []
    value = parsed.value()
    if isinstance(value, ChoiceSweep):
        return [str(choice) for choice in value.list]
    return [] if parsed.is_sweep_override() or "${" in str(value) else [str(value)]  # an interpolation: Hydra's


def unknown_launcher(argv: Sequence[str], conf: Path = CONF) -> str | None:
    """The error sentence for a ``hydra/launcher`` choice neither eaq (``conf/hydra/launcher``) nor Hydra and its
    installed plugins have (``gpu`` for ``gpus``), else None: Hydra answers it with its search path, many lines."""
    if _own_config(_hydra_args(argv)):
        return None
    chosen = [match.group(1) for arg in argv if (match := LAUNCHER.match(arg))]
    if not chosen:
        return None
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins

    Plugins.instance()  # imports the installed plugins, which register their launchers' configs
    valid = sorted({name.removesuffix(".yaml") for name in ConfigStore.instance().list("hydra/launcher")}
                   | {p.stem for p in (conf / "hydra" / "launcher").glob("*.yaml")})
    for name in chosen:
        if name not in valid:
            return f"hydra/launcher={name} is not a launcher eaq or Hydra has; valid: {', '.join(valid)}."
    return None


def unknown_architecture_key(argv: Sequence[str], conf: Path = CONF) -> str | None:
    """The error sentence for ``model.architecture.KEY=...`` where a chosen model preset's architecture has no KEY,
    else None. Hydra answers it with "Could not override ... use +model.architecture.KEY=...", several lines, exit 1;
    a preset of pretrained weights has no architecture at all."""
    args = _hydra_args(argv)
    if _own_config(args):
        return None
    # (the override as the sentence names it, the key, how to add it where the preset lacks it)
    keys = [(o.split("=")[0], match.group(1), f"add it with +{o}") for o in args.overrides
            if not o.startswith("+") and (match := ARCHITECTURE_KEY.match(o))]
    written = {o.split("=")[0]: o for o in args.overrides}
    for override in args.overrides:
        if (match := ARCHITECTURE_DICT.match(override)) and isinstance(given := _dict_value(override), dict):
            keys += [("model.architecture={...}", str(key), f"a dict there merges into the preset's: add it with "
                      f"+model.architecture.{key}=..., or build your own from model=hub model.weights=random "
                      "+model.architecture={...}") for key in given]
    if not keys:
        return None
    if any(arg.lstrip("+").startswith("model=") and not CHOICE.match(arg) for arg in argv):
        return None  # a sweep function (choice(), glob()): which presets it takes is Hydra's to say
    chosen = [v for arg in argv if (match := CHOICE.match(arg)) and match.group(1) == "model" for v in match.group(2).split(",")]
    if not chosen:
        defaults = (yaml.safe_load((conf / "config.yaml").read_text()) or {}).get("defaults", [])
        chosen = [d["model"] for d in defaults if isinstance(d, dict) and "model" in d]
    presets = {name: yaml.safe_load((conf / "model" / f"{name}.yaml").read_text()) or {}
               for name in chosen if (conf / "model" / f"{name}.yaml").is_file()}  # else: unknown_choice says so
    for name, fields in presets.items():
        architecture = fields.get("architecture") or {}
        weights = next((o.split("=", 1)[1] for o in args.overrides if o.lstrip("+").startswith("model.weights=")),
                       fields.get("weights", "pretrained"))
        for override, key, add in keys:
            has_it = [other for other, found in presets.items() if key in (found.get("architecture") or {})]
            if has_it and override in written and key not in architecture:
                # Another preset of the sweep has it: + fails there ("an item is already at"), after the sweep opened.
                add = _across_presets(written[override], key, name, architecture, has_it[0])
            if not architecture and weights == "pretrained":
                return (f"{override}: model={name} loads pretrained weights, whose architecture is theirs; "
                        "model.architecture builds random weights (model.weights=random, as the *_random presets).")
            if key not in architecture and (close := difflib.get_close_matches(key, architecture, n=1)):
                # Most likely a misspelt key of its own, named first: adding a misspelt one with + was refused next, as
                # no field of the model's config.
                return (f"{override}: model={name}'s architecture has no key {key}: did you mean "
                        f"model.architecture.{close[0]}? (A field of the model's config the preset leaves out: {add}.)")
            if key not in architecture:
                has = f"its keys: {', '.join(architecture)}" if architecture else "it has none yet"
                return f"{override}: model={name}'s architecture has no key {key} ({has}); {add}, or fix the name."
    return None


def _across_presets(override: str, key: str, name: str, architecture: dict, other: str) -> str:
    """How to set ``key`` in a sweep where preset ``name`` lacks it and ``other`` has it (+ fails on ``other``): ++ where
    it is a field of ``name``'s config of its own; where that config names it otherwise (GPT-2's n_embd for
    hidden_size: both would be recorded, one built) or not at all, the presets swept apart."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    model_type = str(architecture.get("model_type"))
    made = CONFIG_MAPPING[model_type] if model_type in CONFIG_MAPPING else None  # a lazy mapping: no .get
    own = getattr(made, "attribute_map", {}).get(key)
    if made is not None and own is None and hasattr(made(), key):
        return f"set it in every preset with ++{override} (model={other} has it, which + refuses)"
    said = f"names it {own}" if own else "has no such field"
    return (f"model={name}'s config ({architecture.get('model_type')}) {said} and model={other}'s has it: sweep them "
            "apart, one command each, each with its own key")


def _dict_value(override: str) -> object:
    """The value of a ``key={...}`` override as Hydra parses it (None where it does not parse: Hydra says why)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        return OverridesParser.create().parse_overrides([override])[0].value()
    except HydraException:
        return None


def unknown_config_name(argv: Sequence[str], conf: Path = CONF) -> str | None:
    """The error sentence for a ``-cn`` name with no YAML file where Hydra looks, else None.

    Hydra answers a misspelled named sweep with its search path, many lines. A ``-cp`` or a search path of one's own
    leaves the name to Hydra."""
    args = _hydra_args(argv)
    name = args.config_name
    if name is None or _searched_elsewhere(args):
        return None
    folders = [Path(d).expanduser() for d in [args.config_dir] if d is not None] + [conf]
    stem = name.removesuffix(".yaml")
    if any((folder / f"{stem}.yaml").is_file() for folder in folders):
        return None
    where = folders[0]
    valid = sorted(p.stem for p in where.glob("*.yaml"))
    return (f"-cn {name}: {where / (stem + '.yaml')} does not exist; the configs there: {', '.join(valid) or 'none'} "
            f"(a named sweep is launched as -m -cd sweeps -cn NAME, from the repository root).")


def unknown_key(argv: Sequence[str]) -> str | None:
    """The error sentence for the first override of a key eaq's config does not have (``precison=int8``), else None.

    Hydra answers one with "Could not override 'precison'. To append to your config use +precison=int8", and the `+`
    it advises adds a key nothing reads (eaq.config.validate then refuses it). Keys of Hydra's own, and any key where
    another config folder or search path may add it, are left to Hydra."""
    args = _hydra_args(argv)
    if _own_config(args):
        return None
    for override in args.overrides:
        match = SETTING.match(override)
        if match and not match.group(1).startswith("hydra.") and (wrong := unknown_setting(match.group(1))):
            return (f"unknown setting {wrong}: eaq's config has no such key; fix the name (`python -m eaq.run --cfg "
                    "job` lists every setting).")
    return None


def workload_mismatch(argv: Sequence[str]) -> str | None:
    """The error sentence for a workload setting the run would not honour, else None: ``workload.name=generate``
    generated without the preset's run-name part (its runs named as forward passes), and ``workload.new_tokens=N``
    under the forward workload was accepted and read by nothing. Where the command line does not say the workload in a
    plain ``workload=`` list (a config of one's own, ``-cn``, a sweep function or the sweeper's params), left to it."""
    args = _hydra_args(argv)
    if _own_config(args) or args.config_name:
        return None
    chosen: set[str] = set()
    for override in args.overrides:
        key = override.lstrip("+~").partition("=")[0]
        if (match := CHOICE.match(override)) and match.group(1) == "workload":
            chosen |= set(match.group(2).split(","))
        elif "workload" in key and not key.startswith("workload."):  # workload=choice(...), hydra.sweeper.params.workload
            return None
    for override in args.overrides:
        key, _, value = override.lstrip("+~").partition("=")
        if key == "workload.name":
            presets = (f"choose the workload with workload={value}" if set(value.split(",")) <= set(WORKLOADS) else
                       f"choose the workload with workload=NAME, one of {', '.join(WORKLOADS)}")
            return f"workload.name={value}: {presets} (its preset names the run and sets new_tokens); drop workload.name."
        if key == "workload.new_tokens" and "generate" not in chosen:
            return (f"workload.new_tokens={value} is how many tokens generation makes, and this run measures forward "
                    "passes: add workload=generate, or drop it.")
    return None


# An environment variable an override's value reads, with no default (``${oc.env:NAME,default}`` has one).
ENV_READ = re.compile(r"\$\{oc\.env:([A-Za-z_]\w*)\}")
# An interpolation of another setting by its absolute key (``${precision.name}``); resolvers (``${oc.env:X}``,
# ``${hydra:...}``) have a colon, relative keys a leading dot.
SETTING_READ = re.compile(r"\$\{([A-Za-z_][\w]*(?:\.[\w]+)*)\}")


def unresolvable(argv: Sequence[str]) -> str | None:
    """The error sentence for an override whose value reads what is not there, else None: an environment variable
    that is not set, or a setting no config has (``run_name=x-${precison.name}``).

    Hydra resolves the run's name and folder before eaq sees the config: ``trial=${oc.env:SLURM_ARRAY_TASK_ID}``
    outside a SLURM array, or a misspelt key in the run's name, ended in a 40-line traceback of Hydra's blaming
    ``hydra.run.dir`` (in a sweep, after its parent run had opened)."""
    last = dict(override.lstrip("+~").partition("=")[::2] for override in _hydra_args(argv).overrides)
    for key, value in last.items():  # the last of a key's overrides is its value (eaq.rerun gives one again after)
        for name in ENV_READ.findall(value):
            if name not in os.environ:
                return (f"{key}={value} reads the environment variable {name}, which is not set: export it, or give "
                        f"{key}=<value>.")
        for name in SETTING_READ.findall(value):
            if name != "hydra" and not name.startswith("hydra.") and (wrong := unknown_setting(name)):
                return (f"{key}={value} reads the setting {name}, which no config has: {wrong} is not a setting; name "
                        f"one that is (as ${{precision.name}}), or give {key}=<value>.")
    return None


def wrong_type(argv: Sequence[str]) -> str | None:
    """The error sentence for the first value of a setting its type cannot take (``batch_size=abc``), else None.

    Hydra stops at it with a few lines and exit 1, and in a sweep (``batch_size=abc,4``) at the job of that value,
    before the others ran, their configurations left unmeasured. Each value of a plain override or a comma list is
    set on the schema, as Hydra sets it on the composed config (a setting below a free-form dict, a preset's
    architecture, takes any value there too); sweep functions (``range``, ``glob``) and interpolations are left to
    Hydra and the run."""
    args = _hydra_args(argv)
    if _own_config(args):
        return None
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from eaq.config import EaqConfig

    parser = OverridesParser.create()
    schema = OmegaConf.structured(EaqConfig)
    for text in args.overrides:
        match = SETTING.match(text)
        key = match.group(1) if match else ""
        if not match or key in GROUPS or key.startswith("hydra.") or unknown_setting(key):
            continue  # a group's choice (unknown_choice checks it), Hydra's own key, or an unknown one (unknown_key)
        try:
            override = parser.parse_override(text)
        except Exception:  # noqa: BLE001  (Hydra's own parse error says what is wrong, in its words)
            continue
        if override.is_choice_sweep():
            values = list(override.value().list)
        elif override.is_sweep_override():
            continue
        else:
            values = [override.value()]
        for value in values:
            if isinstance(value, str) and "${" in value:
                continue
            try:
                OmegaConf.update(schema, key, value, merge=True)
            except OmegaConfBaseException as exc:
                said = str(exc).splitlines()[0]
                return (f"{key}={'null' if value is None else value}: {said}; give a value of the setting's type (`python -m "
                        "eaq.run --cfg job` shows each setting's value).")
    return None
