"""Route guidance: the next subgoal along the shortest path to the goal, from a goal distance field
on an occupancy grid. Torch-free: one code path for training (torch tensors on the env's device) and
the robot (numpy, ``RoutePlanner`` on a ROS ``map_server`` map).

The route is the steepest descent of the field from the robot's cell (cell to cell among the 8
neighbours, ``ceil(lookahead_m / cell)`` steps: at least ``lookahead_m`` of it). The subgoal is the
last cell centre of the route's first stretch that the robot sees (a straight line over free cells)
within ``lookahead_m``: on a straight way a point about ``lookahead_m`` ahead, before a corner the
corner, until the robot has passed it; the goal itself once it is in sight within ``lookahead_m``. A
cell is free where the field is finite: its centre keeps the robot's radius from every obstacle
(``navexp.task.maps.grid_path``).

``route_subgoal`` is written against the array namespace it is given (``numpy`` or ``torch``), so
both run the same operations in the same order (float32; the field as float16 values; ties broken by
the first neighbour).
"""

from __future__ import annotations

import heapq
import math
from typing import Any, NamedTuple

import numpy as np

SKIP_CELLS = 1.5
"""Line samples within this many cells of the robot never block its sight: the robot's centre may lie
in a cell whose centre is closer than its radius to an obstacle."""


class RouteConsts(NamedTuple):
    """Constant arrays of ``route_subgoal`` (numpy here; the env keeps torch copies on its device)."""

    neighbours: np.ndarray
    """[9, 2] long (dy, dx) of the 3 x 3 window, the centre included (the goal's cell keeps itself)."""
    fracs: np.ndarray
    """[M] float32 fractions (1/M .. 1) of a sight line sampled every half cell over ``lookahead_m``."""
    steps: int
    """Descent steps: ``ceil(lookahead_m / cell)``."""
    lookahead_m: float


def route_consts(lookahead_m: float, cell_m: float) -> RouteConsts:
    """The constants of a lookahead on a grid of ``cell_m`` cells."""
    neighbours = np.array([(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)], dtype=np.int64)
    m = max(1, math.ceil(lookahead_m / (cell_m / 2)))
    fracs = (np.arange(1, m + 1) / m).astype(np.float32)
    return RouteConsts(neighbours, fracs, max(1, math.ceil(lookahead_m / cell_m)), float(lookahead_m))


class _Ops:
    """What numpy and torch spell differently, for ``route_subgoal``'s shared code."""

    def __init__(self, xp: Any) -> None:
        self.xp, self.torch = xp, getattr(xp, "__name__", "") == "torch"

    def gather(self, a, index, axis: int):
        """``take_along_axis`` (numpy) / ``take_along_dim`` (torch); both broadcast."""
        return self.xp.take_along_dim(a, index, axis) if self.torch else np.take_along_axis(a, index, axis)

    def long(self, a):
        return a.long() if self.torch else a.astype(np.int64)

    def f32(self, a):
        return a.float() if self.torch else a.astype(np.float32)


class _Grid(NamedTuple):
    flat: Any
    """[N, NY * NX] the fields."""
    ny: int
    nx: int
    half_x: float
    half_y: float

    @property
    def cell(self) -> tuple[float, float]:
        """Cell size (y, x) in metres."""
        return 2 * self.half_y / self.ny, 2 * self.half_x / self.nx


def _at(ops: _Ops, g: _Grid, row, col):
    """Field values (float32; inf outside the grid) of cells (row, col) [N, P] long."""
    xp = ops.xp
    inside = (row >= 0) & (row < g.ny) & (col >= 0) & (col < g.nx)
    flat = xp.clip(row, 0, g.ny - 1) * g.nx + xp.clip(col, 0, g.nx - 1)
    return xp.where(inside, ops.f32(ops.gather(g.flat, flat, 1)), math.inf)


def _read(ops: _Ops, g: _Grid, points):
    """Field values [N, P] of the cells of points [N, P, 2] (m)."""
    cy, cx = g.cell
    col = ops.long(ops.xp.floor((points[..., 0] + g.half_x) / cx))
    row = ops.long(ops.xp.floor((points[..., 1] + g.half_y) / cy))
    return _at(ops, g, row, col)


def _centres(ops: _Ops, g: _Grid, row, col):
    """Cell centres x, y [...] (m, float32) of cells (row, col)."""
    cy, cx = g.cell
    return (ops.f32(col) + 0.5) * cx - g.half_x, (ops.f32(row) + 0.5) * cy - g.half_y


def _descend(ops: _Ops, g: _Grid, pos_xy, c: RouteConsts, nb):
    """The route's cells (rows, cols [N, steps + 1]): the best cell of the robot's 3 x 3 window (value +
    distance to its centre), then steepest descent among the 8 neighbours."""
    xp = ops.xp
    cy, cx = g.cell
    row0 = ops.long(xp.floor((pos_xy[:, 1] + g.half_y) / cy))[:, None] + nb[None, :, 0]
    col0 = ops.long(xp.floor((pos_xy[:, 0] + g.half_x) / cx))[:, None] + nb[None, :, 1]
    x, y = _centres(ops, g, row0, col0)
    near = _at(ops, g, row0, col0) + ((x - pos_xy[:, :1]) ** 2 + (y - pos_xy[:, 1:]) ** 2) ** 0.5
    k = xp.argmin(near, 1)[:, None]
    rows, cols = [ops.gather(row0, k, 1)[:, 0]], [ops.gather(col0, k, 1)[:, 0]]
    for _ in range(c.steps):
        r, cc = rows[-1][:, None] + nb[None, :, 0], cols[-1][:, None] + nb[None, :, 1]
        k = xp.argmin(_at(ops, g, r, cc), 1)[:, None]
        rows.append(ops.gather(r, k, 1)[:, 0])
        cols.append(ops.gather(cc, k, 1)[:, 0])
    return xp.stack(rows, 1), xp.stack(cols, 1)


def _in_sight(ops: _Ops, g: _Grid, pos_xy, targets, fracs, skip: float):
    """[N, P] the straight lines from ``pos_xy`` [N, 2] to ``targets`` [N, P, 2] cross free cells only
    (samples within ``skip`` metres of the robot excepted)."""
    xp = ops.xp
    d = targets - pos_xy[:, None, :]  # [N, P, 2]
    pts = pos_xy[:, None, None, :] + fracs[None, None, :, None] * d[:, :, None, :]  # [N, P, M, 2]
    n, p, m = pts.shape[:3]
    free = xp.isfinite(_read(ops, g, pts.reshape(n, p * m, 2))).reshape(n, p, m)
    length = (d[..., 0] ** 2 + d[..., 1] ** 2) ** 0.5
    return (free | (fracs[None, None, :] * length[:, :, None] <= skip)).all(2), length


def route_subgoal(xp: Any, field, pos_xy, goal_xy, half_x: float, half_y: float, consts: RouteConsts):
    """Subgoals [N, 2] (m, world frame) of robots at ``pos_xy`` [N, 2] heading for ``goal_xy`` [N, 2]
    on goal distance fields ``field`` [N, NY, NX] (float16 metres, inf where blocked) over
    [-half_x, half_x] x [-half_y, half_y]; ``consts`` from ``route_consts`` as arrays of ``xp``. The
    goal where it is in sight within the lookahead or where the field is empty. ``xp``: the ``numpy``
    or ``torch`` module (float32 inputs)."""
    n, ny, nx = field.shape
    if ny * nx == 0:
        return goal_xy
    ops, g = _Ops(xp), _Grid(field.reshape(n, ny * nx), ny, nx, half_x, half_y)
    skip = SKIP_CELLS * max(g.cell)
    rows, cols = _descend(ops, g, pos_xy, consts, consts.neighbours)
    x, y = _centres(ops, g, rows, cols)
    route = xp.stack((x, y), -1)  # [N, steps + 1, 2]
    seen, length = _in_sight(ops, g, pos_xy, route, consts.fracs, skip)
    ok = ops.long(seen & (length <= consts.lookahead_m))
    last = xp.clip(xp.cumprod(ok, 1).sum(1) - 1, 0, None)  # the end of the route's first stretch in sight
    point = ops.gather(route, last[:, None, None], 1)[:, 0]
    goal_seen, goal_dist = _in_sight(ops, g, pos_xy, goal_xy[:, None, :], consts.fracs, skip)
    use_goal = goal_seen[:, 0] & (goal_dist[:, 0] <= consts.lookahead_m)
    return xp.where(use_goal[:, None], goal_xy, point)


MOVES: tuple[tuple[int, int, tuple[tuple[int, int], ...]], ...] = (
    (0, 1, ()),
    (1, 0, ()),
    (1, 1, ((1, 0), (0, 1))),
    (1, 2, ((0, 1), (1, 1))),
    (2, 1, ((1, 0), (1, 1))),
)
"""The moves (dy, dx) of training's goal distance field and the cells each passes, mirrored into every
direction (``navexp.task.maps.grid_path._MOVES``; ``tests/test_route.py`` checks they are the same)."""


def free_cells(blocked: np.ndarray, resolution_m: float, radius_m: float) -> np.ndarray:
    """[H, W] bool: the cell's centre keeps ``radius_m`` from every blocked cell (a square of the
    resolution's side) and from the grid's border, as training's occupancy grid does for its
    rectangles and the room's walls (outside the grid counts as blocked)."""
    h, w = blocked.shape
    reach = int(math.ceil(radius_m / resolution_m)) + 1
    padded = np.pad(blocked, reach, constant_values=True)
    free = np.ones((h, w), dtype=bool)
    for dy in range(-reach, reach + 1):
        for dx in range(-reach, reach + 1):
            gap = math.hypot(max(abs(dx) - 0.5, 0.0), max(abs(dy) - 0.5, 0.0)) * resolution_m
            if gap < radius_m:  # a blocked cell at this offset is nearer than the radius
                free &= ~padded[reach + dy : reach + dy + h, reach + dx : reach + dx + w]
    return free


def grid_field(free: np.ndarray, goal_rc: tuple[int, int], cell_yx: tuple[float, float]) -> np.ndarray:
    """Shortest-path distance [H, W] float32 (inf where unreachable) from the goal cell over the free
    cells, with ``MOVES`` (Dijkstra; training's fast sweeping converges to the same distances). The goal's
    cell counts as free."""
    h, w = free.shape
    free = free.copy()
    free[goal_rc] = True
    steps = []
    for dy, dx, passes in MOVES:
        for sy, sx in ((1, 1), (-1, 1), (1, -1), (-1, -1)):
            cells = tuple((sy * py, sx * px) for py, px in passes)
            steps.append((sy * dy, sx * dx, cells, math.hypot(dy * cell_yx[0], dx * cell_yx[1])))
    dist = np.full((h, w), np.inf)
    dist[goal_rc] = 0.0
    heap = [(0.0, goal_rc)]
    while heap:
        d, (r, c) = heapq.heappop(heap)
        if d > dist[r, c]:
            continue
        for dy, dx, cells, cost in steps:
            y, x = r + dy, c + dx
            if not (0 <= y < h and 0 <= x < w and free[y, x] and d + cost < dist[y, x]):
                continue
            if all(0 <= r + py < h and 0 <= c + px < w and free[r + py, c + px] for py, px in cells):
                dist[y, x] = d + cost
                heapq.heappush(heap, (d + cost, (y, x)))
    return dist.astype(np.float32)


class RoutePlanner:
    """The robot's global planner for ``route_subgoal``: an occupancy grid (a ROS ``map_server`` map),
    the goal's distance field on it, and the subgoal of a pose. Map frame, metres; numpy only.

        planner = RoutePlanner.from_occupancy_grid(msg.data, msg.info.width, msg.info.height,
                                                   msg.info.resolution, (ox, oy), robot_radius_m=0.2)
        planner.set_goal((gx, gy))
        policy.command(scan, goal_body_xy, vel_body, omega, route=planner, pose_map=(x, y, yaw))
    """

    def __init__(self, blocked: np.ndarray, resolution_m: float, origin_xy, robot_radius_m: float) -> None:
        """``blocked`` [H, W] bool, row 0 at the lowest y (occupied and unknown cells); ``origin_xy`` the
        map-frame position of the lower-left cell's corner."""
        self.free = free_cells(np.asarray(blocked, dtype=bool), resolution_m, robot_radius_m)
        self.resolution_m = float(resolution_m)
        h, w = self.free.shape
        self.half = (w * self.resolution_m / 2, h * self.resolution_m / 2)
        self.centre = np.array([origin_xy[0] + self.half[0], origin_xy[1] + self.half[1]])
        self.field: np.ndarray | None = None
        self.goal_xy: np.ndarray | None = None

    @classmethod
    def from_occupancy_grid(
        cls, data, width: int, height: int, resolution_m: float, origin_xy, robot_radius_m
    ):
        """From a ROS ``nav_msgs/OccupancyGrid`` (``data`` row-major from the origin, 0 free, 100
        occupied, -1 unknown, as ``map_server`` publishes): every cell but the free ones is blocked."""
        grid = np.asarray(data).reshape(int(height), int(width))
        return cls(grid != 0, resolution_m, origin_xy, robot_radius_m)

    def set_goal(self, goal_xy) -> None:
        """The goal (map frame, m): its distance field, float16 metres as training keeps it (the
        distance from the goal's cell plus the goal's offset from that cell's centre)."""
        goal = np.asarray(goal_xy, dtype=np.float32) - self.centre.astype(np.float32)
        h, w = self.free.shape
        col = int(np.clip(np.floor((goal[0] + self.half[0]) / self.resolution_m), 0, w - 1))
        row = int(np.clip(np.floor((goal[1] + self.half[1]) / self.resolution_m), 0, h - 1))
        dist = grid_field(self.free, (row, col), (self.resolution_m, self.resolution_m))
        cell_centre = np.array(
            [-self.half[0] + (col + 0.5) * self.resolution_m, -self.half[1] + (row + 0.5) * self.resolution_m]
        )
        offset = np.float32(np.linalg.norm(goal - cell_centre.astype(np.float32)))
        self.field = (dist + offset).astype(np.float16)[None]
        self.goal_xy = np.asarray(goal_xy, dtype=np.float64)

    def subgoal(self, pos_xy, lookahead_m: float) -> np.ndarray:
        """The subgoal [2] (map frame, m) of a robot at ``pos_xy`` (``route_subgoal``)."""
        if self.field is None:
            raise ValueError("RoutePlanner has no goal: call set_goal((x, y)) first (map frame, metres)")
        shift = self.centre.astype(np.float32)
        pos = (np.asarray(pos_xy, dtype=np.float32)[:2] - shift)[None]
        goal = (self.goal_xy.astype(np.float32) - shift)[None]
        consts = route_consts(lookahead_m, self.resolution_m)
        sub = route_subgoal(np, self.field, pos, goal, self.half[0], self.half[1], consts)
        return sub[0].astype(np.float64) + self.centre
