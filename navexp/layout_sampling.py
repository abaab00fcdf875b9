"""Random layouts for the navigation task: obstacles, then a start and a goal with clearance, drawn
on the device in fixed rounds, and the device-side pool the env's resets take them from.

The simulator knows layouts only as data (navexp.sim.layout.Layout); where a robot starts and where
its goal lies is the task's business and lives here.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch

from navexp.sim.layout import Layout, obstacle_distance


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
    candidates: int = 16
    """Start and goal candidates drawn per layout and round."""
    rounds: int = 4
    """Obstacle draws per layout; a layout with no valid start or goal after the last is skipped."""

    @classmethod
    def from_env_cfg(cls, env_cfg) -> LayoutSpec:
        room, obst = env_cfg.room, env_cfg.obstacles
        return cls(
            half_x=room.size_x_m / 2,
            half_y=room.size_y_m / 2,
            cylinder_slots=obst.cylinder_slots,
            box_slots=obst.box_slots,
            cylinder_count=tuple(obst.cylinder_count),
            box_count=tuple(obst.box_count),
            cylinder_radius_m=tuple(obst.cylinder_radius_m),
            box_half_size_m=tuple(obst.box_half_size_m),
            wall_margin_m=obst.wall_margin_m,
            robot_radius_m=env_cfg.robot.radius_m,
            spawn_clearance_m=env_cfg.spawn_clearance_m,
            min_start_goal_dist_m=env_cfg.min_start_goal_dist_m,
        )


def _uniform(shape, lo, hi, g: torch.Generator, device) -> torch.Tensor:
    return lo + (hi - lo) * torch.rand(shape, generator=g, device=device)


def _sample_obstacles(spec: LayoutSpec, k: int, g: torch.Generator, device) -> Layout:
    lay = Layout.empty(k, spec.cylinder_slots, spec.box_slots, device)
    hx, hy = spec.half_x - spec.wall_margin_m, spec.half_y - spec.wall_margin_m
    if spec.cylinder_slots:
        n = torch.randint(
            spec.cylinder_count[0], spec.cylinder_count[1] + 1, (k, 1), generator=g, device=device
        )
        lay.cyl_active = torch.arange(spec.cylinder_slots, device=device) < n
        lay.cyl_r = _uniform((k, spec.cylinder_slots), *spec.cylinder_radius_m, g, device)
        lay.cyl_xy = torch.stack(
            (
                _uniform((k, spec.cylinder_slots), -hx, hx, g, device),
                _uniform((k, spec.cylinder_slots), -hy, hy, g, device),
            ),
            -1,
        )
    if spec.box_slots:
        n = torch.randint(spec.box_count[0], spec.box_count[1] + 1, (k, 1), generator=g, device=device)
        lay.box_active = torch.arange(spec.box_slots, device=device) < n
        lay.box_half = _uniform((k, spec.box_slots, 2), *spec.box_half_size_m, g, device)
        lay.box_yaw = _uniform((k, spec.box_slots), 0.0, math.pi, g, device)
        lay.box_xy = torch.stack(
            (
                _uniform((k, spec.box_slots), -hx, hx, g, device),
                _uniform((k, spec.box_slots), -hy, hy, g, device),
            ),
            -1,
        )
    return lay


def _first_valid(valid: torch.Tensor, cand: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick the first valid candidate per world: (ok [K], chosen [K, 2])."""
    ok = valid.any(dim=1)
    idx = valid.float().argmax(dim=1)
    return ok, cand.gather(1, idx[:, None, None].expand(-1, 1, 2)).squeeze(1)


def _place_start_goal(spec: LayoutSpec, lay: Layout, g: torch.Generator, device) -> torch.Tensor:
    """Draw start, goal and yaw for every layout in place; return which layouts found both [K]."""
    need = spec.robot_radius_m + spec.spawn_clearance_m
    k, p = lay.num_worlds, spec.candidates
    cx, cy = spec.half_x - need, spec.half_y - need
    starts = torch.stack((_uniform((k, p), -cx, cx, g, device), _uniform((k, p), -cy, cy, g, device)), -1)
    goals = torch.stack((_uniform((k, p), -cx, cx, g, device), _uniform((k, p), -cy, cy, g, device)), -1)
    d_start = obstacle_distance(starts, lay, spec.half_x, spec.half_y)
    ok_s, start = _first_valid(d_start >= need, starts)
    d_goal = obstacle_distance(goals, lay, spec.half_x, spec.half_y)
    far = (goals - start.unsqueeze(1)).norm(dim=-1) >= spec.min_start_goal_dist_m
    ok_g, goal = _first_valid((d_goal >= need) & far, goals)
    lay.robot_xy, lay.goal_xy = start, goal
    lay.robot_yaw = _uniform((k,), -math.pi, math.pi, g, device)
    return ok_s & ok_g


def sample_layouts(spec: LayoutSpec, k: int, g: torch.Generator, device) -> tuple[Layout, torch.Tensor]:
    """Draw K random layouts; return them and which ones are valid [K] bool.

    A valid layout has start and goal keeping ``robot_radius + spawn_clearance`` from every obstacle
    and wall, at least ``min_start_goal_dist_m`` apart. Layouts whose ``candidates`` starts or goals
    all fail get new obstacles and candidates, ``rounds`` times in all. Every round runs on every
    layout with masked writes, so sampling never waits for the device (no host synchronisation);
    layouts still invalid after the last round are flagged, never handed out (``LayoutPool``).
    """
    lay = _sample_obstacles(spec, k, g, device)
    ok = _place_start_goal(spec, lay, g, device)
    for _ in range(spec.rounds - 1):
        redraw = _sample_obstacles(spec, k, g, device)
        ok_redraw = _place_start_goal(spec, redraw, g, device)
        lay.assign_where(~ok, redraw)
        ok = ok | ok_redraw
    return lay, ok


class LayoutPool:
    """Random layouts sampled in large batches on the device and handed out without host syncs.

    ``take(mask)`` gives the next pool entry to every world where ``mask`` is set, in world order,
    with index arithmetic on the device (a cumulative sum over the mask, a cursor tensor), so a reset
    of any number of worlds costs a fixed number of tensor operations and never waits for the device.

    The host learns how many layouts are left only when it syncs anyway, at the env's fault checks:
    ``low()`` is a device flag read there, true when fewer than ``reserve`` valid layouts remain (the
    env sets ``reserve`` to the most resets possible until its next check, worlds x check period),
    and ``refill()`` then draws a new batch of ``2 * reserve`` (at least ``min_size``). So no layout is
    handed out twice, and about twice as many layouts are sampled as used. Deterministic: the same
    generator state and the same take masks give the same layouts.
    """

    chunk = 32768
    """Layouts sampled per call (bounds the candidate tensors' memory)."""

    def __init__(
        self, spec: LayoutSpec, reserve: int, generator: torch.Generator, device, min_size: int = 256
    ) -> None:
        self.spec, self.generator, self.device = spec, generator, device
        self.reserve, self.min_size = int(reserve), int(min_size)
        self.clear()

    def clear(self) -> None:
        """Drop the remaining layouts (after re-seeding the generator)."""
        self._pool: Layout | None = None
        self._checked = False

    def take(self, mask: torch.Tensor) -> Layout:
        """Layouts for all N worlds [N]: row w is the next fresh layout where ``mask[w]``, otherwise an
        arbitrary valid layout (callers write only the masked rows)."""
        if self._pool is None:
            self.refill()
        rank = mask.long().cumsum(0) - 1
        slot = (self._cursor + rank).remainder(self._num_valid)
        self._cursor = self._cursor + rank[-1] + 1
        return self._pool.index(self._order[slot])

    def low(self) -> torch.Tensor:
        """Device bool: fewer than ``reserve`` unused valid layouts are left (or none drawn yet)."""
        if self._pool is None:
            return torch.ones((), dtype=torch.bool, device=self.device)
        return self._num_valid - self._cursor < self.reserve

    def refill(self) -> None:
        """Draw a new batch (the unused rest of the old one is dropped); waits for the device.

        Batches of ``max(min_size, 2 * reserve)`` layouts are drawn until at least that many are
        valid, so the pool never runs dry within a check period. Raises when a batch yields no valid
        layout, or when the yield stays below 1/8 (the config makes start and goal nearly impossible)."""
        target = max(self.min_size, 2 * self.reserve)
        parts: list[Layout] = []
        valids: list[torch.Tensor] = []
        num_valid = 0
        while num_valid < target:
            for start in range(0, target, self.chunk):
                k = min(self.chunk, target - start)
                pool, valid = sample_layouts(self.spec, k, self.generator, self.device)
                parts.append(pool)
                valids.append(valid)
            drawn = sum(v.numel() for v in valids)
            num_valid = int(sum(v.sum() for v in valids))
            if num_valid == 0 or (num_valid < target and drawn >= 8 * target):
                self._fail(num_valid, drawn)
        valid = torch.cat(valids)
        if not self._checked:
            self._checked = True
            if num_valid < 0.5 * valid.numel():
                warnings.warn(
                    f"only {num_valid / valid.numel():.1%} of sampled layouts have a collision-free start "
                    f"and goal; sampling slows down. Lower obstacle counts or sizes, or "
                    f"min_start_goal_dist_m.",
                    stacklevel=2,
                )
        # Valid entries first, in sampling order; the cursor walks only over those.
        self._order = torch.argsort((~valid).to(torch.uint8), stable=True)
        self._num_valid = torch.tensor(num_valid, device=self.device)
        self._cursor = torch.zeros((), dtype=torch.long, device=self.device)
        self._pool = parts[0] if len(parts) == 1 else Layout.cat(parts)

    def _fail(self, num_valid: int, drawn: int) -> None:
        s = self.spec
        raise RuntimeError(
            f"layout sampling found no collision-free start/goal in enough layouts (only {num_valid} of "
            f"{drawn})"
            f" after {s.rounds} rounds each; lower obstacles.*_count or obstacle sizes, spawn_clearance_m "
            f"({s.spawn_clearance_m}) or min_start_goal_dist_m ({s.min_start_goal_dist_m})"
        )
