"""``cul_de_sac``: a U-shaped trap between start and goal, its opening facing the start (3 wall slots)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from navexp.sim.layout import Layout
from navexp.task.checks import check_range
from navexp.task.maps.families.base import MapSpec, register_family
from navexp.task.maps.families.geometry import clearance, half_thickness, mirror, rect, set_walls
from navexp.task.maps.random_family import LayoutSpec, place_start_goal


@dataclass
class CulDeSacCfg:
    width_m: list[float] = field(default_factory=lambda: [1.0, 3.5])
    """[min, max] inner width of the U (its opening faces the start); 3 wall slots. 1.0 m: a door
    recess or a narrow dead-end corridor; 3.5 m: a room-sized dead end, almost half the 8 m room."""
    depth_m: list[float] = field(default_factory=lambda: [1.0, 3.5])
    """[min, max] length of the U's arms (up to almost half the room: a deep dead end the robot
    can drive into and must turn around in)."""


def _check(cfg: CulDeSacCfg, env_cfg: Any) -> None:
    check_range("maps.cul_de_sac.width_m", cfg.width_m, 2 * env_cfg.robot.radius_m + 1e-3)
    check_range("maps.cul_de_sac.depth_m", cfg.depth_m, 1e-3)


@register_family("cul_de_sac", CulDeSacCfg, wall_slots=lambda m: 3, check=_check)
def cul_de_sac(maps: MapSpec, spec: LayoutSpec, k: int, src) -> tuple[Layout, torch.Tensor]:
    """A U-shaped trap between start and goal, its opening facing the start: the straight line from
    the start runs into the U, and the way out leads around it (3 wall slots: back wall, two arms)."""
    lay = Layout.empty(k, spec.cylinder_slots, spec.box_slots, src.device, spec.wall_slots)
    hx, hy, need = spec.half_x, spec.half_y, clearance(spec)
    t = half_thickness(maps, k, src)
    width = src.uniform((k,), *maps.cfg.cul_de_sac.width_m)
    depth = src.uniform((k,), *maps.cfg.cul_de_sac.depth_m)
    # The back wall right of the centre, far enough right that a deep U leaves a start box before it.
    back_x = torch.maximum(src.uniform((k,), 0.0, 0.3 * hx), depth - hx + 2 * need + 0.5)
    # Keep a robot-wide lane on both sides of the U.
    outer = width / 2 + 2 * t
    y_room = (hy - outer - 2 * spec.robot_radius_m - 0.1).clamp_min(0.0)
    yc = src.uniform((k,), -1.0, 1.0) * y_room
    mouth = back_x - depth
    back = rect(back_x - t, back_x + t, yc - outer, yc + outer)
    upper = rect(mouth, back_x - t, yc + width / 2, yc + outer)
    lower = rect(mouth, back_x - t, yc - outer, yc - width / 2)
    set_walls(lay, *(list(v) for v in zip(back, upper, lower, strict=True)))
    inner = (width / 2 - need).clamp_min(0.0).view(-1, 1)
    ycc = yc.view(-1, 1)
    start_box = (-hx + need, mouth.view(-1, 1) - need, ycc - inner, ycc + inner)
    goal_box = (back_x.view(-1, 1) + t.view(-1, 1) + need, hx - need, ycc - inner, ycc + inner)
    ok = place_start_goal(spec, lay, src, start_box, goal_box)
    return mirror(lay, src, spec), ok
