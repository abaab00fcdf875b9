"""Kinematic motion of moving obstacles, one module for every backend (torch ops on the env's device).

A moving obstacle is a mocap body: its pose is written, never integrated, so the robot cannot push it
(a contact with one ends the episode: navexp.task.rewards.terminations). Each control step the env
calls ``Motion.advance``, which returns the obstacles' positions before and after the step; the
backend moves the mocap bodies linearly between the two over its physics substeps
(``Simulator.move_obstacles``). The same tensors drive both backends, so warp and mujoco see the same
motion; nothing here reads a device value on the host. A step is one masked pass over the slots: every
slot's path point, then (where a layout may steer) one steered step of the bouncing and crossing
slots from one nearest-surface query, each slot taking its own model's.

Motion models (``Layout.mov_mode``, codes in ``MODES``):

- ``loop`` / ``back_and_forth``: along the waypoints ``mov_path[:, :, :npts]`` at ``mov_speed``; the
  position is a closed-form function of the time since ``mov_delay`` (no drift, exact per seed):
  ``s = phase + speed * max(t - delay, 0)`` metres along the closed polyline (loop) or along it and back
  (back and forth: a triangle wave of period ``2 L``).
- ``bounce``: constant velocity ``mov_vel``, reflected off static obstacles (the velocity's component
  along the outward normal of the nearest surface is reversed when the obstacle's bounding circle
  touches it while moving into it) and mirrored at the room's walls (exact: never beyond them).
  Moving obstacles pass through each other.
- ``crossing``: an agent walking from ``mov_path[0]`` to its own goal ``mov_path[1]`` and back, with
  a social-force-like steering (Helbing and Molnar 1995): the desired velocity towards the goal plus a
  push off static surfaces closer than ``REPULSION_RANGE_M``, capped at its speed; where the push
  cancels the walk it turns back instead of standing still. It ignores
  the robot (CrowdNav's "invisible robot" setting, Chen et al. 2019): avoiding is the policy's job,
  and an agent that yields would let a policy learn to wait for a courtesy real people do not owe it.
"""

from __future__ import annotations

import time
import warnings

import torch

from navexp.sim.layout import MAX_WAYPOINTS, Layout, nearest_obstacle, path_geometry

__all__ = [
    "MAX_WAYPOINTS",
    "MODES",
    "Motion",
    "path_point",
    "polyline_point",
    "set_geometry",
    "start_position",
    "time_to_contact",
]

MODES = ("none", "loop", "back_and_forth", "bounce", "crossing")
"""``Layout.mov_mode`` codes: an index into this tuple (0: the slot is unused)."""
NONE, LOOP, BACK_AND_FORTH, BOUNCE, CROSSING = range(len(MODES))
REPULSION_RANGE_M = 0.5
"""A crossing agent is pushed away from static surfaces closer than this to its edge."""
ARRIVAL_M = 0.25
"""A crossing agent turns back towards its other end when its centre is this close to its goal."""
STALL_FRACTION = 0.25
"""A crossing agent whose steered speed falls below this fraction of its own (the push off a surface
cancels its walk: a local minimum of the social force) turns back too."""


def polyline_point(
    path: torch.Tensor, npts: torch.Tensor, s: torch.Tensor, closed: torch.Tensor
) -> torch.Tensor:
    """The point ``s`` metres along a polyline: [..., 2] from path [..., P, 2], npts [...] (used
    points, >= 1), s [...] (m, >= 0) and closed [...] bool (loop: the last point joins the first and
    ``s`` wraps at the length L; open: back and forth, ``s`` folds into a triangle wave of period 2 L).

    Worked case: one 4 m segment, open, s = 8 (1 m/s for 8 s) -> 8 mod 8 = 0 -> the start; s = 4 ->
    the far end; s = 5 -> 3 m from the start on the way back.

    The geometry (``navexp.sim.layout.path_geometry``) computed here; a step reads a layout's own
    (``path_point``)."""
    seg, ends, length, period = path_geometry(path, npts, closed)
    return segment_point(seg, ends, length, period, s, closed)


def segment_point(
    seg: torch.Tensor,
    ends: torch.Tensor,
    length: torch.Tensor,
    period: torch.Tensor,
    s: torch.Tensor,
    closed: torch.Tensor,
) -> torch.Tensor:
    """The point [..., 2] ``s`` [...] metres along polylines of known geometry (``path_geometry``: the
    segments [..., P, 6], their ends [..., P], length L and period [...]; closed [...] bool).

    ``u = s mod period`` (a loop's), folded to ``L - |u - L|`` on the way back of an open path; segment
    k is the number of ends at or before u, and the point a_k + frac (b_k - a_k), frac = (u - start_k)
    / length_k clamped to [0, 1], on that segment alone (one gather)."""
    r = s.remainder(period)
    u = torch.where(closed, r, length - (r - length).abs()).unsqueeze(-1)  # [..., 1]
    k = (ends <= u).sum(-1, keepdim=True)  # [..., 1]
    g = seg.gather(-2, k.unsqueeze(-1).expand(*k.shape, seg.shape[-1])).squeeze(-2)  # [..., 6]
    frac = ((u - g[..., 4:5]) / g[..., 5:6]).clamp(0.0, 1.0)
    return g[..., 0:2] + frac * g[..., 2:4]


def path_point(layout: Layout, s: torch.Tensor, closed: torch.Tensor) -> torch.Tensor:
    """[K, M, 2] the point ``s`` [K, M] metres along each obstacle's path (the layout's geometry)."""
    return segment_point(layout.mov_seg, layout.mov_seg_end, layout.mov_length, layout.mov_period, s, closed)


def set_geometry(layout: Layout) -> None:
    """Derive the layout's path geometry and bounding radii from its moving obstacles (in place; after
    drawing or loading them): ``Layout.set_path_geometry`` with the loops closed."""
    layout.set_path_geometry(layout.mov_mode == LOOP)


def path_position(layout: Layout, t: torch.Tensor) -> torch.Tensor:
    """[K, M, 2] where each path-following obstacle is ``t`` [K] seconds into the episode."""
    moving = (t.unsqueeze(-1) - layout.mov_delay).clamp_min(0.0)
    s = layout.mov_phase + layout.mov_speed * moving
    return path_point(layout, s, layout.mov_mode == LOOP)


def start_position(layout: Layout) -> torch.Tensor:
    """[K, M, 2] the obstacles' positions at t = 0 (a path's phase point; the first waypoint for bounce
    and crossing), computed from their paths (``Layout.mov_start`` keeps it for the resets)."""
    on_path = (layout.mov_mode == LOOP) | (layout.mov_mode == BACK_AND_FORTH)
    t0 = torch.zeros(layout.num_worlds, device=layout.robot_xy.device)
    return torch.where(on_path.unsqueeze(-1), path_position(layout, t0), layout.mov_path[:, :, 0])


def bounding_radius(layout: Layout) -> torch.Tensor:
    """[K, M] the radius of each moving obstacle's bounding circle (a box's half-diagonal): the
    layout's ``mov_radius``."""
    return layout.mov_radius


def time_to_contact(
    pos: torch.Tensor,
    vel: torch.Tensor,
    radius: float,
    mov_pos: torch.Tensor,
    mov_vel: torch.Tensor,
    mov_radius: torch.Tensor,
    used: torch.Tensor,
) -> torch.Tensor:
    """[N] seconds until the robot (centre ``pos`` [N, 2], velocity ``vel`` [N, 2], radius m) first
    touches a used (``used`` [N, M]) moving obstacle (centres ``mov_pos`` [N, M, 2], velocities
    ``mov_vel`` [N, M, 2], bounding radii ``mov_radius`` [N, M]), each gap closing at the rate the two
    approach now: gap / closing speed, 0 in contact, inf when nothing closes.

    Worked case: robot at the origin standing still, radius 0.2; a 0.3 m cylinder at (3, 0) walking
    at 1 m/s towards it: gap 2.5 m, closing 1 m/s -> 2.5 s; walking away or sideways -> inf."""
    rel = mov_pos - pos.unsqueeze(1)  # [N, M, 2] robot -> obstacle
    dist = rel.norm(dim=-1).clamp_min(1e-9)
    closing = -((mov_vel - vel.unsqueeze(1)) * rel).sum(-1) / dist  # > 0: the gap shrinks
    gap = (dist - radius - mov_radius).clamp_min(0.0)
    ttc = torch.where(closing > 0, gap / closing.clamp_min(1e-9), float("inf"))
    ttc = torch.where(gap <= 0, 0.0, ttc)
    return torch.where(used, ttc, float("inf")).amin(dim=-1)


class Motion:
    """The moving obstacles of N worlds during their episodes: positions, velocities, time.

    Tensors [N, M, 2] world frame (m, m/s); ``t`` [N] seconds since each world's episode began.
    """

    def __init__(
        self,
        num_worlds: int,
        slots: int,
        half_x: float,
        half_y: float,
        dt: float,
        device,
        modes: frozenset[int] = frozenset(range(1, len(MODES))),
        compile: bool = False,
    ) -> None:
        self.half_x, self.half_y, self.dt = half_x, half_y, dt
        self.modes = modes
        """The mode codes any layout may use: the steering queries of the others are skipped."""
        self.pos = torch.zeros(num_worlds, slots, 2, device=device)
        self.vel = torch.zeros(num_worlds, slots, 2, device=device)
        self.t = torch.zeros(num_worlds, device=device)
        self.leg = torch.ones(num_worlds, slots, dtype=torch.bool, device=device)
        """[N, M] a crossing agent walks towards mov_path[1] (True) or back to mov_path[0]."""
        self._half = torch.tensor([half_x, half_y], device=device)
        """The room's half sizes [2] (m), made once."""
        self.travel = torch.zeros(num_worlds, slots, device=device)
        """[N, M] seconds each obstacle has been under way or in its start delay (``t`` less the
        steps it gave way); the clock of its path where obstacles yield (``yield_to``)."""
        self.yield_m = 0.0
        self.robot_radius_m = 0.0
        self._before = torch.zeros_like(self.pos)
        """The positions before the last step. Every tensor here is written in place, never re-bound,
        so a captured control step (``navexp.task.step_graph``) replays on the same memory."""
        self._inf = torch.tensor(float("inf"), device=device)
        """A 0-d inf (a masked fill without a scalar made on every step)."""
        self._compiled = torch.compile(self._step, dynamic=False) if compile else None
        """``_step`` through ``torch.compile`` (``env.dynamic.compile_motion``; compiled on its first
        call, fused kernels instead of ~170 small ops); None: eager."""
        self.compile_s: float | None = None
        """Seconds the first compiled step took (tracing and compiling included); None until then."""

    def reset(self, mask: torch.Tensor, layout: Layout) -> None:
        """Worlds where ``mask`` [N] is set start their episode: obstacles at their t = 0 positions."""
        m2 = mask.view(-1, 1, 1)
        torch.where(m2, layout.mov_start, self.pos, out=self.pos)
        torch.where(m2, layout.mov_vel, self.vel, out=self.vel)
        self.t.masked_fill_(mask, 0.0)
        self.leg |= mask.unsqueeze(-1)
        if self.yield_m > 0:
            self.travel.masked_fill_(mask.unsqueeze(-1), 0.0)

    def yield_to(self, gap_m: float, robot_radius_m: float) -> None:
        """Give way to the robot (``env.dynamic.yield_m``): an obstacle whose next step heads towards
        the robot's centre while the gap between the robot's edge and its bounding circle is below
        ``gap_m`` waits that step (a path-follower's clock stops, a steered one keeps its velocity and
        leg). 0: obstacles ignore the robot."""
        self.yield_m, self.robot_radius_m = float(gap_m), float(robot_radius_m)

    def advance(
        self, active: torch.Tensor, layout: Layout, robot_xy: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One control step of the worlds where ``active`` [N] is set (held worlds stand still); returns
        the positions [N, M, 2] before and after it. Compiled where asked; where compiling fails (no
        C++ compiler, an unsupported op) one warning, and the eager step from then on. ``robot_xy`` [N, 2]:
        the robot's centre, read where obstacles yield to it."""
        if self._compiled is None:
            return self._step(active, layout, robot_xy)
        try:
            if self.compile_s is not None:
                return self._compiled(active, layout, robot_xy)
            start = time.perf_counter()
            out = self._compiled(active, layout, robot_xy)
            self.compile_s = time.perf_counter() - start
            return out
        except Exception as err:  # the state is written after the compiled graph ran: nothing half-done
            warnings.warn(
                f"env.dynamic.compile_motion: compiling the motion step failed ({type(err).__name__}: "
                f"{str(err)[:200]}); it runs eagerly",
                RuntimeWarning,
                stacklevel=2,
            )
            self._compiled = None
            return self._step(active, layout, robot_xy)

    def _step(
        self, active: torch.Tensor, layout: Layout, robot_xy: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``advance``, eager: one masked pass, every slot's path point (the layout's path geometry)
        and, where a layout may steer (bounce, crossing), its steered step, each slot taking its
        model's."""
        before, mode = self._before, layout.mov_mode
        before.copy_(self.pos)
        self.t += self.dt * active
        yields = self.yield_m > 0 and robot_xy is not None
        clock = self.travel + self.dt * active.unsqueeze(-1) if yields else self.t.unsqueeze(-1)
        since = clock - layout.mov_delay  # [N, M] s since each obstacle set off (< 0: not yet)
        moved = (since > 0) & (active.unsqueeze(-1) & (mode != NONE))
        s = layout.mov_phase + layout.mov_speed * since.clamp_min(0.0)
        after = path_point(layout, s, mode == LOOP)
        steered = None
        if self.modes & {BOUNCE, CROSSING}:
            mode3 = mode.unsqueeze(-1)  # [N, M, 1]
            steered, vel, leg = self._steer(layout, mode3)
            after = torch.where(mode3 >= BOUNCE, steered, after)
        if yields:
            gives_way = moved & self._gives_way(after, robot_xy, layout)
            moved = moved & ~gives_way
            torch.where(gives_way, self.travel, clock, out=self.travel)
        m = moved.unsqueeze(-1)
        if steered is not None:
            torch.where(m, vel, self.vel, out=self.vel)  # waiting obstacles keep theirs
            torch.where(moved, leg, self.leg, out=self.leg)
        torch.where(m, after, before, out=self.pos)
        return before, self.pos

    def _gives_way(self, after: torch.Tensor, robot_xy: torch.Tensor, layout: Layout) -> torch.Tensor:
        """[N, M] obstacles whose step (from ``_before`` to ``after``) heads towards the robot while
        the gap between the robot's edge and their bounding circle is below ``yield_m``."""
        to_robot = robot_xy.unsqueeze(1) - self._before
        gap = to_robot.norm(dim=-1) - self.robot_radius_m - layout.mov_radius
        return (gap < self.yield_m) & (((after - self._before) * to_robot).sum(-1) > 0)

    def _steer(self, layout: Layout, mode: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The steered models' next positions [N, M, 2], velocities [N, M, 2] and legs [N, M], from one
        nearest-surface query (``advance`` writes them where the obstacles moved). ``bounce``:
        constant velocity, reflected off a static surface it touches
        while moving into it, then one step on, mirrored at the room's walls (exact: never beyond
        them). ``crossing``: towards the current goal, pushed off static surfaces within
        ``REPULSION_RANGE_M``, turning back on arrival or where the push cancels the walk (no
        permanent stop). Slots of other models get values that ``advance`` does not take. Per-slot
        values are kept [N, M, 1] (``mode`` too) so they broadcast against [N, M, 2] without a reshape
        each."""
        speed = layout.mov_speed.unsqueeze(-1)  # [N, M, 1]
        bounce, crossing = mode == BOUNCE, mode == CROSSING
        # The nearest static surface: gap between the bounding circle and it (< 0: overlapping) and the
        # unit normal from it to the obstacle.
        dist, closest = nearest_obstacle(self.pos, layout, self.half_x, self.half_y)
        away = self.pos - closest
        normal = away / away.norm(dim=-1, keepdim=True).clamp_min(1e-9)
        gap = (dist - layout.mov_radius).unsqueeze(-1)
        into = (self.vel * normal).sum(-1, keepdim=True)
        hit = (gap < 0) & (into < 0) & bounce
        vel_b = torch.where(hit, self.vel - 2 * into * normal, self.vel)
        goal = torch.where(self.leg.unsqueeze(-1), layout.mov_path[:, :, 1], layout.mov_path[:, :, 0])
        to_goal = goal - self.pos
        desired = to_goal / to_goal.norm(dim=-1, keepdim=True).clamp_min(1e-9) * speed
        push = (REPULSION_RANGE_M - gap).clamp_min(0.0) / REPULSION_RANGE_M  # 0 far, 1 at contact
        vel_c = desired + push * speed * normal
        vel_c = vel_c * (speed / vel_c.norm(dim=-1, keepdim=True).clamp_min(1e-9)).clamp_max(1.0)
        vel = torch.where(crossing, vel_c, vel_b)
        p = self.pos + vel * self.dt
        # Centre limits of a bouncing obstacle (a box's half-extents, a cylinder's radius); none for others.
        lim = torch.where(bounce, self._half - layout.mov_size, self._inf)
        over, under = p > lim, p < -lim
        speed_abs = vel.abs()
        vel = torch.where(over, -speed_abs, torch.where(under, speed_abs, vel))
        p = torch.where(over, 2 * lim - p, torch.where(under, -2 * lim - p, p))
        arrived = (goal - p).norm(dim=-1, keepdim=True) < ARRIVAL_M
        stalled = vel_c.norm(dim=-1, keepdim=True) < STALL_FRACTION * speed
        return p, vel, self.leg ^ ((arrived | stalled) & crossing).squeeze(-1)
