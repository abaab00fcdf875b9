"""Evaluation suites as config: one policy evaluated on several envs (map families, densities).

A suite is a YAML in ``configs/suites/<name>.yaml`` (or any path), checked against ``SuiteCfg``::

    entries:
      - name: room                 # the run's own env (held-out layouts)
      - name: dense
        num_episodes: null         # null: eval.num_episodes
        overrides:                 # config keys set on the run's config for this entry
          env.obstacles.cylinder_count: [5, 8]

Every entry evaluates the run's config with its ``overrides`` (keys, not groups, so the run's robot,
LiDAR and room stay) through ``navexp.analysis.suites.evaluate_suite``: held-out layouts, auto_reset off,
deterministic actions. The first entry is the main one: its metrics are the top-level fields of
``eval.json`` (the sweep objective reads them); ``entries`` holds every entry's metrics by name.
TensorBoard/W&B tags: ``Eval/<metric>`` (main entry), ``Eval/<entry>/<metric>``, and
``Eval/<entry>/<family or scenario>/<metric>`` where an entry mixes families or plays a scenario file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf, open_dict

from navexp.config.run_config import eval_env_cfg
from navexp.paths import CONFIG_DIR
from navexp.task.maps.scenario_files import resolve_scenario_path, scenario_entry_names
from navexp.task.validation import validate_env_cfg

SUITES_DIR = CONFIG_DIR / "suites"

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_MISSING_KEY = object()


@dataclass
class SuiteEntryCfg:
    name: str = MISSING
    """Entry name: the key in eval.json ``entries`` and the tag level ``Eval/<name>/...``."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """Config key (dotted, e.g. ``env.maps.rng``) -> value, set on the run's config."""
    num_episodes: int | None = None
    """Episodes of this entry; None: ``eval.num_episodes``."""


@dataclass
class SuiteCfg:
    description: str = ""
    entries: list[SuiteEntryCfg] = field(default_factory=list)
    """Evaluated in order; the first is the main entry (top-level eval.json fields)."""


def shipped_suites() -> list[str]:
    """Names of the suites in configs/suites/."""
    return sorted(p.stem for p in SUITES_DIR.glob("*.yaml"))


def suite_path(name_or_path: str) -> Path:
    """The suite YAML of a shipped name or a path; an unknown name fails listing the shipped ones."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path
    shipped = SUITES_DIR / f"{name_or_path}.yaml"
    if _NAME.match(name_or_path) and shipped.is_file():
        return shipped
    raise ValueError(
        f"suite={name_or_path!r} is unknown; allowed: {' | '.join(shipped_suites())} "
        f"(configs/suites/) or the path of a suite YAML"
    )


RUN_ENV = "run_env"
"""An entry of this name is the run's own env: it takes the name of the env (``env.name``: ``room``,
``traps``, ...) when the evaluation knows it and no other entry has that name."""


def load_suite(name_or_path: str, env_name: str | None = None) -> DictConfig:
    """The suite, checked: known keys only, at least one entry, unique path-safe entry names; with
    ``env_name``, an entry named RUN_ENV is named after the run's env."""
    path = suite_path(name_or_path)
    try:
        suite = OmegaConf.merge(OmegaConf.structured(SuiteCfg), OmegaConf.load(path))
    except Exception as e:  # omegaconf's errors name the key; add the file
        raise ValueError(f"suite {path}: {e}") from e
    names = [str(e.name) for e in suite.entries]
    if env_name and env_name not in names:
        for e in suite.entries:
            if e.name == RUN_ENV:
                e.name = env_name
        names = [str(e.name) for e in suite.entries]
    if not names:
        raise ValueError(f"suite {path}: 'entries' is empty; give at least one entry")
    bad = [n for n in names if not _NAME.match(n) or names.count(n) > 1]
    if bad:
        raise ValueError(
            f"suite {path}: entry names {sorted(set(bad))} are invalid; allowed: unique names of letters, "
            f"digits, '_', '.', '-'"
        )
    for e in suite.entries:
        if e.num_episodes is not None and e.num_episodes < 1:
            raise ValueError(f"suite {path}, entry {e.name}: num_episodes={e.num_episodes}; allowed: >= 1")
    return suite


LAYOUT_KEYS = ("env.maps.", "env.obstacles.")
"""Overrides under these draw an entry's own layouts (map families, obstacle counts and sizes)..."""
NOT_DRAWING = ("_slots", ".check_path", ".rng", ".split")
"""...except these: slot counts only make room; the path check and the id source pick among layouts."""


def draws_layouts(entry: DictConfig) -> list[str]:
    """The entry's overrides that draw its own layouts (map families, obstacle counts and sizes)."""
    return [k for k in map(str, entry.overrides) if k.startswith(LAYOUT_KEYS) and not k.endswith(NOT_DRAWING)]


def entry_config(cfg: DictConfig, entry: DictConfig) -> DictConfig:
    """The run's config with the entry's overrides and episode count; a key the config lacks fails,
    naming the entry and the key. An entry that draws its own layouts (``draws_layouts``) plays them, not
    the run's scenario file (``env.scenarios``), unless it names one itself."""
    cfg = cfg.copy()
    with open_dict(cfg):
        for key, value in entry.overrides.items():
            if OmegaConf.select(cfg, key, default=_MISSING_KEY) is _MISSING_KEY:
                raise KeyError(f"suite entry {entry.name!r}: override {key!r} is not a config key")
            OmegaConf.update(cfg, key, value, merge=False)
        if draws_layouts(entry) and "env.scenarios" not in entry.overrides:
            cfg.env.scenarios = None
        if entry.num_episodes is not None:
            cfg.eval.num_episodes = int(entry.num_episodes)
    return cfg


def check_suite(cfg: DictConfig, name_or_path: str) -> None:
    """Load the suite and validate every entry's evaluation env config (before training or any episode)."""
    for entry in load_suite(name_or_path, cfg.env.get("name")).entries:
        try:
            ecfg = entry_config(cfg, entry)
            validate_env_cfg(eval_env_cfg(ecfg).env)
            check_scenario_episodes(ecfg)
        except ValueError as e:
            raise ValueError(f"suite {name_or_path}, entry {entry.name}: {e}") from e


def check_scenarios_played(cfg: DictConfig, name_or_path: str) -> None:
    """A scenario file asked for on the command line together with a suite must be played by one of its
    entries: where every entry draws its own layouts (``suite=ood``), the file would be ignored."""
    entries = load_suite(name_or_path, cfg.env.get("name")).entries
    if any(entry_config(cfg, e).env.get("scenarios") for e in entries):
        return
    raise ValueError(
        f"env.scenarios={cfg.env.scenarios} is played by no entry of suite {name_or_path}: each of "
        f"{[str(e.name) for e in entries]} draws its own layouts ({draws_layouts(entries[0])[:2]}, ...); "
        f"evaluate the scenario file without suite=, or the suite without env.scenarios="
    )


def check_scenario_episodes(cfg: DictConfig, key: str = "eval.num_episodes") -> None:
    """An evaluation of a scenario file plays every entry: ``eval.num_episodes`` below the number of
    entries is refused, naming the entries that would never be played (and ``key``, the option that
    set it: ``episodes`` for ``navexp.play``)."""
    scen = cfg.env.get("scenarios")
    if not scen:
        return
    names = scenario_entry_names(resolve_scenario_path(str(scen)))
    n = int(cfg.eval.num_episodes)
    if n < len(names):
        raise ValueError(
            f"{key}={n} is fewer than the {len(names)} entries of env.scenarios={scen}: "
            f"{names[n:]} would never be played; allowed: {key} >= {len(names)} (a multiple of "
            f"{len(names)} plays every entry equally often)"
        )


def check_evaluation(cfg: DictConfig, suite: str | None) -> None:
    """What an evaluation will play, checked before any episode: every entry of ``suite``, or the
    run's config alone."""
    if suite:
        check_suite(cfg, suite)
    else:
        check_scenario_episodes(cfg)
