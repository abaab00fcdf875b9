"""Jittered scenario entries: one hand-made entry with ``jitter`` loads as ``cases`` distinct start/goal
cases in its declared regions (clear of obstacles, with a free path, seeded), an evaluation counts them
as distinct cases under the entry's name, and bad jitter keys fail naming the entry and key."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOM_SPEC

from navexp import compose_config
from navexp.analysis.rollout import evaluate
from navexp.config.run_config import eval_env_cfg
from navexp.sim.layout import obstacle_distance
from navexp.task.env import NavEnv
from navexp.task.maps.families import MapSpec
from navexp.task.maps.random_family import LayoutSpec
from navexp.task.maps.scenario_files import load_scenario_file, resolve_scenario_path

SPEC = ROOM_SPEC

# Start region x in [-3.5, -2.5], y in [-0.5, 0.5], yaw in [-180, 180] deg; goal region x in [2.5, 3.5],
# y in [-0.5, 0.5]. A cylinder of radius 0.1 at (-3, 0.6) sits by the start region; a wall across the room
# at x = 0 (y in [-4, 1.6]) leaves a 2.4 m gap at the top, so every path detours over y = 1.8.
JITTER = "{xy_m: 0.5, yaw_deg: 180, goal_xy_m: 0.5, cases: 16, seed: 7}"
FIXED_ENTRY = """
  - name: fixed
    robot: {x: -3.0, y: -2.0, yaw_deg: 0.0}
    goal: {x: 3.0, y: -2.0}
"""
JIT_ENTRY = f"""
  - name: jit
    robot: {{x: -3.0, y: 0.0, yaw_deg: 0.0}}
    goal: {{x: 3.0, y: 0.0}}
    jitter: {JITTER}
    obstacles:
      - {{kind: cylinder, x: -3.0, y: 0.6, radius: 0.1}}
      - {{kind: box, x: 0.0, y: -1.2, half_x: 0.1, half_y: 2.8}}
"""
JITTERED = "scenarios:" + FIXED_ENTRY + JIT_ENTRY


def _write(tmp_path: Path, text: str, name: str = "jitter.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_jittered_entry_loads_as_16_distinct_cases_in_its_regions(tmp_path):
    """2 entries, the second with cases=16: 2 x 16 = 32 rows, row j plays entry j mod 2. The odd rows
    hold 16 distinct (start, yaw, goal) in the declared regions, each >= 0.35 m from every obstacle and
    wall, with a finite shortest path of at least the straight 5 m (start x <= -2.5, goal x >= 2.5) and
    the same obstacles; the even rows are the fixed entry; loading again gives the same cases."""
    path = _write(tmp_path, JITTERED)
    lay = load_scenario_file(path, SPEC, MapSpec())
    assert lay.num_worlds == 32
    fixed, jit = lay.index(torch.arange(0, 32, 2)), lay.index(torch.arange(1, 32, 2))
    assert torch.equal(fixed.robot_xy, torch.tensor([[-3.0, -2.0]]).expand(16, 2))
    assert torch.equal(fixed.goal_xy, torch.tensor([[3.0, -2.0]]).expand(16, 2))
    x, y, yaw = jit.robot_xy[:, 0], jit.robot_xy[:, 1], jit.robot_yaw
    gx, gy = jit.goal_xy[:, 0], jit.goal_xy[:, 1]
    assert bool(((x >= -3.5) & (x <= -2.5) & (y >= -0.5) & (y <= 0.5)).all())
    assert bool(((gx >= 2.5) & (gx <= 3.5) & (gy >= -0.5) & (gy <= 0.5)).all())
    assert bool((yaw.abs() <= math.pi).all()) and float(yaw.max() - yaw.min()) > math.pi  # spread over 360
    pairs = {
        tuple(round(float(v), 5) for v in (*r, a, *g))
        for r, a, g in zip(jit.robot_xy, yaw, jit.goal_xy, strict=True)
    }
    starts = {tuple(round(float(v), 5) for v in r) for r in jit.robot_xy}
    assert len(pairs) == 16 and len(starts) == 16
    dist = obstacle_distance(torch.stack((jit.robot_xy, jit.goal_xy), 1), jit, 4.0, 4.0)
    assert float(dist.min()) >= 0.35
    assert bool(torch.isfinite(jit.shortest_path_m).all()) and float(jit.shortest_path_m.min()) >= 5.0
    for name in ("cyl_xy", "cyl_r", "cyl_active", "box_xy", "box_half", "box_yaw", "box_active"):
        field = getattr(jit, name)
        assert torch.equal(field, field[:1].expand_as(field)), name
    assert torch.equal(jit.cyl_xy[0, 0], torch.tensor([-3.0, 0.6])) and bool(jit.box_active[0, 0])
    again = load_scenario_file(path, SPEC, MapSpec())
    assert torch.equal(again.robot_xy, lay.robot_xy) and torch.equal(again.goal_xy, lay.goal_xy)
    assert torch.equal(again.robot_yaw, lay.robot_yaw)
    other = _write(tmp_path, JITTERED.replace("seed: 7", "seed: 8"), "b.yaml")
    other_seed = load_scenario_file(other, SPEC, MapSpec())
    assert not torch.equal(other_seed.robot_xy, lay.robot_xy)


def test_the_shipped_corridor_jitter_has_64_cases_between_the_boxes():
    """configs/scenarios/corridor_jitter.yaml: one entry, cases=64 -> 64 rows; starts in x [-3.7, -2.7],
    goals in x [2.7, 3.7], all y in [-0.5, 0.5]; 64 distinct starts."""
    cfg = compose_config(["env.device=cpu"])
    spec, maps = LayoutSpec.from_env_cfg(cfg.env), MapSpec.from_env_cfg(cfg.env)
    lay = load_scenario_file(resolve_scenario_path("corridor_jitter"), spec, maps)
    assert lay.num_worlds == 64
    x, gx = lay.robot_xy[:, 0], lay.goal_xy[:, 0]
    assert (
        float(x.min()) >= -3.7
        and float(x.max()) <= -2.7
        and float(gx.min()) >= 2.7
        and float(gx.max()) <= 3.7
    )
    assert float(torch.cat((lay.robot_xy[:, 1], lay.goal_xy[:, 1])).abs().max()) <= 0.5
    assert len({tuple(r.tolist()) for r in lay.robot_xy}) == 64


def test_an_evaluation_counts_each_jittered_case_and_the_fixed_entry_once(tmp_path):
    """4 worlds, 16 episodes on the 2-entry file (32 rows): episode i = w + 4k plays row i, entry i mod 2,
    so 'fixed' plays 8 episodes of its 1 case and 'jit' 8 episodes of cases 0..7: 8 distinct cases, 9 in
    all. Standing still, every episode times out; the interval is that of 9 of 9, [0.7008, 1], not 16
    of 16. On the jittered entry alone (1 entry, 16 rows) 8 episodes on 4 worlds play 8 distinct cases."""
    path = _write(tmp_path, JITTERED)
    cfg = compose_config(
        ["env.device=cpu", "env.num_envs=4", "env.episode_length_s=0.3", f"env.scenarios={path}"]
    )
    env = NavEnv(eval_env_cfg(cfg))
    m, _ = evaluate(lambda obs: torch.zeros(env.num_envs, env.num_actions), env, 16)
    assert m["num_episodes"] == 16 and m["num_distinct_cases"] == 9 and m["timeout_rate"] == 1.0
    assert m["ci95"]["timeout_rate"] == pytest.approx([0.7008, 1.0], abs=1e-4)
    assert list(m["by_scenario"]) == ["fixed", "jit"]
    assert (
        m["by_scenario"]["fixed"]["num_episodes"] == 8
        and m["by_scenario"]["fixed"]["num_distinct_cases"] == 1
    )
    assert m["by_scenario"]["jit"]["num_episodes"] == 8 and m["by_scenario"]["jit"]["num_distinct_cases"] == 8
    alone = _write(tmp_path, "scenarios:" + JIT_ENTRY, "alone.yaml")
    cfg = compose_config(
        ["env.device=cpu", "env.num_envs=4", "env.episode_length_s=0.3", f"env.scenarios={alone}"]
    )
    env = NavEnv(eval_env_cfg(cfg))
    m, _ = evaluate(lambda obs: torch.zeros(env.num_envs, env.num_actions), env, 8)
    assert m["num_episodes"] == 8 and m["num_distinct_cases"] == 8 and list(m["by_scenario"]) == ["jit"]


@pytest.mark.parametrize(
    ("jitter", "message"),
    [
        (
            "{xy_m: -0.5, cases: 4}",
            "scenario 1 (jit): jitter.xy_m=-0.5 is invalid; xy_m must be a finite number >= 0",
        ),
        (
            "{xy_m: 0.5, cases: 0}",
            "scenario 1 (jit): jitter.cases=0 is invalid; cases must be an integer in [1, 4096]",
        ),
        (
            "{xy_m: 0.5, cases: 4, radius_m: 1}",
            "scenario 1 (jit): jitter key(s) ['radius_m'] unknown; allowed:",
        ),
        ("{cases: 4}", "xy_m, yaw_deg and goal_xy_m are all 0"),
    ],
)
def test_bad_jitter_keys_name_the_file_entry_key_and_what_is_allowed(tmp_path, jitter, message):
    """A negative range, cases=0, an unknown key and cases > 1 without any range each fail at load."""
    path = _write(tmp_path, JITTERED.replace(JITTER, jitter))
    with pytest.raises(ValueError, match="jitter") as e:
        load_scenario_file(path, SPEC, MapSpec())
    assert str(path) in str(e.value) and message in str(e.value)


def test_a_start_region_without_clearance_fails_naming_the_entry(tmp_path):
    """Start region x in [-3.05, -2.95], y in [0.2, 0.3] next to the cylinder at (-3, 0.6) of radius
    0.1: every start is 0.2-0.303 m from it (the farthest, (-2.95, 0.2): sqrt(0.05^2 + 0.4^2) - 0.1), below
    the 0.35 m clearance (the fixed start (-3, 0.25), 0.25 m off, is free for the 0.2 m radius), so no
    case is found in 32 rounds of 4 draws = 128 draws."""
    text = JITTERED.replace("{x: -3.0, y: 0.0, yaw_deg: 0.0}", "{x: -3.0, y: 0.25}")
    text = text.replace(JITTER, "{xy_m: 0.05, cases: 4}")
    path = _write(tmp_path, text)
    with pytest.raises(ValueError) as e:
        load_scenario_file(path, SPEC, MapSpec())
    msg = str(e.value)
    assert (
        f"{path} scenario 1 (jit): jitter found 0 of cases=4 valid cases in 128 draws: 0 starts and " in msg
    )
    assert (
        "0 draws both, 0 of those started more than goal_radius_m=0.3 m from the goal, and 0 of those had a "
        "free path; move or widen the regions" in msg
    )


def test_a_jittered_pair_of_a_ros_map_gives_its_cases_in_the_map_frame(tmp_path):
    """A free 8 x 8 pixel map of 0.5 m cells (4 m x 4 m, origin (0, 0)), centred on the room: map (x, y)
    -> world (x - 2, y - 2). Pair 0 fixed, pair 1 with robot (1, 1) +- 0.3 and cases=3: 2 x 3 = 6 rows;
    the even rows are pair 0, the odd rows 3 distinct starts in world x, y in [-1.3, -0.7], goal (1, 1).
    The room beyond the map (2 m on every side) takes 4 wall slots."""
    from PIL import Image

    Image.fromarray(np.full((8, 8), 254, dtype=np.uint8)).save(tmp_path / "free.pgm")
    path = _write(
        tmp_path,
        "image: free.pgm\nresolution: 0.5\norigin: [0.0, 0.0, 0.0]\nstarts_goals:\n"
        "  - {robot: {x: 0.5, y: 0.5}, goal: {x: 3.5, y: 0.5}}\n"
        "  - {robot: {x: 1.0, y: 1.0}, goal: {x: 3.0, y: 3.0}, jitter: {xy_m: 0.3, cases: 3}}\n",
        "free.yaml",
    )
    lay = load_scenario_file(path, replace(SPEC, wall_slots=4), MapSpec())
    assert lay.num_worlds == 6
    assert torch.equal(lay.robot_xy[0::2], torch.tensor([[-1.5, -1.5]]).expand(3, 2))
    starts, goals = lay.robot_xy[1::2], lay.goal_xy[1::2]
    assert bool(((starts >= -1.3) & (starts <= -0.7)).all()) and len({tuple(s.tolist()) for s in starts}) == 3
    assert torch.equal(goals, torch.tensor([[1.0, 1.0]]).expand(3, 2))
    assert bool(torch.isfinite(lay.shortest_path_m).all())
