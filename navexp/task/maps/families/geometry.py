"""Wall geometry shared by the structured families: rectangles, cross walls, the start and goal
boxes beside them, and the random mirror/transpose that makes every direction occur.

The structured families (corridor, staggered, cul_de_sac, grid) are drawn in a canonical frame with
the start on the -x side and the goal on the +x side, then mirrored in x and y at random (and, in a
square room, transposed). Walls are axis-aligned boxes in the wall slots.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from navexp.sim.layout import Layout
from navexp.task.checks import check_range
from navexp.task.maps.random_family import LayoutSpec

LANE_MARGIN_M = 0.05
"""Room beyond the robot diameter that a lane between two walls keeps (corridor, staggered)."""


def rect(x0, x1, y0, y1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Centre [..., 2], half-extents [..., 2] and active (non-empty) of [x0, x1] x [y0, y1]."""
    centre = torch.stack(((x0 + x1) / 2, (y0 + y1) / 2), -1)
    half = torch.stack(((x1 - x0) / 2, (y1 - y0) / 2), -1)
    return centre, half.clamp_min(1e-3), (x1 - x0 > 1e-3) & (y1 - y0 > 1e-3)


def set_walls(lay: Layout, centres: list, halves: list, actives: list) -> None:
    """Write wall rectangles into the first wall slots (the rest stay inactive)."""
    n = len(centres)
    lay.wall_xy[:, :n] = torch.stack(centres, 1)
    lay.wall_half[:, :n] = torch.stack(halves, 1)
    lay.wall_active[:, :n] = torch.stack(actives, 1)


def half_thickness(maps, k: int, src) -> torch.Tensor:
    """Each layout's wall half thickness [K]: ``wall_half_thickness_m`` x a factor drawn in
    ``wall_thickness_scale`` (no draw when the range is a single value, so the stream is unchanged)."""
    lo, hi = maps.cfg.wall_thickness_scale
    t = maps.cfg.wall_half_thickness_m
    if lo == hi:
        return torch.full((k,), t * lo, device=src.device)
    return t * src.uniform((k,), lo, hi)


def clearance(spec: LayoutSpec) -> float:
    return spec.robot_radius_m + spec.spawn_clearance_m


def cfg_clearance(env_cfg: Any) -> float:
    """``clearance`` from the env config: robot radius + spawn clearance (m), for the families' checks."""
    return float(env_cfg.robot.radius_m + env_cfg.spawn_clearance_m)


def thickest_half(env_cfg: Any) -> float:
    """Half thickness (m) of the thickest wall a layout can draw: ``wall_half_thickness_m`` x the
    largest ``wall_thickness_scale``."""
    maps = env_cfg.maps
    return float(maps.wall_half_thickness_m * maps.wall_thickness_scale[1])


def check_gap(env_cfg: Any) -> None:
    """``maps.gap_m`` (the doors of corridor and staggered) is wider than the robot."""
    check_range("maps.gap_m", env_cfg.maps.gap_m, 2 * env_cfg.robot.radius_m + 1e-3)


def cross_walls(spec: LayoutSpec, n: torch.Tensor, max_walls: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x of ``max_walls`` cross walls evenly spaced over the room for ``n`` [K, 1] walls, and which exist."""
    i = torch.arange(max_walls, device=n.device).view(1, -1)
    x = -spec.half_x + (i + 1) * (2 * spec.half_x) / (n + 1)
    return x, i < n


def sides(spec: LayoutSpec, first_x: torch.Tensor, last_x: torch.Tensor, t: float):
    """Start box left of the first wall and goal box right of the last (x_lo, x_hi, y_lo, y_hi)."""
    need, hy = clearance(spec), spec.half_y - clearance(spec)
    start = (-spec.half_x + need, first_x - t - need, -hy, hy)
    goal = (last_x + t + need, spec.half_x - need, -hy, hy)
    return start, goal


def mirror(lay: Layout, src, spec: LayoutSpec) -> Layout:
    """Mirror each layout in x and in y at random and, in a square room, swap x and y at random.
    Walls are axis-aligned (yaw 0), so mirroring moves centres and a swap also swaps half-extents."""
    k = lay.num_worlds
    sign = torch.where(src.uniform((k, 2), 0.0, 1.0) < 0.5, -1.0, 1.0)
    swap = src.uniform((k,), 0.0, 1.0) < (0.5 if math.isclose(spec.half_x, spec.half_y) else 0.0)

    def move(xy: torch.Tensor) -> torch.Tensor:
        s = sign.view(k, *([1] * (xy.dim() - 2)), 2)
        xy = xy * s
        sw = swap.view(k, *([1] * (xy.dim() - 1)))
        return torch.where(sw, xy.flip(-1), xy)

    lay.wall_xy, lay.cyl_xy = move(lay.wall_xy), move(lay.cyl_xy)
    lay.robot_xy, lay.goal_xy = move(lay.robot_xy), move(lay.goal_xy)
    lay.wall_half = torch.where(swap.view(k, 1, 1), lay.wall_half.flip(-1), lay.wall_half)
    return lay
