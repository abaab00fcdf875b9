"""A ROS ``map_server`` occupancy-grid map as fixed layouts (``env.scenarios=<map.yaml>``, read through
navexp.task.maps.scenario_files).

A map YAML (``image``, ``resolution``, ``origin``, ``occupied_thresh``, ``free_thresh``, ``negate``; as
written by ``map_saver``; validated key by key, and the image's size read from its header, before any
pixel is decoded) becomes walls. As ``map_server`` reads it, a pixel of occupancy probability p (with
``negate: 0``, p = (255 - value) / 255) is occupied above ``occupied_thresh``, free below ``free_thresh``
and unknown between; the robot may only use free space, so occupied and unknown pixels alike are merged
into rectangles (navexp.task.maps.rectangles), one per wall slot. The map is centred on the room (its own
frame is shifted by minus the centre of its extent), so it must fit inside ``env.room``; the room beyond
the map is unknown too and is walled off by up to 4 more rectangles (none where the map spans the room).
Start/goal pairs come from the same YAML, in the map's frame (inside its extent)::

    starts_goals:
      - {robot: {x: 0.5, y: 0.5, yaw_deg: 0}, goal: {x: 3.5, y: 3.5}}

or, with ``num_pairs: N`` (and optionally ``pairs_seed``), N pairs are sampled in free space with a
free path between them and more than the env's ``goal_radius_m`` apart. Each pair is one entry.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from navexp.sim.layout import Layout, nearest_obstacle
from navexp.sim.scenarios import GOAL_KEYS, ROBOT_KEYS, check_mapping, finite_number, shown
from navexp.task.maps.families import MapSpec
from navexp.task.maps.grid_path import shortest_paths
from navexp.task.maps.random_family import LayoutSpec, place_start_goal
from navexp.task.maps.random_source import StreamSource
from navexp.task.maps.rectangles import merge_rectangles
from navexp.task.maps.scenario_jitter import DEFAULT_GOAL_RADIUS_M, check_start_outside_goal, expand_jittered

ROS_MAP_KEYS = ("image", "resolution", "origin", "occupied_thresh", "free_thresh", "negate")
"""The keys of a ROS map_server map YAML: a file with any of them is read (and validated) as a map."""

MAP_ALLOWED = {
    "image": "the path of the PGM/PNG image relative to the YAML",
    "resolution": "a finite number > 0 (metres per pixel)",
    "origin": "a list [x, y, yaw] of 3 finite numbers (metres, metres, radians; yaw 0)",
    "occupied_thresh": "a number in [0, 1) (occupancy probability above which a pixel is a wall)",
    "free_thresh": "a number in [0, 1] and below occupied_thresh (default 0.196, ROS 1 map_saver's; pixels "
    "below it are free, those between it and occupied_thresh unknown and blocked like walls)",
    "negate": "0 | 1",
    "mode": "trinary | scale (both read the same here: free below free_thresh, all else blocked)",
    "num_pairs": "an integer >= 1 (start/goal pairs sampled in free space)",
    "pairs_seed": "an integer",
    "starts_goals": "a list of {robot: {x, y, yaw_deg}, goal: {x, y}} (each optionally with jitter)",
}
"""What each map YAML key allows, as the errors state it (no other key is accepted)."""

DEFAULT_FREE_THRESH = 0.196
"""``free_thresh`` when a map YAML has none: the value ROS 1's ``map_saver`` writes (a standard map's
unknown grey, 205, is p = 50 / 255 = 0.196 + 8e-5: unknown; nav2's map_saver writes 0.25)."""

PAIR_KEYS = ("robot", "goal", "jitter")
PAIR_SHAPE = "{robot: {x, y, yaw_deg}, goal: {x, y}, jitter}"
"""A map YAML's ``starts_goals`` entry: its keys and its shape, as the errors state it."""

MAX_MAP_PIXELS = 4096 * 4096
"""Largest map image (W x H = 16.8 M pixels), checked from the image header before decoding. 4096 pixels
are 41 m at a fine 0.01 m per pixel (205 m at map_saver's usual 0.05 m), far beyond the rooms the wall
slots fill (8 m by default); decoding holds a few float64/int64 arrays of the image (8 bytes per pixel
each, about 1 GB here), where a 12000 x 12000 map took 54 s and 7.4 GB."""


@dataclass(frozen=True)
class MapHeader:
    """A map YAML's validated keys and its image's size, known before any pixel is decoded."""

    image: Path
    """The image file (resolved next to the YAML)."""
    size_wh: tuple[int, int]
    """Image width and height in pixels."""
    resolution_m: float
    """Metres per pixel."""
    origin_xy: tuple[float, float]
    """Map-frame position (metres) of the lower-left pixel's corner."""
    occupied_thresh: float
    """Pixels with occupancy probability above this are occupied."""
    free_thresh: float
    """Pixels with occupancy probability below this are free; the others (occupied, unknown) are walls."""
    negate: bool
    """Whether p = value / 255 (else (255 - value) / 255)."""


def is_ros_map(data: object) -> bool:
    """Whether a parsed YAML is a ROS map (has any of ``ROS_MAP_KEYS``) rather than a scenario list."""
    return isinstance(data, dict) and any(k in data for k in ROS_MAP_KEYS)


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _bad_key(file: Path, key: str, value: object) -> ValueError:
    return ValueError(f"{file}: {key}={shown(value)} is invalid; {key} must be {MAP_ALLOWED[key]}")


def _threshold(file: Path, data: dict, key: str, default: float | None, upper_open: bool) -> float | None:
    v = data.get(key, default)
    if v is None:
        return None
    if not _is_num(v) or not 0.0 <= v <= 1.0 or (upper_open and v == 1.0):
        raise _bad_key(file, key, v)
    return float(v)


def read_map_header(file: Path, data: dict) -> MapHeader:
    """Validate a map YAML's keys (each error names the file, key, value and what is allowed; a key not in
    ``MAP_ALLOWED`` is refused listing them) and read the image's size from its header, refusing more
    than ``MAX_MAP_PIXELS``; decodes no pixel."""
    unknown = sorted(str(k)[:60] for k in data if k not in MAP_ALLOWED)
    if unknown:
        raise ValueError(f"{file}: map key(s) {unknown} unknown; allowed: {sorted(MAP_ALLOWED)}")
    for key in ("image", "resolution", "origin"):
        if key not in data:
            raise ValueError(
                f"{file}: {key}: missing, {MAP_ALLOWED[key]} (a map_server map needs image, "
                "resolution, origin)"
            )
    name = data["image"]
    if not isinstance(name, str) or not name.strip():
        raise _bad_key(file, "image", name)
    res = data["resolution"]
    if not _is_num(res) or res <= 0:
        raise _bad_key(file, "resolution", res)
    origin = data["origin"]
    if not isinstance(origin, list) or len(origin) != 3 or not all(_is_num(v) for v in origin):
        raise _bad_key(file, "origin", origin)
    if abs(float(origin[2])) > 1e-9:
        raise ValueError(f"{file}: origin yaw={origin[2]} is not supported; allowed: 0")
    occ_t = _threshold(file, data, "occupied_thresh", 0.65, upper_open=True)
    free_t = _threshold(file, data, "free_thresh", min(DEFAULT_FREE_THRESH, occ_t), upper_open=False)
    if free_t > occ_t or (free_t == occ_t and "free_thresh" in data):
        raise ValueError(
            f"{file}: free_thresh={free_t!r} is invalid; free_thresh must be a number in [0, 1] and below "
            f"occupied_thresh={occ_t!r} (map_server: free < occupied)"
        )
    negate = data.get("negate", 0)
    if negate not in (0, 1) or not isinstance(negate, int):
        raise _bad_key(file, "negate", negate)
    if data.get("mode", "trinary") not in ("trinary", "scale"):
        raise _bad_key(file, "mode", data["mode"])
    image = (file.parent / name).resolve()
    if not image.is_file():
        raise FileNotFoundError(f"{file}: image {shown(name)} not found at {image}")
    size, origin_xy = _image_size(file, image), (float(origin[0]), float(origin[1]))
    return MapHeader(image, size, float(res), origin_xy, occ_t, free_t, bool(negate))


def _image_size(file: Path, image: Path) -> tuple[int, int]:
    """(W, H) from the image header (PIL opens lazily), refused above ``MAX_MAP_PIXELS``."""
    limit = f"the limit of {MAX_MAP_PIXELS} pixels (MAX_MAP_PIXELS)"
    try:
        with warnings.catch_warnings():  # PIL's own bomb warning: our limit below is lower
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(image) as im:
                w, h = im.size
    except Image.DecompressionBombError as e:  # above twice PIL's limit: it refuses before we see the size
        raise ValueError(f"{file}: image {image.name!r} is too large ({e}), above {limit}") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as e:  # ValueError: a garbage header
        raise ValueError(f"{file}: image {image.name!r} is not a readable PGM/PNG image ({e})") from None
    if w * h > MAX_MAP_PIXELS:
        raise ValueError(
            f"{file}: image {image.name!r} is {w} x {h} = {w * h} pixels, above {limit}; "
            "crop or downsample the map (a coarser resolution)"
        )
    return w, h


WIDE_MODES = ("I", "I;16", "I;16B", "I;16L", "I;16N")
"""Pillow's modes of a 16-bit grey image (a PGM with maxval > 255 opens as ``I``, scaled to 0-65535; a
16-bit PNG as ``I;16`` or ``I``): read at their own depth, a value v is the shade v / 65535."""


def _grey_values(file: Path, header: MapHeader) -> tuple[np.ndarray, float]:
    """Each pixel's grey value [H, W] at the image's own depth and that depth's full scale: 255 for 8-bit
    images (colour ones through Pillow's grey conversion), 65535 for 16-bit ones (``WIDE_MODES``), so the
    thresholds apply to the value normalised by its own scale, as nav2's map_server does; a wide image
    with values outside 0-65535 is refused naming the file."""
    try:
        with Image.open(header.image) as im:
            if im.mode not in WIDE_MODES:
                return np.asarray(im.convert("L"), dtype=np.float64), 255.0
            values = np.asarray(im, dtype=np.float64)
    except (OSError, ValueError) as e:  # a truncated image: its header promised more pixels than it holds
        raise ValueError(f"{file}: image {header.image.name!r} could not be decoded ({e})") from None
    if values.size and (values.min() < 0 or values.max() > 65535):
        raise ValueError(
            f"{file}: image {header.image.name!r} holds values in [{values.min():g}, {values.max():g}]; "
            "allowed: an 8-bit or 16-bit grey image (0-255 or 0-65535)"
        )
    return values, 65535.0


def _occupancy_probability(file: Path, header: MapHeader) -> np.ndarray:
    """Occupancy probability [H, W] (row 0 at the lowest y) of a validated map's pixels: p = v / full with
    ``negate``, else (full - v) / full (``_grey_values``: 8-bit and 16-bit images alike)."""
    values, full = _grey_values(file, header)
    p = values / full if header.negate else (full - values) / full
    return p[::-1].copy()


def read_occupancy(file: Path, header: MapHeader) -> np.ndarray:
    """Occupied cells [H, W] bool (row 0 at the lowest y) of a validated map's image: p > occupied_thresh."""
    return _occupancy_probability(file, header) > header.occupied_thresh


def read_blocked(file: Path, header: MapHeader) -> np.ndarray:
    """Cells the robot may not use [H, W] bool (row 0 at the lowest y): all but the free ones
    (p < free_thresh), so occupied and unknown cells alike, as a planner that treats unknown as lethal."""
    return ~(_occupancy_probability(file, header) < header.free_thresh)


def num_pairs(file: Path, data: dict) -> int:
    """The number of start/goal pairs of a map YAML: its ``starts_goals`` list (each pair's shape and keys
    checked), or ``num_pairs``."""
    pairs = data.get("starts_goals")
    if pairs is not None:
        if not isinstance(pairs, list):
            raise _bad_key(file, "starts_goals", pairs)
        for i, pair in enumerate(pairs):
            where = f"{file} starts_goals[{i}]"
            check_mapping(where, "pair", pair, PAIR_KEYS, PAIR_SHAPE)
            for key, keys in (("robot", ROBOT_KEYS), ("goal", GOAL_KEYS)):
                check_mapping(where, key, pair.get(key), keys, "{" + ", ".join(keys) + "}")
        if pairs:
            return len(pairs)
    n = data.get("num_pairs")
    if n is None:
        raise ValueError(f"{file}: give 'starts_goals' (a list of robot/goal pairs) or 'num_pairs' >= 1")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise _bad_key(file, "num_pairs", n)
    return n


def load_ros_map(
    file: Path, data: dict, spec: LayoutSpec, maps: MapSpec, goal_radius_m: float = DEFAULT_GOAL_RADIUS_M
) -> Layout:
    """One layout per start/goal pair: the map's occupied and unknown cells (merged rectangles) centred in
    the room, and the room beyond the map walled off."""
    header = read_map_header(file, data)
    k = num_pairs(file, data)
    seed = data.get("pairs_seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise _bad_key(file, "pairs_seed", seed)
    (w, h), res, origin = header.size_wh, header.resolution_m, header.origin_xy
    size_x, size_y = w * res, h * res
    if size_x > 2 * spec.half_x + 1e-6 or size_y > 2 * spec.half_y + 1e-6:
        raise ValueError(
            f"{file}: the map is {size_x:.2f} m x {size_y:.2f} m, larger than the room "
            f"({2 * spec.half_x} m x {2 * spec.half_y} m); raise env.room.size_x_m / size_y_m"
        )
    blocked = read_blocked(file, header)
    # Map frame -> world: shift by minus the centre of the map's extent.
    shift = (-(origin[0] + size_x / 2), -(origin[1] + size_y / 2))
    centre, half, active, count = merge_rectangles(
        torch.from_numpy(blocked)[None], (-size_x / 2, -size_y / 2), (res, res), spec.wall_slots
    )
    outside = _outside_rectangles(size_x / 2, size_y / 2, spec.half_x, spec.half_y)
    n_rects = int(count[0])
    if n_rects + len(outside) > spec.wall_slots:
        raise ValueError(
            f"{file}: the occupied and unknown cells merge into {n_rects} rectangles and the room beyond "
            f"the map takes {len(outside)} more, {n_rects + len(outside)} in all, more than "
            f"env.obstacles.wall_slots={spec.wall_slots}; raise it to at least {n_rects + len(outside)} "
            "(or make env.room the map's size)"
        )
    pairs = data.get("starts_goals")
    lay = Layout.empty(k, spec.cylinder_slots, spec.box_slots, "cpu", spec.wall_slots)
    lay.wall_xy[:], lay.wall_half[:], lay.wall_active[:] = centre[0], half[0], active[0]
    for j, (cx, cy, hx, hy) in enumerate(outside, start=n_rects):
        lay.wall_xy[:, j], lay.wall_half[:, j] = torch.tensor([cx, cy]), torch.tensor([hx, hy])
        lay.wall_active[:, j] = True
    if pairs:
        extent = (origin[0], origin[0] + size_x, origin[1], origin[1] + size_y)
        _given_pairs(file, pairs, lay, shift, extent, spec)
        lay.shortest_path_m = shortest_paths(
            lay, spec.half_x, spec.half_y, spec.robot_radius_m, maps.cfg.path_cell_m
        )
        wheres = [f"{file} starts_goals[{i}]" for i in range(k)]
        check_start_outside_goal(pairs, wheres, lay, goal_radius_m)
        lay = expand_jittered(pairs, wheres, lay, spec, maps.cfg.path_cell_m, goal_radius_m)
    else:
        _sample_pairs(file, lay, spec, maps, seed, (size_x / 2, size_y / 2), goal_radius_m)
    return lay


def _outside_rectangles(
    map_hx: float, map_hy: float, half_x: float, half_y: float
) -> list[tuple[float, float, float, float]]:
    """(centre x, centre y, half x, half y) of the rectangles filling the room beyond a map of half-extents
    (map_hx, map_hy) centred in it: left and right strips over the room's height, bottom and top strips
    over the map's width; none thinner than 1 micrometre (the map spans the room there)."""
    gap_x, gap_y = half_x - map_hx, half_y - map_hy  # strip thickness (metres)
    rects = []
    if gap_x > 1e-6:
        cx = (half_x + map_hx) / 2
        rects += [(-cx, 0.0, gap_x / 2, half_y), (cx, 0.0, gap_x / 2, half_y)]
    if gap_y > 1e-6:
        cy = (half_y + map_hy) / 2
        rects += [(0.0, -cy, map_hx, gap_y / 2), (0.0, cy, map_hx, gap_y / 2)]
    return rects


def _given_pairs(
    file: Path,
    pairs: list,
    lay: Layout,
    shift: tuple[float, float],
    extent: tuple[float, float, float, float],
    spec: LayoutSpec,
) -> None:
    """Write the listed pairs (map frame, checked by ``_num_pairs``) into ``lay`` (world frame); each start
    and goal must lie inside the map's ``extent`` (x0, x1, y0, y1; map frame) and in free space."""
    for i, pair in enumerate(pairs):
        where = f"{file} starts_goals[{i}]"
        robot, goal = pair.get("robot") or {}, pair.get("goal") or {}
        xy = {}
        for name, point in (("robot", robot), ("goal", goal)):
            x, y = finite_number(point, "x", f"{where} {name}"), finite_number(point, "y", f"{where} {name}")
            if not (extent[0] <= x <= extent[1] and extent[2] <= y <= extent[3]):
                raise ValueError(
                    f"{where}: the {name} ({x}, {y}) is outside the map, which covers x in "
                    f"[{extent[0]:g}, {extent[1]:g}], y in [{extent[2]:g}, {extent[3]:g}] (map frame); "
                    "the room beyond the map is unknown space and walled off"
                )
            xy[name] = (x + shift[0], y + shift[1])
        lay.robot_xy[i], lay.goal_xy[i] = torch.tensor(xy["robot"]), torch.tensor(xy["goal"])
        lay.robot_yaw[i] = math.radians(finite_number(robot, "yaw_deg", where + " robot", 0.0))
    dist, _ = nearest_obstacle(torch.stack((lay.robot_xy, lay.goal_xy), 1), lay, spec.half_x, spec.half_y)
    bad = (dist < spec.robot_radius_m).nonzero().tolist()
    if bad:
        i, which = bad[0]
        raise ValueError(
            f"{file} starts_goals[{i}]: the {'robot start' if which == 0 else 'goal'} is "
            f"{dist[i, which]:.3f} m from a wall (occupied or unknown cells, or the room beyond the map); "
            f"it must be free space (>= robot radius {spec.robot_radius_m} m)"
        )


def _sample_pairs(
    file: Path,
    lay: Layout,
    spec: LayoutSpec,
    maps: MapSpec,
    seed: int,
    map_half: tuple[float, float],
    goal_radius_m: float,
    rounds: int = 32,
) -> None:
    """Draw start/goal pairs in the map's free space (candidates inside its extent, ``map_half`` half
    widths around the room's centre, less the clearance), more than ``goal_radius_m`` apart and with a
    free path between them; the others are redrawn."""
    src = StreamSource(torch.Generator().manual_seed(seed), "cpu")
    need = spec.robot_radius_m + spec.spawn_clearance_m
    bx, by = max(map_half[0] - need, 0.0), max(map_half[1] - need, 0.0)
    box = (-bx, bx, -by, by)
    done = torch.zeros(lay.num_worlds, dtype=torch.bool)
    for _ in range(rounds):
        draw = lay.index(torch.arange(lay.num_worlds))
        ok = place_start_goal(spec, draw, src, box, box)
        ok &= (draw.robot_xy - draw.goal_xy).norm(dim=1) > goal_radius_m
        draw.shortest_path_m = shortest_paths(
            draw, spec.half_x, spec.half_y, spec.robot_radius_m, maps.cfg.path_cell_m
        )
        ok &= torch.isfinite(draw.shortest_path_m) & ~done
        lay.assign_where(ok, draw)
        done |= ok
        if bool(done.all()):
            return
    raise ValueError(
        f"{file}: found start/goal pairs with a free path for only {int(done.sum())} of {lay.num_worlds} "
        f"after {rounds} rounds; lower num_pairs, min_start_goal_dist_m or spawn_clearance_m"
    )
