"""``grid``: a BARN-style cellular-automaton occupancy grid merged into wall rectangles."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from navexp.sim.layout import Layout
from navexp.task.checks import check, check_range
from navexp.task.maps.families.base import MapSpec, register_family
from navexp.task.maps.families.geometry import clearance, mirror
from navexp.task.maps.random_family import LayoutSpec, place_start_goal
from navexp.task.maps.rectangles import merge_rectangles


@dataclass
class GridMapCfg:
    cell_m: float = 0.6
    """Cell of the cellular-automaton grid (BARN style); runs of occupied cells merge into walls."""
    fill: list[float] = field(default_factory=lambda: [0.35, 0.5])
    """[min, max] initial probability that a cell is occupied."""
    smooth_steps: int = 1
    """Automaton steps: a cell is occupied when >= 5 of its 3x3 neighbourhood (itself included) are."""


def _check(cfg: GridMapCfg, env_cfg: Any) -> None:
    check_range("maps.grid.fill", cfg.fill, 0)
    check(cfg.fill[1] <= 1, "maps.grid.fill", list(cfg.fill), "probabilities in [0, 1]")
    check(cfg.cell_m > 0, "maps.grid.cell_m", cfg.cell_m, "> 0")
    check(cfg.smooth_steps >= 0, "maps.grid.smooth_steps", cfg.smooth_steps, ">= 0")


def _hint(maps: Any, spec: LayoutSpec) -> str:
    # No static bound: whether a cellular-automaton grid leaves a free way depends on the draw.
    return (
        f"lower maps.grid.fill ({list(maps.grid.fill)}: the chance a cell starts occupied, default "
        f"[0.35, 0.5]), or raise obstacles.wall_slots ({spec.wall_slots}: a layout needing more wall "
        f"rectangles is redrawn)"
    )


@register_family("grid", GridMapCfg, wall_slots=lambda m: 1, check=_check, hint=_hint)
def grid(maps: MapSpec, spec: LayoutSpec, k: int, src) -> tuple[Layout, torch.Tensor]:
    """A cellular-automaton occupancy grid in the style of BARN: cells of ``grid.cell_m`` start occupied
    with probability ``grid.fill``, then ``grid.smooth_steps`` times a cell becomes occupied when at
    least 5 cells of its 3x3 neighbourhood (itself included) are. The grid spans the room between a
    free start strip (-x) and goal strip (+x); its occupied runs merge into wall rectangles, and a
    layout needing more rectangles than wall slots is invalid."""
    lay = Layout.empty(k, spec.cylinder_slots, spec.box_slots, src.device, spec.wall_slots)
    need = clearance(spec)
    strip = max(1.0, 2 * need + 0.3)
    span_x, span_y = 2 * spec.half_x - 2 * strip, 2 * spec.half_y
    nx, ny = max(1, round(span_x / maps.cfg.grid.cell_m)), max(1, round(span_y / maps.cfg.grid.cell_m))
    fill = src.uniform((k, 1, 1), *maps.cfg.grid.fill)
    occ = src.uniform((k, ny, nx), 0.0, 1.0) < fill
    ones = torch.ones(1, 1, 3, 3, device=src.device)
    for _ in range(maps.cfg.grid.smooth_steps):
        count = torch.nn.functional.conv2d(occ.float().unsqueeze(1), ones, padding=1).squeeze(1)
        occ = count >= 5
    centre, half, active, n_rects = merge_rectangles(
        occ, (-spec.half_x + strip, -spec.half_y), (span_y / ny, span_x / nx), spec.wall_slots
    )
    lay.wall_xy, lay.wall_half, lay.wall_active = centre, half, active
    hy = spec.half_y - need
    start_box = (-spec.half_x + need, -spec.half_x + strip - need, -hy, hy)
    goal_box = (spec.half_x - strip + need, spec.half_x - need, -hy, hy)
    ok = place_start_goal(spec, lay, src, start_box, goal_box)
    return mirror(lay, src, spec), ok & (n_rects <= spec.wall_slots)
