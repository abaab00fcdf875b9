"""``staggered``: parallel cross walls with doors at alternating ends, a slalom of hairpin lanes (1 wall
slot each)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from navexp.sim.layout import Layout
from navexp.task.checks import check_range
from navexp.task.maps.families.base import MapSpec, register_family
from navexp.task.maps.families.geometry import half_thickness, mirror, rect, set_walls, sides
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
    maps = env_cfg.maps
    thick = 2 * maps.wall_half_thickness_m * maps.wall_thickness_scale[1]
    lane = 2 * env_cfg.robot.radius_m + 0.05
    check_range("maps.staggered.spacing_m", cfg.spacing_m, thick + lane)


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


@register_family("staggered", StaggeredCfg, wall_slots=lambda m: m.staggered.walls[1], check=_check)
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
