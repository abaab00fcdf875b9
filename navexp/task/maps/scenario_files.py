"""Fixed layouts from a file: navexp's scenario YAML, or a ROS ``map_server`` occupancy-grid map.

A map YAML (``image``, ``resolution``, ``origin``, ``occupied_thresh``, ``negate``; as written by
``map_saver``) becomes walls: pixels whose occupancy probability exceeds ``occupied_thresh`` (with
``negate: 0``, p = (255 - value) / 255) are merged into rectangles (navexp.task.maps.rectangles), one per
wall slot. The map is centred on the room (its own frame is shifted by minus the centre of its
extent), so it must fit inside ``env.room``. Start/goal pairs come from the same YAML, in the map's
frame::

    starts_goals:
      - {robot: {x: 0.5, y: 0.5, yaw_deg: 0}, goal: {x: 3.5, y: 3.5}}

or, with ``num_pairs: N`` (and optionally ``pairs_seed``), N pairs are sampled in free space with a
free path between them. Each pair is one entry (world w at its k-th episode plays pair
(w + k * num_envs) mod N); every entry records its shortest path.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
import yaml
from PIL import Image

from navexp.paths import CONFIG_DIR
from navexp.sim.layout import Layout, nearest_obstacle
from navexp.sim.scenarios import load_scenarios
from navexp.task.maps.families import MapSpec
from navexp.task.maps.grid_path import shortest_paths
from navexp.task.maps.random_family import LayoutSpec, place_start_goal
from navexp.task.maps.random_source import StreamSource
from navexp.task.maps.rectangles import merge_rectangles

SCENARIO_DIR = CONFIG_DIR / "scenarios"
"""Shipped scenario files, selected by name: ``env.scenarios=corridor``."""


def resolve_scenario_path(name_or_path: str) -> Path:
    """A path as given, or a shipped scenario name (``corridor`` -> configs/scenarios/corridor.yaml)."""
    p = Path(name_or_path).expanduser()
    if p.is_file():
        return p
    shipped = SCENARIO_DIR / f"{name_or_path}.yaml"
    if shipped.is_file():
        return shipped
    names = sorted(f.stem for f in SCENARIO_DIR.glob("*.yaml"))
    raise FileNotFoundError(f"env.scenarios={name_or_path!r}: no such file; shipped scenarios: {names}")


MAP_KEYS = ("image", "resolution", "origin")


def load_scenario_file(file: Path, spec: LayoutSpec, maps: MapSpec) -> Layout:
    """The layouts of a scenario YAML or a ROS map YAML (told apart by its ``image`` key), on the CPU,
    each with its shortest path (inf when the goal cannot be reached)."""
    file = Path(file)
    data = yaml.safe_load(file.read_text())
    if isinstance(data, dict) and "image" in data:
        lay = load_ros_map(file, data, spec, maps)
    else:
        lay = load_scenarios(
            file,
            spec.cylinder_slots,
            spec.box_slots,
            spec.half_x,
            spec.half_y,
            spec.robot_radius_m,
            spec.wall_slots,
            data,
        )
        lay.shortest_path_m = shortest_paths(
            lay, spec.half_x, spec.half_y, spec.robot_radius_m, maps.cfg.path_cell_m
        )
    return lay


def scenario_entry_names(file: Path) -> list[str]:
    """The name of each entry of a scenario file, in entry order: a scenario's ``name`` (``scenario_<i>``
    when it has none), a map's ``pair_<i>``; a repeated name gets ``_<i>`` appended."""
    data = yaml.safe_load(Path(file).read_text())
    if isinstance(data, dict) and "image" in data:
        pairs = data.get("starts_goals")
        return [f"pair_{i}" for i in range(len(pairs) if pairs else int(data.get("num_pairs", 0)))]
    names = [str(e.get("name") or f"scenario_{i}") for i, e in enumerate(data["scenarios"])]
    return [f"{n}_{i}" if names.count(n) > 1 else n for i, n in enumerate(names)]


def read_occupancy(file: Path, data: dict) -> tuple[np.ndarray, float, tuple[float, float]]:
    """Occupied cells [H, W] bool (row 0 at the lowest y), the resolution and the origin (x, y) of a
    map_server YAML's image."""
    missing = [k for k in MAP_KEYS if k not in data]
    if missing:
        raise ValueError(f"{file}: a map_server map needs {list(MAP_KEYS)}; missing {missing}")
    res = float(data["resolution"])
    origin = data["origin"]
    if res <= 0 or len(origin) != 3:
        raise ValueError(f"{file}: resolution={res} must be > 0 and origin [x, y, yaw]; got {origin}")
    if abs(float(origin[2])) > 1e-9:
        raise ValueError(f"{file}: origin yaw={origin[2]} is not supported; allowed: 0")
    image = (file.parent / str(data["image"])).resolve()
    if not image.is_file():
        raise FileNotFoundError(f"{file}: image {str(data['image'])!r} not found at {image}")
    pixels = np.asarray(Image.open(image).convert("L"), dtype=np.float64)
    negate = int(data.get("negate", 0))
    if negate not in (0, 1):
        raise ValueError(f"{file}: negate={negate!r} is invalid; allowed: 0 | 1")
    p = pixels / 255.0 if negate else (255.0 - pixels) / 255.0
    occupied = p > float(data.get("occupied_thresh", 0.65))
    return occupied[::-1].copy(), res, (float(origin[0]), float(origin[1]))


def load_ros_map(file: Path, data: dict, spec: LayoutSpec, maps: MapSpec) -> Layout:
    """One layout per start/goal pair: the map's walls (merged rectangles) centred in the room."""
    occ, res, origin = read_occupancy(file, data)
    h, w = occ.shape
    size_x, size_y = w * res, h * res
    if size_x > 2 * spec.half_x + 1e-6 or size_y > 2 * spec.half_y + 1e-6:
        raise ValueError(
            f"{file}: the map is {size_x:.2f} m x {size_y:.2f} m, larger than the room "
            f"({2 * spec.half_x} m x {2 * spec.half_y} m); raise env.room.size_x_m / size_y_m"
        )
    # Map frame -> world: shift by minus the centre of the map's extent.
    shift = (-(origin[0] + size_x / 2), -(origin[1] + size_y / 2))
    centre, half, active, count = merge_rectangles(
        torch.from_numpy(occ)[None], (-size_x / 2, -size_y / 2), (res, res), spec.wall_slots
    )
    n_rects = int(count[0])
    if n_rects > spec.wall_slots:
        raise ValueError(
            f"{file}: the occupied cells merge into {n_rects} rectangles, more than "
            f"env.obstacles.wall_slots={spec.wall_slots}; raise it to at least {n_rects}"
        )
    pairs = data.get("starts_goals")
    k = len(pairs) if pairs else int(data.get("num_pairs", 0))
    if k < 1:
        raise ValueError(f"{file}: give 'starts_goals' (a list of robot/goal pairs) or 'num_pairs' >= 1")
    lay = Layout.empty(k, spec.cylinder_slots, spec.box_slots, "cpu", spec.wall_slots)
    lay.wall_xy[:], lay.wall_half[:], lay.wall_active[:] = centre[0], half[0], active[0]
    if pairs:
        _given_pairs(file, pairs, lay, shift, spec)
        lay.shortest_path_m = shortest_paths(
            lay, spec.half_x, spec.half_y, spec.robot_radius_m, maps.cfg.path_cell_m
        )
    else:
        _sample_pairs(file, lay, spec, maps, int(data.get("pairs_seed", 0)))
    return lay


def _num(entry: dict, key: str, where: str, default: float | None = None) -> float:
    v = entry.get(key, default)
    if not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{where}: '{key}'={v!r} is not a finite number")
    return float(v)


def _given_pairs(file: Path, pairs: list, lay: Layout, shift: tuple[float, float], spec: LayoutSpec) -> None:
    for i, pair in enumerate(pairs):
        where = f"{file} starts_goals[{i}]"
        robot, goal = pair.get("robot") or {}, pair.get("goal") or {}
        lay.robot_xy[i, 0] = _num(robot, "x", where + " robot") + shift[0]
        lay.robot_xy[i, 1] = _num(robot, "y", where + " robot") + shift[1]
        lay.robot_yaw[i] = math.radians(_num(robot, "yaw_deg", where + " robot", 0.0))
        lay.goal_xy[i, 0] = _num(goal, "x", where + " goal") + shift[0]
        lay.goal_xy[i, 1] = _num(goal, "y", where + " goal") + shift[1]
    dist, _ = nearest_obstacle(torch.stack((lay.robot_xy, lay.goal_xy), 1), lay, spec.half_x, spec.half_y)
    bad = (dist < spec.robot_radius_m).nonzero().tolist()
    if bad:
        i, which = bad[0]
        raise ValueError(
            f"{file} starts_goals[{i}]: the {'robot start' if which == 0 else 'goal'} is "
            f"{dist[i, which]:.3f} m from a wall; it must be free space (>= robot radius "
            f"{spec.robot_radius_m} m)"
        )


def _sample_pairs(
    file: Path, lay: Layout, spec: LayoutSpec, maps: MapSpec, seed: int, rounds: int = 32
) -> None:
    """Draw start/goal pairs in free space with a free path between them (redrawing the others)."""
    src = StreamSource(torch.Generator().manual_seed(seed), "cpu")
    done = torch.zeros(lay.num_worlds, dtype=torch.bool)
    for _ in range(rounds):
        draw = lay.index(torch.arange(lay.num_worlds))
        ok = place_start_goal(spec, draw, src)
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
