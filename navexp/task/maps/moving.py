"""Moving obstacles of random layouts: the ``env.dynamic`` keys, their checks, and their draw.

Each layout of any map family gets its moving obstacles after its static ones (``add_moving``, called by
``navexp.task.maps.families.generate``): per slot a motion model drawn by weight, a size, a speed, a
start delay and a path, all on the device in fixed-shape ops. Every obstacle's position at t = 0 keeps
``clearance_m`` beyond both radii from the robot's start and from the goal and does not overlap a
static obstacle; a slot whose candidates all fail stays unused (``mov_mode`` 0) instead of voiding the
layout. Obstacles never stop for good (paths loop or reverse, agents turn back at their goals), so a
goal they pass over is blocked only while one passes. The motion itself is navexp.sim.motion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import torch

from navexp.sim.layout import MAX_WAYPOINTS, Layout, bounding_radii, obstacle_distance
from navexp.sim.motion import (
    BACK_AND_FORTH,
    BOUNCE,
    CROSSING,
    LOOP,
    MODES,
    REPULSION_RANGE_M,
    bounding_radius,
    polyline_point,
    set_geometry,
    start_position,
)
from navexp.task.checks import check, check_range

if TYPE_CHECKING:
    from navexp.task.maps.random_source import HashSource, StreamSource

    RandomSource = StreamSource | HashSource

MODELS = MODES[1:]
"""Motion models ``env.dynamic.models`` weighs (navexp.sim.motion)."""
CANDIDATES = 8
"""Start candidates drawn per moving obstacle; the first clear one is taken."""


@dataclass
class DynamicCfg:
    """``env.dynamic``: moving obstacles (none by default). Ranges and their sources:
    docs/maps-and-scenarios.md, "Moving obstacles"."""

    cylinder_slots: int = 0
    """Moving cylinders (people) compiled into the model; unused ones are parked below the floor."""
    box_slots: int = 0
    """Moving boxes (carts, axis-aligned) compiled into the model."""
    cylinder_count: list[int] = field(default_factory=lambda: [0, 0])
    """[min, max] moving cylinders per episode (inclusive), max <= cylinder_slots."""
    box_count: list[int] = field(default_factory=lambda: [0, 0])
    """[min, max] moving boxes per episode (inclusive), max <= box_slots."""
    cylinder_radius_m: list[float] = field(default_factory=lambda: [0.2, 0.35])
    """[min, max] radius of a moving cylinder (a person's shoulder half-width: 0.2-0.35 m)."""
    box_half_size_m: list[float] = field(default_factory=lambda: [0.25, 0.45])
    """[min, max] half-extent of a moving box side (a cart: 0.5-0.9 m a side)."""
    speed_mps: list[float] = field(default_factory=lambda: [0.2, 1.0])
    """[min, max] speed (m/s), min > 0 (people walk at about 1.3 m/s)."""
    path_length_m: list[float] = field(default_factory=lambda: [2.0, 5.0])
    """[min, max] length of a back-and-forth segment, half the perimeter of a loop, the length of a
    crossing (m)."""
    start_delay_s: list[float] = field(default_factory=lambda: [0.0, 0.0])
    """[min, max] seconds an obstacle waits at its start before it moves."""
    models: dict[str, float] = field(
        default_factory=lambda: {"loop": 1.0, "back_and_forth": 1.0, "bounce": 1.0, "crossing": 1.0}
    )
    """Weight of each motion model (loop | back_and_forth | bounce | crossing), >= 0, summing to > 0."""
    clearance_m: float = 0.5
    """Gap (m) between an obstacle at t = 0 and the robot's start and the goal, beyond both radii."""
    yield_m: float = 0.0
    """Obstacles that give way: one whose next step heads towards the robot while the gap between
    their edges is below this (m) waits that step (a person or a cart with a safety scanner stopping
    for the robot). 0: off, obstacles ignore the robot (CrowdNav's invisible robot)."""
    compile_motion: bool = False
    """``torch.compile`` the motion step (navexp.sim.motion.Motion): fused kernels instead of ~170 small
    torch ops per control step, compiled on the first step; the eager step where compiling fails."""


@dataclass(frozen=True)
class MovingSpec:
    """``env.dynamic`` as plain values (what ``add_moving`` draws from)."""

    cylinder_slots: int
    box_slots: int
    cylinder_count: tuple[int, int]
    box_count: tuple[int, int]
    cylinder_radius_m: tuple[float, float]
    box_half_size_m: tuple[float, float]
    speed_mps: tuple[float, float]
    path_length_m: tuple[float, float]
    start_delay_s: tuple[float, float]
    weights: tuple[float, ...]
    """Weight per model, in ``MODELS`` order."""
    clearance_m: float
    compile_motion: bool = False
    """Compile the motion step (``env.dynamic.compile_motion``)."""
    yield_m: float = 0.0
    """Obstacles wait while the robot is this close ahead of them (``env.dynamic.yield_m``; 0: off)."""

    @property
    def slots(self) -> int:
        return self.cylinder_slots + self.box_slots

    @property
    def modes(self) -> frozenset[int]:
        """The motion codes (navexp.sim.motion) drawn with a weight > 0."""
        return frozenset(i + 1 for i, w in enumerate(self.weights) if w > 0)

    @classmethod
    def from_cfg(cls, dyn: Any) -> MovingSpec | None:
        """The spec of ``env.dynamic``; None without moving slots (or without the key: older configs)."""
        if dyn is None or dyn.cylinder_slots + dyn.box_slots == 0:
            return None
        return cls(
            cylinder_slots=int(dyn.cylinder_slots),
            box_slots=int(dyn.box_slots),
            cylinder_count=tuple(dyn.cylinder_count),
            box_count=tuple(dyn.box_count),
            cylinder_radius_m=tuple(dyn.cylinder_radius_m),
            box_half_size_m=tuple(dyn.box_half_size_m),
            speed_mps=tuple(dyn.speed_mps),
            path_length_m=tuple(dyn.path_length_m),
            start_delay_s=tuple(dyn.start_delay_s),
            weights=tuple(float(dyn.models.get(m, 0.0)) for m in MODELS),
            clearance_m=float(dyn.clearance_m),
            compile_motion=bool(getattr(dyn, "compile_motion", False)),  # absent in older configs
            yield_m=float(getattr(dyn, "yield_m", 0.0)),
        )


def check_dynamic_cfg(dyn: Any) -> None:
    """Raise a one-line ValueError naming the ``dynamic.*`` key, its value and what is allowed."""
    for kind in ("cylinder", "box"):
        slots, count = getattr(dyn, f"{kind}_slots"), getattr(dyn, f"{kind}_count")
        check(slots >= 0, f"dynamic.{kind}_slots", slots, "an integer >= 0")
        check_range(f"dynamic.{kind}_count", count, 0)
        check(
            count[1] <= slots, f"dynamic.{kind}_count", list(count), f"max <= dynamic.{kind}_slots ({slots})"
        )
    check_range("dynamic.cylinder_radius_m", dyn.cylinder_radius_m, 1e-3)
    check_range("dynamic.box_half_size_m", dyn.box_half_size_m, 1e-3)
    check_range("dynamic.speed_mps", dyn.speed_mps, 1e-3)
    check_range("dynamic.path_length_m", dyn.path_length_m, 1e-3)
    check_range("dynamic.start_delay_s", dyn.start_delay_s, 0.0)
    check(dyn.clearance_m >= 0, "dynamic.clearance_m", dyn.clearance_m, ">= 0")
    yield_m = getattr(dyn, "yield_m", 0.0)
    check(yield_m >= 0, "dynamic.yield_m", yield_m, ">= 0 (0: obstacles ignore the robot)")
    compile_motion = getattr(dyn, "compile_motion", False)
    check(isinstance(compile_motion, bool), "dynamic.compile_motion", compile_motion, "true | false")
    models = dict(dyn.models)
    unknown = sorted(set(models) - set(MODELS))
    check(not unknown, "dynamic.models", models, f"weights of {' | '.join(MODELS)} (unknown: {unknown})")
    check(
        all(w >= 0 for w in models.values()) and sum(models.values()) > 0,
        "dynamic.models",
        models,
        "weights >= 0 with at least one > 0",
    )


def add_moving(
    spec: MovingSpec | None, lay: Layout, src: RandomSource, room: tuple[float, float, float]
) -> None:
    """Draw the moving obstacles of every layout of ``lay`` in place (nothing without a spec).

    ``room`` is (half_x, half_y, robot_radius_m). Draws on the device, no host sync."""
    if spec is None:
        return
    half_x, half_y, robot_r = room
    k, m, dev = lay.num_worlds, spec.slots, lay.robot_xy.device
    moving = Layout.empty(k, 0, 0, dev, moving_slots=(spec.cylinder_slots, spec.box_slots))
    is_box = moving.mov_is_box
    active = _active(spec, k, src, dev)
    r = src.uniform((k, spec.cylinder_slots), *spec.cylinder_radius_m)
    half = src.uniform((k, spec.box_slots, 2), *spec.box_half_size_m)
    size = torch.cat((torch.stack((r, r), -1), half), dim=1)
    bound = bounding_radii(size, is_box)
    mode = _draw_modes(spec, k, src)
    speed = src.uniform((k, m), *spec.speed_mps)
    lim = torch.tensor([half_x, half_y], device=dev) - size  # [K, M, 2] centre limits
    path, npts, phase, vel = _candidate_paths(spec, lay, src, mode, speed, lim)
    t0 = polyline_point(path, npts, phase, (mode == LOOP).expand_as(phase))  # [K, M, R, 2]
    on_path = ((mode == LOOP) | (mode == BACK_AND_FORTH)).unsqueeze(-1)
    t0 = torch.where(on_path, t0, path[..., 0, :])
    clear = _clear_of_spawn(lay, t0, bound, robot_r + spec.clearance_m, half_x, half_y)
    pick = clear.float().argmax(dim=-1)  # the first clear candidate
    take = lambda x: _pick(x, pick)  # noqa: E731
    moving.mov_mode = torch.where(active & clear.any(-1), mode[..., 0], 0)
    moving.mov_path, moving.mov_npts, moving.mov_phase = take(path), take(npts), take(phase)
    moving.mov_vel, moving.mov_size, moving.mov_speed = take(vel), size, speed
    moving.mov_delay = src.uniform((k, m), *spec.start_delay_s)
    moving.mov_start = take(t0)
    set_geometry(moving)  # the path geometry once per layout: a step reads it
    _take_moving_fields(lay, moving)


def _take_moving_fields(lay: Layout, moving: Layout) -> None:
    """Set every moving-obstacle field (``mov_*``) of ``lay`` to ``moving``'s."""
    for f in fields(Layout):
        if f.name.startswith("mov_"):
            setattr(lay, f.name, getattr(moving, f.name))


def _pick(x: torch.Tensor, pick: torch.Tensor) -> torch.Tensor:
    """Candidate ``pick`` [K, M] of ``x`` [K, M, R, ...] -> [K, M, ...]."""
    k, m = pick.shape
    idx = pick.view(k, m, 1, *([1] * (x.dim() - 3))).expand(k, m, 1, *x.shape[3:])
    return x.gather(2, idx).squeeze(2)


def _active(spec: MovingSpec, k: int, src: RandomSource, dev) -> torch.Tensor:
    """[K, M] bool: the first n cylinders and the first n boxes of each layout are in play."""
    n_cyl = src.integers(spec.cylinder_count[0], spec.cylinder_count[1], (k, 1))
    n_box = src.integers(spec.box_count[0], spec.box_count[1], (k, 1))
    return torch.cat(
        (
            torch.arange(spec.cylinder_slots, device=dev) < n_cyl,
            torch.arange(spec.box_slots, device=dev) < n_box,
        ),
        dim=1,
    )


def _draw_modes(spec: MovingSpec, k: int, src: RandomSource) -> torch.Tensor:
    """[K, M, 1] long motion codes drawn by the models' weights (inverse of the cumulative weights)."""
    w = torch.tensor(spec.weights, device=src.device)
    cum = w.cumsum(0) / w.sum()
    u = src.uniform((k, spec.slots), 0.0, 1.0)
    code = (u.unsqueeze(-1) >= cum).sum(-1).clamp_max(len(MODELS) - 1) + 1
    return code.unsqueeze(-1)


def _candidate_paths(
    spec: MovingSpec,
    lay: Layout,
    src: RandomSource,
    mode: torch.Tensor,
    speed: torch.Tensor,
    lim: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """CANDIDATES paths per slot for its mode: waypoints [K, M, R, P, 2], used points [K, M, R], phase
    (m) [K, M, R] and bounce velocity [K, M, R, 2]; waypoints kept inside the room (``lim``)."""
    k, m, r = lay.num_worlds, spec.slots, CANDIDATES
    lim4 = lim.view(k, m, 1, 1, 2)
    p0 = (src.uniform((k, m, r, 2), -1.0, 1.0) * lim.unsqueeze(2)).unsqueeze(3)  # [K, M, R, 1, 2]
    theta = src.uniform((k, m, r), 0.0, 2 * math.pi)
    length = src.uniform((k, m, r), *spec.path_length_m)
    d1 = torch.stack((theta.cos(), theta.sin()), -1)
    d2 = torch.stack((-theta.sin(), theta.cos()), -1)
    side = (length / 2).view(k, m, r, 1, 1)
    corners = torch.stack((torch.zeros_like(d1), d1, d1 + d2, d2), dim=3) * side  # a square loop
    segment = torch.stack((torch.zeros_like(d1), d1), dim=3) * length.view(k, m, r, 1, 1)
    # Crossing: across the robot's straight line to its goal, at 30-70 % of the way, both ends in the room.
    f = src.uniform((k, m, r), 0.3, 0.7).unsqueeze(-1)
    a, b = lay.robot_xy.view(k, 1, 1, 2), lay.goal_xy.view(k, 1, 1, 2)
    mid = a + f * (b - a)
    normal = torch.stack((a[..., 1] - b[..., 1], b[..., 0] - a[..., 0]), -1)
    normal = normal / normal.norm(dim=-1, keepdim=True).clamp_min(1e-9)
    cross = torch.stack((mid + normal * length.unsqueeze(-1) / 2, mid - normal * length.unsqueeze(-1) / 2), 3)
    pts = torch.zeros(k, m, r, MAX_WAYPOINTS, 2, device=lim.device)
    mode4 = mode.view(k, m, 1, 1, 1)
    pts[..., :4, :] = torch.where(mode4 == LOOP, p0 + corners, p0.expand(-1, -1, -1, 4, -1))
    pts[..., :2, :] = torch.where(mode4 == BACK_AND_FORTH, p0 + segment, pts[..., :2, :])
    # A crossing agent's ends keep its repulsion range from the walls, so it can reach them and turn back.
    inner = (lim4 - REPULSION_RANGE_M).clamp_min(0.0)
    cross = torch.maximum(torch.minimum(cross, inner), -inner)
    pts[..., :2, :] = torch.where(mode4 == CROSSING, cross, pts[..., :2, :])
    pts = torch.maximum(torch.minimum(pts, lim4), -lim4)
    npts = torch.where(mode == LOOP, 4, torch.where((mode == BACK_AND_FORTH) | (mode == CROSSING), 2, 1))
    npts = npts.expand(k, m, r)
    # The phase: anywhere on a loop (perimeter 4 x L/2) or on a segment's way there and back (2 L).
    phase = src.uniform((k, m, r), 0.0, 1.0) * 2 * length
    vel = d1 * speed.unsqueeze(-1).unsqueeze(-1) * (mode == BOUNCE).unsqueeze(-1)
    return pts, npts, phase, vel


def _clear_of_spawn(
    lay: Layout, t0: torch.Tensor, bound: torch.Tensor, gap: float, half_x: float, half_y: float
) -> torch.Tensor:
    """[K, M, R] bool: a candidate's t = 0 position [K, M, R, 2] keeps ``bound + gap`` from the robot's
    start and the goal and does not overlap a static obstacle."""
    k, m, r, _ = t0.shape
    b = bound.unsqueeze(-1)
    far_start = (t0 - lay.robot_xy.view(k, 1, 1, 2)).norm(dim=-1) >= b + gap
    far_goal = (t0 - lay.goal_xy.view(k, 1, 1, 2)).norm(dim=-1) >= b + gap
    free = obstacle_distance(t0.view(k, m * r, 2), lay, half_x + 1e3, half_y + 1e3).view(k, m, r) >= b
    return far_start & far_goal & free


def with_moving_slots(lay: Layout, spec: MovingSpec | None) -> Layout:
    """``lay`` with the spec's moving slots, all unused, where it has none (a ROS map's layouts)."""
    if spec is None or lay.moving_slots == spec.slots:
        return lay
    empty = Layout.empty(
        lay.num_worlds, 0, 0, lay.robot_xy.device, moving_slots=(spec.cylinder_slots, spec.box_slots)
    )
    _take_moving_fields(lay, empty)
    return lay


def jitter_phases(cases: Layout, gen: torch.Generator) -> None:
    """Jittered cases of a scenario entry: each path-following obstacle starts at a phase uniform over
    its way there and back (a loop wraps), in place; a draw from ``gen`` only where there are moving
    slots (files without them draw their cases as before)."""
    if cases.moving_slots == 0:
        return
    seg = (cases.mov_path[:, :, 1:] - cases.mov_path[:, :, :-1]).norm(dim=-1)
    used = torch.arange(seg.shape[-1]) < (cases.mov_npts - 1).unsqueeze(-1)
    length = torch.where(used, seg, 0.0).sum(-1)  # open length; a loop's closing side wraps anyway
    u = torch.rand(cases.mov_phase.shape, generator=gen)
    cases.mov_phase = cases.mov_phase + u * 2 * length
    cases.mov_start = start_position(cases)


def clear_of_moving(lay: Layout, need: float) -> torch.Tensor:
    """[K] bool: start and goal keep ``need`` beyond the moving obstacles' bounding radius at t = 0."""
    if lay.moving_slots == 0:
        return torch.ones(lay.num_worlds, dtype=torch.bool)
    ends = torch.stack((lay.robot_xy, lay.goal_xy), 1).unsqueeze(2)  # [K, 2, 1, 2]
    gap = (ends - start_position(lay).unsqueeze(1)).norm(dim=-1) - bounding_radius(lay).unsqueeze(1)
    return ((gap >= need) | (lay.mov_mode == 0).unsqueeze(1)).all(-1).all(-1)
