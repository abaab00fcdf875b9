"""Map families: batched generators of layouts with structure (walls with doors, slaloms, traps,
clutter, cellular-automaton grids), each a plain function ``(MapSpec, LayoutSpec, k, source) ->
(Layout, valid [K])`` on the source's device. No loop over layouts, no host sync.

The structured families (corridor, staggered, cul_de_sac, grid) are drawn in a canonical frame with
the start on the -x side and the goal on the +x side, then mirrored in x and y at random (and, in a
square room, transposed), so every direction occurs. Walls are axis-aligned boxes in the wall slots.
Validity here is the clearance of start and goal (and, for grid, that the rectangles fit the slots);
the free path is checked afterwards for every family (``generate``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from navexp.sim.layout import Layout
from navexp.task.maps.grid_path import shortest_paths
from navexp.task.maps.random_family import LayoutSpec, place_start_goal, sample_layouts
from navexp.task.maps.rectangles import merge_rectangles

FAMILIES = ("random", "corridor", "staggered", "cul_de_sac", "cluttered", "grid")
"""Map family names; a layout's ``family`` is the index into this tuple."""


@dataclass(frozen=True)
class MapSpec:
    """The map families' parameters (plain values; see navexp.task.env_cfg.MapsCfg for each)."""

    weights: tuple[tuple[str, float], ...] = (("random", 1.0),)
    rng: str = "stream"
    split: str = "train"
    check_path: bool = False
    path_cell_m: float = 0.2
    wall_half_thickness_m: float = 0.1
    gap_m: tuple[float, float] = (0.9, 1.4)
    corridor_walls: tuple[int, int] = (1, 2)
    staggered_walls: tuple[int, int] = (2, 3)
    cul_de_sac_width_m: tuple[float, float] = (1.2, 2.2)
    cul_de_sac_depth_m: tuple[float, float] = (1.0, 2.0)
    cluttered_count: tuple[int, int] = (8, 14)
    cluttered_radius_m: tuple[float, float] = (0.1, 0.25)
    grid_cell_m: float = 0.6
    grid_fill: tuple[float, float] = (0.35, 0.5)
    grid_smooth_steps: int = 1

    @property
    def active_families(self) -> list[tuple[str, float]]:
        """(family, normalised weight) of the families with weight > 0, in FAMILIES order."""
        w = dict(self.weights)
        total = sum(v for v in w.values() if v > 0)
        return [(f, w[f] / total) for f in FAMILIES if w.get(f, 0.0) > 0]

    @classmethod
    def from_env_cfg(cls, env_cfg) -> MapSpec:
        """The env config's ``maps`` (a config of before map families, e.g. a checkpoint's: the default)."""
        m = getattr(env_cfg, "maps", None)
        if m is None:
            return cls()
        weights = tuple((str(f), float(v)) for f, v in m.weights.items())
        structured = any(v > 0 for f, v in weights if f != "random")
        return cls(
            weights=weights,
            rng=str(m.rng),
            split=str(m.split),
            check_path=structured if m.check_path is None else bool(m.check_path),
            path_cell_m=float(m.path_cell_m),
            wall_half_thickness_m=float(m.wall_half_thickness_m),
            gap_m=tuple(m.gap_m),
            corridor_walls=tuple(m.corridor.walls),
            staggered_walls=tuple(m.staggered.walls),
            cul_de_sac_width_m=tuple(m.cul_de_sac.width_m),
            cul_de_sac_depth_m=tuple(m.cul_de_sac.depth_m),
            cluttered_count=tuple(m.cluttered.count),
            cluttered_radius_m=tuple(m.cluttered.radius_m),
            grid_cell_m=float(m.grid.cell_m),
            grid_fill=tuple(m.grid.fill),
            grid_smooth_steps=int(m.grid.smooth_steps),
        )


def wall_slots_needed(maps: MapSpec, family: str) -> int:
    """Wall slots a family's largest layout uses (grid: at least one; more rectangles are redrawn)."""
    return {
        "random": 0,
        "corridor": 2 * maps.corridor_walls[1],
        "staggered": maps.staggered_walls[1],
        "cul_de_sac": 3,
        "cluttered": 0,
        "grid": 1,
    }[family]


def _rect(x0, x1, y0, y1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Centre [..., 2], half-extents [..., 2] and active (non-empty) of [x0, x1] x [y0, y1]."""
    centre = torch.stack(((x0 + x1) / 2, (y0 + y1) / 2), -1)
    half = torch.stack(((x1 - x0) / 2, (y1 - y0) / 2), -1)
    return centre, half.clamp_min(1e-3), (x1 - x0 > 1e-3) & (y1 - y0 > 1e-3)


def _set_walls(lay: Layout, centres: list, halves: list, actives: list) -> None:
    """Write wall rectangles into the first wall slots (the rest stay inactive)."""
    n = len(centres)
    lay.wall_xy[:, :n] = torch.stack(centres, 1)
    lay.wall_half[:, :n] = torch.stack(halves, 1)
    lay.wall_active[:, :n] = torch.stack(actives, 1)


def _need(spec: LayoutSpec) -> float:
    return spec.robot_radius_m + spec.spawn_clearance_m


def _cross_walls(spec: LayoutSpec, n: torch.Tensor, max_walls: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x of ``max_walls`` cross walls evenly spaced over the room for ``n`` [K, 1] walls, and which exist."""
    i = torch.arange(max_walls, device=n.device).view(1, -1)
    x = -spec.half_x + (i + 1) * (2 * spec.half_x) / (n + 1)
    return x, i < n


def _sides(spec: LayoutSpec, first_x: torch.Tensor, last_x: torch.Tensor, t: float):
    """Start box left of the first wall and goal box right of the last (x_lo, x_hi, y_lo, y_hi)."""
    need, hy = _need(spec), spec.half_y - _need(spec)
    start = (-spec.half_x + need, first_x - t - need, -hy, hy)
    goal = (last_x + t + need, spec.half_x - need, -hy, hy)
    return start, goal


def corridor(maps: MapSpec, spec: LayoutSpec, k: int, src) -> tuple[Layout, torch.Tensor]:
    """Cross walls over the full room width, each with one door of width ``gap_m`` at a random place;
    start before the first wall, goal after the last (2 wall slots per wall: below and above the door)."""
    lay = Layout.empty(k, spec.cylinder_slots, spec.box_slots, src.device, spec.wall_slots)
    w_max, t, hy = maps.corridor_walls[1], maps.wall_half_thickness_m, spec.half_y
    n = src.integers(*maps.corridor_walls, (k, 1))
    x, exists = _cross_walls(spec, n, w_max)
    gap = src.uniform((k, w_max), *maps.gap_m)
    gap_lo = -hy + src.uniform((k, w_max), 0.0, 1.0) * (2 * hy - gap)
    parts = ([], [], [])
    for i in range(w_max):
        edge = torch.full_like(gap_lo[:, i], hy)
        for y0, y1 in ((-edge, gap_lo[:, i]), (gap_lo[:, i] + gap[:, i], edge)):  # below, above the door
            c, h, a = _rect(x[:, i] - t, x[:, i] + t, y0, y1)
            for p, v in zip(parts, (c, h, a & exists[:, i]), strict=True):
                p.append(v)
    _set_walls(lay, *parts)
    last = x.gather(1, n - 1)
    start_box, goal_box = _sides(spec, x[:, :1], last, t)
    ok = place_start_goal(spec, lay, src, start_box, goal_box)
    return _mirror(lay, src, spec), ok


def staggered(maps: MapSpec, spec: LayoutSpec, k: int, src) -> tuple[Layout, torch.Tensor]:
    """Parallel cross walls, each leaving a door of width ``gap_m`` at alternating ends (top, bottom,
    top, ...): the way from start to goal is a slalom. One wall slot per wall."""
    lay = Layout.empty(k, spec.cylinder_slots, spec.box_slots, src.device, spec.wall_slots)
    w_max, t, hy = maps.staggered_walls[1], maps.wall_half_thickness_m, spec.half_y
    n = src.integers(*maps.staggered_walls, (k, 1))
    x, exists = _cross_walls(spec, n, w_max)
    gap = src.uniform((k, w_max), *maps.gap_m)
    parts = ([], [], [])
    for i in range(w_max):
        full = torch.full_like(gap[:, i], hy)
        y0, y1 = (-full, full - gap[:, i]) if i % 2 == 0 else (-full + gap[:, i], full)
        c, h, a = _rect(x[:, i] - t, x[:, i] + t, y0, y1)
        for p, v in zip(parts, (c, h, a & exists[:, i]), strict=True):
            p.append(v)
    _set_walls(lay, *parts)
    start_box, goal_box = _sides(spec, x[:, :1], x.gather(1, n - 1), t)
    ok = place_start_goal(spec, lay, src, start_box, goal_box)
    return _mirror(lay, src, spec), ok


def cul_de_sac(maps: MapSpec, spec: LayoutSpec, k: int, src) -> tuple[Layout, torch.Tensor]:
    """A U-shaped trap between start and goal, its opening facing the start: the straight line from
    the start runs into the U, and the way out leads around it (3 wall slots: back wall, two arms)."""
    lay = Layout.empty(k, spec.cylinder_slots, spec.box_slots, src.device, spec.wall_slots)
    t, hx, hy, need = maps.wall_half_thickness_m, spec.half_x, spec.half_y, _need(spec)
    width = src.uniform((k,), *maps.cul_de_sac_width_m)
    depth = src.uniform((k,), *maps.cul_de_sac_depth_m)
    back_x = src.uniform((k,), 0.0, 0.3 * hx)
    # Keep a robot-wide lane on both sides of the U.
    outer = width / 2 + 2 * t
    y_room = (hy - outer - 2 * spec.robot_radius_m - 0.1).clamp_min(0.0)
    yc = src.uniform((k,), -1.0, 1.0) * y_room
    mouth = back_x - depth
    back = _rect(back_x - t, back_x + t, yc - outer, yc + outer)
    upper = _rect(mouth, back_x - t, yc + width / 2, yc + outer)
    lower = _rect(mouth, back_x - t, yc - outer, yc - width / 2)
    _set_walls(lay, *(list(v) for v in zip(back, upper, lower, strict=True)))
    inner = (width / 2 - need).clamp_min(0.0).view(-1, 1)
    ycc = yc.view(-1, 1)
    start_box = (-hx + need, mouth.view(-1, 1) - need, ycc - inner, ycc + inner)
    goal_box = (back_x.view(-1, 1) + t + need, hx - need, ycc - inner, ycc + inner)
    ok = place_start_goal(spec, lay, src, start_box, goal_box)
    return _mirror(lay, src, spec), ok


def cluttered(maps: MapSpec, spec: LayoutSpec, k: int, src) -> tuple[Layout, torch.Tensor]:
    """Many small cylinders (``cluttered.count`` of ``cluttered.radius_m``), no boxes: the random
    sampler with these counts and sizes."""
    clutter = replace(
        spec,
        cylinder_count=maps.cluttered_count,
        cylinder_radius_m=maps.cluttered_radius_m,
        box_count=(0, 0),
    )
    return sample_layouts(clutter, k, src)


def grid(maps: MapSpec, spec: LayoutSpec, k: int, src) -> tuple[Layout, torch.Tensor]:
    """A cellular-automaton occupancy grid in the style of BARN: cells of ``grid.cell_m`` start occupied
    with probability ``grid.fill``, then ``grid.smooth_steps`` times a cell becomes occupied when at
    least 5 cells of its 3x3 neighbourhood (itself included) are. The grid spans the room between a
    free start strip (-x) and goal strip (+x); its occupied runs merge into wall rectangles, and a
    layout needing more rectangles than wall slots is invalid."""
    lay = Layout.empty(k, spec.cylinder_slots, spec.box_slots, src.device, spec.wall_slots)
    need = _need(spec)
    strip = max(1.0, 2 * need + 0.3)
    span_x, span_y = 2 * spec.half_x - 2 * strip, 2 * spec.half_y
    nx, ny = max(1, round(span_x / maps.grid_cell_m)), max(1, round(span_y / maps.grid_cell_m))
    fill = src.uniform((k, 1, 1), *maps.grid_fill)
    occ = src.uniform((k, ny, nx), 0.0, 1.0) < fill
    ones = torch.ones(1, 1, 3, 3, device=src.device)
    for _ in range(maps.grid_smooth_steps):
        count = torch.nn.functional.conv2d(occ.float().unsqueeze(1), ones, padding=1).squeeze(1)
        occ = count >= 5
    centre, half, active, n_rects = merge_rectangles(
        occ, (-spec.half_x + strip, -spec.half_y), (span_y / ny, span_x / nx), spec.wall_slots
    )
    lay.wall_xy, lay.wall_half, lay.wall_active = centre, half, active
    hy = spec.half_y - need
    start_box = (-spec.half_x + need, -spec.half_x + strip - need, -hy, hy)
    goal_box = (spec.half_x - strip + need, spec.half_x - need, -hy, hy)
    ok = place_start_goal(spec, lay, src, start_box, goal_box)
    return _mirror(lay, src, spec), ok & (n_rects <= spec.wall_slots)


def _mirror(lay: Layout, src, spec: LayoutSpec) -> Layout:
    """Mirror each layout in x and in y at random and, in a square room, swap x and y at random.
    Walls are axis-aligned (yaw 0), so mirroring moves centres and a swap also swaps half-extents."""
    k = lay.num_worlds
    sign = torch.where(src.uniform((k, 2), 0.0, 1.0) < 0.5, -1.0, 1.0)
    swap = src.uniform((k,), 0.0, 1.0) < (0.5 if math.isclose(spec.half_x, spec.half_y) else 0.0)

    def move(xy: torch.Tensor) -> torch.Tensor:
        s = sign.view(k, *([1] * (xy.dim() - 2)), 2)
        xy = xy * s
        sw = swap.view(k, *([1] * (xy.dim() - 1)))
        return torch.where(sw, xy.flip(-1), xy)

    lay.wall_xy, lay.cyl_xy = move(lay.wall_xy), move(lay.cyl_xy)
    lay.robot_xy, lay.goal_xy = move(lay.robot_xy), move(lay.goal_xy)
    lay.wall_half = torch.where(swap.view(k, 1, 1), lay.wall_half.flip(-1), lay.wall_half)
    return lay


GENERATORS = {
    "random": lambda maps, spec, k, src: sample_layouts(spec, k, src),
    "corridor": corridor,
    "staggered": staggered,
    "cul_de_sac": cul_de_sac,
    "cluttered": cluttered,
    "grid": grid,
}


def generate(maps: MapSpec, spec: LayoutSpec, family: str, k: int, src) -> tuple[Layout, torch.Tensor]:
    """K layouts of ``family`` from the random source ``src``; their family index recorded, and, with
    ``maps.check_path``, their shortest path (layouts without a free path are invalid). Waits for the
    device only in the path check."""
    lay, ok = GENERATORS[family](maps, spec, k, src)
    lay.family = torch.full((k,), FAMILIES.index(family), dtype=torch.long, device=src.device)
    if maps.check_path:
        chunk = 8192 if lay.robot_xy.device.type == "cuda" else 256
        lay.shortest_path_m = shortest_paths(
            lay, spec.half_x, spec.half_y, spec.robot_radius_m, maps.path_cell_m, chunk
        )
        ok = ok & torch.isfinite(lay.shortest_path_m)
    return lay, ok
