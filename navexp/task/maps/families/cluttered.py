"""``cluttered``: many small cylinders and no boxes, the random sampler with these counts and sizes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch

from navexp.sim.layout import Layout
from navexp.task.checks import check, check_range
from navexp.task.maps.families.base import MapSpec, register_family
from navexp.task.maps.random_family import LayoutSpec, sample_layouts


@dataclass
class ClutteredCfg:
    count: list[int] = field(default_factory=lambda: [8, 14])
    """[min, max] small cylinders (cylinder slots), max <= obstacles.cylinder_slots."""
    radius_m: list[float] = field(default_factory=lambda: [0.1, 0.25])


def _check(cfg: ClutteredCfg, env_cfg: Any) -> None:
    check_range("maps.cluttered.count", cfg.count, 0)
    check_range("maps.cluttered.radius_m", cfg.radius_m, 1e-3)


def check_slots(cfg: ClutteredCfg, env_cfg: Any) -> None:
    """With weight > 0: the cylinders fit the cylinder slots."""
    slots = env_cfg.obstacles.cylinder_slots
    check(
        cfg.count[1] <= slots,
        "maps.cluttered.count",
        list(cfg.count),
        f"max <= obstacles.cylinder_slots ({slots})",
    )


def _hint(maps: Any, spec: LayoutSpec) -> str:
    c = maps.cluttered
    return f"lower maps.cluttered.count ({list(c.count)}) or maps.cluttered.radius_m ({list(c.radius_m)})"


@register_family("cluttered", ClutteredCfg, check=_check, hint=_hint)
def cluttered(maps: MapSpec, spec: LayoutSpec, k: int, src) -> tuple[Layout, torch.Tensor]:
    """Many small cylinders (``cluttered.count`` of ``cluttered.radius_m``), no boxes: the random
    sampler with these counts and sizes."""
    clutter = replace(
        spec,
        cylinder_count=tuple(maps.cfg.cluttered.count),
        cylinder_radius_m=tuple(maps.cfg.cluttered.radius_m),
        box_count=(0, 0),
    )
    return sample_layouts(clutter, k, src)
