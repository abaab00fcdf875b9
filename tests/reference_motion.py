"""The moving obstacles' motion as navexp.sim.motion computed it before the fused step (issue 50,
item 3): the reference ``tests/test_moving.py`` holds the fused motion to. Copied verbatim from
navexp/sim/motion.py and navexp/sim/layout.py (``nearest_obstacle``) of commit 01c89e5; the bounding
radius is computed from the sizes here (the motion reads ``Layout.mov_radius`` since the path
geometry moved into the layout)."""

from __future__ import annotations

import torch

from navexp.sim.layout import Layout, rotate_xy
from navexp.sim.motion import (
    ARRIVAL_M,
    BOUNCE,
    CROSSING,
    LOOP,
    NONE,
    REPULSION_RANGE_M,
    STALL_FRACTION,
    Motion,
)


def bounding_radius(layout: Layout) -> torch.Tensor:
    """[K, M] the radius of each moving obstacle's bounding circle (a box's half-diagonal)."""
    return layout.mov_size.norm(dim=-1) * torch.where(layout.mov_is_box, 1.0, 2**-0.5)


def _cylinder_parts(p: torch.Tensor, layout: Layout) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-cylinder signed distance [K, P, C] (``|p - c| - r``, inf for inactive slots) and the
    offset from the centre and its length, for the closest point."""
    rel = p - layout.cyl_xy.unsqueeze(1)  # [K, P, C, 2]
    norm = rel.norm(dim=-1).clamp_min(1e-9)
    d = torch.where(layout.cyl_active.unsqueeze(1), norm - layout.cyl_r.unsqueeze(1), float("inf"))
    return d, rel, norm


def _box_parts(p: torch.Tensor, layout: Layout) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-box (boxes, then walls) signed distance [K, P, B+W] (the rotated-rectangle distance in
    the box frame ``q = R(-yaw)(p - c)``, inf for inactive slots), ``q`` and ``|q| - half``."""
    xy, half, yaw, active = layout.boxes_and_walls()
    q = rotate_xy(p - xy.unsqueeze(1), -yaw.unsqueeze(1))  # [K, P, B+W, 2]
    excess = q.abs() - half.unsqueeze(1)
    outside = excess.clamp_min(0).norm(dim=-1)
    inside = excess.max(dim=-1).values.clamp_max(0)
    d = torch.where(active.unsqueeze(1), outside + inside, float("inf"))
    return d, q, excess


def _wall_distances(points: torch.Tensor, half_x: float, half_y: float) -> torch.Tensor:
    x, y = points[..., 0], points[..., 1]
    return torch.stack((half_x - x, half_x + x, half_y - y, half_y + y), dim=-1)  # [K, P, 4]


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
    # Cylinders: the closest point lies along the ray from the centre through p.
    d_cyl, rel, norm = _cylinder_parts(p, layout)
    r = layout.cyl_r.unsqueeze(1)
    c_cyl = layout.cyl_xy.unsqueeze(1) + rel / norm.unsqueeze(-1) * r.unsqueeze(-1)
    # Boxes: the closest point is q clamped to the box...
    d_box, q, excess = _box_parts(p, layout)
    rect_xy, rect_half, rect_yaw, _ = layout.boxes_and_walls()
    half = rect_half.unsqueeze(1)
    q_clamped = torch.maximum(torch.minimum(q, half), -half)
    # ...except inside a box, where the clamp is the point itself: push it to the nearest face.
    face = torch.where(excess[..., :1] > excess[..., 1:], 0, 1)  # axis closest to a face
    pushed = q.clone()
    pushed.scatter_(-1, face, (torch.sign(q) * half).gather(-1, face))
    inside = excess.max(dim=-1).values < 0
    q_near = torch.where(inside.unsqueeze(-1), pushed, q_clamped)
    c_box = rect_xy.unsqueeze(1) + rotate_xy(q_near, rect_yaw.unsqueeze(1))
    # Walls: the four inner faces.
    x, y = points[..., 0], points[..., 1]
    d_wall = _wall_distances(points, half_x, half_y)
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


def polyline_point(
    path: torch.Tensor, npts: torch.Tensor, s: torch.Tensor, closed: torch.Tensor
) -> torch.Tensor:
    """The point ``s`` metres along a polyline: [..., 2] from path [..., P, 2], npts [...] (used
    points, >= 1), s [...] (m, >= 0) and closed [...] bool (loop: the last point joins the first and
    ``s`` wraps at the length L; open: back and forth, ``s`` folds into a triangle wave of period 2 L).

    Worked case: one 4 m segment, open, s = 8 (1 m/s for 8 s) -> 8 mod 8 = 0 -> the start; s = 4 ->
    the far end; s = 5 -> 3 m from the start on the way back."""
    p = path.shape[-2]
    j = torch.arange(p, device=path.device)
    nseg = torch.where(closed, npts, npts - 1).unsqueeze(-1)  # segments in use
    nxt = torch.where(j + 1 < npts.unsqueeze(-1), j + 1, 0)  # a loop's last point joins the first
    ends = path.gather(-2, nxt.unsqueeze(-1).expand(*nxt.shape, 2))
    seg = torch.where(j < nseg, (ends - path).norm(dim=-1), 0.0)  # [..., P]
    total = seg.sum(-1).clamp_min(1e-9)
    u = torch.where(closed, s.remainder(total), total - (s.remainder(2 * total) - total).abs())
    cum_end = seg.cumsum(-1)
    k = ((cum_end <= u.unsqueeze(-1)) & (j < nseg)).sum(-1).clamp_max((nseg.squeeze(-1) - 1).clamp_min(0))
    k1 = k.unsqueeze(-1)
    start = (cum_end - seg).gather(-1, k1).squeeze(-1)
    length = seg.gather(-1, k1).squeeze(-1)
    frac = ((u - start) / length.clamp_min(1e-9)).clamp(0.0, 1.0).unsqueeze(-1)
    a = path.gather(-2, k1.unsqueeze(-1).expand(*k.shape, 1, 2)).squeeze(-2)
    b = ends.gather(-2, k1.unsqueeze(-1).expand(*k.shape, 1, 2)).squeeze(-2)
    return a + frac * (b - a)


def path_position(layout: Layout, t: torch.Tensor) -> torch.Tensor:
    """[K, M, 2] where each path-following obstacle is ``t`` [K] seconds into the episode."""
    moving = (t.unsqueeze(-1) - layout.mov_delay).clamp_min(0.0)
    s = layout.mov_phase + layout.mov_speed * moving
    return polyline_point(layout.mov_path, layout.mov_npts, s, layout.mov_mode == LOOP)


class ReferenceMotion(Motion):
    """``Motion`` with the old ``advance`` (one pass per model, the general nearest-surface query)."""

    def advance(self, active: torch.Tensor, layout: Layout) -> tuple[torch.Tensor, torch.Tensor]:
        """One control step of the worlds where ``active`` [N] is set (held worlds stand still); returns
        the positions [N, M, 2] before and after it."""
        before, vel, leg = self.pos, self.vel, self.leg
        self.t = self.t + self.dt * active
        started = (self.t.unsqueeze(-1) > layout.mov_delay) & active.unsqueeze(-1)  # [N, M]
        mode = layout.mov_mode.unsqueeze(-1)
        after = path_position(layout, self.t)
        if self.modes & {BOUNCE, CROSSING}:
            gap, normal = self._nearest_surface(layout)  # one query for both steering models
            if BOUNCE in self.modes:
                after = torch.where(mode == BOUNCE, self._bounce(layout, gap, normal), after)
            if CROSSING in self.modes:
                after = torch.where(mode == CROSSING, self._cross(layout, gap, normal), after)
        moved = started & (layout.mov_mode != NONE)
        self.pos = torch.where(moved.unsqueeze(-1), after, before)
        self.vel = torch.where(moved.unsqueeze(-1), self.vel, vel)  # waiting obstacles keep theirs
        self.leg = torch.where(moved, self.leg, leg)
        return before, self.pos

    def _nearest_surface(self, layout: Layout) -> tuple[torch.Tensor, torch.Tensor]:
        """Gap [N, M] between each obstacle's bounding circle and the nearest static surface (walls
        included; negative: overlapping) and the unit normal [N, M, 2] from that surface to the obstacle."""
        dist, closest = nearest_obstacle(self.pos, layout, self.half_x, self.half_y)
        away = self.pos - closest
        return dist - bounding_radius(layout), away / away.norm(dim=-1, keepdim=True).clamp_min(1e-9)

    def _bounce(self, layout: Layout, gap: torch.Tensor, normal: torch.Tensor) -> torch.Tensor:
        """Constant velocity: reflected off a static surface it touches while moving into it, then one
        step on, mirrored at the room's walls (exact: never beyond them)."""
        into = (self.vel * normal).sum(-1)
        hit = (gap < 0) & (into < 0) & (layout.mov_mode == BOUNCE)
        vel = torch.where(hit.unsqueeze(-1), self.vel - 2 * into.unsqueeze(-1) * normal, self.vel)
        half = torch.tensor([self.half_x, self.half_y], device=self.pos.device)
        lim = half - layout.mov_size  # centre limits: a box's half-extents, a cylinder's radius
        p = self.pos + vel * self.dt
        over, under = p > lim, p < -lim
        self.vel = torch.where(over, -vel.abs(), torch.where(under, vel.abs(), vel))
        return torch.where(over, 2 * lim - p, torch.where(under, -2 * lim - p, p))

    def _cross(self, layout: Layout, gap: torch.Tensor, normal: torch.Tensor) -> torch.Tensor:
        """Walk towards the current goal, pushed off static surfaces within ``REPULSION_RANGE_M``; turn
        back on arrival, or where the push cancels the walk (no permanent stop)."""
        goal = torch.where(self.leg.unsqueeze(-1), layout.mov_path[:, :, 1], layout.mov_path[:, :, 0])
        to_goal = goal - self.pos
        speed = layout.mov_speed.unsqueeze(-1)
        desired = to_goal / to_goal.norm(dim=-1, keepdim=True).clamp_min(1e-9) * speed
        push = (REPULSION_RANGE_M - gap.unsqueeze(-1)).clamp_min(
            0.0
        ) / REPULSION_RANGE_M  # 0 far, 1 at contact
        vel = desired + push * speed * normal
        vel = vel * (speed / vel.norm(dim=-1, keepdim=True).clamp_min(1e-9)).clamp_max(1.0)
        p = self.pos + vel * self.dt
        arrived = (goal - p).norm(dim=-1) < ARRIVAL_M
        stalled = vel.norm(dim=-1) < STALL_FRACTION * layout.mov_speed
        turn = (arrived | stalled) & (layout.mov_mode == CROSSING)
        self.leg = torch.where(turn, ~self.leg, self.leg)
        return p
