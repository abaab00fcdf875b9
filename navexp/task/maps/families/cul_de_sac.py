"""``cul_de_sac``: a U-shaped trap between start and goal, its opening facing the start (3 wall slots)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from navexp.sim.layout import Layout
from navexp.task.checks import check, check_range
from navexp.task.maps.families.base import MapSpec, register_family
from navexp.task.maps.families.geometry import (
    cfg_clearance,
    clearance,
    half_thickness,
    mirror,
    rect,
    set_walls,
    thickest_half,
)
from navexp.task.maps.random_family import LayoutSpec, place_start_goal


@dataclass
class CulDeSacCfg:
    width_m: list[float] = field(default_factory=lambda: [1.0, 3.5])
    """[min, max] inner width of the U (its opening faces the start); 3 wall slots. 1.0 m: a door
    recess or a narrow dead-end corridor; 3.5 m: a room-sized dead end, almost half the 8 m room."""
    depth_m: list[float] = field(default_factory=lambda: [1.0, 3.5])
    """[min, max] length of the U's arms (up to almost half the room: a deep dead end the robot
    can drive into and must turn around in)."""


LANE_M = 0.1
"""Room beyond the robot diameter kept between the U's arms and the room's sides."""
MOUTH_M = 0.5
"""Least length of the start box before the U's mouth (m)."""


def _check(cfg: CulDeSacCfg, env_cfg: Any) -> None:
    r, t, need = env_cfg.robot.radius_m, thickest_half(env_cfg), cfg_clearance(env_cfg)
    room = env_cfg.room
    check_range("maps.cul_de_sac.width_m", cfg.width_m, 2 * r + 1e-3)
    check_range("maps.cul_de_sac.depth_m", cfg.depth_m, 1e-3)
    # Across (y): the U, width + two arms 2 t thick, with a lane of 2 r + LANE_M on both sides.
    most_w = room.size_y_m - 4 * t - 4 * r - 2 * LANE_M
    check(
        cfg.width_m[1] <= most_w + 1e-9,
        "maps.cul_de_sac.width_m",
        list(cfg.width_m),
        f"max <= {most_w:.3g}: the U (inner width + 2 arms of up to {2 * t:.3g} m) keeps a robot lane of "
        f"2 x robot.radius_m + {LANE_M} m to both sides of the {room.size_y_m} m room",
    )
    # Along (x): a start box of MOUTH_M before the mouth, the U (depth + back wall), a goal box behind
    # it, each box holding the robot's clearance on both sides: the back wall's centre lies at
    # depth - half_x + 2 need + MOUTH_M (cul_de_sac below), its far face t further, then 2 need.
    most_d = room.size_x_m - 4 * need - t - MOUTH_M
    check(
        cfg.depth_m[1] <= most_d + 1e-9,
        "maps.cul_de_sac.depth_m",
        list(cfg.depth_m),
        f"max <= {most_d:.3g}: the U with a start box of {MOUTH_M} m before its mouth and a goal box "
        f"behind its back wall, each holding 2 x (robot.radius_m + spawn_clearance_m), fit the "
        f"{room.size_x_m} m room",
    )


def _hint(maps: Any, spec: LayoutSpec) -> str:
    c = maps.cul_de_sac
    return f"a smaller maps.cul_de_sac.width_m ({list(c.width_m)}) or depth_m ({list(c.depth_m)})"


@register_family("cul_de_sac", CulDeSacCfg, wall_slots=lambda m: 3, check=_check, hint=_hint)
def cul_de_sac(maps: MapSpec, spec: LayoutSpec, k: int, src) -> tuple[Layout, torch.Tensor]:
    """A U-shaped trap between start and goal, its opening facing the start: the straight line from
    the start runs into the U, and the way out leads around it (3 wall slots: back wall, two arms)."""
    lay = Layout.empty(k, spec.cylinder_slots, spec.box_slots, src.device, spec.wall_slots)
    hx, hy, need = spec.half_x, spec.half_y, clearance(spec)
    t = half_thickness(maps, k, src)
    width = src.uniform((k,), *maps.cfg.cul_de_sac.width_m)
    depth = src.uniform((k,), *maps.cfg.cul_de_sac.depth_m)
    # The back wall right of the centre, far enough right that a deep U leaves a start box before it.
    back_x = torch.maximum(src.uniform((k,), 0.0, 0.3 * hx), depth - hx + 2 * need + MOUTH_M)
    # Keep a robot-wide lane on both sides of the U.
    outer = width / 2 + 2 * t
    y_room = (hy - outer - 2 * spec.robot_radius_m - LANE_M).clamp_min(0.0)
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
