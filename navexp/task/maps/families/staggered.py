"""``staggered``: parallel cross walls with doors at alternating ends, a slalom (1 wall slot each)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from navexp.sim.layout import Layout
from navexp.task.checks import check_range
from navexp.task.maps.families.base import MapSpec, register_family
from navexp.task.maps.families.geometry import cross_walls, mirror, rect, set_walls, sides
from navexp.task.maps.random_family import LayoutSpec, place_start_goal


@dataclass
class StaggeredCfg:
    walls: list[int] = field(default_factory=lambda: [2, 3])
    """[min, max] parallel cross walls, gaps at alternating ends (a slalom); 1 wall slot each."""


def _check(cfg: StaggeredCfg, env_cfg: Any) -> None:
    check_range("maps.staggered.walls", cfg.walls, 1)


@register_family("staggered", StaggeredCfg, wall_slots=lambda m: m.staggered.walls[1], check=_check)
def staggered(maps: MapSpec, spec: LayoutSpec, k: int, src) -> tuple[Layout, torch.Tensor]:
    """Parallel cross walls, each leaving a door of width ``gap_m`` at alternating ends (top, bottom,
    top, ...): the way from start to goal is a slalom. One wall slot per wall."""
    lay = Layout.empty(k, spec.cylinder_slots, spec.box_slots, src.device, spec.wall_slots)
    w_max, t, hy = maps.cfg.staggered.walls[1], maps.cfg.wall_half_thickness_m, spec.half_y
    n = src.integers(*maps.cfg.staggered.walls, (k, 1))
    x, exists = cross_walls(spec, n, w_max)
    gap = src.uniform((k, w_max), *maps.cfg.gap_m)
    parts = ([], [], [])
    for i in range(w_max):
        full = torch.full_like(gap[:, i], hy)
        y0, y1 = (-full, full - gap[:, i]) if i % 2 == 0 else (-full + gap[:, i], full)
        c, h, a = rect(x[:, i] - t, x[:, i] + t, y0, y1)
        for p, v in zip(parts, (c, h, a & exists[:, i]), strict=True):
            p.append(v)
    set_walls(lay, *parts)
    start_box, goal_box = sides(spec, x[:, :1], x.gather(1, n - 1), t)
    ok = place_start_goal(spec, lay, src, start_box, goal_box)
    return mirror(lay, src, spec), ok
