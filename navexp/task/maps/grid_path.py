"""Free paths on an occupancy grid: is the goal reachable from the start for the robot's radius, and
how long is the shortest way there. Batched over layouts in torch, on the layouts' device.

The grid covers the room with square-ish cells (``cell_m``); a cell is free when its centre keeps the
robot radius from every obstacle and wall (the configuration space of a disc robot). Path lengths come
from a fixed-stencil relaxation (fast sweeping, ``grid_distances``): moves to the 16 neighbours
``(1,0)`` (cost 1 cell), ``(1,1)`` (sqrt 2) and ``(2,1)`` (sqrt 5), in every direction, each allowed
only when the cells it passes are free too (no corner cutting). Against the true Euclidean
shortest path this overestimates by at most ~2.7 % on open ground (the worst angle between stencil
directions), plus up to one cell for snapping start and goal to their cells.
"""

from __future__ import annotations

import math

import torch

from navexp.sim.layout import Layout, obstacle_distance

_MOVES: list[tuple[int, int, tuple[tuple[int, int], ...]]] = [
    (0, 1, ()),
    (1, 0, ()),
    (1, 1, ((1, 0), (0, 1))),
    (1, 2, ((0, 1), (1, 1))),
    (2, 1, ((1, 0), (1, 1))),
]
"""Moves (dy, dx) from a source cell with dy, dx >= 0, and the cells each passes on the way (offsets from
the source). The four sweep orderings mirror them into every direction: 16 moves in all."""
PAD = 2
"""Border of blocked cells around the grid (the longest move spans 2 cells)."""


def grid_shape(half_x: float, half_y: float, cell_m: float) -> tuple[int, int, float, float]:
    """Rows, columns and cell size along y and x of the grid over [-half_x, half_x] x [-half_y, half_y]."""
    nx, ny = max(1, round(2 * half_x / cell_m)), max(1, round(2 * half_y / cell_m))
    return ny, nx, 2 * half_y / ny, 2 * half_x / nx


def cell_centres(half_x: float, half_y: float, cell_m: float, device) -> torch.Tensor:
    """Cell centres [NY, NX, 2] (x, y) of the grid; row 0 at -half_y, column 0 at -half_x."""
    ny, nx, cy, cx = grid_shape(half_x, half_y, cell_m)
    xs = -half_x + (torch.arange(nx, device=device) + 0.5) * cx
    ys = -half_y + (torch.arange(ny, device=device) + 0.5) * cy
    return torch.stack(torch.meshgrid(xs, ys, indexing="xy"), dim=-1)


def _used_slots(layout: Layout) -> Layout:
    """The layouts with only the slots some layout of the batch uses (the distance query costs per slot;
    families use few of them). Waits for the device."""
    keep = {
        kind: getattr(layout, f"{kind}_active").any(0).nonzero().squeeze(1) for kind in ("cyl", "box", "wall")
    }
    parts = {}
    for name in ("cyl_xy", "cyl_r", "cyl_active", "box_xy", "box_half", "box_yaw", "box_active"):
        parts[name] = getattr(layout, name)[:, keep[name.split("_")[0]]]
    for name in ("wall_xy", "wall_half", "wall_yaw", "wall_active"):
        parts[name] = getattr(layout, name)[:, keep["wall"]]
    return Layout(**parts, robot_xy=layout.robot_xy, robot_yaw=layout.robot_yaw, goal_xy=layout.goal_xy)


def cell_clearance(layout: Layout, half_x: float, half_y: float, cell_m: float) -> torch.Tensor:
    """[K, NY, NX]: distance (m) from each cell centre to the nearest obstacle or room wall."""
    layout = _used_slots(layout)
    centres = cell_centres(half_x, half_y, cell_m, layout.robot_xy.device)
    ny, nx = centres.shape[:2]
    pts = centres.reshape(1, -1, 2).expand(layout.num_worlds, -1, -1)
    return obstacle_distance(pts, layout, half_x, half_y).view(-1, ny, nx)


def free_cells(layout: Layout, half_x: float, half_y: float, radius_m: float, cell_m: float) -> torch.Tensor:
    """[K, NY, NX] bool: the cell centre keeps ``radius_m`` from every obstacle and room wall."""
    return cell_clearance(layout, half_x, half_y, cell_m) >= radius_m


def clearance_cost(clearance: torch.Tensor, radius_m: float, margin_m: float, cost: float) -> torch.Tensor:
    """Cost per metre [K, NY, NX] of entering each cell for a field that keeps its way ``margin_m`` clear
    of obstacles where it can: 1 where the robot's edge keeps ``margin_m`` (clearance >= radius +
    margin), rising linearly to ``1 + cost`` where it touches (clearance = radius)."""
    short = ((radius_m + margin_m - clearance) / margin_m).clamp(0.0, 1.0)
    return 1.0 + cost * short


def _cell_index(xy: torch.Tensor, half_x: float, half_y: float, cell_m: float) -> torch.Tensor:
    """Flat cell index [K] of points [K, 2] (clamped into the grid)."""
    ny, nx, cy, cx = grid_shape(half_x, half_y, cell_m)
    col = ((xy[:, 0] + half_x) / cx).floor().long().clamp(0, nx - 1)
    row = ((xy[:, 1] + half_y) / cy).floor().long().clamp(0, ny - 1)
    return row * nx + col


def _skew(t: torch.Tensor, fill: float | bool) -> torch.Tensor:
    """[K, NY, NX] -> [S, K, NY] with S = NX + NY - 1: entry (s, k, y) is t[k, y, s - y] (``fill`` outside),
    so every anti-diagonal x + y = s of the grid is one contiguous slice."""
    k, ny, nx = t.shape
    idx = torch.arange(nx + ny - 1, device=t.device).view(1, -1) - torch.arange(ny, device=t.device).view(
        -1, 1
    )
    valid = (idx >= 0) & (idx < nx)
    got = t.gather(2, idx.clamp(0, nx - 1).expand(k, -1, -1))
    return torch.where(valid, got, fill).permute(2, 0, 1).contiguous()


def _unskew(z: torch.Tensor, nx: int) -> torch.Tensor:
    """Inverse of ``_skew``: [S, K, NY] -> [K, NY, NX]."""
    _, k, ny = z.shape
    idx = torch.arange(nx, device=z.device).view(1, -1) + torch.arange(ny, device=z.device).view(-1, 1)
    return z.permute(1, 2, 0).gather(2, idx.expand(k, -1, -1))


def _allowed(free: torch.Tensor) -> list[torch.Tensor]:
    """Per move of ``_MOVES``: [K, NY, NX] bool, the move into each cell is possible (the cell, its source
    and the cells passed are free; the grid's outside counts as blocked)."""
    k, ny, nx = free.shape
    fp = torch.nn.functional.pad(free, (PAD, PAD, PAD, PAD), value=False)

    def at(dy: int, dx: int) -> torch.Tensor:  # entry (y, x) reads free[y + dy, x + dx]
        return fp[:, PAD + dy : PAD + dy + ny, PAD + dx : PAD + dx + nx]

    out = []
    for dy, dx, passes in _MOVES:
        ok = free & at(-dy, -dx)
        for py, px in passes:
            ok = ok & at(py - dy, px - dx)
        out.append(ok)
    return out


def grid_distances(
    free: torch.Tensor,
    source: torch.Tensor,
    cell_yx: tuple[float, float] = (1.0, 1.0),
    max_rounds: int = 64,
    cost: torch.Tensor | None = None,
) -> torch.Tensor:
    """Shortest-path distance [K, NY, NX] (in the unit of ``cell_yx``, the cell size along y and x)
    from the flat ``source`` cell [K] of each grid (or, a bool [K, NY, NX], from the nearest of its
    cells) over the free cells of ``free`` [K, NY, NX] (inf where unreachable).
    With ``cost`` [K, NY, NX] (>= 1), a move's length is multiplied by the cost of
    the cell it enters: a weighted distance, never below the plain one.

    Fast sweeping (Gauss-Seidel relaxation): a round runs four passes, one per diagonal direction of
    travel; a pass visits the anti-diagonals in order, and every move it relaxes comes from an earlier
    anti-diagonal, so one pass carries distances across the whole grid along paths that head its way.
    Rounds repeat until nothing changes (each round waits for the device once); a path with n turns
    between directions needs about n rounds."""
    k, ny, nx = free.shape
    flips = ((), (1,), (2,), (1, 2))
    # Each ordering sees the grid mirrored so that its direction of travel is +y, +x; per move, the
    # cost where the move is allowed and inf elsewhere, on the skewed grid.
    penalties = []
    for f in flips:
        masks = _allowed(free.flip(f) if f else free)
        w = 1.0 if cost is None else (cost.flip(f) if f else cost)
        penalties.append(
            [
                _skew(torch.where(m, math.hypot(dy * cell_yx[0], dx * cell_yx[1]) * w, math.inf), math.inf)
                for (dy, dx, _), m in zip(_MOVES, masks, strict=True)
            ]
        )
    if source.dtype == torch.bool:  # many sources: distance to the nearest
        dist = torch.where(source, 0.0, math.inf).to(free.device)
    else:
        dist = torch.full((k, ny * nx), math.inf, device=free.device)
        dist.scatter_(1, source.view(-1, 1), 0.0)
        dist = dist.view(k, ny, nx)
    tmp = torch.empty(k, ny, device=free.device)
    for _ in range(max_rounds):
        before = dist
        for f, pens in zip(flips, penalties, strict=True):
            # Two rows of inf in front of y = 0: a source dy rows down is a view, no padding op.
            z = torch.nn.functional.pad(
                _skew(dist.flip(f) if f else dist, math.inf), (PAD, 0), value=math.inf
            )
            for s in range(1, z.shape[0]):
                cur = z[s, :, PAD:]
                for (dy, dx, _), pen in zip(_MOVES, pens, strict=True):
                    if s >= dy + dx:
                        torch.add(z[s - dy - dx, :, PAD - dy : PAD - dy + ny], pen[s], out=tmp)
                        torch.minimum(cur, tmp, out=cur)
            dist = _unskew(z[:, :, PAD:], nx)
            dist = dist.flip(f) if f else dist
        if not bool((dist < before).any()):
            break
    return dist


def shortest_paths(
    layout: Layout, half_x: float, half_y: float, radius_m: float, cell_m: float, chunk: int = 256
) -> torch.Tensor:
    """Shortest collision-free path from start to goal for a disc of ``radius_m`` [K] metres (inf when
    the goal is unreachable), measured on the grid (see the module docstring for its accuracy).

    Start and goal count as free cells even when their cell centre is not (a start may touch the
    inflated border of an obstacle within a cell). Runs in chunks of ``chunk`` layouts and waits for
    the device (run it where a sync is allowed: the layout pool's refill, scenario loading)."""
    return paths_and_fields(layout, half_x, half_y, radius_m, cell_m, chunk)[0]


def paths_and_fields(
    layout: Layout,
    half_x: float,
    half_y: float,
    radius_m: float,
    cell_m: float,
    chunk: int = 256,
    fields: bool = False,
    margin_m: float = 0.0,
    margin_cost: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``shortest_paths`` [K] and, with ``fields``, each layout's goal distance field [K, NY, NX]
    (float16 metres along the shortest free path from every cell centre to the goal's cell, plus the
    goal's offset from that cell's centre; inf where the goal cannot be reached: ``path_distance``
    reads it at any point). With ``margin_m`` > 0 the field is the weighted distance of
    ``margin_cost`` (a metre closer than ``margin_m`` to an obstacle counts up to ``1 + margin_cost``
    metres), so it leads along ways that keep clear where there are any; the shortest paths [K] stay
    plain metres. Waits for the device."""
    out, kept = [], []
    ny, nx, cy, cx = grid_shape(half_x, half_y, cell_m)
    for lo in range(0, layout.num_worlds, chunk):
        rows = torch.arange(lo, min(lo + chunk, layout.num_worlds), device=layout.robot_xy.device)
        part = layout.index(rows)
        clear = cell_clearance(part, half_x, half_y, cell_m)
        free = (clear >= radius_m).view(part.num_worlds, -1)
        start = _cell_index(part.robot_xy, half_x, half_y, cell_m)
        goal = _cell_index(part.goal_xy, half_x, half_y, cell_m)
        free.scatter_(1, start.view(-1, 1), True)
        free.scatter_(1, goal.view(-1, 1), True)
        dist = grid_distances(free.view(-1, ny, nx), goal, (cy, cx))
        out.append(dist.view(part.num_worlds, -1).gather(1, start.view(-1, 1)).squeeze(1))
        if fields and margin_m > 0:
            cost = clearance_cost(clear, radius_m, margin_m, margin_cost)
            dist = grid_distances(free.view(-1, ny, nx), goal, (cy, cx), cost=cost)
        if fields:  # + the goal's offset from its cell centre: the field never reads below the truth
            centre = cell_centres(half_x, half_y, cell_m, dist.device).view(-1, 2)[goal]
            kept.append((dist + (part.goal_xy - centre).norm(dim=-1).view(-1, 1, 1)).half())
    dev = layout.robot_xy.device
    paths = torch.cat(out) if out else torch.zeros(0, device=dev)
    if not fields:
        return paths, None
    return paths, (torch.cat(kept) if kept else torch.zeros(0, ny, nx, dtype=torch.float16, device=dev))


_NEIGHBOURS: dict[torch.device, torch.Tensor] = {}
"""The 3 x 3 cell offsets (dy, dx) [9, 2], one copy per device (no host-to-device copy per step)."""


def _neighbours(device: torch.device) -> torch.Tensor:
    if device not in _NEIGHBOURS:
        offsets = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
        _NEIGHBOURS[device] = torch.tensor(offsets, device=device)
    return _NEIGHBOURS[device]


def path_distance(field: torch.Tensor, xy: torch.Tensor, half_x: float, half_y: float) -> torch.Tensor:
    """Distance [K] (m) along the shortest free path from points ``xy`` [K, 2] to the goal, read from
    goal distance fields [K, NY, NX] (``paths_and_fields``): the least of ``field[c] + |xy - centre(c)|``
    over the point's cell and its 8 neighbours (continuous in ``xy``; a point whose own cell centre is
    blocked still reads its free neighbours). Like the field, it never reads less than the true path
    (but for float16 rounding: under 1 cm at 10 m), and at most about 2.7 % plus one and a half cell
    diagonals more (a path through cell centres and the goal's cell centre). Continuous within a cell;
    crossing a cell border switches the 3 x 3 window (a step of at most a few cm, where a farther cell
    was the least). inf where all nine are unreachable or outside the grid.
    A fixed number of gathers: no host sync."""
    k, ny, nx = field.shape
    cy, cx = 2 * half_y / ny, 2 * half_x / nx
    col = ((xy[:, 0] + half_x) / cx).floor().long().clamp(0, nx - 1)
    row = ((xy[:, 1] + half_y) / cy).floor().long().clamp(0, ny - 1)
    off = _neighbours(xy.device)
    r, c = row.unsqueeze(1) + off[:, 0], col.unsqueeze(1) + off[:, 1]  # [K, 9]
    inside = (r >= 0) & (r < ny) & (c >= 0) & (c < nx)
    flat = r.clamp(0, ny - 1) * nx + c.clamp(0, nx - 1)
    value = field.view(k, -1).gather(1, flat).float()
    centre = torch.stack((-half_x + (c + 0.5) * cx, -half_y + (r + 0.5) * cy), dim=-1)
    total = value + (xy.unsqueeze(1) - centre).norm(dim=-1)
    return torch.where(inside, total, math.inf).min(dim=1).values
