"""Runs grouped by their resolved config, and the few columns that tell the groups apart.

Two runs are in one group when every config key but the neutral ones (``run_records.NEUTRAL``: the
seed, the logger, the sweep's bookkeeping, the device) has the same value in both: a run launched with
``reward=bcppo ppo.algorithm.desired_kl=0.01`` (the defaults, spelled out) groups with a default run.
The columns that name the groups are the config group choices that differ (``env``: ``room`` or
``traps``) and the differing keys that no differing choice explains (a key inside the ``env`` section
follows from ``env=traps``; a ``_global_`` group such as ``recipe`` may set any key) or that a run's
command line sets; where two groups would still read alike, the hidden keys that tell them apart are
added. The settings a command line names that every run has alike are reported once (``shared``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from omegaconf import OmegaConf

from navexp.analysis.run_records import Run, flatten, package

ABSENT = json.dumps("(absent)")
"""The value of a key a run's config lacks (a run from before the key existed)."""


@dataclass
class Group:
    """Runs that share the grouping values."""

    key: dict[str, str]
    """The columns naming the group and its values in them."""
    runs: list[Run] = field(default_factory=list)


@dataclass
class Grouping:
    """The groups of some runs and what the table says about them besides."""

    groups: list[Group]
    shared: dict[str, str]
    """Settings a run's command line names that every run has alike: printed once above the table."""
    hidden: list[str]
    """Config keys that differ between groups but follow from a column (``env=traps``: its env keys)."""


def varying_keys(runs: list[Run]) -> list[str]:
    """Config keys whose values differ between the runs (dotted, sorted): what ``by=`` can name."""
    flat = [flatten(OmegaConf.to_container(r.config, resolve=False)) for r in runs]
    keys = set().union(*flat) if flat else set()
    return sorted(k for k in keys if len({json.dumps(f.get(k), sort_keys=True) for f in flat}) > 1)


def varying_settings(runs: list[Run]) -> list[str]:
    """The non-neutral config keys whose values differ between the runs (sorted)."""
    keys = sorted(set().union(*(r.settings for r in runs))) if runs else []
    return [k for k in keys if len({r.settings.get(k, ABSENT) for r in runs}) > 1]


def group_runs(runs: list[Run], by: list[str] | None = None) -> Grouping:
    """Group finished runs by their resolved config (the seed and the other neutral keys aside), or by
    the config keys ``by``. A ``by`` key missing from a run's config fails naming it and the keys that
    vary across the runs."""
    if by:
        groups = _group_by_keys(runs, by)
        return Grouping(groups, shared_settings(runs, set(by)), [])
    varying = varying_settings(runs)
    buckets: dict[tuple, list[Run]] = {}
    for run in runs:
        buckets.setdefault(tuple(run.settings.get(k, ABSENT) for k in varying), []).append(run)
    shown = label_keys(list(buckets.values()), varying)
    groups = [Group({k: value_of(g, k) for k in shown}, g) for g in buckets.values()]
    hidden = [k for k in varying if k not in shown]
    return Grouping(groups, shared_settings(runs, set(shown)), hidden)


def _group_by_keys(runs: list[Run], by: list[str]) -> list[Group]:
    groups: dict[tuple, Group] = {}
    for run in runs:
        key, typed = {}, {}
        for k in by:
            value = OmegaConf.select(run.config, k, default="__missing__")
            if value == "__missing__":
                raise KeyError(
                    f"by={k!r} is not a config key of {run.path}; keys that vary: {varying_keys(runs)}"
                )
            plain = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
            typed[k] = json.dumps(plain)  # groups apart "1" and 1
            key[k] = plain if isinstance(plain, str) else typed[k]  # written traps, not "traps"
        groups.setdefault(tuple(sorted(typed.items())), Group(key)).runs.append(run)
    return list(groups.values())


def value_of(runs: list[Run], key: str) -> str:
    """A column's value for some runs: a config key's value as it reads (``traps``, ``0.01``) or a
    group choice (``env``: ``room``); several values joined by ``|``, none: ``-``."""
    values = []
    for run in runs:
        if key in run.settings:
            plain = json.loads(run.settings[key])
            text = plain if isinstance(plain, str) else json.dumps(plain)
        else:
            text = run.choices.get(key, "-")
        if text not in values:
            values.append(text)
    return "|".join(values)


def label_keys(groups: list[list[Run]], varying: list[str]) -> list[str]:
    """The columns that tell ``groups`` apart (module docstring): differing group choices, then the
    differing keys no differing choice explains or that a command line sets, then hidden keys until no
    two groups read alike."""
    if len(groups) < 2:
        return []
    runs = [r for g in groups for r in g]
    names = sorted({c for r in runs for c in r.choices})
    differing = [c for c in names if len({value_of(g, c) for g in groups}) > 1]
    sections = [package(c) for c in differing if c not in varying]
    anything = any(package(c) == "" for c in differing)  # a _global_ group (recipe, size) sets any key
    set_keys = {o.lstrip("+~").split("=", 1)[0] for r in runs for o in r.overrides}

    def explained(k: str) -> bool:
        return anything or any(k.startswith(f"{p}.") for p in sections)

    shown = [c for c in differing if c not in varying]
    shown += [k for k in varying if k in set_keys or not explained(k)]
    for k in varying:  # the keys left out, one at a time, until every group reads apart
        if len({tuple(value_of(g, c) for c in shown) for g in groups}) == len(groups):
            break
        if k not in shown:
            shown.append(k)
    return shown


def shared_settings(runs: list[Run], columns: set[str]) -> dict[str, str]:
    """``key: value`` of each config key or group a run's command line names, outside ``columns``,
    that every run has alike (``env.num_envs``: ``4``)."""
    named = sorted({o.lstrip("+~").split("=", 1)[0] for r in runs for o in r.overrides} - columns)
    shared = {}
    for key in named:
        if not all(key in r.settings or key in r.choices for r in runs):
            continue  # a section (env.lidar={...}) or a key some runs lack: not one value
        value = value_of(runs, key)
        if "|" not in value:
            shared[key] = value
    return shared
