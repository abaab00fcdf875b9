"""Many cases from one hand-made entry: a scenario entry's ``jitter`` draws ``cases`` start/goal pairs
around its fixed ``robot`` and ``goal`` (same obstacles), at load time, from a seeded generator.

Format (metres, degrees; every range is a half-width around the entry's own value)::

    scenarios:
      - name: corridor
        robot: {x: -3.0, y: 0.0, yaw_deg: 0.0}
        goal: {x: 3.0, y: 0.0}
        jitter: {xy_m: 0.5, yaw_deg: 180, goal_xy_m: 0.5, cases: 64, seed: 0}

Case c's start x is uniform in [x - xy_m, x + xy_m] (y the same), its yaw uniform in
[yaw_deg - 180, yaw_deg + 180] (wrapped to [-180, 180]), its goal x and y uniform within
``goal_xy_m`` of the goal's. A draw is kept when start and goal keep ``robot radius + spawn_clearance_m``
from every obstacle and the room's walls (so both are inside the room), the start is more than the env's
``goal_radius_m`` from the goal (else the episode would succeed before the robot moves), and the goal is
reachable on the occupancy grid (navexp.task.maps.grid_path.shortest_paths, which also records the case's
``shortest_path_m``); others are redrawn, in at most ``JITTER_ROUNDS`` rounds of ``cases`` draws.
``seed`` defaults to the entry's index in the file; the same file gives the same cases.

Play order (``expand_jittered``): with E entries and at most C cases per entry, the scenario layouts
are E * C rows, row j = entry j mod E at its case (j // E) mod C_e (an entry with fewer cases repeats
them in order; an entry without jitter is its one case). World w at its k-th episode plays row
(w + k * num_envs) mod (E * C) (navexp.task.env), so every entry is played equally often, and N episodes
on a file of one entry with ``cases: C`` play min(N, C) distinct cases. A file without jitter keeps
its E rows, one per entry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from navexp.sim.layout import Layout, obstacle_distance
from navexp.task.maps.grid_path import shortest_paths
from navexp.task.maps.moving import clear_of_moving, jitter_phases
from navexp.task.maps.random_family import LayoutSpec

DEFAULT_GOAL_RADIUS_M = 0.3
"""The env's default ``goal_radius_m`` (``EnvCfg`` reads it from here): the goal radius a start must keep
clear of when a caller gives none."""

JITTER_ALLOWED = {
    "xy_m": "a finite number >= 0 (metres; start x and y each within +- xy_m of the robot's)",
    "yaw_deg": "a finite number in [0, 180] (degrees; start yaw within +- yaw_deg of the robot's)",
    "goal_xy_m": "a finite number >= 0 (metres; goal x and y each within +- goal_xy_m of the goal's)",
    "cases": "an integer in [1, 4096] (distinct start/goal cases drawn)",
    "seed": "an integer (default: the entry's index in the file)",
}
"""What each ``jitter`` key allows, as the errors state it."""

MAX_JITTER_CASES = 4096
"""Most cases of one entry: each costs a shortest-path pass (2-4 ms on one CPU thread at 0.2 m)."""

JITTER_ROUNDS = 32
"""Rounds of ``cases`` draws before an entry with too few valid cases fails."""


@dataclass(frozen=True)
class Jitter:
    """An entry's validated ``jitter``: half-widths of the start and goal regions and the case count."""

    xy_m: float
    """Start x and y each uniform within +- this of the robot's (m)."""
    yaw_rad: float
    """Start yaw uniform within +- this of the robot's (rad)."""
    goal_xy_m: float
    """Goal x and y each uniform within +- this of the goal's (m)."""
    cases: int
    """Distinct start/goal cases drawn."""
    seed: int
    """Seed of the entry's generator."""


def parse_jitter(where: str, entry: dict, index: int) -> Jitter | None:
    """The entry's ``jitter`` (None without one); each error names ``where`` (file and entry), the key,
    the bad value and what is allowed."""
    raw = entry.get("jitter")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError(
            f"{where}: jitter={raw!r} is invalid; jitter must be a mapping of {sorted(JITTER_ALLOWED)}"
        )
    unknown = sorted(set(raw) - set(JITTER_ALLOWED))
    if unknown:
        raise ValueError(f"{where}: jitter key(s) {unknown} unknown; allowed: {sorted(JITTER_ALLOWED)}")
    if "cases" not in raw:
        raise ValueError(f"{where}: jitter.cases: missing, {JITTER_ALLOWED['cases']}")

    def bad(key: str) -> ValueError:
        return ValueError(
            f"{where}: jitter.{key}={raw[key]!r} is invalid; {key} must be {JITTER_ALLOWED[key]}"
        )

    vals = {}
    for key, hi in (("xy_m", math.inf), ("yaw_deg", 180.0), ("goal_xy_m", math.inf)):
        v = raw.get(key, 0.0)
        if not _is_num(v) or not 0.0 <= v <= hi:
            raise bad(key)
        vals[key] = float(v)
    for key, lo, hi in (("cases", 1, MAX_JITTER_CASES), ("seed", -(2**63), 2**63 - 1)):
        v = raw.get(key, index)
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise bad(key)
    if raw["cases"] > 1 and not any(vals.values()):
        raise ValueError(
            f"{where}: jitter has cases={raw['cases']} but xy_m, yaw_deg and goal_xy_m are all 0 (one case); "
            "give at least one of them > 0"
        )
    seed = raw.get("seed", index)
    return Jitter(vals["xy_m"], math.radians(vals["yaw_deg"]), vals["goal_xy_m"], raw["cases"], seed)


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def draw_cases(
    where: str, base: Layout, jit: Jitter, spec: LayoutSpec, cell_m: float, goal_radius_m: float
) -> Layout:
    """``jit.cases`` layouts of the one-row ``base`` (same obstacles), start and goal drawn in the jitter
    regions with clearance, more than ``goal_radius_m`` apart and with a free path, each with its
    shortest path; fails naming ``where`` when fewer are found in ``JITTER_ROUNDS`` rounds."""
    gen = torch.Generator().manual_seed(jit.seed)
    need = spec.robot_radius_m + spec.spawn_clearance_m
    b = jit.cases
    half = torch.tensor([jit.xy_m, jit.xy_m, jit.yaw_rad, jit.goal_xy_m, jit.goal_xy_m])
    centre = torch.cat((base.robot_xy[0], base.robot_yaw[:1], base.goal_xy[0]))
    kept: list[Layout] = []
    found = starts_ok = goals_ok = both_ok = apart_ok = paths_ok = 0
    for _ in range(JITTER_ROUNDS):
        # One [B, 5] draw per round (start x, y, yaw, goal x, y): the cases depend on the seed alone.
        u = centre + (2.0 * torch.rand(b, 5, generator=gen) - 1.0) * half
        cand = base.index(torch.zeros(b, dtype=torch.long))
        cand.robot_xy, cand.goal_xy = u[:, 0:2].contiguous(), u[:, 3:5].contiguous()
        cand.robot_yaw = torch.atan2(torch.sin(u[:, 2]), torch.cos(u[:, 2]))  # wrapped to [-pi, pi]
        jitter_phases(cand, gen)  # moving obstacles: a phase per case (no draw without them)
        dist = obstacle_distance(
            torch.stack((cand.robot_xy, cand.goal_xy), 1), cand, spec.half_x, spec.half_y
        )
        clear = (dist >= need) & clear_of_moving(cand, need).unsqueeze(1)  # [B, 2]: start, goal
        starts_ok += int(clear[:, 0].sum())
        goals_ok += int(clear[:, 1].sum())
        cand = cand.index(clear.all(dim=1))
        both_ok += cand.num_worlds
        # A start within the goal radius is a success at the first step: not a case to evaluate.
        cand = cand.index((cand.robot_xy - cand.goal_xy).norm(dim=1) > goal_radius_m)
        apart_ok += cand.num_worlds
        cand.shortest_path_m = shortest_paths(cand, spec.half_x, spec.half_y, spec.robot_radius_m, cell_m)
        cand = cand.index(torch.isfinite(cand.shortest_path_m))
        paths_ok += cand.num_worlds
        kept.append(cand.index(torch.arange(min(cand.num_worlds, b - found))))
        found += kept[-1].num_worlds
        if found == b:
            return Layout.cat(kept)
    tried = JITTER_ROUNDS * b
    raise ValueError(
        f"{where}: jitter found {found} of cases={b} valid cases in {tried} draws: {starts_ok} starts and "
        f"{goals_ok} goals kept {need:.2f} m (robot radius + spawn_clearance_m) from every obstacle and "
        f"wall, {both_ok} draws both, {apart_ok} of those started more than goal_radius_m={goal_radius_m} m "
        f"from the goal, and {paths_ok} of those had a free path; move or widen the regions "
        "(xy_m, goal_xy_m) or lower cases"
    )


def expand_jittered(
    entries: list, wheres: list[str], lay: Layout, spec: LayoutSpec, cell_m: float, goal_radius_m: float
) -> Layout:
    """The file's layouts with every jittered entry's cases, in play order (row j = entry j mod E at case
    (j // E) mod C_e, E * max C_e rows; see the module docstring); ``lay`` itself (one row per entry)
    when no entry has jitter. ``wheres[i]`` names entry i in errors; cases start more than
    ``goal_radius_m`` from their goal."""
    jitters = [parse_jitter(w, e, i) for i, (w, e) in enumerate(zip(wheres, entries, strict=True))]
    if all(j is None for j in jitters):
        return lay
    rows = [lay.index(torch.tensor([i])) for i in range(len(entries))]
    parts = [
        r if j is None else draw_cases(w, r, j, spec, cell_m, goal_radius_m)
        for r, j, w in zip(rows, jitters, wheres, strict=True)
    ]
    sizes = torch.tensor([p.num_worlds for p in parts])
    offsets = torch.cumsum(sizes, 0) - sizes
    e = len(parts)
    j = torch.arange(e * int(sizes.max()))
    entry = j % e
    return Layout.cat(parts).index(offsets[entry] + (j // e) % sizes[entry])


def check_start_outside_goal(
    entries: list[dict], wheres: list[str], lay: Layout, goal_radius_m: float
) -> None:
    """Refuse an entry without jitter whose start is within ``goal_radius_m`` of its goal: the env counts
    a success when the robot's centre is closer than that, so the episode would succeed before the robot
    moves (a jittered entry's cases are redrawn instead: ``draw_cases``)."""
    dist = (lay.robot_xy - lay.goal_xy).norm(dim=1)
    for i, (entry, where) in enumerate(zip(entries, wheres, strict=True)):
        if entry.get("jitter") is None and float(dist[i]) <= goal_radius_m:
            raise ValueError(
                f"{where}: the robot starts {float(dist[i]):.3f} m from the goal, within "
                f"goal_radius_m={goal_radius_m} m (the episode would count as a success before the robot "
                f"moves); move them more than {goal_radius_m} m apart"
            )
