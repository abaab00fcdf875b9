"""Map families: batched generators of layouts with structure (walls with doors, slaloms, traps,
clutter, cellular-automaton grids) next to the random sampler, one module each, in a registry.

Adding a family is one module in this package: a generator ``(MapSpec, LayoutSpec, k, source) ->
(Layout, valid [K])`` decorated with ``@register_family(name, cfg=<its keys' dataclass>,
wall_slots=..., check=...)``. Every module here is imported below, which registers it; its keys then
appear as ``env.maps.<name>.*`` and its weight as ``env.maps.weights.<name>``. Validity from a
generator is the clearance of start and goal (and, for grid, that the rectangles fit the slots); the
free path is checked afterwards for every family (``generate``).
"""

from __future__ import annotations

import importlib
import pkgutil

from navexp.task.maps.families.base import (
    REGISTRY,
    Family,
    MapsBaseCfg,
    MapSpec,
    family_index,
    generate,
    maps_cfg_schema,
    register_family,
    wall_slots_needed,
)

_BUILT_IN = ("random", "corridor", "staggered", "cul_de_sac", "cluttered", "grid")  # layout.family order
_HELPERS = ("base", "geometry")
for _name in [
    *_BUILT_IN,
    *sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in (*_BUILT_IN, *_HELPERS)),
]:
    importlib.import_module(f"{__name__}.{_name}")  # registers its family

FAMILIES: tuple[str, ...] = tuple(REGISTRY)
"""Map family names; a layout's ``family`` is the index into this tuple."""
MapsCfg = maps_cfg_schema()
"""Schema of ``env.maps``: the shared keys (``MapsBaseCfg``) and one field per family with keys."""

__all__ = [
    "FAMILIES",
    "REGISTRY",
    "Family",
    "MapSpec",
    "MapsBaseCfg",
    "MapsCfg",
    "family_index",
    "generate",
    "register_family",
    "wall_slots_needed",
]
