"""Fixed scenarios: a YAML list of worlds (obstacles, robot start, goal) used instead of random layouts.

Format (metres, degrees)::

    scenarios:
      - name: corridor
        robot: {x: -3.0, y: 0.0, yaw_deg: 0.0}
        goal: {x: 3.0, y: 0.0}
        obstacles:
          - {kind: box, x: 0.0, y: 1.0, half_x: 2.5, half_y: 0.2, yaw_deg: 0.0}
          - {kind: cylinder, x: 1.0, y: -1.0, radius: 0.3}
          - {kind: wall, x: 0.0, y: -2.0, half_x: 2.0, half_y: 0.1}   # a box in the wall slots
          - {kind: cylinder, radius: 0.25, path: [[-2, 1], [2, 1]], speed_mps: 1.0}   # a moving one

A moving obstacle (one with a ``path``): navexp.sim.moving_scenarios.

World w at its k-th episode uses entry (w + k * num_envs) mod len(scenarios). An entry's ``jitter`` key
is read by the task, which expands it into many start/goal cases (navexp.task.maps.scenario_jitter).
Every key is checked (``scenario_entries``): an unknown one (``obstacle:``, ``yaw:``) is refused listing
the allowed ones, a malformed entry fails in one line naming the file, the entry and its shape.
"""

from __future__ import annotations

import math
import reprlib
from pathlib import Path

import torch
import yaml

from navexp.sim.layout import Layout, nearest_obstacle
from navexp.sim.motion import set_geometry
from navexp.sim.moving_scenarios import (
    check_moving_keys,
    check_moving_start,
    is_moving,
    moving_slot,
    place_moving,
)

KINDS = {
    "cylinder": ("x", "y", "radius"),
    "box": ("x", "y", "half_x", "half_y"),
    "wall": ("x", "y", "half_x", "half_y"),
}
"""Each obstacle kind's required keys (metres); ``box`` and ``wall`` may add ``yaw_deg``."""

ENTRY_KEYS = ("name", "robot", "goal", "obstacles", "jitter")
"""The keys a scenario entry may have (``jitter``: read by the task, navexp.task.maps.scenario_jitter)."""
ROBOT_KEYS = ("x", "y", "yaw_deg")
GOAL_KEYS = ("x", "y")
ENTRY_SHAPE = (
    "{name, robot: {x, y, yaw_deg}, goal: {x, y}, obstacles: [{kind: cylinder | box | wall, ...}], jitter}"
)
"""A scenario entry's shape, as the errors state it."""


MAX_YAML_VALUES = 1_000_000
"""Most values (mappings, lists, keys and scalars) a scenario or map YAML may expand to, an alias counted
each time it is used: far above any hand-made or generated file (an entry with 20 obstacles is about 200),
far below a nine-level alias bomb (466 bytes expanding to 9^9 = 387 M strings)."""

_REPR = reprlib.Repr()
"""A repr that cuts lists, mappings and strings while it builds the text, so its cost is bounded (set
attribute by attribute: Python 3.11's Repr takes no arguments)."""
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxtuple = 3, 4, 4, 4
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = 40, 40, 40


def shown(value: object) -> str:
    """``repr(value)`` cut to 60 characters, so an error stays one readable line; the text is cut while it
    is built (reprlib), so an alias bomb's value costs no more than a small one."""
    r = _REPR.repr(value)
    return r if len(r) <= 60 else r[:57] + "..."


def entry_where(file: Path | str, i: int, entry: object) -> str:
    """How errors name scenario entry ``i``: the file, the index and the entry's name (cut to 60
    characters) when it has one."""
    if not isinstance(entry, dict):
        return f"{file} scenario {i}"
    name = entry.get("name", "unnamed")
    return f"{file} scenario {i} ({name if isinstance(name, str) and len(name) <= 60 else shown(name)})"


def check_yaml_size(file: Path | str, data: object, limit: int = MAX_YAML_VALUES) -> None:
    """Refuse a parsed YAML that expands to more than ``limit`` values (an alias counted at each use),
    in one line naming the file; stops counting at the limit, so its cost is bounded too."""
    count, stack = 0, [data]
    while stack:
        value = stack.pop()
        count += 1
        if count > limit:
            raise ValueError(
                f"{file}: the YAML expands to more than {limit} values (aliases such as *a count each time "
                f"they are used); a scenario or map file may hold at most {limit} (MAX_YAML_VALUES)"
            )
        if isinstance(value, dict):
            stack.extend(value)
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


def read_scenario_yaml(file: Path | str) -> object:
    """A scenario or map YAML parsed (safe_load) and checked for its expanded size (``check_yaml_size``)."""
    data = yaml.safe_load(Path(file).read_text())
    check_yaml_size(file, data)
    return data


def check_mapping(where: str, what: str, value: object, allowed: tuple[str, ...], shape: str) -> dict:
    """``value`` when it is a mapping of ``allowed`` keys only; else a ValueError naming ``where`` (file
    and entry), ``what``, the value or the unknown keys, and the allowed shape or keys."""
    if not isinstance(value, dict):
        raise ValueError(f"{where}: {what}={shown(value)} is invalid; {what} must be a mapping {shape}")
    unknown = sorted(k[:60] if isinstance(k, str) else shown(k) for k in value if k not in allowed)
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise ValueError(f"{where}: {what} key(s) {unknown[:5]}{more} unknown; allowed: {sorted(allowed)}")
    return value


def scenario_entries(file: Path, data: object) -> list[dict]:
    """The validated entries of a parsed scenario YAML: a top-level ``scenarios:`` list (no other key) of
    mappings of ``ENTRY_KEYS``, ``robot``/``goal`` mappings of ``ROBOT_KEYS``/``GOAL_KEYS``, and
    ``obstacles`` a list of mappings of their kind's keys. Each error is one line naming the file, the
    entry (index and name) and the expected shape or the allowed keys; values are checked on loading."""
    if not isinstance(data, dict) or not isinstance(data.get("scenarios"), list) or not data["scenarios"]:
        got = "an empty file" if data is None else shown(data)
        raise ValueError(
            f"{file}: expected a top-level 'scenarios:' list with at least one entry {ENTRY_SHAPE} "
            f"(or a ROS map YAML); got {got}"
        )
    check_mapping(str(file), "top-level", data, ("scenarios",), "{scenarios: [...]}")
    entries = data["scenarios"]
    for i, e in enumerate(entries):
        where = entry_where(file, i, e)  # the name, where there is one, names the entry in every error
        check_mapping(where, "entry", e, ENTRY_KEYS, ENTRY_SHAPE)
        name = e.get("name")
        if name is not None and not isinstance(name, (str, int, float)):
            raise ValueError(f"{where}: name={shown(name)} is invalid; name must be a string")
        for key, keys in (("robot", ROBOT_KEYS), ("goal", GOAL_KEYS)):
            if e.get(key) is not None:
                check_mapping(where, key, e[key], keys, "{" + ", ".join(keys) + "}")
        obstacles = e.get("obstacles")
        if obstacles is not None and not isinstance(obstacles, list):
            raise ValueError(
                f"{where}: obstacles={shown(obstacles)} is invalid; obstacles must be a list of "
                + OBSTACLE_SHAPE
            )
        for j, ob in enumerate(obstacles or []):
            _check_obstacle(f"{where} obstacle {j}", ob)
    return entries


OBSTACLE_SHAPE = "mappings {kind: cylinder, x, y, radius} | {kind: box | wall, x, y, half_x, half_y, yaw_deg}"
"""An obstacle's shape, as the errors state it."""


def _check_obstacle(where: str, ob: object) -> None:
    """An obstacle is a mapping with a known ``kind`` and only that kind's keys."""
    if not isinstance(ob, dict):
        raise ValueError(f"{where}: obstacle={shown(ob)} is invalid; obstacles must be {OBSTACLE_SHAPE}")
    if is_moving(ob):
        check_moving_keys(where, ob)
        return
    kind = ob.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        raise ValueError(f"{where}: kind={shown(kind)}; allowed: {sorted(KINDS)}")
    keys = ("kind", *KINDS[kind], *(() if kind == "cylinder" else ("yaw_deg",)))
    check_mapping(where, kind, ob, keys, "{" + ", ".join(keys) + "}")


def finite_number(entry: dict, key: str, where: str, default: float | None = None) -> float:
    """``entry[key]`` as a float (``default`` when absent and given); else a ValueError naming ``where``."""
    if key not in entry:
        if default is not None:
            return default
        raise ValueError(f"{where}: missing '{key}'")
    v = entry[key]
    if not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{where}: '{key}'={shown(v)} is not a finite number")
    return float(v)


def load_scenarios(
    file: Path,
    cylinder_slots: int,
    box_slots: int,
    half_x: float,
    half_y: float,
    robot_radius_m: float,
    wall_slots: int = 0,
    data: dict | None = None,
    moving_slots: tuple[int, int] = (0, 0),
) -> Layout:
    """Parse and validate a scenario file (or its parsed ``data``) into a Layout with one entry per
    scenario (the task resolves shipped scenario names to files:
    ``navexp.task.maps.scenario_files.resolve_scenario_path``)."""
    file = Path(file)
    data = read_scenario_yaml(file) if data is None else data
    entries = scenario_entries(file, data)
    lay = Layout.empty(len(entries), cylinder_slots, box_slots, "cpu", wall_slots, moving_slots=moving_slots)
    slots = {"cylinder": cylinder_slots, "box": box_slots, "wall": wall_slots, "moving": moving_slots}
    for i, e in enumerate(entries):
        where = entry_where(file, i, e)
        robot, goal = e.get("robot") or {}, e.get("goal") or {}
        lay.robot_xy[i] = torch.tensor(
            [finite_number(robot, "x", where + " robot"), finite_number(robot, "y", where + " robot")]
        )
        lay.robot_yaw[i] = math.radians(finite_number(robot, "yaw_deg", where + " robot", 0.0))
        lay.goal_xy[i] = torch.tensor(
            [finite_number(goal, "x", where + " goal"), finite_number(goal, "y", where + " goal")]
        )
        _place_obstacles(lay, i, e.get("obstacles") or [], where, slots, (half_x, half_y))
    set_geometry(lay)  # the moving obstacles' path geometry, once per layout
    _check_free_space(file, lay, half_x, half_y, robot_radius_m)
    check_moving_start(file, lay, robot_radius_m)
    return lay


def _place_obstacles(
    lay: Layout, i: int, obstacles: list[dict], where: str, slots: dict, half: tuple[float, float]
) -> None:
    """Write entry ``i``'s obstacles into the next free slots of their kind (``slots``: each kind's
    count; ``moving``: the moving slots); a size <= 0 or more obstacles of a kind than its slots raise
    naming the obstacle."""
    used = dict.fromkeys(KINDS, 0)
    used_moving: dict[str, int] = {}
    for j, ob in enumerate(obstacles):
        ow = f"{where} obstacle {j}"
        if is_moving(ob):
            place_moving(lay, i, ob, ow, moving_slot(ow, ob["kind"], used_moving, slots["moving"]), half)
            continue
        kind = ob["kind"]  # a known kind: checked by scenario_entries
        vals = [finite_number(ob, k, ow) for k in KINDS[kind]]
        if min(vals[2:]) <= 0:
            raise ValueError(f"{ow}: sizes {vals[2:]} must be > 0")
        k = used[kind]
        if k >= slots[kind]:
            plural = {"cylinder": "cylinders", "box": "boxes", "wall": "walls"}[kind]
            raise ValueError(f"{ow}: more {plural} than env.obstacles.{kind}_slots={slots[kind]}")
        if kind == "cylinder":
            lay.cyl_xy[i, k] = torch.tensor(vals[:2])
            lay.cyl_r[i, k], lay.cyl_active[i, k] = vals[2], True
        else:  # a rotated rectangle: a box or a wall segment, each kind in its own slots
            getattr(lay, f"{kind}_xy")[i, k] = torch.tensor(vals[:2])
            getattr(lay, f"{kind}_half")[i, k] = torch.tensor(vals[2:])
            getattr(lay, f"{kind}_yaw")[i, k] = math.radians(finite_number(ob, "yaw_deg", ow, 0.0))
            getattr(lay, f"{kind}_active")[i, k] = True
        used[kind] = k + 1


def _check_free_space(file: Path, lay: Layout, half_x: float, half_y: float, robot_radius_m: float) -> None:
    """Every start and goal keeps the robot radius from every obstacle and wall; else the first one
    that does not is named."""
    pts = torch.stack((lay.robot_xy, lay.goal_xy), dim=1)
    dist, _ = nearest_obstacle(pts, lay, half_x, half_y)
    bad = (dist < robot_radius_m).nonzero().tolist()
    if bad:
        i, which = bad[0]
        raise ValueError(
            f"{file} scenario {i}: the {'robot start' if which == 0 else 'goal'} is "
            f"{dist[i, which]:.3f} m from an obstacle or wall; it must be free space "
            f"(>= robot radius {robot_radius_m} m)"
        )
