"""Fixed layouts from a file: navexp's scenario YAML (format: navexp.sim.scenarios) or a ROS
``map_server`` occupancy-grid map (navexp.task.maps.ros_map).

Each entry is one layout (world w at its k-th episode plays entry (w + k * num_envs) mod N) and records
its shortest path. A scenario entry or a listed map pair may add ``jitter`` to be played as many cases
(navexp.task.maps.scenario_jitter). A start must lie more than the env's ``goal_radius_m`` from its goal:
a listed pair or scenario entry closer is refused, sampled pairs and jittered cases closer are redrawn.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from navexp.paths import CONFIG_DIR
from navexp.sim.layout import Layout
from navexp.sim.scenarios import load_scenarios, scenario_entries
from navexp.task.maps.families import MapSpec
from navexp.task.maps.grid_path import shortest_paths
from navexp.task.maps.moving import with_moving_slots
from navexp.task.maps.random_family import LayoutSpec
from navexp.task.maps.ros_map import (
    is_ros_map,
    load_ros_map,
    num_pairs,
    read_map_header,
)
from navexp.task.maps.scenario_jitter import DEFAULT_GOAL_RADIUS_M, check_start_outside_goal, expand_jittered

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


def load_scenario_file(
    file: Path, spec: LayoutSpec, maps: MapSpec, goal_radius_m: float = DEFAULT_GOAL_RADIUS_M
) -> Layout:
    """The layouts of a scenario YAML or a ROS map YAML (any of ``ROS_MAP_KEYS``), on the CPU,
    each with its shortest path (inf when the goal cannot be reached): one row per entry, or, when an
    entry has ``jitter``, E entries x C cases rows in play order (row j plays entry j mod E;
    navexp.task.maps.scenario_jitter.expand_jittered). Every start lies more than ``goal_radius_m`` (the
    env's ``goal_radius_m``) from its goal."""
    file = Path(file)
    data = yaml.safe_load(file.read_text())
    if is_ros_map(data):
        return with_moving_slots(load_ros_map(file, data, spec, maps, goal_radius_m), spec.moving)
    entries = scenario_entries(file, data)
    lay = load_scenarios(
        file,
        spec.cylinder_slots,
        spec.box_slots,
        spec.half_x,
        spec.half_y,
        spec.robot_radius_m,
        spec.wall_slots,
        data,
        (spec.moving.cylinder_slots, spec.moving.box_slots) if spec.moving is not None else (0, 0),
    )
    lay.shortest_path_m = shortest_paths(
        lay, spec.half_x, spec.half_y, spec.robot_radius_m, maps.cfg.path_cell_m
    )
    wheres = [f"{file} scenario {i} ({e.get('name', 'unnamed')})" for i, e in enumerate(entries)]
    check_start_outside_goal(entries, wheres, lay, goal_radius_m)
    return expand_jittered(entries, wheres, lay, spec, maps.cfg.path_cell_m, goal_radius_m)


def scenario_entry_names(file: Path) -> list[str]:
    """The name of each entry of a scenario file, in entry order: a scenario's ``name`` (``scenario_<i>``
    when it has none), a map's ``pair_<i>``; a repeated name gets ``_<i>`` appended. The file's shape and
    keys are checked as on loading (the same errors), its values and pixels are not."""
    data = yaml.safe_load(Path(file).read_text())
    if is_ros_map(data):
        read_map_header(Path(file), data)  # the same key errors as loading it (reads no pixel)
        return [f"pair_{i}" for i in range(num_pairs(file, data))]
    names = [str(e.get("name") or f"scenario_{i}") for i, e in enumerate(scenario_entries(Path(file), data))]
    return [f"{n}_{i}" if names.count(n) > 1 else n for i, n in enumerate(names)]
