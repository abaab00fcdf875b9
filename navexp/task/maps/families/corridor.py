"""``corridor``: cross walls over the full room width, each with one door (2 wall slots per wall)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from navexp.sim.layout import Layout
from navexp.task.checks import check_range
from navexp.task.maps.families.base import MapSpec, register_family
from navexp.task.maps.families.geometry import cross_walls, half_thickness, mirror, rect, set_walls, sides
from navexp.task.maps.random_family import LayoutSpec, place_start_goal


@dataclass
class CorridorCfg:
    walls: list[int] = field(default_factory=lambda: [1, 2])
    """[min, max] cross walls between start and goal, one gap (door) each; 2 wall slots per wall."""


def _check(cfg: CorridorCfg, env_cfg: Any) -> None:
    check_range("maps.corridor.walls", cfg.walls, 1)


@register_family("corridor", CorridorCfg, wall_slots=lambda m: 2 * m.corridor.walls[1], check=_check)
def corridor(maps: MapSpec, spec: LayoutSpec, k: int, src) -> tuple[Layout, torch.Tensor]:
    """Cross walls over the full room width, each with one door of width ``gap_m`` at a random place;
    start before the first wall, goal after the last (2 wall slots per wall: below and above the door)."""
    lay = Layout.empty(k, spec.cylinder_slots, spec.box_slots, src.device, spec.wall_slots)
    w_max, hy = maps.cfg.corridor.walls[1], spec.half_y
    t = half_thickness(maps, k, src).view(-1, 1)
    n = src.integers(*maps.cfg.corridor.walls, (k, 1))
    x, exists = cross_walls(spec, n, w_max)
    gap = src.uniform((k, w_max), *maps.cfg.gap_m)
    gap_lo = -hy + src.uniform((k, w_max), 0.0, 1.0) * (2 * hy - gap)
    parts = ([], [], [])
    for i in range(w_max):
        edge = torch.full_like(gap_lo[:, i], hy)
        for y0, y1 in ((-edge, gap_lo[:, i]), (gap_lo[:, i] + gap[:, i], edge)):  # below, above the door
            c, h, a = rect(x[:, i] - t[:, 0], x[:, i] + t[:, 0], y0, y1)
            for p, v in zip(parts, (c, h, a & exists[:, i]), strict=True):
                p.append(v)
    set_walls(lay, *parts)
    last = x.gather(1, n - 1)
    start_box, goal_box = sides(spec, x[:, :1], last, t)
    ok = place_start_goal(spec, lay, src, start_box, goal_box)
    return mirror(lay, src, spec), ok
