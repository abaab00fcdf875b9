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

World w at its k-th episode uses entry (w + k * num_envs) mod len(scenarios). An entry's ``jitter`` key
is read by the task, which expands it into many start/goal cases (navexp.task.maps.scenario_jitter).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import yaml

from navexp.sim.layout import Layout, nearest_obstacle

KINDS = {
    "cylinder": ("x", "y", "radius"),
    "box": ("x", "y", "half_x", "half_y"),
    "wall": ("x", "y", "half_x", "half_y"),
}


def _num(entry: dict, key: str, where: str, default: float | None = None) -> float:
    if key not in entry:
        if default is not None:
            return default
        raise ValueError(f"{where}: missing '{key}'")
    v = entry[key]
    if not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{where}: '{key}'={v!r} is not a finite number")
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
) -> Layout:
    """Parse and validate a scenario file (or its parsed ``data``) into a Layout with one entry per
    scenario (the task resolves shipped scenario names to files:
    ``navexp.task.maps.scenario_files.resolve_scenario_path``)."""
    file = Path(file)
    data = yaml.safe_load(file.read_text()) if data is None else data
    if not isinstance(data, dict) or not isinstance(data.get("scenarios"), list) or not data["scenarios"]:
        raise ValueError(f"{file}: expected a top-level 'scenarios:' list with at least one entry")
    entries = data["scenarios"]
    lay = Layout.empty(len(entries), cylinder_slots, box_slots, "cpu", wall_slots)
    for i, e in enumerate(entries):
        where = f"{file} scenario {i} ({e.get('name', 'unnamed')})"
        robot, goal = e.get("robot") or {}, e.get("goal") or {}
        lay.robot_xy[i] = torch.tensor(
            [_num(robot, "x", where + " robot"), _num(robot, "y", where + " robot")]
        )
        lay.robot_yaw[i] = math.radians(_num(robot, "yaw_deg", where + " robot", 0.0))
        lay.goal_xy[i] = torch.tensor([_num(goal, "x", where + " goal"), _num(goal, "y", where + " goal")])
        nc = nb = nw = 0
        for j, ob in enumerate(e.get("obstacles") or []):
            ow = f"{where} obstacle {j}"
            kind = ob.get("kind")
            if kind not in KINDS:
                raise ValueError(f"{ow}: kind={kind!r}; allowed: {sorted(KINDS)}")
            vals = [_num(ob, k, ow) for k in KINDS[kind]]
            if min(vals[2:]) <= 0:
                raise ValueError(f"{ow}: sizes {vals[2:]} must be > 0")
            if kind == "cylinder":
                if nc >= cylinder_slots:
                    raise ValueError(
                        f"{ow}: more cylinders than env.obstacles.cylinder_slots={cylinder_slots}"
                    )
                lay.cyl_xy[i, nc] = torch.tensor(vals[:2])
                lay.cyl_r[i, nc], lay.cyl_active[i, nc] = vals[2], True
                nc += 1
            else:  # a rotated rectangle: a box or a wall segment, each kind in its own slots
                kind_slots, used = (wall_slots, nw) if kind == "wall" else (box_slots, nb)
                if used >= kind_slots:
                    plural = "walls" if kind == "wall" else "boxes"
                    raise ValueError(f"{ow}: more {plural} than env.obstacles.{kind}_slots={kind_slots}")
                getattr(lay, f"{kind}_xy")[i, used] = torch.tensor(vals[:2])
                getattr(lay, f"{kind}_half")[i, used] = torch.tensor(vals[2:])
                getattr(lay, f"{kind}_yaw")[i, used] = math.radians(_num(ob, "yaw_deg", ow, 0.0))
                getattr(lay, f"{kind}_active")[i, used] = True
                if kind == "wall":
                    nw += 1
                else:
                    nb += 1
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
    return lay
