"""Evaluation suites: one policy evaluated on several envs (map families, densities), one result each.

A suite is a YAML in ``configs/suites/<name>.yaml`` (or any path), checked against ``SuiteCfg``::

    entries:
      - name: room                 # the run's own env (held-out layouts)
      - name: dense
        num_episodes: null         # null: eval.num_episodes
        overrides:                 # config keys set on the run's config for this entry
          env.obstacles.cylinder_count: [5, 8]

Every entry evaluates the run's config with its ``overrides`` (keys, not groups, so the run's robot,
LiDAR and room stay) through ``navexp.rollout.evaluate``: held-out layouts, auto_reset off,
deterministic actions. The first entry is the main one: its metrics are the top-level fields of
``eval.json`` (the sweep objective reads them); ``entries`` holds every entry's metrics by name.
TensorBoard/W&B tags: ``Eval/<metric>`` (main entry), ``Eval/<entry>/<metric>``, and
``Eval/<entry>/<family or scenario>/<metric>`` where an entry mixes families or plays a scenario file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import MISSING, DictConfig, OmegaConf, open_dict

from navexp.api import CONFIG_DIR

if TYPE_CHECKING:
    from navexp.env import NavEnv
    from navexp.plots import Episode
    from navexp.rollout import Policy

SUITES_DIR = CONFIG_DIR / "suites"

Build = Callable[[DictConfig], "tuple[Policy, NavEnv]"]
"""An entry's config -> the policy and its evaluation env (``NavEnv(eval_env_cfg(cfg))``)."""

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


def load_suite(name_or_path: str) -> DictConfig:
    """The suite, checked: known keys only, at least one entry, unique path-safe entry names."""
    path = suite_path(name_or_path)
    try:
        suite = OmegaConf.merge(OmegaConf.structured(SuiteCfg), OmegaConf.load(path))
    except Exception as e:  # omegaconf's errors name the key; add the file
        raise ValueError(f"suite {path}: {e}") from e
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


def entry_config(cfg: DictConfig, entry: DictConfig) -> DictConfig:
    """The run's config with the entry's overrides and episode count; a key the config lacks fails,
    naming the entry and the key."""
    cfg = cfg.copy()
    with open_dict(cfg):
        for key, value in entry.overrides.items():
            if OmegaConf.select(cfg, key, default=_MISSING_KEY) is _MISSING_KEY:
                raise KeyError(f"suite entry {entry.name!r}: override {key!r} is not a config key")
            OmegaConf.update(cfg, key, value, merge=False)
        if entry.num_episodes is not None:
            cfg.eval.num_episodes = int(entry.num_episodes)
    return cfg


def check_suite(cfg: DictConfig, name_or_path: str) -> None:
    """Load the suite and validate every entry's evaluation env config (before training or any episode)."""
    from navexp.rollout import eval_env_cfg
    from navexp.validation import validate_env_cfg

    for entry in load_suite(name_or_path).entries:
        try:
            validate_env_cfg(eval_env_cfg(entry_config(cfg, entry)).env)
        except ValueError as e:
            raise ValueError(f"suite {name_or_path}, entry {entry.name}: {e}") from e


def evaluate_suite(
    cfg: DictConfig, suite: str | None, build: Build, record: bool = False
) -> tuple[dict, NavEnv, list[Episode]]:
    """Evaluate every entry of ``suite`` (None: the run's config alone); return the metrics (the main
    entry's at the top level, all under ``entries``), the main entry's env and its recorded episodes
    (with ``record``)."""
    from navexp.rollout import evaluate

    if not suite:
        policy, env = build(cfg)
        metrics, episodes = evaluate(policy, env, int(cfg.eval.num_episodes), record=record)
        return metrics, env, episodes
    entries: dict[str, dict] = {}
    main: tuple[NavEnv, list[Episode]] | None = None
    for i, entry in enumerate(load_suite(suite).entries):
        ecfg = entry_config(cfg, entry)
        policy, env = build(ecfg)
        metrics, episodes = evaluate(policy, env, int(ecfg.eval.num_episodes), record=record and i == 0)
        entries[str(entry.name)] = metrics
        if main is None:
            main = (env, episodes)
        spl = "-" if metrics["spl"] is None else f"{metrics['spl']:.3f}"
        print(
            f"[navexp] suite {suite}, {entry.name}: success {metrics['success_rate']:.1%} of "
            f"{metrics['num_episodes']} episodes ({metrics['num_distinct_cases']} distinct cases), SPL {spl}",
            flush=True,
        )
    first = next(iter(entries))
    return {**entries[first], "suite_main_entry": first, "entries": entries}, main[0], main[1]


def breakdown(metrics: dict) -> dict[str, dict]:
    """The groups worth their own tags: scenario entries, else families when more than one."""
    if "by_scenario" in metrics:
        return metrics["by_scenario"]
    fams = metrics.get("by_family") or {}
    return fams if len(fams) > 1 else {}


def eval_scalars(metrics: dict, skip: tuple[str, ...] = ()) -> dict[str, float]:
    """TensorBoard/W&B scalars of an evaluation: ``Eval/<metric>`` of the main entry, then per entry
    ``Eval/<entry>/<metric>`` and its groups ``Eval/<entry>/<group>/<metric>`` (without a suite: the
    main evaluation's groups ``Eval/<group>/<metric>``). Keys in ``skip`` (what was evaluated) are left
    out."""
    out = _numbers("Eval/", metrics, skip)
    entries = metrics.get("entries")
    scopes = entries.items() if entries else [("", metrics)]
    for name, m in scopes:
        prefix = f"Eval/{name}/" if name else "Eval/"
        if name:
            out.update(_numbers(prefix, m, skip))
        for group, gm in breakdown(m).items():
            out.update(_numbers(f"{prefix}{group}/", gm, skip))
    return out


def _numbers(prefix: str, metrics: dict, skip: tuple[str, ...]) -> dict[str, float]:
    return {
        prefix + k: float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in skip
    }
