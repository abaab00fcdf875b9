"""``corridor``: cross walls over the full room width, each with one door (2 wall slots per wall)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from navexp.sim.layout import Layout
from navexp.task.checks import check, check_range
from navexp.task.maps.families.base import MapSpec, register_family
from navexp.task.maps.families.geometry import (
    LANE_MARGIN_M,
    cfg_clearance,
    check_gap,
    cross_walls,
    half_thickness,
    mirror,
    rect,
    set_walls,
    sides,
    thickest_half,
)
from navexp.task.maps.random_family import LayoutSpec, place_start_goal


@dataclass
class CorridorCfg:
    walls: list[int] = field(default_factory=lambda: [1, 2])
    """[min, max] cross walls between start and goal, one gap (door) each; 2 wall slots per wall."""


def _check(cfg: CorridorCfg, env_cfg: Any) -> None:
    check_range("maps.corridor.walls", cfg.walls, 1)
    check_gap(env_cfg)
    # n walls lie 2 half_x / (n + 1) apart, the first and last as far from the room's sides: that
    # pitch must hold a start (goal) box beside the wall, t + 2 (radius + spawn clearance), and a
    # lane between two walls, 2 t + 2 radius + LANE_MARGIN_M (t the thickest wall's half thickness).
    size_x, t, r = env_cfg.room.size_x_m, thickest_half(env_cfg), env_cfg.robot.radius_m
    pitch = max(t + 2 * cfg_clearance(env_cfg), 2 * t + 2 * r + LANE_MARGIN_M)
    most = int(size_x / pitch + 1e-9) - 1
    check(
        cfg.walls[1] <= most,
        "maps.corridor.walls",
        list(cfg.walls),
        f"max <= {most}: walls {size_x} m / (max + 1) apart along x must keep {pitch:.3g} m, a start box "
        f"beside the first and a robot lane between two",
    )


def _hint(maps: Any, spec: LayoutSpec) -> str:
    return (
        f"fewer maps.corridor.walls ({list(maps.corridor.walls)}), wider doors maps.gap_m "
        f"({list(maps.gap_m)}) or thinner walls maps.wall_thickness_scale ({list(maps.wall_thickness_scale)})"
    )


@register_family(
    "corridor", CorridorCfg, wall_slots=lambda m: 2 * m.corridor.walls[1], check=_check, hint=_hint
)
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
