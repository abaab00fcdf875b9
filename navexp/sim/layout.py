"""Per-world layouts: obstacle slots, robot start and goal; random sampling and 2D geometry.

A ``Layout`` holds K worlds' layouts as torch tensors (world frame, metres, radians). Obstacles are
vertical extrusions, so free space is a 2D question: the signed distance from a point to a
cylinder is ``|p - c| - r`` and to a box the usual rotated-rectangle distance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import torch


@dataclass
class Layout:
    """K worlds' layouts. Inactive slots are ignored (and parked by the simulator)."""

    cyl_xy: torch.Tensor
    """[K, C, 2] cylinder centres."""
    cyl_r: torch.Tensor
    """[K, C] cylinder radii."""
    cyl_active: torch.Tensor
    """[K, C] bool."""
    box_xy: torch.Tensor
    """[K, B, 2] box centres."""
    box_half: torch.Tensor
    """[K, B, 2] box half-extents along the box's own x and y."""
    box_yaw: torch.Tensor
    """[K, B] box yaw."""
    box_active: torch.Tensor
    """[K, B] bool."""
    robot_xy: torch.Tensor
    """[K, 2] start position."""
    robot_yaw: torch.Tensor
    """[K] start yaw."""
    goal_xy: torch.Tensor
    """[K, 2] goal position."""

    @property
    def num_worlds(self) -> int:
        return self.robot_xy.shape[0]

    def index(self, idx: torch.Tensor) -> Layout:
        """Return the layouts of the worlds ``idx`` (a K' index or a K mask)."""
        return Layout(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    def assign(self, idx: torch.Tensor, other: Layout) -> None:
        """Write ``other`` into the worlds ``idx`` in place."""
        for f in fields(self):
            getattr(self, f.name)[idx] = getattr(other, f.name)

    @staticmethod
    def empty(k: int, cylinder_slots: int, box_slots: int, device: torch.device | str) -> Layout:
        """K layouts with every slot inactive and robot and goal at the origin."""
        z = dict(device=device)
        return Layout(
            cyl_xy=torch.zeros(k, cylinder_slots, 2, **z),
            cyl_r=torch.full((k, cylinder_slots), 0.1, **z),
            cyl_active=torch.zeros(k, cylinder_slots, dtype=torch.bool, **z),
            box_xy=torch.zeros(k, box_slots, 2, **z),
            box_half=torch.full((k, box_slots, 2), 0.1, **z),
            box_yaw=torch.zeros(k, box_slots, **z),
            box_active=torch.zeros(k, box_slots, dtype=torch.bool, **z),
            robot_xy=torch.zeros(k, 2, **z),
            robot_yaw=torch.zeros(k, **z),
            goal_xy=torch.zeros(k, 2, **z),
        )


def _rotate(v: torch.Tensor, yaw: torch.Tensor) -> torch.Tensor:
    """Rotate 2D vectors v [..., 2] by yaw [...] (counter-clockwise)."""
    c, s = torch.cos(yaw), torch.sin(yaw)
    return torch.stack((c * v[..., 0] - s * v[..., 1], s * v[..., 0] + c * v[..., 1]), dim=-1)


def nearest_obstacle(
    points: torch.Tensor, layout: Layout, half_x: float, half_y: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Distance and closest surface point from points to obstacles and walls.

    Args:
        points: [K, P, 2] query points (world frame).
        layout: the K worlds' layouts.
        half_x, half_y: half inner room size (wall faces at +-half_x, +-half_y).

    Returns:
        dist: [K, P] signed distance to the nearest obstacle or wall surface (negative inside).
        closest: [K, P, 2] the closest surface point of that obstacle or wall.
    """
    p = points.unsqueeze(2)  # [K, P, 1, 2]
    inf = torch.tensor(float("inf"), device=points.device)
    # Cylinders: d = |p - c| - r; closest point along the ray from the centre through p.
    rel = p - layout.cyl_xy.unsqueeze(1)  # [K, P, C, 2]
    norm = rel.norm(dim=-1).clamp_min(1e-9)
    r = layout.cyl_r.unsqueeze(1)
    d_cyl = torch.where(layout.cyl_active.unsqueeze(1), norm - r, inf)
    c_cyl = layout.cyl_xy.unsqueeze(1) + rel / norm.unsqueeze(-1) * r.unsqueeze(-1)
    # Boxes: work in the box frame q = R(-yaw)(p - c); closest point is q clamped to the box.
    yaw = layout.box_yaw.unsqueeze(1)
    q = _rotate(p - layout.box_xy.unsqueeze(1), -yaw)  # [K, P, B, 2]
    half = layout.box_half.unsqueeze(1)
    excess = q.abs() - half
    outside = excess.clamp_min(0).norm(dim=-1)
    inside = excess.max(dim=-1).values.clamp_max(0)
    d_box = torch.where(layout.box_active.unsqueeze(1), outside + inside, inf)
    q_clamped = torch.maximum(torch.minimum(q, half), -half)
    # Inside a box the clamp is the point itself; push it to the nearest face instead.
    face = torch.where(excess[..., :1] > excess[..., 1:], 0, 1)  # axis closest to a face
    pushed = q.clone()
    pushed.scatter_(-1, face, (torch.sign(q) * half).gather(-1, face))
    q_near = torch.where((inside < 0).unsqueeze(-1), pushed, q_clamped)
    c_box = layout.box_xy.unsqueeze(1) + _rotate(q_near, yaw)
    # Walls: the four inner faces.
    x, y = points[..., 0], points[..., 1]
    d_wall = torch.stack((half_x - x, half_x + x, half_y - y, half_y + y), dim=-1)  # [K, P, 4]
    c_wall = torch.stack(
        (
            torch.stack((torch.full_like(x, half_x), y), -1),
            torch.stack((torch.full_like(x, -half_x), y), -1),
            torch.stack((x, torch.full_like(y, half_y)), -1),
            torch.stack((x, torch.full_like(y, -half_y)), -1),
        ),
        dim=2,
    )
    d_all = torch.cat((d_cyl, d_box, d_wall), dim=-1)
    c_all = torch.cat((c_cyl, c_box, c_wall), dim=2)
    dist, arg = d_all.min(dim=-1)
    closest = c_all.gather(2, arg[..., None, None].expand(-1, -1, 1, 2)).squeeze(2)
    return dist, closest


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
    candidates: int = 64
    """Start and goal candidates drawn per world and attempt."""
    max_attempts: int = 20
    """Obstacle re-draws per world before sampling gives up."""

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
    return ok, cand[torch.arange(cand.shape[0], device=cand.device), idx]


def sample_layouts(spec: LayoutSpec, k: int, g: torch.Generator, device) -> Layout:
    """Draw K random layouts with robot and goal in free space.

    Start and goal keep ``robot_radius + spawn_clearance`` from every obstacle and wall, and are at
    least ``min_start_goal_dist_m`` apart. Worlds where no candidate fits get new obstacles, up to
    ``max_attempts`` times; then a RuntimeError says what to change. Nothing is ever spawned inside
    an obstacle.
    """
    need = spec.robot_radius_m + spec.spawn_clearance_m
    lay = _sample_obstacles(spec, k, g, device)
    todo = torch.arange(k, device=device)
    for _ in range(spec.max_attempts):
        sub = lay.index(todo)
        n, p = todo.numel(), spec.candidates
        cx, cy = spec.half_x - need, spec.half_y - need
        starts = torch.stack((_uniform((n, p), -cx, cx, g, device), _uniform((n, p), -cy, cy, g, device)), -1)
        goals = torch.stack((_uniform((n, p), -cx, cx, g, device), _uniform((n, p), -cy, cy, g, device)), -1)
        d_start, _ = nearest_obstacle(starts, sub, spec.half_x, spec.half_y)
        ok_s, start = _first_valid(d_start >= need, starts)
        d_goal, _ = nearest_obstacle(goals, sub, spec.half_x, spec.half_y)
        far = (goals - start.unsqueeze(1)).norm(dim=-1) >= spec.min_start_goal_dist_m
        ok_g, goal = _first_valid((d_goal >= need) & far, goals)
        sub.robot_xy, sub.goal_xy = start, goal
        sub.robot_yaw = _uniform((n,), -math.pi, math.pi, g, device)
        lay.assign(todo, sub)
        ok = ok_s & ok_g
        if bool(ok.all()):
            return lay
        todo = todo[~ok]
        lay.assign(todo, _sample_obstacles(spec, todo.numel(), g, device))
    raise RuntimeError(
        f"layout sampling found no collision-free start/goal for worlds {todo.tolist()[:10]} after "
        f"{spec.max_attempts} attempts; lower obstacles.*_count or obstacle sizes, spawn_clearance_m "
        f"({spec.spawn_clearance_m}) or min_start_goal_dist_m ({spec.min_start_goal_dist_m})"
    )


class LayoutPool:
    """Random layouts sampled in batches and handed out in order.

    Sampling costs a fixed number of tensor operations whatever the batch size, so one batch of
    ``batch`` layouts serves many control steps' worth of resets instead of a sampling call per step.
    Deterministic: the same generator state gives the same sequence of layouts. Layouts left in a
    batch too small for a request are dropped and a new batch is drawn.
    """

    def __init__(self, spec: LayoutSpec, batch: int, generator: torch.Generator, device) -> None:
        self.spec, self.batch, self.generator, self.device = spec, int(batch), generator, device
        self.clear()

    def clear(self) -> None:
        """Drop the remaining layouts (after re-seeding the generator)."""
        self._pool: Layout | None = None
        self._next = self._size = 0

    def take(self, k: int) -> Layout:
        """The next ``k`` layouts."""
        if self._next + k > self._size:
            self._size = max(self.batch, k)
            self._pool = sample_layouts(self.spec, self._size, self.generator, self.device)
            self._next = 0
        ids = torch.arange(self._next, self._next + k, device=self.device)
        self._next += k
        return self._pool.index(ids)
