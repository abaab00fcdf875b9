"""The env config's value checks, shared by the env validation and the map families' own keys: each
failure is a ValueError naming the key, the value and what is allowed."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf


def check(ok: bool, key: str, value: Any, allowed: str) -> None:
    """Raise ``env config: <key>=<value> is invalid; allowed: <allowed>`` unless ``ok``."""
    if not ok:
        raise ValueError(f"env config: {key}={value!r} is invalid; allowed: {allowed}")


def check_range(key: str, value: list, lo: float) -> None:
    """A ``[min, max]`` pair with ``lo <= min <= max``."""
    check(
        len(value) == 2 and lo <= value[0] <= value[1],
        key,
        list(value),
        f"[min, max] with {lo} <= min <= max",
    )


def check_all_finite(cfg: Any, group: str, exempt: frozenset[str] = frozenset()) -> None:
    """Refuse NaN and inf in every float of a config group (a DictConfig, dataclass or dict), nested
    keys and list entries included: no key of ``group`` takes them, except the dotted keys in ``exempt``.

    Runs before the range checks: ``inf > 0`` passes them, and then ``max_range_m=inf`` reads every
    beam as 0, ``maps.weights.random=inf`` fails deep in the layout pool."""
    for key, value in _floats(_plain(cfg), ""):
        if key not in exempt and not math.isfinite(value):
            raise ValueError(
                f"{group} config: {group}.{key}={value!r} is invalid; allowed: a finite number "
                f"(NaN and inf are refused in every {group} key)"
            )


def _plain(cfg: Any) -> Any:
    """Plain dicts and lists of a config node (interpolations resolved)."""
    if isinstance(cfg, DictConfig | ListConfig):
        return OmegaConf.to_container(cfg, resolve=True)
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return dataclasses.asdict(cfg)
    return cfg


def _floats(node: Any, key: str):
    """``(dotted key, value)`` for every float under ``node`` (list entries as ``key[i]``)."""
    if isinstance(node, Mapping):
        for k, v in node.items():
            yield from _floats(v, f"{key}.{k}" if key else str(k))
    elif isinstance(node, list | tuple):
        for i, v in enumerate(node):
            yield from _floats(v, f"{key}[{i}]")
    elif isinstance(node, float):
        yield key, node
