"""Per-world layouts: obstacle slots, robot start and goal, and their 2D geometry (the sampling of
random layouts is the task's: navexp/task/maps/random_family.py and navexp/task/maps/).

A ``Layout`` holds K worlds' layouts as torch tensors (world frame, metres, radians). Obstacles are
vertical extrusions, so free space is a 2D question: the signed distance from a point to a
cylinder is ``|p - c| - r`` and to a box the usual rotated-rectangle distance. Wall segments are
boxes in slots of their own (after the boxes), so every geometry query treats them as boxes.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

MAX_WAYPOINTS = 8
"""Waypoints a moving obstacle's path holds (``Layout.mov_path`` [K, M, MAX_WAYPOINTS, 2])."""
SEGMENT_COLUMNS = 6
"""Numbers per path segment in ``Layout.mov_seg``: start point (x, y), vector to its end (dx, dy),
metres along the path where it begins, its length (m, >= 1e-9)."""


POSE_FIELDS = (
    *("cyl_xy", "cyl_r", "cyl_active", "box_xy", "box_half", "box_yaw", "box_active"),
    *("robot_xy", "robot_yaw", "goal_xy", "wall_xy", "wall_half", "wall_yaw", "wall_active"),
    *("mov_mode", "mov_speed", "mov_size", "mov_is_box", "mov_start"),
)
"""The ``Layout`` fields ``slot_poses`` and ``slot_sizes`` read, with the robot's start and goal."""


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
    wall_xy: torch.Tensor | None = None
    """[K, W, 2] wall segment centres (boxes in slots of their own; None: no wall slots)."""
    wall_half: torch.Tensor | None = None
    """[K, W, 2] wall half-extents along the wall's own x and y."""
    wall_yaw: torch.Tensor | None = None
    """[K, W] wall yaw."""
    wall_active: torch.Tensor | None = None
    """[K, W] bool."""
    family: torch.Tensor | None = None
    """[K] long: the map family that made the layout (index into navexp.task.maps.FAMILIES; -1 unknown)."""
    seed: torch.Tensor | None = None
    """[K] long: the layout's seed; (family, seed) regenerates it (navexp.task.maps.generate_layouts).
    -1 for layouts drawn from a generator stream or loaded from a file."""
    shortest_path_m: torch.Tensor | None = None
    """[K] shortest collision-free path from start to goal for the robot radius, measured on the
    occupancy grid (navexp.task.maps.grid_path); -1 where it was not computed (no path check), inf where
    none exists."""
    goal_field: torch.Tensor | None = None
    """[K, NY, NX] float16 distance (m) along the shortest free path from every cell centre of the
    occupancy grid to the goal (navexp.task.maps.grid_path.paths_and_fields); [K, 0, 0] where it is not
    kept (only a term that reads the path distance needs it)."""
    mov_mode: torch.Tensor | None = None
    """[K, M] long: each moving obstacle slot's motion model (navexp.sim.motion.MODES; 0: unused). M =
    the scene's moving cylinder slots, then its moving box slots."""
    mov_path: torch.Tensor | None = None
    """[K, M, P, 2] waypoints (navexp.sim.motion.MAX_WAYPOINTS); bounce: [0] the start; crossing: [0]
    the start, [1] the agent's own goal."""
    mov_npts: torch.Tensor | None = None
    """[K, M] long: waypoints in use (>= 1)."""
    mov_speed: torch.Tensor | None = None
    """[K, M] speed along the path or of the agent (m/s)."""
    mov_delay: torch.Tensor | None = None
    """[K, M] seconds the obstacle stands still at its start before it moves."""
    mov_phase: torch.Tensor | None = None
    """[K, M] metres along its path where a path-following obstacle starts."""
    mov_vel: torch.Tensor | None = None
    """[K, M, 2] initial velocity of a bouncing obstacle (m/s)."""
    mov_size: torch.Tensor | None = None
    """[K, M, 2] a moving cylinder's (radius, radius), a moving box's half-extents along x and y."""
    mov_is_box: torch.Tensor | None = None
    """[K, M] bool: the slot is a box (the scene's kind of the slot; boxes keep yaw 0)."""
    mov_start: torch.Tensor | None = None
    """[K, M, 2] where each moving obstacle stands at t = 0 (navexp.sim.motion.start_position of the
    fields above, kept so a reset computes nothing)."""
    # The path geometry, derived from the fields above once per layout (navexp.sim.motion.set_geometry,
    # ``path_geometry``) so a control step reads it instead of recomputing it.
    mov_seg: torch.Tensor | None = None
    """[K, M, P, SEGMENT_COLUMNS] per path segment: start point (x, y), vector to its end (dx, dy),
    metres along the path where it begins, its length (m, >= 1e-9); segment P-1 of a loop closes it."""
    mov_seg_end: torch.Tensor | None = None
    """[K, M, P] metres along the path where each segment ends; inf for the last segment in use and the
    unused ones (the number of ends at or before ``u`` is the index of the segment ``u`` lies on)."""
    mov_length: torch.Tensor | None = None
    """[K, M] length L of the path (m, >= 1e-9; a loop's closing side included)."""
    mov_period: torch.Tensor | None = None
    """[K, M] metres after which the motion repeats: L for a loop, 2 L there and back."""
    mov_radius: torch.Tensor | None = None
    """[K, M] radius of the obstacle's bounding circle (m; a box's half-diagonal)."""

    def __post_init__(self) -> None:
        # Optional fields default to "no wall slots" and "unknown id/path" (rows as robot_xy).
        k, dev = self.robot_xy.shape[0], self.robot_xy.device
        if self.wall_xy is None:
            self.wall_xy = torch.zeros(k, 0, 2, device=dev)
            self.wall_half = torch.zeros(k, 0, 2, device=dev)
            self.wall_yaw = torch.zeros(k, 0, device=dev)
            self.wall_active = torch.zeros(k, 0, dtype=torch.bool, device=dev)
        if self.family is None:
            self.family = torch.full((k,), -1, dtype=torch.long, device=dev)
        if self.seed is None:
            self.seed = torch.full((k,), -1, dtype=torch.long, device=dev)
        if self.shortest_path_m is None:
            self.shortest_path_m = torch.full((k,), -1.0, device=dev)
        if self.goal_field is None:
            self.goal_field = torch.zeros(k, 0, 0, dtype=torch.float16, device=dev)
        if self.mov_mode is None:
            self._no_moving(k, dev)

    def _no_moving(self, k: int, dev: torch.device) -> None:
        """Zero moving obstacle slots (the layouts of a scene without them)."""
        empty = lambda *shape, dtype=torch.float32: torch.zeros(k, 0, *shape, dtype=dtype, device=dev)  # noqa: E731
        self.mov_mode, self.mov_npts = empty(dtype=torch.long), empty(dtype=torch.long)
        self.mov_path = empty(MAX_WAYPOINTS, 2)
        self.mov_speed, self.mov_delay, self.mov_phase = empty(), empty(), empty()
        self.mov_vel, self.mov_size = empty(2), empty(2)
        self.mov_is_box = empty(dtype=torch.bool)
        self.mov_start = empty(2)
        self.mov_seg, self.mov_seg_end = empty(MAX_WAYPOINTS, SEGMENT_COLUMNS), empty(MAX_WAYPOINTS)
        self.mov_length, self.mov_period, self.mov_radius = empty(), empty(), empty()

    @property
    def num_worlds(self) -> int:
        return self.robot_xy.shape[0]

    def to(self, device: torch.device | str) -> Layout:
        """The same layouts on ``device``."""
        return Layout(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

    def index(self, idx: torch.Tensor, names: tuple[str, ...] | None = None) -> Layout:
        """Return the layouts of the worlds ``idx`` (a K' index or a K mask); with ``names``, only those
        fields are taken (the others get their defaults: ``POSE_FIELDS`` is what a backend's reset
        reads, one index op per field)."""
        names = names or tuple(f.name for f in fields(self))
        return Layout(**{name: getattr(self, name)[idx] for name in names})

    @staticmethod
    def cat(parts: list[Layout]) -> Layout:
        """The layouts of several batches, in order."""
        return Layout(**{f.name: torch.cat([getattr(p, f.name) for p in parts]) for f in fields(Layout)})

    def assign_where(self, mask: torch.Tensor, other: Layout) -> None:
        """Take row w of ``other`` (K rows too) where ``mask[w]``, in place; a fixed-shape masked write."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if mine.numel() == 0:  # no wall slots: nothing to write (and no ops on the step path)
                continue
            m = mask.view(-1, *([1] * (mine.dim() - 1)))
            mine.copy_(torch.where(m, theirs, mine))

    @staticmethod
    def empty(
        k: int,
        cylinder_slots: int,
        box_slots: int,
        device: torch.device | str,
        wall_slots: int = 0,
        field_shape: tuple[int, int] = (0, 0),
        moving_slots: tuple[int, int] = (0, 0),
    ) -> Layout:
        """K layouts with every slot inactive and robot and goal at the origin; ``field_shape`` (NY, NX)
        of the goal distance field where it is kept (inf: no path yet); ``moving_slots`` (cylinders,
        boxes) of moving obstacles, every one unused."""
        z = dict(device=device)
        m = sum(moving_slots)
        is_box = torch.arange(m, device=device) >= moving_slots[0]
        lay = Layout(
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
            wall_xy=torch.zeros(k, wall_slots, 2, **z),
            wall_half=torch.full((k, wall_slots, 2), 0.1, **z),
            wall_yaw=torch.zeros(k, wall_slots, **z),
            wall_active=torch.zeros(k, wall_slots, dtype=torch.bool, **z),
            goal_field=torch.full((k, *field_shape), float("inf"), dtype=torch.float16, **z),
            mov_mode=torch.zeros(k, m, dtype=torch.long, **z),
            mov_path=torch.zeros(k, m, MAX_WAYPOINTS, 2, **z),
            mov_npts=torch.ones(k, m, dtype=torch.long, **z),
            mov_speed=torch.zeros(k, m, **z),
            mov_delay=torch.zeros(k, m, **z),
            mov_phase=torch.zeros(k, m, **z),
            mov_vel=torch.zeros(k, m, 2, **z),
            mov_size=torch.full((k, m, 2), 0.1, **z),
            mov_is_box=is_box.expand(k, m).clone(),
            mov_start=torch.zeros(k, m, 2, **z),
        )
        lay.set_path_geometry(torch.zeros(k, m, dtype=torch.bool, device=device))
        return lay

    def set_path_geometry(self, closed: torch.Tensor) -> None:
        """Derive ``mov_seg``, ``mov_seg_end``, ``mov_length``, ``mov_period`` and ``mov_radius`` from
        the paths, sizes and kinds, in place; ``closed`` [K, M] bool: the loops (navexp.sim.motion's
        ``set_geometry`` passes them). Run it after writing any of ``mov_path``, ``mov_npts``,
        ``mov_mode``, ``mov_size`` or ``mov_is_box``."""
        geometry = path_geometry(self.mov_path, self.mov_npts, closed)
        self.mov_seg, self.mov_seg_end, self.mov_length, self.mov_period = geometry
        self.mov_radius = bounding_radii(self.mov_size, self.mov_is_box)

    @property
    def moving_slots(self) -> int:
        return self.mov_mode.shape[1]

    @property
    def wall_slots(self) -> int:
        return self.wall_xy.shape[1]

    def boxes_and_walls(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Boxes, then walls, as one set of rotated rectangles: centres [K, B+W, 2], half-extents
        [K, B+W, 2], yaws [K, B+W], active [K, B+W] (the slot order of the simulator)."""
        if self.wall_slots == 0:  # no copies on the step path of a config without walls
            return self.box_xy, self.box_half, self.box_yaw, self.box_active
        return (
            torch.cat((self.box_xy, self.wall_xy), dim=1),
            torch.cat((self.box_half, self.wall_half), dim=1),
            torch.cat((self.box_yaw, self.wall_yaw), dim=1),
            torch.cat((self.box_active, self.wall_active), dim=1),
        )


class LayoutRows:
    """K layouts as one row of bytes per world ([K, width] uint8), so that taking, indexing and
    writing layouts is one tensor op however many fields a ``Layout`` has.

    Each field's values of a world lie in a column range of the row, as raw bytes of its dtype;
    fields are ordered by element size (8-byte first) and the width is a multiple of 8, so every
    range is aligned and ``unpack`` gives each field as a view (no copy) of its dtype and shape.
    Two layouts with the same slot counts and goal-field shape have the same format."""

    def __init__(self, like: Layout) -> None:
        """The format of layouts shaped as ``like`` (its field shapes past the world axis and dtypes)."""
        specs = [(f.name, getattr(like, f.name)) for f in fields(Layout)]
        specs.sort(key=lambda nt: -nt[1].element_size())  # stable: same-size fields keep field order
        self.format: list[tuple[str, torch.dtype, tuple[int, ...], int, int]] = []
        """Per field: name, dtype, shape of one world's values, first and last byte column."""
        col = 0
        for name, x in specs:
            nbytes = x[0].numel() * x.element_size() if x.shape[0] else 0
            self.format.append((name, x.dtype, tuple(x.shape[1:]), col, col + nbytes))
            col += nbytes
        self.width = -(-col // 8) * 8
        """Bytes per world (a multiple of 8)."""

    def pack(self, layout: Layout) -> torch.Tensor:
        """[K, width] uint8 rows of ``layout`` (a copy)."""
        k = layout.num_worlds
        rows = torch.zeros(k, self.width, dtype=torch.uint8, device=layout.robot_xy.device)
        for name, dtype, shape, start, stop in self.format:
            x = getattr(layout, name)
            assert x.dtype == dtype and tuple(x.shape[1:]) == shape, f"{name}: not this format's layout"
            if stop > start:
                rows[:, start:stop] = x.reshape(k, -1).contiguous().view(torch.uint8)
        return rows

    def unpack(self, rows: torch.Tensor) -> Layout:
        """The layouts of ``rows`` [K, width], every field a view into them (writing rows in place
        changes the fields)."""
        k = rows.shape[0]
        return Layout(
            **{
                name: rows[:, start:stop].view(dtype).view(k, *shape)
                for name, dtype, shape, start, stop in self.format
            }
        )


def slot_poses(
    layout: Layout, half_height: float, park_z: float, moving_xy: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mocap positions [K, S, 3] and quaternions (w, x, y, z) [K, S, 4] of the obstacle slots
    (cylinders, then boxes, then walls, then the moving slots at ``moving_xy`` [K, M, 2], default their
    start ``mov_start``): active slots stand on the floor (centre at ``half_height``),
    inactive ones are parked at ``park_z``; boxes and walls turn by their yaw about z, moving boxes
    keep yaw 0."""
    rect_xy, _, rect_yaw, rect_active = layout.boxes_and_walls()
    active = torch.cat((layout.cyl_active, rect_active, layout.mov_mode > 0), dim=1)
    z = torch.where(active, half_height, park_z).unsqueeze(-1)
    mov_xy = layout.mov_start if moving_xy is None else moving_xy
    pos = torch.cat((torch.cat((layout.cyl_xy, rect_xy, mov_xy), dim=1), z), dim=2)
    half_yaw = (
        torch.cat((torch.zeros_like(layout.cyl_r), rect_yaw, torch.zeros_like(layout.mov_speed)), 1) / 2
    )
    zero = torch.zeros_like(half_yaw)
    return pos, torch.stack((torch.cos(half_yaw), zero, zero, torch.sin(half_yaw)), dim=-1)


def slot_sizes(layout: Layout, half_height: float) -> tuple[torch.Tensor, torch.Tensor]:
    """MuJoCo geom sizes [K, S, 3] of the obstacle slots (cylinders, boxes, walls) and their
    half-extents [K, S, 3] (the local AABB; a cylinder's is (r, r, h/2))."""
    r = layout.cyl_r
    hz = torch.full_like(r, half_height)
    cyl_size = torch.stack((r, hz, torch.zeros_like(r)), dim=-1)
    cyl_half = torch.stack((r, r, hz), dim=-1)
    bh = layout.boxes_and_walls()[1]
    box_hz = torch.full_like(bh[..., 0], half_height)
    box = torch.cat((bh, box_hz.unsqueeze(-1)), dim=-1)
    # Moving slots: a cylinder's geom size is (r, h/2, 0), a box's (hx, hy, h/2); AABBs (r|hx, r|hy, h/2).
    ms, is_box = layout.mov_size, layout.mov_is_box.unsqueeze(-1)
    mov_hz = torch.full_like(ms[..., :1], half_height)
    mov_half = torch.cat((ms, mov_hz), dim=-1)
    mov_size = torch.where(is_box, mov_half, torch.cat((ms[..., :1], mov_hz, torch.zeros_like(mov_hz)), -1))
    return torch.cat((cyl_size, box, mov_size), dim=1), torch.cat((cyl_half, box, mov_half), dim=1)


def path_geometry(
    path: torch.Tensor, npts: torch.Tensor, closed: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The geometry of polylines path [..., P, 2] with npts [...] points in use (>= 1), closed [...]
    bool (the last point joins the first): segments [..., P, SEGMENT_COLUMNS], where each ends
    [..., P] (inf past the last in use), length L [...] and period [...] (L closed, 2 L open); the
    fields ``Layout.mov_seg``, ``mov_seg_end``, ``mov_length``, ``mov_period``.

    Worked case: (0, 0), (3, 0), (3, 4), open: segments of 3 and 4 m starting at 0 and 3 m, L = 7,
    period 14; the second segment's end reads inf (the last in use), so no ``u`` searches past it."""
    p = path.shape[-2]
    j = torch.arange(p, device=path.device)
    n = npts.unsqueeze(-1)
    nxt = torch.arange(1, p + 1, device=path.device).remainder(n)  # a loop's last point joins the first
    step = path.gather(-2, nxt.unsqueeze(-1).expand(*nxt.shape, 2)) - path  # [..., P, 2] b - a
    nseg = torch.where(closed.unsqueeze(-1), n, n - 1)  # [..., 1] segments in use
    seg = torch.where(j < nseg, step.norm(dim=-1), 0.0)  # [..., P]
    total = seg.sum(-1).clamp_min(1e-9)
    cum_end = seg.cumsum(-1)
    ends = torch.where(j < nseg - 1, cum_end, float("inf"))
    table = torch.cat((path, step, (cum_end - seg).unsqueeze(-1), seg.clamp_min(1e-9).unsqueeze(-1)), -1)
    return table, ends, total, torch.where(closed, total, 2 * total)


def bounding_radii(size: torch.Tensor, is_box: torch.Tensor) -> torch.Tensor:
    """[...] radius of the bounding circle of moving obstacles of size [..., 2] (a cylinder's (r, r),
    a box's half-extents) and kind is_box [...]: r (|(r, r)| / sqrt 2) or the half-diagonal."""
    return size.norm(dim=-1) * torch.where(is_box, 1.0, 2**-0.5)


def rotation_matrices(yaw: torch.Tensor) -> torch.Tensor:
    """[..., 2, 2] rotation matrices R(yaw) = [[cos, -sin], [sin, cos]] for yaw [...] (rad): a column
    vector turns counter-clockwise as ``R @ v``, a row vector clockwise as ``v @ R`` (into a frame
    turned by yaw)."""
    c, s = torch.cos(yaw), torch.sin(yaw)
    return torch.stack((c, -s, s, c), dim=-1).unflatten(-1, (2, 2))


def rotate_xy(v: torch.Tensor, yaw: torch.Tensor) -> torch.Tensor:
    """Rotate 2D vectors v [..., 2] by yaw [...] (counter-clockwise)."""
    c, s = torch.cos(yaw), torch.sin(yaw)
    return torch.stack((c * v[..., 0] - s * v[..., 1], s * v[..., 0] + c * v[..., 1]), dim=-1)


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


def obstacle_distance(points: torch.Tensor, layout: Layout, half_x: float, half_y: float) -> torch.Tensor:
    """Signed distance [K, P] from points [K, P, 2] to the nearest obstacle or wall surface (negative
    inside); the distance part of ``nearest_obstacle`` alone (layout sampling needs no more)."""
    p = points.unsqueeze(2)
    d_cyl, _, _ = _cylinder_parts(p, layout)
    d_box, _, _ = _box_parts(p, layout)
    return torch.cat((d_cyl, d_box, _wall_distances(points, half_x, half_y)), dim=-1).min(dim=-1).values


def _room_walls(half_x: float, half_y: float, device) -> tuple[torch.Tensor, ...]:
    """Constants of the room's four inner faces (+x, -x, +y, -y): the coordinate each one measures
    (index [4]), its sign [4] and offset [4] (distance = offset + sign * coordinate), and which
    coordinate its closest point fixes (mask [4, 2]) to what (value [4, 2]); then the signs [2] that
    turn a swapped (y, x) into (y, -x) and (-y, x) (a rotation as cos v + sin swap(v) sign), and a 0-d
    inf (the distance of an inactive slot)."""
    key = (half_x, half_y, str(device))
    if key not in _WALL_CONSTANTS:  # made by kernels on the device (no host copy), once
        face = torch.arange(4, device=device)
        axis = face // 2
        sign = (face % 2) * 2.0 - 1.0  # -1, 1, -1, 1
        offset = torch.where(axis == 0, half_x, half_y).float()
        mask = torch.stack((axis == 0, axis == 1), dim=-1)
        value = torch.where(mask, (-sign * offset).unsqueeze(-1), 0.0)
        inf = torch.full((), float("inf"), device=device)
        _WALL_CONSTANTS[key] = (axis, sign, offset, mask, value, -sign[:2], sign[:2], inf)
    return _WALL_CONSTANTS[key]


_WALL_CONSTANTS: dict[tuple, tuple[torch.Tensor, ...]] = {}
"""``_room_walls`` per room size and device, made once (no host-to-device copy on a step)."""


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

    The same arithmetic as ``_cylinder_parts``, ``_box_parts`` and ``_wall_distances`` (equal results),
    in fewer ops: each box's yaw turned into cos and sin once, the room's faces from constants.
    """
    p = points.unsqueeze(2)  # [K, P, 1, 2]
    # Cylinders: the closest point lies along the ray from the centre through p.
    cxy, r = layout.cyl_xy.unsqueeze(1), layout.cyl_r.unsqueeze(1)
    rel = p - cxy
    norm = rel.norm(dim=-1).clamp_min(1e-9)
    axis, sign, offset, mask, value, to_box, to_world, inf = _room_walls(half_x, half_y, points.device)
    d_cyl = torch.where(layout.cyl_active.unsqueeze(1), norm - r, inf)
    c_cyl = cxy + rel / norm.unsqueeze(-1) * r.unsqueeze(-1)
    # Boxes (and walls): the distance in the box frame q = R(-yaw)(p - c) (R(-yaw): cos, -sin).
    xy, half, yaw, active = layout.boxes_and_walls()
    xy, half, yaw = xy.unsqueeze(1), half.unsqueeze(1), yaw.view(yaw.shape[0], 1, -1, 1)  # one view op
    cos, sin = torch.cos(yaw), torch.sin(yaw)  # [K, 1, B+W, 1]
    v = p - xy
    q = cos * v + sin * (v.flip(-1) * to_box)  # (cos vx + sin vy, cos vy - sin vx) [K, P, B+W, 2]
    excess = q.abs() - half
    deepest = excess.max(dim=-1).values
    d_box = torch.where(active.unsqueeze(1), excess.clamp_min(0).norm(dim=-1) + deepest.clamp_max(0), inf)
    # The closest point is q clamped to the box, except inside one, where the clamp is the point itself:
    # there the axis closest to a face (x where its excess is the larger, else y) goes to that face.
    x_face = excess[..., :1] > excess[..., 1:]
    to_face = torch.cat((x_face, ~x_face), dim=-1) & (deepest < 0).unsqueeze(-1)
    q_near = torch.where(to_face, torch.sign(q) * half, torch.clamp(q, -half, half))
    c_box = xy + (cos * q_near + sin * (q_near.flip(-1) * to_world))  # R(yaw) q_near
    # The room's four inner faces.
    d_wall = offset + sign * points.index_select(-1, axis)  # [K, P, 4]
    c_wall = torch.where(mask, value, p)  # [K, P, 4, 2]
    dist, arg = torch.cat((d_cyl, d_box, d_wall), dim=-1).min(dim=-1)
    c_all = torch.cat((c_cyl, c_box, c_wall), dim=2)
    closest = c_all.gather(2, arg.view(*arg.shape, 1, 1).expand(-1, -1, 1, 2)).squeeze(2)
    return dist, closest
