"""Typos never train: every override's key and group option checked against the schemas before Hydra
composes (so before any directory is written), with the closest valid keys in the message.

    python -m navexp.train +ppo.algorithm.desired_kll=0.01
    Error: ppo.algorithm.desired_kll is not a config key (+ppo.algorithm.desired_kll=0.01); closest: ...

Hydra's ``+key=`` adds a key past a structured schema, so without this check a misspelled key with
``+`` trains a full run that ignores it. The schema (``ExperimentCfg``, the groups' dataclasses) fixes
every key: the term dicts hold every registered term with all its params, the curriculum's weights
every map family. The one dict open to new keys is ``env.robot.params`` (OPEN_KEYS: its keys depend on
the robot; the robot checks them against its ``default_params`` when the env is built), and
``hydra.*`` is Hydra's own.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, ListConfig

from navexp.extras import require
from navexp.paths import CONFIG_DIR

OPEN_KEYS = ("env.robot.params",)
"""Dicts whose keys the schema does not fix: any key may be added below them (``+env.robot.params.k=v``)."""


def _schema() -> DictConfig:
    """The top-level schema as stored in Hydra's ConfigStore (``base_config``: every key a composed
    config can have; the term dicts hold the terms registered by now, a user's own included)."""
    from navexp.config.schemas import register_configs  # schemas imports this module

    register_configs()  # a no-op unless a term was registered since the last store
    return ConfigStore.instance().load("base_config.yaml").node


NOT_GROUPS = ("scenarios", "suites")
"""Folders of ``configs/`` that hold data files, not group options (``env.scenarios=``, ``eval.suite=``)."""


def config_groups(config_dir: Path = CONFIG_DIR) -> dict[str, list[str]]:
    """The config groups of a config dir (folders of YAML options; the app's by default), with their
    options."""
    return {
        p.name: sorted(f.stem for f in p.glob("*.yaml"))
        for p in sorted(config_dir.iterdir())
        if p.is_dir() and p.name not in NOT_GROUPS and any(p.glob("*.yaml"))
    }


def _searchpath_groups(overrides: list[str]) -> dict[str, list[str]] | None:
    """Groups a ``hydra.searchpath=[file://DIR,...]`` override adds (a user's ``+exp=old``); None when a
    search path is not a folder this can read (``pkg://``): then any group may exist."""
    groups: dict[str, list[str]] = {}
    for o in overrides:
        key, _, value = o.lstrip("+").partition("=")
        if key != "hydra.searchpath":
            continue
        if "pkg://" in value:
            return None
        for d in re.findall(r"file://([^,\]'\"]+)", value):
            if Path(d).is_dir():
                groups.update(config_groups(Path(d)))
    return groups


def groups_help() -> str:
    """The groups section of ``--help`` (``hydra.help.template``): each group and its options, without
    the schemas Hydra also lists (``base_<group>``) and the data folders; ``size`` with ``auto``."""
    groups = config_groups()
    groups["size"] = ["auto", *groups.get("size", [])]
    return "\n".join(f"{g}: {', '.join(options)}" for g, options in groups.items())


def _paths(node: Any, prefix: str = "") -> list[str]:
    """Every key path below ``node`` (inner nodes and leaves)."""
    out: list[str] = []
    if isinstance(node, DictConfig):
        for k in node.keys():
            path = f"{prefix}.{k}" if prefix else str(k)
            out.append(path)
            out.extend(_paths(node._get_node(k), path))
    return out


def unknown_key(key: str, schema: DictConfig | None = None) -> str | None:
    """None when ``key`` is a config key (or lies below an open dict); else the error message.
    ``schema``: the top-level schema, when the caller checks many keys (loaded here otherwise)."""
    if any(key == k or key.startswith(k + ".") for k in OPEN_KEYS):
        return None
    schema = _schema() if schema is None else schema
    node: Any = schema
    parts = key.split(".")
    i = 0
    for i, part in enumerate(parts):  # noqa: B007 (i: where the walk stopped, used below)
        if isinstance(node, ListConfig) and part.isdigit():
            node = node._get_node(int(part)) if int(part) < len(node) else None
            if node is None:
                return None  # an index past the default list: its length is the value's business
            continue
        if not isinstance(node, DictConfig) or part not in node:
            break
        node = node._get_node(part)
    else:
        return None
    where = ".".join(parts[:i])
    close = difflib.get_close_matches(key, _paths(schema), n=3, cutoff=0.6)
    hints = [f"closest: {', '.join(close)}"] if close else []
    if where and isinstance(node, DictConfig):  # the keys next to the typo, when there are few
        below = [str(k) for k in node.keys()]
        if len(below) <= 12:
            hints.append(f"keys of {where}: {', '.join(below) or 'none'}")
    hints.append("every key: docs/configuration.md")
    return f"{key} is not a config key; {'; '.join(hints)}"


def check_overrides(overrides: list[str]) -> None:
    """Raise ValueError for an override whose key is not in the schema (with or without ``+``) or
    whose group option does not exist, naming the closest keys or the group's options."""
    extra = _searchpath_groups(overrides)
    groups = config_groups() | (extra or {})
    schema = _schema()
    for arg in overrides:
        key, sep, value = arg.lstrip("+~").partition("=")
        key = key.split("@", 1)[0]
        if key == "hydra/launcher" and sep:
            _check_launcher(value)
        if key == "hydra" or key.startswith(("hydra.", "hydra/")):
            continue  # Hydra's own config and groups: Hydra checks them
        if key in groups or "/" in key:
            _check_option(arg, key, value if sep else None, groups.get(key))
            continue
        message = unknown_key(key, schema)
        if message is not None and not (extra is None and "." not in key):
            raise ValueError(f"{message}; in {arg!r}")


LAUNCHERS = {
    "joblib": "hydra_plugins.hydra_joblib_launcher",
    "submitit_local": "hydra_plugins.hydra_submitit_launcher",
    "submitit_slurm": "hydra_plugins.hydra_submitit_launcher",
}
"""Hydra's launcher plugins navexp documents, and the module each one installs (the ``launchers`` extra)."""


def _check_launcher(value: str) -> None:
    """``hydra/launcher=joblib`` (or submitit_*) without its plugin names the extra, not Hydra's
    "Could not find 'hydra/launcher/joblib'"."""
    if value in LAUNCHERS:
        require(LAUNCHERS[value], "launchers", f"hydra/launcher={value}")


def _check_option(arg: str, group: str, value: str | None, options: list[str] | None) -> None:
    """A group choice (``reward=bcppo``, a basic sweep ``reward=bcppo,path``) names existing options."""
    if options is None or value is None or group == "size" or any(c in value for c in "()[]${}'\""):
        # A nested group, a deletion, a sweep function or a quoted value: Hydra's grammar decides; size
        # (with its auto) is checked where it resolves (navexp/config/presets.py).
        return
    for v in value.split(","):
        if v.strip() and v.strip() not in options and v.strip() != "null":
            raise ValueError(
                f"{group}={v.strip()} is not an option of the {group} group (in {arg!r}); "
                f"options: {' | '.join(options)}"
            )
