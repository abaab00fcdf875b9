"""``staggered``: parallel cross walls with doors at alternating ends, a slalom of hairpin lanes (1 wall
slot each)."""

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
    half_thickness,
    mirror,
    rect,
    set_walls,
    sides,
    thickest_half,
)
from navexp.task.maps.random_family import LayoutSpec, place_start_goal


@dataclass
class StaggeredCfg:
    walls: list[int] = field(default_factory=lambda: [2, 3])
    """[min, max] parallel cross walls, gaps at alternating ends (a slalom); 1 wall slot each."""
    spacing_m: list[float] = field(default_factory=lambda: [1.0, 2.7])
    """[min, max] distance between consecutive walls, drawn per layout: the lanes of the slalom. 1.0 m
    with the thickest default walls (0.4 m) leaves a 0.6 m lane, 1.5 robot diameters: a hairpin turn
    around each wall end. Capped so start and goal keep ``SIDE_MARGIN_M`` of room beside the walls."""


SIDE_MARGIN_M = 1.3
"""Room kept between the room's side and the first (and last) wall, for the start and goal boxes."""


def _check(cfg: StaggeredCfg, env_cfg: Any) -> None:
    check_range("maps.staggered.walls", cfg.walls, 1)
    check_gap(env_cfg)
    t, r, need = thickest_half(env_cfg), env_cfg.robot.radius_m, cfg_clearance(env_cfg)
    pitch = 2 * t + 2 * r + LANE_MARGIN_M  # a wall and a lane for the robot
    check_range("maps.staggered.spacing_m", cfg.spacing_m, pitch)
    # The start (goal) box lies between the room's side and the first (last) wall, SIDE_MARGIN_M from
    # the side: it holds the robot's clearance on both sides, x in [-half_x + need, wall - t - need].
    most_r = (SIDE_MARGIN_M - t) / 2 - env_cfg.spawn_clearance_m
    check(
        2 * need + t <= SIDE_MARGIN_M + 1e-9,
        "robot.radius_m",
        r,
        f"<= {most_r:.3g} for map family staggered (env.maps.weights.staggered > 0): its start and goal "
        f"boxes, {SIDE_MARGIN_M} m beside the walls, hold the robot with spawn_clearance_m on both sides",
    )
    # wall_x caps the spacing at span_room / (n - 1) so the walls fit the room; capped below the pitch,
    # the lanes would be too narrow for the robot.
    span_room = env_cfg.room.size_x_m - 2 * SIDE_MARGIN_M
    most = 1 + int(max(span_room, 0.0) / pitch + 1e-9)
    check(
        cfg.walls[1] <= most,
        "maps.staggered.walls",
        list(cfg.walls),
        f"max <= {most}: the walls fit {span_room:.3g} m of the room along x (its {env_cfg.room.size_x_m} m "
        f"less {SIDE_MARGIN_M} m each side), at least {pitch:.3g} m apart (a wall and a robot lane)",
    )


def wall_x(spec: LayoutSpec, n: torch.Tensor, spacing: torch.Tensor, u: torch.Tensor, w_max: int):
    """x of ``w_max`` walls, ``spacing`` [K, 1] apart (capped so the group fits the room with
    ``SIDE_MARGIN_M`` on both sides), the group shifted by ``u`` [K, 1] in [-1, 1] of its free play;
    and which walls exist (i < n)."""
    span_room = 2 * (spec.half_x - SIDE_MARGIN_M)
    spacing = torch.minimum(spacing, span_room / (n - 1).clamp_min(1))
    span = (n - 1) * spacing
    shift = u * (span_room - span).clamp_min(0.0) / 2
    i = torch.arange(w_max, device=n.device).view(1, -1)
    return -span / 2 + shift + i * spacing, i < n


def _hint(maps: Any, spec: LayoutSpec) -> str:
    return (
        f"fewer maps.staggered.walls ({list(maps.staggered.walls)}), a wider maps.staggered.spacing_m "
        f"({list(maps.staggered.spacing_m)}), wider doors maps.gap_m ({list(maps.gap_m)}) or thinner walls "
        f"maps.wall_thickness_scale ({list(maps.wall_thickness_scale)})"
    )


@register_family(
    "staggered", StaggeredCfg, wall_slots=lambda m: m.staggered.walls[1], check=_check, hint=_hint
)
def staggered(maps: MapSpec, spec: LayoutSpec, k: int, src) -> tuple[Layout, torch.Tensor]:
    """Parallel cross walls ``spacing_m`` apart, each leaving a door of width ``gap_m`` at alternating
    ends (top, bottom, top, ...): the way from start to goal is a slalom of hairpin turns. One wall
    slot per wall."""
    lay = Layout.empty(k, spec.cylinder_slots, spec.box_slots, src.device, spec.wall_slots)
    cfg, hy = maps.cfg.staggered, spec.half_y
    w_max = cfg.walls[1]
    t = half_thickness(maps, k, src).view(-1, 1)
    n = src.integers(*cfg.walls, (k, 1))
    spacing = src.uniform((k, 1), *cfg.spacing_m)
    x, exists = wall_x(spec, n, spacing, src.uniform((k, 1), -1.0, 1.0), w_max)
    gap = src.uniform((k, w_max), *maps.cfg.gap_m)
    parts = ([], [], [])
    for i in range(w_max):
        full = torch.full_like(gap[:, i], hy)
        y0, y1 = (-full, full - gap[:, i]) if i % 2 == 0 else (-full + gap[:, i], full)
        c, h, a = rect(x[:, i] - t[:, 0], x[:, i] + t[:, 0], y0, y1)
        for p, v in zip(parts, (c, h, a & exists[:, i]), strict=True):
            p.append(v)
    set_walls(lay, *parts)
    start_box, goal_box = sides(spec, x[:, :1], x.gather(1, n - 1), t)
    ok = place_start_goal(spec, lay, src, start_box, goal_box)
    return mirror(lay, src, spec), ok
