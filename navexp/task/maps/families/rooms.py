"""``rooms``: floor plans. Rectangular rooms tiling the room (a grid of rows x columns of random
widths), a door in some shared walls, optional furniture; start and goal in different rooms with a
shortest path at least ``min_detour`` times the straight line.

The doors always connect every room: the shared walls of a random spanning tree of the room grid get
one (a chain, one route between two rooms), and every other shared wall one with ``loop_prob``
(a ring: two routes). A shared wall without a door is closed. Each shared wall fills 2 wall slots,
the pieces beside its door (a closed wall: two touching pieces).

The start is picked with the goal's distance field (``grid_path.paths_and_fields`` from the goal):
of the start candidates in other rooms, the first with a finite shortest path of at least
``min_detour`` x the straight line. The field waits for the device: the family is drawn where the
pool refills anyway.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from navexp.sim.layout import Layout, obstacle_distance
from navexp.task.checks import check, check_range
from navexp.task.maps.families.base import MapSpec, register_family
from navexp.task.maps.families.geometry import clearance, half_thickness, rect, set_walls, thickest_half
from navexp.task.maps.grid_path import path_distance, paths_and_fields
from navexp.task.maps.random_family import LayoutSpec

MAX_SIDE = 3
"""Most rows (and columns) of the room grid: 3 x 3 rooms."""
DOOR_MARGIN_M = 0.15
"""Least distance from a door to the wall crossing the end of its wall (beyond that wall's half
thickness), so a robot passing the door does not scrape the corner."""
FURNITURE_GAP_M = 0.6
"""Least free gap between furniture and a room's walls: a robot (0.4 m) passes on every side."""


@dataclass
class RoomsCfg:
    rooms: list[int] = field(default_factory=lambda: [2, 6])
    """[min, max] rooms: a grid of rows x columns (each 1-3, every side at least ``min_room_m``) with
    a product in the range, each allowed grid equally likely. In the 8 m room: 1 x 2, 2 x 1, 1 x 3,
    3 x 1, 2 x 2, 2 x 3, 3 x 2 (and 3 x 3 for max 9)."""
    min_room_m: float = 2.5
    """Least side of a room (m): a small office or bedroom."""
    door_m: list[float] = field(default_factory=lambda: [0.8, 1.2])
    """[min, max] width of a door (m): interior doors of 0.8-0.9 m to a wide 1.2 m opening."""
    loop_prob: float = 0.5
    """Chance that a shared wall off the spanning tree gets a door too (0: chains only, 1: every shared
    wall has a door)."""
    min_detour: float = 1.5
    """Least ratio of the shortest path to the straight line from start to goal."""
    furniture_boxes: list[int] = field(default_factory=lambda: [0, 2])
    """[min, max] boxes (tables, shelves; box slots) placed in random rooms."""
    furniture_half_m: list[float] = field(default_factory=lambda: [0.2, 0.45])
    """[min, max] half side of a furniture box (m), drawn per axis."""
    furniture_cylinders: list[int] = field(default_factory=lambda: [0, 2])
    """[min, max] cylinders (bins, plants, columns; cylinder slots) placed in random rooms."""
    furniture_radius_m: list[float] = field(default_factory=lambda: [0.15, 0.35])
    """[min, max] cylinder radius (m)."""


def room_grids(cfg: RoomsCfg, size_x_m: float, size_y_m: float) -> list[tuple[int, int]]:
    """The (rows, columns) grids a layout may draw: each side 1-3 rooms of at least ``min_room_m``,
    rows x columns in ``rooms``."""
    sides = range(1, MAX_SIDE + 1)
    return [
        (r, c)
        for r in sides
        for c in sides
        if cfg.rooms[0] <= r * c <= cfg.rooms[1]
        and r * cfg.min_room_m <= size_y_m + 1e-9
        and c * cfg.min_room_m <= size_x_m + 1e-9
    ]


def _edges() -> tuple[list[tuple[int, int, int]], torch.Tensor, torch.Tensor]:
    """The 12 shared walls of the 3 x 3 grid as (vertical, row, column): a vertical wall between
    rooms (r, c) and (r, c + 1), a horizontal one between (r, c) and (r + 1, c); and the two rooms of
    each (cell ids r * 3 + c) [12]."""
    edges = [(1, r, c) for r in range(MAX_SIDE) for c in range(MAX_SIDE - 1)]
    edges += [(0, r, c) for r in range(MAX_SIDE - 1) for c in range(MAX_SIDE)]
    u = [r * MAX_SIDE + c for _, r, c in edges]
    v = [r * MAX_SIDE + c + 1 if vert else (r + 1) * MAX_SIDE + c for vert, r, c in edges]
    return edges, torch.tensor(u), torch.tensor(v)


EDGES, EDGE_U, EDGE_V = _edges()


def _wall_slots(maps: Any) -> int:
    """2 slots per shared wall of the largest grid (the room's size is not known here: every grid of
    at most ``rooms`` max rooms counts)."""
    cfg = maps.rooms
    grids = [(r, c) for r in range(1, 4) for c in range(1, 4) if cfg.rooms[0] <= r * c <= cfg.rooms[1]]
    return max((2 * (r * (c - 1) + c * (r - 1)) for r, c in grids), default=0)


def _check(cfg: RoomsCfg, env_cfg: Any) -> None:
    room, r = env_cfg.room, env_cfg.robot.radius_m
    check_range("maps.rooms.rooms", cfg.rooms, 2)
    check(cfg.rooms[1] <= MAX_SIDE**2, "maps.rooms.rooms", list(cfg.rooms), f"max <= {MAX_SIDE**2} (3 x 3)")
    check(cfg.min_room_m > 0, "maps.rooms.min_room_m", cfg.min_room_m, "> 0")
    grids = room_grids(cfg, room.size_x_m, room.size_y_m)
    check(
        bool(grids),
        "maps.rooms.rooms",
        list(cfg.rooms),
        f"a count of rows x columns (1-3 each) whose rooms keep maps.rooms.min_room_m ({cfg.min_room_m} m) "
        f"in the {room.size_x_m} x {room.size_y_m} m room",
    )
    check_range("maps.rooms.door_m", cfg.door_m, 2 * r + 1e-3)
    # A door with its margins to the crossing walls fits the shortest wall, a room's least side.
    most = cfg.min_room_m - 2 * (thickest_half(env_cfg) + DOOR_MARGIN_M)
    check(
        cfg.door_m[1] <= most + 1e-9,
        "maps.rooms.door_m",
        list(cfg.door_m),
        f"max <= {most:.3g}: min_room_m less the crossing walls and {DOOR_MARGIN_M} m beside the door",
    )
    check(0 <= cfg.loop_prob <= 1, "maps.rooms.loop_prob", cfg.loop_prob, "a probability in [0, 1]")
    check(cfg.min_detour >= 1, "maps.rooms.min_detour", cfg.min_detour, ">= 1 (1: no detour asked)")
    check_range("maps.rooms.furniture_half_m", cfg.furniture_half_m, 1e-3)
    check_range("maps.rooms.furniture_radius_m", cfg.furniture_radius_m, 1e-3)
    obst = env_cfg.obstacles
    for key, counts, slots, name in (
        ("furniture_boxes", cfg.furniture_boxes, obst.box_slots, "box_slots"),
        ("furniture_cylinders", cfg.furniture_cylinders, obst.cylinder_slots, "cylinder_slots"),
    ):
        check_range(f"maps.rooms.{key}", counts, 0)
        check(counts[1] <= slots, f"maps.rooms.{key}", list(counts), f"max <= obstacles.{name} ({slots})")


def _hint(maps: Any, spec: LayoutSpec) -> str:
    c = maps.rooms
    return (
        f"a lower maps.rooms.min_detour ({c.min_detour}), wider doors maps.rooms.door_m ({list(c.door_m)}) "
        f"or fewer furniture (maps.rooms.furniture_boxes {list(c.furniture_boxes)}, furniture_cylinders "
        f"{list(c.furniture_cylinders)})"
    )


def _splits(src, k: int, n: torch.Tensor, half: float, least: float) -> torch.Tensor:
    """Borders [K, 4] of ``n`` [K] parts of [-half, half], each at least ``least`` long (the slack
    shared in random proportions); borders past the n-th sit at ``half``."""
    i = torch.arange(MAX_SIDE, device=src.device).view(1, -1)
    w = src.uniform((k, MAX_SIDE), 0.05, 1.0) * (i < n.view(-1, 1))
    slack = 2 * half - n.view(-1, 1) * least
    parts = (least + slack * w / w.sum(1, keepdim=True)) * (i < n.view(-1, 1))
    return torch.cat((torch.full((k, 1), -half, device=src.device), -half + parts.cumsum(1)), 1)


def _doors(src, k: int, exists: torch.Tensor, loop_prob: float) -> torch.Tensor:
    """[K, 12] bool: the shared walls with a door. Kruskal's algorithm on random weights picks a
    spanning tree of the existing rooms (labels merged per edge, batched); every other existing wall
    gets a door with ``loop_prob``."""
    dev = src.device
    order = torch.where(exists, src.uniform((k, len(EDGES)), 0.0, 1.0), 2.0).argsort(1)
    labels = torch.arange(MAX_SIDE**2, device=dev).repeat(k, 1)
    eu, ev = EDGE_U.to(dev), EDGE_V.to(dev)
    door = torch.zeros_like(exists)
    for j in range(len(EDGES)):
        e = order[:, j : j + 1]
        lu, lv = labels.gather(1, eu[e]), labels.gather(1, ev[e])
        join = exists.gather(1, e) & (lu != lv)
        door.scatter_(1, e, door.gather(1, e) | join)
        labels = torch.where(join & (labels == lv), lu, labels)
    return door | (exists & (src.uniform((k, len(EDGES)), 0.0, 1.0) < loop_prob))


def _walls(maps: MapSpec, src, k: int, xb, yb, rows, cols, t) -> list[tuple]:
    """Per shared wall of the 3 x 3 grid, its two pieces beside the door (centre, half, active)."""
    cfg = maps.cfg.rooms
    exists = torch.stack(
        [(c + vert < cols) & (r + 1 - vert < rows) for vert, r, c in EDGES], 1
    )  # vertical (r, c)-(r, c+1): c + 1 < cols, r < rows; horizontal: r + 1 < rows, c < cols
    door = _doors(src, k, exists, cfg.loop_prob)
    width = src.uniform((k, len(EDGES)), *cfg.door_m) * door
    u = src.uniform((k, len(EDGES)), 0.0, 1.0)
    pieces = []
    for j, (vert, r, c) in enumerate(EDGES):
        at, lo, hi = (
            (xb[:, c + 1], yb[:, r], yb[:, r + 1]) if vert else (yb[:, r + 1], xb[:, c], xb[:, c + 1])
        )
        free = (hi - lo) - 2 * (t + DOOR_MARGIN_M) - width[:, j]
        d_lo = lo + t + DOOR_MARGIN_M + u[:, j] * free.clamp_min(0.0)
        for a, b in ((lo - t, d_lo), (d_lo + width[:, j], hi + t)):
            ctr, half, act = rect(at - t, at + t, a, b) if vert else rect(a, b, at - t, at + t)
            pieces.append((ctr, half, act & exists[:, j]))
    return pieces


def _compact(lay: Layout, pieces: list[tuple]) -> torch.Tensor:
    """Write the active pieces into the first wall slots; [K] bool: all of them fit."""
    ctr, half, act = (torch.stack(p, 1) for p in zip(*pieces, strict=True))
    order = torch.sort((~act).int(), dim=1, stable=True).indices[:, : lay.wall_slots]
    take = order.unsqueeze(-1).expand(-1, -1, 2)
    set_walls(lay, list(ctr.gather(1, take).unbind(1)), list(half.gather(1, take).unbind(1)),
              list(act.gather(1, order).unbind(1)))  # fmt: skip
    return act.sum(1) <= lay.wall_slots


def _room_boxes(xb, yb, margin) -> tuple[torch.Tensor, ...]:
    """x_lo, x_hi, y_lo, y_hi [K, 9] of every cell of the 3 x 3 grid shrunk by ``margin`` [K, 1]."""
    r = torch.arange(MAX_SIDE**2, device=xb.device) // MAX_SIDE
    c = torch.arange(MAX_SIDE**2, device=xb.device) % MAX_SIDE
    return xb[:, c] + margin, xb[:, c + 1] - margin, yb[:, r] + margin, yb[:, r + 1] - margin


def _in_rooms(src, boxes, cell: torch.Tensor) -> torch.Tensor:
    """Points [K, P, 2] uniform in the boxes of rooms ``cell`` [K, P]."""
    x0, x1, y0, y1 = (b.gather(1, cell) for b in boxes)
    ux, uy = src.uniform(tuple(cell.shape), 0.0, 1.0), src.uniform(tuple(cell.shape), 0.0, 1.0)
    return torch.stack((x0 + ux * (x1 - x0), y0 + uy * (y1 - y0)), -1)


def _cell_of(index: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """Cell id (r * 3 + c) of the ``index``-th room in row-major order of a grid of ``cols`` columns."""
    return (index // cols) * MAX_SIDE + index % cols


def _furniture(maps: MapSpec, spec: LayoutSpec, lay: Layout, src, xb, yb, n_rooms, cols, t) -> None:
    """Boxes and cylinders in random rooms, ``FURNITURE_GAP_M`` clear of the rooms' walls (a room too
    small for that gets its piece in its middle)."""
    cfg, k = maps.cfg.rooms, lay.num_worlds
    for kind, slots, counts in (
        ("box", spec.box_slots, cfg.furniture_boxes),
        ("cyl", spec.cylinder_slots, cfg.furniture_cylinders),
    ):
        if slots == 0:
            continue
        n = src.integers(counts[0], counts[1], (k, 1))
        room = _cell_of((src.uniform((k, slots), 0.0, 1.0) * n_rooms).long(), cols)
        if kind == "box":
            lay.box_half = src.uniform((k, slots, 2), *cfg.furniture_half_m)
            lay.box_yaw = src.uniform((k, slots), 0.0, math.pi)
            reach = math.sqrt(2) * cfg.furniture_half_m[1]  # the largest box's half diagonal
        else:
            lay.cyl_r = src.uniform((k, slots), *cfg.furniture_radius_m)
            reach = cfg.furniture_radius_m[1]
        x0, x1, y0, y1 = _room_boxes(xb, yb, t + FURNITURE_GAP_M + reach)
        mx, my = (x0 + x1) / 2, (y0 + y1) / 2
        xy = _in_rooms(src, (x0.minimum(mx), x1.maximum(mx), y0.minimum(my), y1.maximum(my)), room)
        active = torch.arange(slots, device=src.device) < n
        if kind == "box":
            lay.box_xy, lay.box_active = xy, active
        else:
            lay.cyl_xy, lay.cyl_active = xy, active


def _first(valid: torch.Tensor, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(any valid [K], the first valid of ``points`` [K, P, 2], else the first) per layout."""
    idx = valid.float().argmax(1).view(-1, 1, 1).expand(-1, 1, 2)
    return valid.any(1), points.gather(1, idx).squeeze(1)


def _start_goal(maps: MapSpec, spec: LayoutSpec, lay: Layout, src, boxes, n_rooms, cols) -> torch.Tensor:
    """Goal in a random room, start in another with a detour of at least ``min_detour``; [K] found."""
    k, p, need = lay.num_worlds, spec.candidates, clearance(spec)
    hx, hy = spec.half_x, spec.half_y
    goal_room = (src.uniform((k, 1), 0.0, 1.0) * n_rooms).long().clamp_max(n_rooms - 1)
    goals = _in_rooms(src, boxes, _cell_of(goal_room.expand(-1, p), cols))
    ok_goal, goal = _first(obstacle_distance(goals, lay, hx, hy) >= need, goals)
    # Start rooms: one of the n - 1 others per candidate (skip the goal's index).
    other = (src.uniform((k, p), 0.0, 1.0) * (n_rooms - 1)).long().clamp_max(n_rooms - 2)
    starts = _in_rooms(src, boxes, _cell_of(other + (other >= goal_room).long(), cols))
    lay.goal_xy, lay.robot_xy = goal, goal  # the field below runs from the goal
    chunk = 8192 if goal.device.type == "cuda" else 256
    field = paths_and_fields(lay, hx, hy, spec.robot_radius_m, maps.cfg.path_cell_m, chunk, True)[1]
    path = torch.stack([path_distance(field, starts[:, i], hx, hy) for i in range(p)], 1)
    straight = (starts - goal.unsqueeze(1)).norm(dim=-1)
    ok = (obstacle_distance(starts, lay, hx, hy) >= need) & (straight >= spec.min_start_goal_dist_m)
    ok &= torch.isfinite(path) & (path >= maps.cfg.rooms.min_detour * straight)
    ok_start, lay.robot_xy = _first(ok, starts)
    lay.robot_yaw = src.uniform((k,), -math.pi, math.pi)
    return ok_goal & ok_start


@register_family("rooms", RoomsCfg, wall_slots=_wall_slots, check=_check, hint=_hint)
def rooms(maps: MapSpec, spec: LayoutSpec, k: int, src) -> tuple[Layout, torch.Tensor]:
    """Floor plans: a grid of ``rooms`` rectangular rooms (random widths, sides >= ``min_room_m``)
    filling the room, doors of ``door_m`` in the shared walls of a random spanning tree (and in each
    other shared wall with ``loop_prob``), furniture in random rooms; start and goal in different rooms
    with a shortest path >= ``min_detour`` x the straight line. 2 wall slots per shared wall."""
    cfg = maps.cfg.rooms
    lay = Layout.empty(k, spec.cylinder_slots, spec.box_slots, src.device, spec.wall_slots)
    grids = torch.tensor(room_grids(cfg, 2 * spec.half_x, 2 * spec.half_y), device=src.device)
    rows, cols = grids[src.integers(0, len(grids) - 1, (k,))].unbind(1)
    t = half_thickness(maps, k, src)
    xb = _splits(src, k, cols, spec.half_x, cfg.min_room_m)
    yb = _splits(src, k, rows, spec.half_y, cfg.min_room_m)
    fits = _compact(lay, _walls(maps, src, k, xb, yb, rows, cols, t))
    n_rooms, cols1, t1 = (rows * cols).view(-1, 1), cols.view(-1, 1), t.view(-1, 1)
    _furniture(maps, spec, lay, src, xb, yb, n_rooms, cols1, t1)
    boxes = _room_boxes(xb, yb, t1 + clearance(spec))
    return lay, fits & _start_goal(maps, spec, lay, src, boxes, n_rooms, cols1)
