"""The map-family registry and the typed map settings every generator reads.

A family is a batched generator ``(MapSpec, LayoutSpec, k, source) -> (Layout, valid [K])`` on the
source's device (no loop over layouts, no host sync), registered with ``@register_family`` together
with the schema of its own keys (``env.maps.<name>``), the wall slots its largest layout needs and the
checks of its keys. A layout's ``family`` is the family's index in registration order (``FAMILIES``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, make_dataclass
from typing import Any

import torch
from omegaconf import OmegaConf

from navexp.sim.layout import Layout
from navexp.task.maps.grid_path import grid_shape, paths_and_fields
from navexp.task.maps.moving import add_moving
from navexp.task.maps.random_family import LayoutSpec

Generator = Callable[["MapSpec", LayoutSpec, int, Any], "tuple[Layout, torch.Tensor]"]


@dataclass(frozen=True)
class Family:
    """A registered map family."""

    name: str
    generate: Generator
    cfg: type | None = None
    """Schema of the family's own keys under ``env.maps.<name>`` (None: it has none)."""
    wall_slots: Callable[[Any], int] = lambda maps_cfg: 0
    """Wall slots its largest layout uses, from the typed ``env.maps`` settings."""
    check: Callable[[Any, Any], None] = lambda family_cfg, env_cfg: None
    """Raise ValueError naming the key for impossible settings of ``env.maps.<name>`` (``env_cfg``:
    the whole env config, for the robot radius and the slot counts). Runs only while the family has
    weight > 0."""
    hint: Callable[[Any, LayoutSpec], str] | None = None
    """The family's own keys to change, with their values, when too few of its layouts can be drawn
    (``(maps_cfg, spec) -> "lower maps.grid.fill ([0.9, 1.0]) ..."``); None: the obstacle keys."""


REGISTRY: dict[str, Family] = {}
"""Families by name, in registration order (the built-in ones first: random, corridor, staggered,
cul_de_sac, cluttered, grid)."""


def register_family(
    name: str,
    cfg: type | None = None,
    wall_slots: Callable[[Any], int] | None = None,
    check: Callable[[Any, Any], None] | None = None,
    hint: Callable[[Any, LayoutSpec], str] | None = None,
) -> Callable[[Generator], Generator]:
    """Decorator: register a generator as map family ``name``; a duplicate name raises."""

    def deco(fn: Generator) -> Generator:
        if name in REGISTRY:
            raise ValueError(f"map family {name!r} is already registered")
        pairs = (("wall_slots", wall_slots), ("check", check), ("hint", hint))
        extra = {k: v for k, v in pairs if v is not None}
        REGISTRY[name] = Family(name, fn, cfg, **extra)
        return fn

    return deco


@dataclass
class MapsBaseCfg:
    """The keys of ``env.maps`` shared by every family (each family adds ``env.maps.<name>``)."""

    weights: dict[str, float] = field(default_factory=dict)
    """Weight per family (every family is listed so it can be set from the command line):
    random | corridor | staggered | cul_de_sac | cluttered | grid. Normalised (their sum must be finite
    and > 0); 0 = off, and the keys of a family that is off are not checked."""
    rng: str = "stream"
    """stream: layouts come from one generator stream seeded by seed + layout_seed_offset (today's
    layouts; no per-layout id). hashed: layout (family, seed) is drawn from a counter-based hash of its
    id, so it can be regenerated from it, and training and evaluation seeds lie in disjoint ranges."""
    split: str = "train"
    """train | eval: the seed range hashed layouts come from (evaluation sets eval)."""
    check_path: bool | None = None
    """Reject layouts without a free path from start to goal for the robot radius and record the
    shortest path (Layout.shortest_path_m). None: on when any family other than random has weight."""
    path_cell_m: float = 0.2
    """Occupancy-grid cell of the path check: the shortest path is exact to about one cell (plus at
    most 2.7 %); 0.1 is finer and 2-5x slower (one CPU thread: 2-4 ms a layout at 0.2). Below
    (2 x robot radius + the thinnest obstacle) / 1.71, so the check cannot step over an obstacle, and at
    least the room's longer side / 256 (``navexp.task.validation._check_path_cell``)."""
    path_margin_m: float = 0.0
    """Clearance the goal distance field (read by ``path_progress`` and ``truth_path_dist``) prefers
    beyond the robot's radius: a metre where the robot's edge passes closer than this to an obstacle
    counts up to ``1 + path_margin_cost`` metres, so the field leads through the middle of lanes and
    wide doors rather than round corners at touching distance. 0: plain metres. The free-path check
    and ``shortest_path_m`` (SPL) always use plain metres."""
    path_margin_cost: float = 1.0
    """Extra cost per metre at touching distance (falls linearly to 0 at ``path_margin_m``)."""
    wall_half_thickness_m: float = 0.1
    """Half thickness of the structured families' walls, scaled per layout by ``wall_thickness_scale``."""
    wall_thickness_scale: list[float] = field(default_factory=lambda: [0.5, 2.0])
    """[min, max] factor on ``wall_half_thickness_m`` drawn per layout (corridor, staggered, cul_de_sac):
    walls 0.1-0.4 m thick by default, from partitions to load-bearing walls."""
    gap_m: list[float] = field(default_factory=lambda: [0.7, 1.4])
    """[min, max] width of a door (corridor, staggered); must exceed the robot diameter (0.4 m): 0.7 m
    is 1.75 diameters, a narrow interior door."""


_SCHEMA: list[type] = []


def maps_cfg_schema() -> type:
    """The ``env.maps`` schema: ``MapsBaseCfg`` plus one field per registered family with keys, and
    the weights' default (random 1, every other family 0). Built once, after the families registered."""
    if not _SCHEMA:
        weights = {name: (1.0 if name == "random" else 0.0) for name in REGISTRY}
        fields = [("weights", dict[str, float], field(default_factory=lambda: dict(weights)))]
        fields += [(f.name, f.cfg, field(default_factory=f.cfg)) for f in REGISTRY.values() if f.cfg]
        # Published as navexp.task.maps.families.MapsCfg, so pickled configs (joblib workers) find it.
        schema = make_dataclass("MapsCfg", fields, bases=(MapsBaseCfg,))
        schema.__module__ = "navexp.task.maps.families"
        _SCHEMA.append(schema)
    return _SCHEMA[0]


@dataclass(frozen=True)
class MapSpec:
    """The typed ``env.maps`` settings the generators read (``cfg``: a ``MapsCfg``), and whether the
    free-path check runs (``check_path`` resolved from the config's null)."""

    cfg: Any = None
    """A ``MapsCfg`` (default: the schema's defaults, i.e. random layouts only)."""
    check_path: bool = False
    keep_fields: bool = False
    """Keep each layout's goal distance field (``Layout.goal_field``; implies the path check): set by
    the env while a term reads the path distance, not a config key."""

    def __post_init__(self) -> None:
        if self.cfg is None:
            object.__setattr__(self, "cfg", maps_cfg_schema()())

    @property
    def active_families(self) -> list[tuple[str, float]]:
        """(family, normalised weight) of the families with weight > 0, in registration order."""
        w = self.cfg.weights
        total = sum(v for v in w.values() if v > 0)
        return [(f, w[f] / total) for f in REGISTRY if w.get(f, 0.0) > 0]

    @classmethod
    def from_env_cfg(cls, env_cfg) -> MapSpec:
        """The env config's ``maps`` as the typed schema (a config of before map families, e.g. a
        checkpoint's: the defaults); a null ``check_path`` is on when a structured family has weight."""
        m = getattr(env_cfg, "maps", None)
        if m is None:
            return cls()
        cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(maps_cfg_schema()), m))
        structured = any(v > 0 for f, v in cfg.weights.items() if f != "random")
        return cls(cfg, structured if cfg.check_path is None else bool(cfg.check_path))

    def with_cfg(self, **changes: Any) -> MapSpec:
        """A copy with top-level keys or a family's keys changed: ``with_cfg(gap_m=[1, 1],
        corridor={"walls": [1, 1]})``."""
        cfg = OmegaConf.structured(self.cfg)
        merged = OmegaConf.to_object(OmegaConf.merge(cfg, changes))
        return MapSpec(merged, self.check_path, self.keep_fields)


def family_index(name: str) -> int:
    """A family's index in registration order (a layout's ``family``)."""
    return list(REGISTRY).index(name)


def wall_slots_needed(maps: MapSpec, family: str) -> int:
    """Wall slots a family's largest layout uses (grid: at least one; more rectangles are redrawn)."""
    return REGISTRY[family].wall_slots(maps.cfg)


def generate(maps: MapSpec, spec: LayoutSpec, family: str, k: int, src) -> tuple[Layout, torch.Tensor]:
    """K layouts of ``family`` from the random source ``src``; their family index recorded, and, with
    ``maps.check_path``, their shortest path (layouts without a free path are invalid). Waits for the
    device only in the path check."""
    lay, ok = REGISTRY[family].generate(maps, spec, k, src)
    add_moving(spec.moving, lay, src, (spec.half_x, spec.half_y, spec.robot_radius_m))
    lay.family = torch.full((k,), family_index(family), dtype=torch.long, device=src.device)
    if maps.check_path or maps.keep_fields:
        chunk = 8192 if lay.robot_xy.device.type == "cuda" else 256
        # Fewer layouts a chunk on a finer grid, so the check's memory (~260 bytes per cell and layout)
        # stays that of the 40 x 40 cells of the default (0.2 m cells in the 8 m room).
        ny, nx = grid_shape(spec.half_x, spec.half_y, maps.cfg.path_cell_m)[:2]
        chunk = max(1, min(chunk, chunk * 1600 // (ny * nx)))
        lay.shortest_path_m, goal_field = paths_and_fields(
            lay,
            spec.half_x,
            spec.half_y,
            spec.robot_radius_m,
            maps.cfg.path_cell_m,
            chunk,
            maps.keep_fields,
            maps.cfg.path_margin_m,
            maps.cfg.path_margin_cost,
        )
        if goal_field is not None:
            lay.goal_field = goal_field
        ok = ok & torch.isfinite(lay.shortest_path_m)
    return lay, ok
