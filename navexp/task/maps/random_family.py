"""Random layouts for the navigation task (the ``random`` map family): obstacles, then a start and a
goal with clearance, drawn on the device in fixed rounds. The device-side pool the env's resets take
layouts from, for every map family, is navexp.task.maps.pool.LayoutPool.

The simulator knows layouts only as data (navexp.sim.layout.Layout); where a robot starts and where
its goal lies is the task's business and lives here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from navexp.sim.layout import Layout, obstacle_distance
from navexp.task.maps.moving import MovingSpec

if TYPE_CHECKING:
    from navexp.task.maps.random_source import HashSource, StreamSource

    RandomSource = StreamSource | HashSource


@dataclass(frozen=True)
class LayoutSpec:
    """What random layouts look like (plain values; see EnvCfg for the meaning of each)."""

    half_x: float
    half_y: float
    cylinder_slots: int
    box_slots: int
    cylinder_count: tuple[int, int]
    box_count: tuple[int, int]
    cylinder_radius_m: tuple[float, float]
    box_half_size_m: tuple[float, float]
    wall_margin_m: float
    robot_radius_m: float
    spawn_clearance_m: float
    min_start_goal_dist_m: float
    wall_slots: int = 0
    candidates: int = 16
    """Start and goal candidates drawn per layout and round."""
    rounds: int = 4
    """Obstacle draws per layout; a layout with no valid start or goal after the last is skipped."""
    moving: MovingSpec | None = None
    """Moving obstacles drawn after the static layout (``env.dynamic``); None: none."""

    @classmethod
    def from_env_cfg(cls, env_cfg) -> LayoutSpec:
        room, obst = env_cfg.room, env_cfg.obstacles
        return cls(
            half_x=room.size_x_m / 2,
            half_y=room.size_y_m / 2,
            cylinder_slots=obst.cylinder_slots,
            box_slots=obst.box_slots,
            wall_slots=getattr(obst, "wall_slots", 0),  # absent in configs of before walls
            cylinder_count=tuple(obst.cylinder_count),
            box_count=tuple(obst.box_count),
            cylinder_radius_m=tuple(obst.cylinder_radius_m),
            box_half_size_m=tuple(obst.box_half_size_m),
            wall_margin_m=obst.wall_margin_m,
            robot_radius_m=env_cfg.robot.radius_m,
            spawn_clearance_m=env_cfg.spawn_clearance_m,
            min_start_goal_dist_m=env_cfg.min_start_goal_dist_m,
            moving=MovingSpec.from_cfg(getattr(env_cfg, "dynamic", None)),  # absent in older configs
        )


def _sample_obstacles(spec: LayoutSpec, k: int, src: RandomSource) -> Layout:
    device = src.device
    lay = Layout.empty(k, spec.cylinder_slots, spec.box_slots, device, spec.wall_slots)
    hx, hy = spec.half_x - spec.wall_margin_m, spec.half_y - spec.wall_margin_m
    if spec.cylinder_slots:
        n = src.integers(spec.cylinder_count[0], spec.cylinder_count[1], (k, 1))
        lay.cyl_active = torch.arange(spec.cylinder_slots, device=device) < n
        lay.cyl_r = src.uniform((k, spec.cylinder_slots), *spec.cylinder_radius_m)
        lay.cyl_xy = torch.stack(
            (src.uniform((k, spec.cylinder_slots), -hx, hx), src.uniform((k, spec.cylinder_slots), -hy, hy)),
            -1,
        )
    if spec.box_slots:
        n = src.integers(spec.box_count[0], spec.box_count[1], (k, 1))
        lay.box_active = torch.arange(spec.box_slots, device=device) < n
        lay.box_half = src.uniform((k, spec.box_slots, 2), *spec.box_half_size_m)
        lay.box_yaw = src.uniform((k, spec.box_slots), 0.0, math.pi)
        lay.box_xy = torch.stack(
            (src.uniform((k, spec.box_slots), -hx, hx), src.uniform((k, spec.box_slots), -hy, hy)), -1
        )
    return lay


def _first_valid(valid: torch.Tensor, cand: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick the first valid candidate per world: (ok [K], chosen [K, 2])."""
    ok = valid.any(dim=1)
    idx = valid.float().argmax(dim=1)
    return ok, cand.gather(1, idx[:, None, None].expand(-1, 1, 2)).squeeze(1)


def place_start_goal(
    spec: LayoutSpec,
    lay: Layout,
    src: RandomSource,
    start_box: tuple[float, float, float, float] | None = None,
    goal_box: tuple[float, float, float, float] | None = None,
) -> torch.Tensor:
    """Draw start, goal and yaw for every layout in place; return which layouts found both [K].

    Candidates are uniform in ``start_box``/``goal_box`` ((x_lo, x_hi, y_lo, y_hi), default: the room
    shrunk by the clearance); the first one with the clearance from every obstacle (and, for the
    goal, ``min_start_goal_dist_m`` from the start) is taken."""
    need = spec.robot_radius_m + spec.spawn_clearance_m
    k, p = lay.num_worlds, spec.candidates
    cx, cy = spec.half_x - need, spec.half_y - need
    sb = start_box or (-cx, cx, -cy, cy)
    gb = goal_box or (-cx, cx, -cy, cy)
    starts = torch.stack((src.uniform((k, p), sb[0], sb[1]), src.uniform((k, p), sb[2], sb[3])), -1)
    goals = torch.stack((src.uniform((k, p), gb[0], gb[1]), src.uniform((k, p), gb[2], gb[3])), -1)
    d_start = obstacle_distance(starts, lay, spec.half_x, spec.half_y)
    ok_s, start = _first_valid(d_start >= need, starts)
    d_goal = obstacle_distance(goals, lay, spec.half_x, spec.half_y)
    far = (goals - start.unsqueeze(1)).norm(dim=-1) >= spec.min_start_goal_dist_m
    ok_g, goal = _first_valid((d_goal >= need) & far, goals)
    lay.robot_xy, lay.goal_xy = start, goal
    lay.robot_yaw = src.uniform((k,), -math.pi, math.pi)
    return ok_s & ok_g


def sample_layouts(spec: LayoutSpec, k: int, src: RandomSource) -> tuple[Layout, torch.Tensor]:
    """Draw K random layouts (the ``random`` map family); return them and which ones are valid [K].

    A valid layout has start and goal keeping ``robot_radius + spawn_clearance`` from every obstacle
    and wall, at least ``min_start_goal_dist_m`` apart. Layouts whose ``candidates`` starts or goals
    all fail get new obstacles and candidates, ``rounds`` times in all. Every round runs on every
    layout with masked writes, so sampling never waits for the device (no host synchronisation);
    layouts still invalid after the last round are flagged, never handed out (``LayoutPool``).
    """
    lay = _sample_obstacles(spec, k, src)
    ok = place_start_goal(spec, lay, src)
    for _ in range(spec.rounds - 1):
        redraw = _sample_obstacles(spec, k, src)
        ok_redraw = place_start_goal(spec, redraw, src)
        lay.assign_where(~ok, redraw)
        ok = ok | ok_redraw
    return lay, ok
