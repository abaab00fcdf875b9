"""Moving obstacles in scenario files: an obstacle of kind ``cylinder`` or ``box`` with a ``path``.

Format (metres, m/s, seconds), inside an entry's ``obstacles`` list (navexp.sim.scenarios)::

    - {kind: cylinder, radius: 0.25, path: [[-2, 0], [2, 0]], speed_mps: 1.0, mode: back_and_forth}
    - {kind: box, half_x: 0.4, half_y: 0.3, path: [[-1, -1], [1, -1], [1, 1]], speed_mps: 0.5,
       mode: loop, start_delay_s: 2.0}

``mode`` is ``back_and_forth`` (default: to the last waypoint and back) or ``loop`` (the last waypoint
joins the first); ``start_delay_s`` (default 0) the seconds it stands at the first waypoint before it
moves. Each moving obstacle takes the next moving slot of its kind (``env.dynamic.cylinder_slots`` /
``box_slots``). Every key is checked: unknown keys, a path of fewer than 2 or more than ``MAX_WAYPOINTS``
points, a waypoint that puts the obstacle outside the room, a speed <= 0, an unknown mode, a negative
delay, more moving obstacles than slots; each error is one line naming the file, entry and obstacle.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from navexp.sim.layout import MAX_WAYPOINTS, Layout
from navexp.sim.motion import BACK_AND_FORTH, LOOP, bounding_radius, start_position

SIZE_KEYS = {"cylinder": ("radius",), "box": ("half_x", "half_y")}
"""A moving obstacle's size keys by kind (walls do not move)."""
MOVING_KEYS = ("path", "speed_mps", "mode", "start_delay_s")
"""The keys that make an obstacle move (``path`` and ``speed_mps`` required)."""
SCENARIO_MODES = {"back_and_forth": BACK_AND_FORTH, "loop": LOOP}


def is_moving(ob: object) -> bool:
    """An obstacle entry with a ``path``: a moving one."""
    return isinstance(ob, dict) and "path" in ob


def check_moving_keys(where: str, ob: dict) -> None:
    """A moving obstacle's kind (cylinder | box) and keys; one-line errors naming ``where``."""
    kind = ob.get("kind")
    if kind not in SIZE_KEYS:
        raise ValueError(f"{where}: kind={kind!r} cannot move (has a path); allowed: {sorted(SIZE_KEYS)}")
    allowed = ("kind", *SIZE_KEYS[kind], *MOVING_KEYS)
    unknown = sorted(str(k) for k in ob if k not in allowed)
    if unknown:
        raise ValueError(f"{where}: moving {kind} key(s) {unknown} unknown; allowed: {sorted(allowed)}")


def _number(where: str, ob: dict, key: str, default: float | None = None) -> float:
    v = ob.get(key, default)
    if v is None:
        raise ValueError(f"{where}: missing '{key}'")
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        raise ValueError(f"{where}: '{key}'={v!r} is not a finite number")
    return float(v)


def _path(where: str, ob: dict, size: tuple[float, float], half: tuple[float, float]) -> list[list[float]]:
    """The validated waypoints: 2..MAX_WAYPOINTS finite [x, y] pairs keeping the obstacle in the room."""
    path = ob["path"]
    shape = f"a list of 2 to {MAX_WAYPOINTS} [x, y] points"
    if not isinstance(path, list) or not 2 <= len(path) <= MAX_WAYPOINTS:
        raise ValueError(f"{where}: path={path!r} is invalid; allowed: {shape}")
    for p in path:
        ok = isinstance(p, list) and len(p) == 2
        if not ok or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in p):
            raise ValueError(f"{where}: path point {p!r} is invalid; allowed: {shape}")
        if abs(p[0]) > half[0] - size[0] or abs(p[1]) > half[1] - size[1]:
            raise ValueError(
                f"{where}: path point {p} puts the obstacle outside the room; allowed: |x| <= "
                f"{half[0] - size[0]:.2f}, |y| <= {half[1] - size[1]:.2f} (half room minus its size)"
            )
    return [[float(v) for v in p] for p in path]


def place_moving(lay: Layout, i: int, ob: dict, where: str, slot: int, half: tuple[float, float]) -> None:
    """Write the moving obstacle ``ob`` of entry ``i`` into moving slot ``slot`` of ``lay`` (checked)."""
    kind = ob["kind"]
    sizes = [_number(where, ob, k) for k in SIZE_KEYS[kind]]
    if min(sizes) <= 0:
        raise ValueError(f"{where}: sizes {sizes} must be > 0")
    size = (sizes[0], sizes[-1])
    path = _path(where, ob, size, half)
    speed = _number(where, ob, "speed_mps")
    if speed <= 0:
        raise ValueError(f"{where}: speed_mps={speed} is invalid with a path; allowed: > 0 (m/s)")
    mode = ob.get("mode", "back_and_forth")
    if mode not in SCENARIO_MODES:
        raise ValueError(f"{where}: mode={mode!r} is invalid; allowed: {' | '.join(SCENARIO_MODES)}")
    delay = _number(where, ob, "start_delay_s", 0.0)
    if delay < 0:
        raise ValueError(f"{where}: start_delay_s={delay} is invalid; allowed: >= 0 (s)")
    lay.mov_mode[i, slot] = SCENARIO_MODES[mode]
    lay.mov_path[i, slot] = torch.tensor(path + [path[-1]] * (MAX_WAYPOINTS - len(path)))
    lay.mov_npts[i, slot] = len(path)
    lay.mov_speed[i, slot], lay.mov_delay[i, slot] = speed, delay
    lay.mov_size[i, slot] = torch.tensor(size)
    lay.mov_start[i, slot] = torch.tensor(path[0])  # phase 0: the first waypoint


def moving_slot(where: str, kind: str, used: dict[str, int], slots: tuple[int, int]) -> int:
    """The next free moving slot of ``kind`` (cylinders first, then boxes); raise when none is left."""
    k, n = used.get(kind, 0), slots[0] if kind == "cylinder" else slots[1]
    if k >= n:
        plural = "cylinders" if kind == "cylinder" else "boxes"
        raise ValueError(f"{where}: more moving {plural} than env.dynamic.{kind}_slots={n}")
    used[kind] = k + 1
    return k if kind == "cylinder" else slots[0] + k


def check_moving_start(file: Path, lay: Layout, robot_radius_m: float) -> None:
    """Every start and goal is clear of every moving obstacle where it stands at t = 0 (else the episode
    could end in a collision before the robot moves); the first one that is not is named."""
    if lay.moving_slots == 0:
        return
    gap = (torch.stack((lay.robot_xy, lay.goal_xy), 1).unsqueeze(2) - start_position(lay).unsqueeze(1)).norm(
        dim=-1
    ) - bounding_radius(lay).unsqueeze(1)  # [K, 2, M]
    bad = ((gap < robot_radius_m) & (lay.mov_mode > 0).unsqueeze(1)).nonzero().tolist()
    if bad:
        i, which, j = bad[0]
        raise ValueError(
            f"{file} scenario {i}: the {'robot start' if which == 0 else 'goal'} is {gap[i, which, j]:.3f} m "
            f"from moving obstacle {j} at t = 0; it must be >= robot radius {robot_radius_m} m (move its "
            "first waypoint or the start/goal)"
        )
