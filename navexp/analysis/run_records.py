"""The runs under some folders and what each recorded, read for ``navexp.analysis.compare``.

A run is a folder with ``config.yaml`` (``navexp.train`` writes it first, the resolved config); it is
finished when it also holds its evaluation file (``eval.json``). Besides the config a run is read for
its command line (Hydra's ``.hydra/overrides.yaml``) and its group choices (``.hydra/hydra.yaml``,
``hydra.runtime.choices``), which only name what differs; the resolved config decides the groups.
A run whose files cannot be read (truncated YAML or JSON, a success rate that is null, NaN or text, an
``entries`` that is a list, an overrides list that is a mapping) is not compared: it is listed as
unreadable with its file and what is wrong, and the others are compared without it.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf

from navexp.config.aliases import translate_overrides
from navexp.learn.ppo_schema import nest_ppo
from navexp.paths import CONFIG_DIR, overrides_record

IGNORED = (
    "seed",
    "hydra.",
    "hydra/",
    "resume",
    "verbose",
    "experiment_name",
    "sweep.",
    "logger=",
    "logger.",
    "env.device",
)
"""Overrides that never tell groups apart: the seed, Hydra's own settings, where a run lives and logs,
what a sweeper adds to each trial (its id, number, study, W&B name) and the device it ran on."""
NEUTRAL = (
    "seed",
    "experiment_name",
    "resume",
    "verbose",
    "env.device",
    "env.name",
    "logger",
    "sweep",
    "hydra",
)
"""Config keys (and the sections below them) that never tell groups apart, for the same reasons."""
RATES = ("success_rate", "collision_rate", "timeout_rate")
"""An evaluation's rates: numbers in [0, 1] (null only for the metrics after ``success_rate``)."""


class Unreadable(ValueError):
    """A run file that cannot be read: the file and what is wrong with it."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


@dataclass
class Run:
    """One run directory and what it recorded."""

    path: Path
    overrides: list[str]
    """Its command-line overrides with today's key names, the neutral ones (``IGNORED``) left out."""
    config: Any
    """config.yaml (an OmegaConf node) in today's shape."""
    metrics: dict | None = None
    """The evaluation file's figures (None: the run has not finished)."""
    evaluation: Path | None = None
    """The evaluation file read (``find_runs``)."""
    choices: dict[str, str] = field(default_factory=dict)
    """Its config group choices (``env``: ``traps``), empty for a run made without Hydra."""
    settings: dict[str, str] = field(default_factory=dict)
    """Every config leaf but the neutral ones (``NEUTRAL``), dotted key -> its value as JSON."""


@dataclass
class RunsFound:
    """The runs under some folders: those read, and those that could not be."""

    runs: list[Run]
    unreadable: list[Unreadable]


def find_runs(dirs: list[str | Path], evaluation: str = "eval.json") -> RunsFound:
    """Every run directory (holding config.yaml) under ``dirs``, in path order, with the metrics of
    its ``evaluation`` file: ``eval.json`` (the final evaluation), or a glob in the run directory such as
    ``eval_*suite-ood*.json`` for a later ``navexp.evaluate`` (several matches: ``evaluation_file``).
    Each run counts once however the folders overlap (the same folder twice, a run and its parent)."""
    check_evaluation_glob(evaluation)
    runs, unreadable, seen = [], [], set()
    for d in dirs:
        root = Path(d)
        if not root.exists():
            raise FileNotFoundError(f"{root}: no such directory")
        configs = sorted(p for p in root.rglob("config.yaml") if ".hydra" not in p.relative_to(root).parts)
        for cfg_path in configs:
            run_dir = cfg_path.parent
            if run_dir.resolve() in seen or _inside_run(run_dir, root):
                continue  # a folder given twice, or inside another: each run counts once
            seen.add(run_dir.resolve())
            try:
                runs.append(read_run(run_dir, evaluation))
            except Unreadable as e:
                unreadable.append(e)
    return RunsFound(runs, unreadable)


def read_run(run_dir: Path, evaluation: str) -> Run:
    """One run's config, command line, group choices and evaluation; ``Unreadable`` names the first
    file that cannot be read."""
    path = evaluation_file(run_dir, evaluation)
    metrics = read_evaluation(path) if path is not None else None
    config = load_config(run_dir / "config.yaml")
    overrides, choices = read_command_line(run_dir)
    flat = flatten(OmegaConf.to_container(config, resolve=False))
    settings = {k: json.dumps(v, sort_keys=True) for k, v in flat.items() if not is_neutral(k)}
    return Run(run_dir, overrides, config, metrics, path, choices, settings)


def is_neutral(key: str) -> bool:
    """A config key that never tells groups apart (``NEUTRAL``: the seed, the logger, ...)."""
    return any(key == n or key.startswith(f"{n}.") for n in NEUTRAL)


def check_evaluation_glob(pattern: str) -> None:
    """``eval=`` is a pattern inside each run directory (``segments/1/eval.json`` too), not a path
    outside it."""
    if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
        raise ValueError(
            f"eval={pattern!r}: give a file name pattern inside each run directory, not a path "
            f"(eval.json, or eval='eval_*suite-ood*.json' for navexp.evaluate ... suite=ood)"
        )


def read_evaluation(path: Path) -> dict:
    """An evaluation file's figures: a JSON object whose ``success_rate`` and other rates are numbers in
    [0, 1] and whose ``entries`` (if any) map names to such objects; else ``Unreadable``."""
    try:
        metrics = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise Unreadable(path, f"not JSON ({str(e)[:120]})") from None
    if not isinstance(metrics, dict) or "success_rate" not in metrics:
        raise Unreadable(path, "not an evaluation of navexp.train or navexp.evaluate (no success_rate)")
    check_rates(path, metrics, "")
    entries = metrics.get("entries")
    if entries is None:
        return metrics
    if not isinstance(entries, dict):
        raise Unreadable(path, f"'entries' is a {type(entries).__name__}, not a mapping of entry names")
    for name, entry in entries.items():
        if not isinstance(entry, dict) or "success_rate" not in entry:
            raise Unreadable(path, f"entries.{str(name)[:40]} is not an evaluation (no success_rate)")
        check_rates(path, entry, f"entries.{str(name)[:40]}.")
    return metrics


def check_rates(path: Path, metrics: dict, where: str) -> None:
    """``success_rate`` is a number in [0, 1]; the other rates, where given, too (or null)."""
    for name in RATES:
        value = metrics.get(name)
        if value is None and name != "success_rate":
            continue
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or not 0 <= value <= 1:
            raise Unreadable(path, f"{where}{name} is {str(value)[:40]!r}; allowed: a number in [0, 1]")


def load_config(path: Path) -> Any:
    """A run's config.yaml in today's shape (a run from before the ``ppo`` sections: its flat keys
    moved into them, so ``by=ppo.algorithm.clip_param`` finds old and new runs alike)."""
    try:
        config = OmegaConf.load(path)
    except (OSError, yaml.YAMLError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise Unreadable(path, f"not a run's config ({first[:120]})") from None
    if not OmegaConf.is_dict(config):
        raise Unreadable(path, f"not a run's config (a {type(config).__name__}, not a mapping)")
    if OmegaConf.is_dict(config.get("ppo")):
        config.ppo = nest_ppo(OmegaConf.to_container(config.ppo, resolve=False))
    return config


def read_command_line(run_dir: Path) -> tuple[list[str], dict[str, str]]:
    """The run's overrides (Hydra's latest record: a resume's, which repeats the run's own), with today's
    key names and without those that never tell groups apart, and the group choices Hydra recorded
    beside them (``hydra.yaml``); a run made without Hydra has neither."""
    path = overrides_record(run_dir)
    if path is None:
        return [], {}
    given = _yaml(path)
    if given is None:
        given = []
    bad = [given] if not isinstance(given, list) else [o for o in given if not isinstance(o, str)]
    if bad:
        kind = type(bad[0]).__name__
        raise Unreadable(path, f"not a list of key=value overrides (holds a {kind}: {str(bad[0])[:60]})")
    overrides = sorted(o for o in translate_overrides(given) if not o.lstrip("+~").startswith(IGNORED))
    hydra_yaml = path.parent / "hydra.yaml"
    if not hydra_yaml.is_file():
        return overrides, {}
    choices = OmegaConf.select(OmegaConf.create(_yaml(hydra_yaml) or {}), "hydra.runtime.choices")
    if not OmegaConf.is_dict(choices):
        raise Unreadable(hydra_yaml, "no hydra.runtime.choices mapping")
    return overrides, {str(g): str(c) for g, c in choices.items() if not str(g).startswith("hydra/")}


def _yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise Unreadable(path, f"not YAML ({first[:120]})") from None


def package(group: str) -> str:
    """Where a config group's keys land (its files' ``# @package`` line: ``robot``: ``env.robot``;
    ``_global_``: ""), the group's own name where none is given."""
    for option in sorted((CONFIG_DIR / group).glob("*.yaml"))[:1]:
        first = option.read_text().split("\n", 1)[0]
        if first.startswith("# @package "):
            name = first[len("# @package ") :].strip()
            return "" if name == "_global_" else name
    return group


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted leaf keys of a nested dict (lists are leaves)."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: node}


def _inside_run(d: Path, root: Path) -> bool:
    """A config.yaml below another run's directory (at or below ``root``) is that run's, not a run: an
    earlier segment (``<run>/segments/<k>/``, also when ``root`` is the segments folder) or W&B's copy
    (``<run>/wandb/.../files/config.yaml``)."""
    if d.parent.name == "segments" and (d.parent.parent / "config.yaml").is_file():
        return True
    rel = d.relative_to(root).parts
    above = [root.joinpath(*rel[:i]) for i in range(len(rel))]  # root, then each folder down to d's parent
    return any((folder / "config.yaml").is_file() for folder in above)


def evaluation_file(run_dir: Path, pattern: str) -> Path | None:
    """The run's file matching ``pattern``; of several, one that scores the run's policy (what
    ``navexp.evaluate checkpoint=<run>`` reads: its average with ``ppo.average_checkpoints``), the
    newest by modification time among those (an evaluation of another checkpoint, such as a single
    ``model_<it>.pt``, only when none scores the policy)."""
    matches = [p for p in run_dir.glob(pattern) if p.is_file()]
    if len(matches) <= 1:
        return matches[0] if matches else None
    from navexp.learn.checkpoint import resolve_policy  # torch: only where a choice is to be made

    try:
        policy = resolve_policy(run_dir).name
    except FileNotFoundError:  # no checkpoint left: the newest file
        policy = None

    def rank(p: Path) -> tuple[bool, int]:
        try:
            scored = Path(str(json.loads(p.read_text()).get("checkpoint") or "")).name
        except (OSError, ValueError, AttributeError):
            scored = ""
        return scored == policy, p.stat().st_mtime_ns

    best = max(matches, key=rank)
    if policy is not None and not rank(best)[0]:
        print(
            f"[navexp] {run_dir}: none of {sorted(p.name for p in matches)} scores the run's policy "
            f"{policy}; reading the newest, {best.name}",
            file=sys.stderr,
        )
    return best
