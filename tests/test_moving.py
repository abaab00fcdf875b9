"""Moving obstacles (env.dynamic, scenario paths): hand-checkable kinematics, the moving_collision end,
spawns clear at t = 0, determinism per seed, key-by-key validation, backend parity and no host sync."""

from __future__ import annotations

import math
import shutil
from dataclasses import replace

import pytest
import torch
import yaml
from conftest import ROOM_SPEC, build_env
from omegaconf import OmegaConf

from navexp import compose_config
from navexp.analysis.sync_audit import SyncAudit
from navexp.sim.layout import Layout
from navexp.sim.motion import (
    BACK_AND_FORTH,
    BOUNCE,
    CROSSING,
    LOOP,
    Motion,
    polyline_point,
    set_geometry,
    start_position,
    time_to_contact,
)
from navexp.task.maps.families import MapSpec
from navexp.task.maps.moving import MovingSpec, clear_of_moving, with_moving_slots
from navexp.task.maps.pool import LayoutPool
from navexp.task.maps.scenario_files import load_scenario_file
from navexp.task.state import REASONS
from navexp.task.validation import validate_env_cfg

DT = 0.1
"""The default control period (s): timestep 0.02 x decimation 5."""


def one_obstacle(mode: int, path: list[list[float]], speed: float, radius: float = 0.3) -> Layout:
    """One world with one moving cylinder of ``radius`` on ``path`` at ``speed``."""
    lay = Layout.empty(1, 0, 0, "cpu", moving_slots=(1, 0))
    lay.mov_mode[0, 0] = mode
    lay.mov_path[0, 0, : len(path)] = torch.tensor(path)
    lay.mov_npts[0, 0] = len(path)
    lay.mov_speed[0, 0] = speed
    lay.mov_size[0, 0] = radius
    set_geometry(lay)
    lay.mov_start = start_position(lay)
    return lay


def run_motion(lay: Layout, steps: int, static: Layout | None = None) -> list[torch.Tensor]:
    """The obstacle's position after each of ``steps`` control steps (8 m x 8 m room)."""
    motion = Motion(1, lay.moving_slots, 4.0, 4.0, DT, "cpu")
    motion.reset(torch.ones(1, dtype=torch.bool), lay)
    active = torch.ones(1, dtype=torch.bool)
    return [motion.advance(active, lay)[1][0, 0].clone() for _ in range(steps)]


def test_back_and_forth_at_1_mps_on_a_4_m_segment_is_back_at_its_start_after_8_s():
    """(-2, 0) -> (2, 0) at 1 m/s: at the far end after 4 s (40 steps), 1 m back after 5 s, at the start
    after 8 s (80 steps), and again after 16 s."""
    pos = run_motion(one_obstacle(BACK_AND_FORTH, [[-2, 0], [2, 0]], 1.0), 160)
    assert torch.allclose(pos[39], torch.tensor([2.0, 0.0]), atol=1e-4)
    assert torch.allclose(pos[49], torch.tensor([1.0, 0.0]), atol=1e-4)
    assert torch.allclose(pos[79], torch.tensor([-2.0, 0.0]), atol=1e-4)
    assert torch.allclose(pos[159], torch.tensor([-2.0, 0.0]), atol=1e-4)


def test_a_loop_closes_its_square_and_back_and_forth_folds_at_the_ends():
    """A 2 m square loop (perimeter 8 m): 3 m along is the second corner plus 1 m; 8 m is the start.
    A 2-segment open path (3 m then 4 m, L = 7): 10 m along is 3 m back from the end, i.e. 4 m from the
    start: 1 m up the second segment = (3, 1)."""
    square = torch.tensor([[0.0, 0.0], [2.0, 0.0], [2.0, 2.0], [0.0, 2.0]])
    pad = torch.cat((square, square[-1:].expand(4, 2)))
    n, closed = torch.tensor(4), torch.tensor(True)
    assert torch.allclose(polyline_point(pad, n, torch.tensor(3.0), closed), torch.tensor([2.0, 1.0]))
    assert torch.allclose(
        polyline_point(pad, n, torch.tensor(8.0), closed), torch.tensor([0.0, 0.0]), atol=1e-5
    )
    bent = torch.tensor([[0.0, 0.0], [3.0, 0.0], [3.0, 4.0]])
    p = polyline_point(bent, torch.tensor(3), torch.tensor(10.0), torch.tensor(False))
    assert torch.allclose(p, torch.tensor([3.0, 1.0]), atol=1e-5)


def test_a_bounce_keeps_the_obstacle_inside_the_room_and_off_a_static_obstacle():
    """At (1.2, 0.7) m/s for 60 s a 0.3 m cylinder never leaves |x|, |y| <= 4 - 0.3 = 3.7 and turns back
    at the walls; heading +x at 1 m/s towards a static cylinder of 0.5 m at (2, 0) it turns back once
    its 0.3 m edge touches (x <= 2 - 0.5 - 0.3 + one 0.1 m step = 1.3)."""
    lay = one_obstacle(BOUNCE, [[0, 0]], 1.2)
    lay.mov_vel[0, 0] = torch.tensor([1.2, 0.7])
    pos = torch.stack(run_motion(lay, 600))
    assert pos.abs().max() <= 3.7 + 1e-5
    assert pos[:, 0].max() > 3.6 and pos[:, 0].min() < -3.6  # it reached both walls and came back
    static = one_obstacle(BOUNCE, [[0, 0]], 1.0)
    static.mov_vel[0, 0] = torch.tensor([1.0, 0.0])
    static.cyl_xy, static.cyl_r = torch.tensor([[[2.0, 0.0]]]), torch.tensor([[0.5]])
    static.cyl_active = torch.ones(1, 1, dtype=torch.bool)
    xs = torch.stack(run_motion(static, 60))[:, 0]
    assert xs.max() <= 1.3 + 1e-5 and xs[-1] < 0.0  # turned back, now heading for the -x wall


def test_a_crossing_agent_walks_to_its_goal_and_back():
    """From (-3, 0) to its goal (3, 0) at 1 m/s in an empty room: 2 m along after 2 s, at the goal
    (within ARRIVAL_M 0.25 m) after about 6 s, then heading back."""
    pos = torch.stack(run_motion(one_obstacle(CROSSING, [[-3, 0], [3, 0]], 1.0), 70))
    assert torch.allclose(pos[19], torch.tensor([-1.0, 0.0]), atol=1e-4)
    assert pos[:, 0].max() > 2.75 and pos[-1, 0] < pos[:, 0].max()


def test_a_crossing_agent_blocked_head_on_turns_back_instead_of_standing():
    """From (-3, 0) to (3, 0) at 1 m/s, a static cylinder of 1 m at the origin in the way: the push off
    it (full at contact, 0 beyond 0.5 m from its 0.3 m body, i.e. from x = -1.8) stops the walk near
    x = -1.5, where the agent turns back (stalled) instead of standing: within the next 5 s it is back
    past x = -2.5, and it never comes closer than x = -1.3."""
    lay = one_obstacle(CROSSING, [[-3, 0], [3, 0]], 1.0)
    lay.cyl_xy, lay.cyl_r = torch.tensor([[[0.0, 0.0]]]), torch.tensor([[1.0]])
    lay.cyl_active = torch.ones(1, 1, dtype=torch.bool)
    xs = torch.stack(run_motion(lay, 100))[:, 0]
    assert xs.max() < -1.3
    assert xs[20:70].min() < -2.5


COLLIDE = """
scenarios:
  - name: person_walks_into_the_robot
    robot: {x: 0.0, y: 0.0, yaw_deg: 0.0}
    goal: {x: 3.0, y: 3.0}
    obstacles:
      - {kind: cylinder, radius: 0.25, path: [[-2.0, 0.0], [2.0, 0.0]], speed_mps: 1.0}
  - name: robot_drives_into_a_static_box
    robot: {x: 0.0, y: 0.0, yaw_deg: 0.0}
    goal: {x: -3.0, y: -3.0}
    obstacles:
      - {kind: box, x: 1.0, y: 0.0, half_x: 0.2, half_y: 1.0}
      - {kind: cylinder, radius: 0.25, path: [[-2.0, 3.0], [2.0, 3.0]], speed_mps: 1.0}
"""


def collide_env(backend: str, scenario_file, *overrides: str):
    """The COLLIDE scenario's two worlds, held at their episode's end (env=dynamic)."""
    path = scenario_file(COLLIDE)
    return build_env(
        "env=dynamic", backend, "env.num_envs=2", f"env.scenarios={path}", "env.auto_reset=false", *overrides
    )


def test_contact_with_a_moving_obstacle_ends_as_moving_collision_apart_from_static(backend, scenario_file):
    """World 0: the robot stands at the origin, a 0.25 m person walks at it from 2 m at 1 m/s: contact
    once the gap 2 - 0.25 - 0.2 = 1.55 m is closed, at step 16 (1.6 s) -> ``moving_collision``. World
    1: the robot drives +x into a static box (face at x = 0.8) -> plain ``collision``."""
    env = collide_env(backend, scenario_file)
    ends = {}
    for k in range(30):
        a = torch.tensor([[0.0, 0.0, 0.0], [0.6, 0.0, 0.0]])
        _, _, done, _ = env.step(a)
        for w in done.nonzero().flatten().tolist():
            ends.setdefault(w, (k + 1, REASONS[int(env.state.reason[w])]))
    assert ends[0] == (16, "moving_collision"), ends
    assert ends[1][1] == "collision", ends
    log = env.pop_episode_log()
    assert float(log["Episode_Termination/moving_collision"]) == 0.5  # 1 of the 2 finished episodes


def test_time_to_contact_is_the_gap_over_the_closing_speed():
    """Robot radius 0.2 at the origin; a 0.3 m obstacle at (3, 0): gap 2.5 m. Walking at the robot at
    1 m/s: 2.5 s; with the robot driving at it at 1 m/s too: 1.25 s; walking away or sideways: inf;
    overlapping: 0; an unused slot never counts; the least over the slots."""
    pos, still, fwd = torch.zeros(1, 2), torch.zeros(1, 2), torch.tensor([[1.0, 0.0]])
    at = torch.tensor([[[3.0, 0.0]]])
    r = torch.tensor([[0.3]])
    used = torch.ones(1, 1, dtype=torch.bool)

    def ttc(vel, mov_vel, mov_pos=at, radius=r, used=used):
        return float(time_to_contact(pos, vel, 0.2, mov_pos, torch.tensor([mov_vel]), radius, used)[0])

    assert ttc(still, [[-1.0, 0.0]]) == pytest.approx(2.5)
    assert ttc(fwd, [[-1.0, 0.0]]) == pytest.approx(1.25)
    assert ttc(still, [[1.0, 0.0]]) == math.inf and ttc(still, [[0.0, 1.0]]) == math.inf
    assert ttc(still, [[0.0, 0.0]], mov_pos=torch.tensor([[[0.4, 0.0]]])) == 0.0
    assert ttc(still, [[-1.0, 0.0]], used=~used) == math.inf
    two = torch.tensor([[[3.0, 0.0], [0.0, 2.0]]])  # the second: gap 1.5 m, closing 0.5 m/s -> 3 s
    vel2 = [[-1.0, 0.0], [0.0, -0.5]]
    assert ttc(still, vel2, mov_pos=two, radius=r.expand(1, 2), used=used.expand(1, 2)) == pytest.approx(2.5)


def test_a_person_who_yields_stops_short_of_a_standing_robot_and_walks_on_when_it_leaves(
    backend, scenario_file
):
    """``env.dynamic.yield_m=0.3``, the COLLIDE scenario: the 0.25 m person walks at the standing
    robot from x = -2 at 1 m/s; the gap to the robot's edge, 1.55 - 0.1 k m after k steps, is 0.25 m
    after step 13, below 0.3: it waits at x = -0.7 (no contact in 40 steps, where it touched at step
    16 without yielding). The robot then drives off along +x and the person walks on behind it."""
    env = collide_env(backend, scenario_file, "env.dynamic.yield_m=0.3")
    still = torch.zeros(2, 3)
    for _ in range(40):
        env.step(still)
    assert not bool(env.held[0])  # no contact
    assert float(env.motion.pos[0, 0, 0]) == pytest.approx(-0.7, abs=1e-4)
    away = torch.tensor([[0.5, 0.0, 0.0], [0.0, 0.0, 0.0]])
    for _ in range(10):
        env.step(away)
    assert float(env.motion.pos[0, 0, 0]) > -0.5 and not bool(env.held[0])


def test_the_moving_ttc_reward_reads_a_person_walking_at_the_robot(backend, scenario_file):
    """The COLLIDE scenario's world 0: the robot stands, the 0.25 m person walks at it from x = -2 at
    1 m/s; after k steps the gap is 2 - 0.1 k - 0.45 m, closing at 1 m/s: ttc = 1.55 - 0.1 k s, so
    ``moving_ttc`` (horizon 1 s) pays 0 until step 5 and 1 - (1.55 - 0.1 k) from step 6 (0.05)."""
    env = collide_env(backend, scenario_file, "reward.terms.moving_ttc.weight=-2.0")
    a = torch.zeros(2, 3)
    for k in range(1, 11):
        env.step(a)
        assert float(env.state.moving_ttc[0]) == pytest.approx(1.55 - 0.1 * k, abs=0.01), k
    penalty = [1 - (1.55 - 0.1 * k) for k in range(6, 11)]  # 0.05 ... 0.45
    column = [t.name for t in env.reward_manager.terms].index("moving_ttc")
    paid = float(env.reward_manager.episode_sums[0, column])
    assert paid == pytest.approx(-2.0 * sum(penalty), abs=0.05)


def test_random_layouts_keep_start_and_goal_clear_of_moving_obstacles_at_t0():
    """512 env=dynamic layouts: every obstacle in play stands at least robot radius + clearance (0.2 +
    0.5 m) beyond its bounding radius from the start and the goal at t = 0; 2-4 of them move."""
    cfg = compose_config(["env=dynamic"]).env
    spec = replace(ROOM_SPEC, moving=MovingSpec.from_cfg(cfg.dynamic))
    pool = LayoutPool(spec, 256, torch.Generator().manual_seed(0), "cpu", maps=MapSpec())
    pool.refill()
    lay = pool.take(torch.ones(512, dtype=torch.bool))
    assert bool(clear_of_moving(lay, 0.2 + 0.5 - 1e-4).all())
    in_play = (lay.mov_mode > 0).sum(1)
    assert in_play.max() <= 4 and in_play.float().mean() > 2.0
    assert set((lay.mov_mode[lay.mov_mode > 0]).unique().tolist()) == {LOOP, BACK_AND_FORTH, BOUNCE, CROSSING}


def test_the_same_seed_moves_the_same_obstacles_and_another_seed_others():
    """Two env=dynamic envs with seed 3 give equal obstacle positions over 20 steps; seed 4 differs."""
    positions = []
    for seed in (3, 3, 4):
        env = build_env("env=dynamic", "env.sim.backend=mujoco", "env.num_envs=4", f"seed={seed}")
        for _ in range(20):
            env.step(torch.zeros(4, 3))
        positions.append(env.motion.pos.clone())
    assert torch.equal(positions[0], positions[1])
    assert not torch.equal(positions[0], positions[2])


def test_warp_step_with_moving_obstacles_makes_no_host_sync():
    """30 steps of 8 env=dynamic worlds with 1 s episodes (resets included) on warp: zero host syncs."""
    env = build_env(
        "env=dynamic",
        "env.sim.backend=warp",
        "env.num_envs=8",
        "env.episode_length_s=1.0",
        "env.check_every=1000",
    )
    start = env.motion.pos.clone()
    with SyncAudit() as audit:
        for _ in range(30):
            env.step(torch.zeros(8, 3))
    assert audit.num_syncs == 0, dict(audit.syncs)
    assert (env.motion.pos - start).abs().max() > 0.1  # they moved


def test_backends_agree_on_a_moving_scenario():
    """The shipped moving scenario (3 entries), 40 steps of the same commands: the same episode ends
    (step and reason) on warp and mujoco and, before each world's end, poses within 1e-4 m and every
    LiDAR range within 1e-3 m (the moving obstacles are in the scans). At the end step itself the
    backends differ on purpose: warp holds a touching robot where it touched, mujoco's contact force
    pushes it back (navexp.sim.warp_backend.contact_free)."""
    runs = []
    for backend in ("warp", "mujoco"):
        env = build_env(
            "env=dynamic",
            f"env.sim.backend={backend}",
            "env.num_envs=3",
            "env.scenarios=moving",
            "env.auto_reset=false",
            "env.episode_length_s=40",
        )
        scans, poses, ends = [], [], {}
        for k in range(40):
            a = torch.tensor(
                [[0.6 * math.cos(0.05 * k + i), 0.3 * math.sin(0.07 * k + i), 0.0] for i in range(3)]
            )
            _, _, done, _ = env.step(a)
            for w in done.nonzero().flatten().tolist():
                ends.setdefault(w, (k, int(env.state.reason[w])))
            scans.append(env.state.scan_clean.clone())
            poses.append(env.state.pos_xy.clone())
        runs.append((torch.stack(poses), torch.stack(scans), ends))
    (p_w, s_w, ends_w), (p_m, s_m, ends_m) = runs
    assert ends_w == ends_m
    for w in range(3):
        last = ends_w.get(w, (40, None))[0]  # the steps before this world's end
        assert (p_w[:last, w] - p_m[:last, w]).norm(dim=-1).max() < 1e-4
        assert (s_w[:last, w] - s_m[:last, w]).abs().max() < 1e-3
    assert (s_w[-1] - s_w[0]).abs().max() > 0.5  # the scans changed: something moved in them


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "env.dynamic.cylinder_count",
            "[1, 5]",
            r"dynamic.cylinder_count=\[1, 5\] is invalid; allowed: max <= ",
        ),
        (
            "env.dynamic.speed_mps",
            "[0.0, 1.0]",
            r"dynamic.speed_mps=\[0.0, 1.0\] is invalid; allowed: \[min, max\]",
        ),
        (
            "env.dynamic.models",
            "{walk: 1.0}",
            r"dynamic.models=\{'walk': 1.0\} is invalid; allowed: weights of loop",
        ),
        ("env.dynamic.models", "{loop: 0.0}", r"allowed: weights >= 0 with at least one > 0"),
        ("env.dynamic.start_delay_s", "[-1.0, 0.0]", r"dynamic.start_delay_s=\[-1.0, 0.0\] is invalid"),
    ],
)
def test_dynamic_keys_are_checked_one_by_one(key, value, message):
    """Each bad env.dynamic value fails in one line naming the key, the value and what is allowed."""
    cfg = compose_config(["env=dynamic"])
    OmegaConf.update(cfg, key, yaml.safe_load(value), merge=False)  # a dict replaced, not merged
    with pytest.raises(ValueError, match=message):
        validate_env_cfg(cfg.env)


ENTRY = """
scenarios:
  - name: e
    robot: {{x: -3.0, y: 0.0}}
    goal: {{x: 3.0, y: 0.0}}
    obstacles:
      - {obstacle}
"""


@pytest.mark.parametrize(
    ("obstacle", "message"),
    [
        (
            "{kind: cylinder, radius: 0.3, path: [[0, -2], [0, 2]], speed_mps: 1, sped: 2}",
            r"obstacle 0: moving cylinder key\(s\) \['sped'\] unknown; allowed: \['kind', 'mode', 'path'",
        ),
        (
            "{kind: cylinder, radius: 0.3, path: [[0, -2], [0, 3.9]], speed_mps: 1}",
            r"path point \[0, 3.9\] puts the obstacle outside the room; allowed: \|x\| <= 3.70",
        ),
        (
            "{kind: cylinder, radius: 0.3, path: [[0, -2], [0, 2]], speed_mps: 0}",
            r"speed_mps=0.0 is invalid with a path; allowed: > 0",
        ),
        (
            "{kind: box, half_x: 0.3, half_y: 0.3, path: [[0, -2], [0, 2]], speed_mps: 1, mode: pingpong}",
            r"mode='pingpong' is invalid; allowed: back_and_forth \| loop",
        ),
        (
            "{kind: wall, half_x: 0.3, half_y: 0.3, path: [[0, -2], [0, 2]], speed_mps: 1}",
            r"kind='wall' cannot move \(has a path\); allowed: \['box', 'cylinder'\]",
        ),
        (
            "{kind: cylinder, radius: 0.3, path: [[-2.5, 0], [0, 2]], speed_mps: 1}",
            r"the robot start is 0.200 m from moving obstacle 0 at t = 0; it must be >= robot radius",
        ),
    ],
)
def test_moving_scenario_entries_are_validated_key_by_key(scenario_file, obstacle, message):
    """A bad moving obstacle in a scenario file fails in one line naming the file, entry and obstacle."""
    spec = replace(ROOM_SPEC, moving=MovingSpec.from_cfg(compose_config(["env=dynamic"]).env.dynamic))
    path = scenario_file(ENTRY.format(obstacle=obstacle))
    with pytest.raises(ValueError, match=message):
        load_scenario_file(path, spec, MapSpec())


def test_jitter_draws_a_phase_per_case_and_keeps_starts_clear(scenario_file):
    """An entry with a 4 m back-and-forth path and jitter (16 cases): the phases differ between cases,
    lie in [0, 8) m, and every case's start and goal keep 0.35 m beyond the obstacle at t = 0."""
    spec = replace(ROOM_SPEC, moving=MovingSpec.from_cfg(compose_config(["env=dynamic"]).env.dynamic))
    text = ENTRY.format(obstacle="{kind: cylinder, radius: 0.3, path: [[0, -2], [0, 2]], speed_mps: 1}")
    text += "    jitter: {xy_m: 0.5, goal_xy_m: 0.5, cases: 16}\n"
    lay = load_scenario_file(scenario_file(text), spec, MapSpec())
    phase = lay.mov_phase[:, 0]
    assert lay.num_worlds == 16 and phase.unique().numel() == 16
    assert phase.min() >= 0 and phase.max() < 8.0
    assert bool(clear_of_moving(lay, 0.35 - 1e-4).all())


def test_lidar_history_term_holds_the_earlier_scans_and_restarts_with_an_episode():
    """obs=dynamic: the policy group is 78 + 3 x 72 = 294 wide; at reset the 3 earlier scans repeat the
    first scan; after 4 steps the history holds the scans of steps 3, 2 and 1 (most recent first), and
    the term's columns (after lidar's 72) are those scans log-encoded."""
    env = build_env("env=dynamic", "obs=dynamic", "env.sim.backend=mujoco", "env.num_envs=2")
    assert env.obs_manager.group_widths == {"policy": 294}
    obs = env.get_observations()["policy"]
    assert torch.equal(obs[:, 72:144], obs[:, :72]) and torch.equal(obs[:, 216:288], obs[:, :72])
    scans = [env.state.scan.clone()]
    for _ in range(4):
        obs, _, done, _ = env.step(torch.full((2, 3), 0.1))
        assert not done.any()
        scans.append(env.state.scan.clone())
    for k in range(3):
        assert torch.equal(env.state.scan_history[:, k], scans[3 - k])
    log = torch.log(scans[3].clamp_min(0.1) / 0.1) / math.log(6.0 / 0.1)
    assert torch.allclose(obs["policy"][:, 72:144], log, atol=1e-6)


def test_the_deployed_policy_keeps_the_scan_history():
    """NumpyPolicy with lidar (2 beams) + lidar_history (frames 2, stride 1, linear, 6 m): scans of 1, 2,
    3 m give frames [1/6 | 1/6, 1/6], then [2/6 | 1/6, 1/6], then [3/6 | 2/6, 1/6]; reset() forgets them."""
    import numpy as np

    from navexp.deploy.policy import NumpyPolicy

    meta = {
        "obs": {
            "terms": [["lidar", 2], ["lidar_history", 4]],
            "history_length": 1,
            "params": {"lidar": {"encoding": "linear"}, "lidar_history": {"frames": 2, "stride": 1}},
        },
        "lidar": {"max_range_m": 6.0},
        "scales": {"max_lin_vel_mps": 1.5, "max_ang_vel_radps": 2.0},
        "action": {"scale": [1.5, 1.5, 2.0]},
    }
    policy = NumpyPolicy([(np.zeros((3, 6)), np.zeros(3))], "elu", np.zeros(6), np.ones(6), 1e-8, meta)
    frames = [policy.observation([r, r], [1.0, 0.0], [0.0, 0.0], 0.0) * 6 for r in (1.0, 2.0, 3.0)]
    assert np.allclose(frames[0], [1, 1, 1, 1, 1, 1])
    assert np.allclose(frames[1], [2, 2, 1, 1, 1, 1])
    assert np.allclose(frames[2], [3, 3, 2, 2, 1, 1])
    policy.reset()
    assert np.allclose(policy.observation([4.0, 4.0], [1.0, 0.0], [0.0, 0.0], 0.0) * 6, [4] * 6)


def test_lidar_history_params_are_checked():
    """frames=0 is refused naming the param and what is allowed, when the config is built."""
    with pytest.raises(
        ValueError, match=r"lidar_history.params.frames=0 is invalid; allowed: an integer >= 1"
    ):
        build_env("obs=dynamic", "obs.terms.lidar_history.params.frames=0", "env.num_envs=2")


def test_the_moving_obstacle_benchmark_runs_and_refuses_an_unknown_argument():
    """scripts/bench_moving.py at 2 worlds, 2 steps, 1 repeat on mujoco: a static and a moving step
    time and their ratio (no timing asserted); ``worlds=2`` is refused naming the allowed arguments."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "bench_moving.py"
    spec = importlib.util.spec_from_file_location("bench_moving", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = bench.main(["num_envs=2", "steps=2", "repeats=1", "backends=mujoco"])
    assert set(out["mujoco"]) == {"static_ms", "moving_ms", "ratio"} and out["mujoco"]["ratio"] > 0
    with pytest.raises(SystemExit, match=r"argument 'worlds=2' is invalid; allowed: num_envs=, steps="):
        bench.main(["worlds=2"])


def test_evaluation_reports_moving_collisions_apart_and_the_time_spent_waiting(scenario_file):
    """The COLLIDE scenario played by a policy that never moves, 1.6 s episodes: world 0 is hit by the
    person at step 16 (moving_collision; it waited the 15 steps before, 1.5 s: the hit shoves it faster
    than 0.1 m/s), world 1 stands 0.6 m from the box until its time-out (16 steps, 1.6 s waited):
    moving_collision_rate 0.5, timeout_rate 0.5, collision_rate 0, mean_wait_s (1.5 + 1.6) / 2 = 1.55;
    by_scenario names each entry's end."""
    from navexp.analysis.rollout import evaluate
    from navexp.config.run_config import eval_env_cfg
    from navexp.task.env import NavEnv

    cfg = compose_config(
        ["env=dynamic", "env.device=cpu", "env.num_envs=2", f"env.scenarios={scenario_file(COLLIDE)}"]
        + ["env.episode_length_s=1.6", "env.sim.backend=mujoco"]
    )
    env = NavEnv(eval_env_cfg(cfg))
    m, _ = evaluate(lambda obs: torch.zeros(2, 3), env, 2)
    assert (m["moving_collision_rate"], m["timeout_rate"], m["collision_rate"]) == (0.5, 0.5, 0.0)
    assert m["mean_wait_s"] == pytest.approx(1.55)
    assert m["by_scenario"]["person_walks_into_the_robot"]["moving_collision_rate"] == 1.0


def test_trajectory_figures_draw_each_moving_obstacles_track():
    """An episode whose layout has 2 moving slots in play of 3 (recorded tracks [T+1, 3, 2]) draws 2
    dashed tracks and 2 obstacles at their last position (a circle of 0.3 m, a 0.4 x 0.2 m box)."""
    import matplotlib.pyplot as plt
    import numpy as np

    from navexp.analysis.plots import Episode, SceneInfo, draw_episode

    t = np.linspace(0, 1, 5)[:, None]
    track = np.stack([np.hstack((t, t)), np.hstack((-t, t)), np.zeros((5, 2))], axis=1)
    layout = {
        "robot_xy": np.zeros(2),
        "goal_xy": np.array([2.0, 0.0]),
        "mov_mode": np.array([BACK_AND_FORTH, LOOP, 0]),
        "mov_size": np.array([[0.3, 0.3], [0.4, 0.2], [0.1, 0.1]]),
        "mov_is_box": np.array([False, True, True]),
        "mov_track": track,
    }
    info = SceneInfo(4.0, 4.0, 0.3, 0.2, 6.0, 1.5, np.zeros(4), 0.1)
    ep = Episode(layout, np.zeros((5, 2)), np.zeros(5), np.zeros(5), np.full((5, 4), 6.0), 1)
    fig, ax = plt.subplots()
    draw_episode(ax, ep, info)
    tracks = [line for line in ax.lines if line.get_gid() == "moving_track"]
    bodies = [p for p in ax.patches if p.get_gid() == "moving"]
    plt.close(fig)
    assert len(tracks) == 2 and np.allclose(tracks[1].get_xydata()[-1], [-1.0, 1.0])
    assert len(bodies) == 2 and bodies[0].radius == pytest.approx(0.3)
    assert (bodies[1].get_width(), bodies[1].get_height()) == pytest.approx((0.8, 0.4))


def test_the_fused_motion_equals_the_old_formulas_for_every_model_over_200_steps():
    """recipe=dynamic's layouts (static cylinders, boxes and walls; 2-4 moving obstacles of all four
    models), 64 worlds for 200 control steps (20 s), about 1 world in 10 held each step and a quarter
    of them restarted at step 100: after every step the fused ``Motion.advance`` (one masked pass, the
    path geometry read from the layout, one lean nearest-surface query) puts every moving obstacle
    where the old per-model formulas (tests/reference_motion.py: the geometry recomputed from the
    waypoints every step) do, bit for bit, keeps the same bounce velocities and crossing legs, and
    an obstacle of every model ended more than 1 m from its start."""
    from reference_motion import ReferenceMotion

    env = build_env("recipe=dynamic", "env.sim.backend=mujoco", "env.num_envs=64", "seed=5")
    lay, n = env.layout, 64
    assert lay.wall_slots > 0 and bool(lay.cyl_active.any()) and bool(lay.box_active.any())
    assert set(lay.mov_mode.unique().tolist()) == {0, LOOP, BACK_AND_FORTH, BOUNCE, CROSSING}
    args = (n, lay.moving_slots, env.half_x, env.half_y, DT, "cpu")
    fused, old = Motion(*args), ReferenceMotion(*args)
    gen = torch.Generator().manual_seed(0)
    for m in (fused, old):
        m.reset(torch.ones(n, dtype=torch.bool), lay)
    start = fused.pos.clone()
    bounce = lay.mov_mode == BOUNCE
    for step in range(200):
        active = torch.rand(n, generator=gen) > 0.1
        if step == 100:
            restart = torch.rand(n, generator=gen) < 0.25
            fused.reset(restart, lay)
            old.reset(restart, lay)
        fused.advance(active, lay)
        old.advance(active, lay)
        assert torch.equal(fused.pos, old.pos), (step, float((fused.pos - old.pos).abs().max()))
        assert torch.equal(fused.vel[bounce], old.vel[bounce]) and torch.equal(fused.leg, old.leg), step
    travel = (fused.pos - start).norm(dim=-1)
    for mode in (LOOP, BACK_AND_FORTH, BOUNCE, CROSSING):
        assert float(travel[lay.mov_mode == mode].max()) > 1.0, mode


def test_path_geometry_of_a_bent_path_open_and_closed():
    """(0, 0) -> (3, 0) -> (3, 4), 3 points in a 4-point slot. Open (back and forth): segments of 3 and
    4 m starting 0 and 3 m along, L = 7 m, period 2 x 7 = 14 m, the first segment ends at 3 m and the
    second (the last in use) reads inf. Closed (loop): the closing side (3, 4) -> (0, 0) is 5 m, L =
    3 + 4 + 5 = 12 m = the period, ends 3, 7, inf. 10 m along the loop is 3 m down the closing side:
    (3, 4) + 3/5 (-3, -4) = (1.2, 1.6)."""
    from navexp.sim.layout import path_geometry
    from navexp.sim.motion import segment_point

    path = torch.tensor([[0.0, 0.0], [3.0, 0.0], [3.0, 4.0], [3.0, 4.0]])
    n = torch.tensor(3)
    inf = float("inf")
    seg, ends, length, period = path_geometry(path, n, torch.tensor(False))
    assert torch.equal(seg[:2], torch.tensor([[0.0, 0, 3, 0, 0, 3], [3.0, 0, 0, 4, 3, 4]]))
    assert ends.tolist() == [3.0, inf, inf, inf] and (float(length), float(period)) == (7.0, 14.0)
    seg, ends, length, period = path_geometry(path, n, torch.tensor(True))
    assert torch.equal(seg[2], torch.tensor([3.0, 4, -3, -4, 7, 5]))
    assert ends.tolist() == [3.0, 7.0, inf, inf] and (float(length), float(period)) == (12.0, 12.0)
    p = segment_point(seg, ends, length, period, torch.tensor(10.0), torch.tensor(True))
    assert torch.allclose(p, torch.tensor([1.2, 1.6]))


def _geometry_is_current(lay: Layout) -> bool:
    """The layout's path geometry and bounding radii equal those recomputed from its waypoints."""
    fresh = lay.index(torch.arange(lay.num_worlds))
    set_geometry(fresh)
    names = ("mov_seg", "mov_seg_end", "mov_length", "mov_period", "mov_radius")
    return all(torch.equal(getattr(lay, f), getattr(fresh, f)) for f in names)


def test_every_source_of_layouts_carries_the_path_geometry_of_its_paths(scenario_file):
    """The geometry fields (``mov_seg``, ``mov_seg_end``, ``mov_length``, ``mov_period``,
    ``mov_radius``) equal those recomputed from the waypoints in: the pool's env=dynamic layouts
    (path_length_m 2-5 m: a loop's perimeter 4 x L/2 and a segment's way there and back 2 L are at
    most 10 m), a scenario file's back-and-forth person (4 m: period 8 m, radius 0.3 m) with jittered
    cases, Layout.empty and a ROS map's layouts (``with_moving_slots``: every slot unused), and the
    env's own packed layouts after 30 steps with resets."""
    spec = replace(ROOM_SPEC, moving=MovingSpec.from_cfg(compose_config(["env=dynamic"]).env.dynamic))
    pool = LayoutPool(spec, 64, torch.Generator().manual_seed(0), "cpu", maps=MapSpec())
    pool.refill()
    drawn = pool.take(torch.ones(128, dtype=torch.bool))
    assert _geometry_is_current(drawn)
    on_path = (drawn.mov_mode == LOOP) | (drawn.mov_mode == BACK_AND_FORTH)
    period = drawn.mov_period[on_path]
    assert period.numel() > 0 and bool(((period > 0) & (period <= 10 + 1e-4)).all())
    text = ENTRY.format(obstacle="{kind: cylinder, radius: 0.3, path: [[0, -2], [0, 2]], speed_mps: 1}")
    text += "    jitter: {xy_m: 0.5, goal_xy_m: 0.5, cases: 4}\n"
    cases = load_scenario_file(scenario_file(text), spec, MapSpec())
    assert _geometry_is_current(cases)
    assert cases.mov_period[:, 0].tolist() == [8.0] * 4
    assert torch.allclose(cases.mov_radius[:, 0], torch.tensor(0.3))
    assert _geometry_is_current(Layout.empty(3, 1, 1, "cpu", moving_slots=(2, 1)))
    assert _geometry_is_current(with_moving_slots(Layout.empty(3, 1, 1, "cpu"), spec.moving))
    env = build_env("env=dynamic", "env.sim.backend=mujoco", "env.num_envs=8", "env.episode_length_s=1.0")
    for _ in range(30):
        env.step(torch.zeros(8, 3))
    assert int(env.episode_count.min()) >= 2 and _geometry_is_current(env.layout)


def test_the_lean_nearest_obstacle_query_equals_the_old_one():
    """64 random layouts (6 cylinder, 4 box and 3 wall slots, turned every way, some inactive) and 9
    points each, one inside a box: the distance and closest point of ``nearest_obstacle`` (yaw turned
    once, the room's faces from constants) are those of the old query (tests/reference_motion.py),
    bit for bit."""
    from reference_motion import nearest_obstacle as old_nearest

    from navexp.sim.layout import nearest_obstacle

    g = torch.Generator().manual_seed(0)
    k, c, b, w = 64, 6, 4, 3
    uniform = lambda lo, hi, *shape: torch.rand(*shape, generator=g) * (hi - lo) + lo  # noqa: E731
    lay = Layout.empty(k, c, b, "cpu", wall_slots=w)
    lay.cyl_xy, lay.cyl_r, lay.cyl_active = (
        uniform(-4, 4, k, c, 2),
        uniform(0.1, 0.6, k, c),
        uniform(0, 1, k, c) > 0.3,
    )
    lay.box_xy, lay.box_half, lay.box_yaw = (
        uniform(-4, 4, k, b, 2),
        uniform(0.1, 1.1, k, b, 2),
        uniform(-4, 4, k, b),
    )
    lay.box_active = uniform(0, 1, k, b) > 0.3
    lay.wall_xy, lay.wall_half, lay.wall_yaw = (
        uniform(-4, 4, k, w, 2),
        uniform(0.05, 1, k, w, 2),
        uniform(-4, 4, k, w),
    )
    lay.wall_active = uniform(0, 1, k, w) > 0.3
    points = uniform(-4.5, 4.5, k, 9, 2)
    points[:, 0] = lay.box_xy[:, 0] + 0.01  # inside the first box
    dist, closest = nearest_obstacle(points, lay, 4.0, 3.0)
    old_dist, old_closest = old_nearest(points, lay, 4.0, 3.0)
    assert torch.equal(dist, old_dist) and torch.equal(closest, old_closest)
    assert bool((dist[:, 0] < 0)[lay.box_active[:, 0]].all())  # the points inside a box read negative


def _motion_runs(n: int, steps: int, *motions: Motion, lay: Layout) -> list[list[torch.Tensor]]:
    """Each motion's positions after every one of ``steps`` control steps (about 1 world in 10 held)."""
    gen = torch.Generator().manual_seed(0)
    for m in motions:
        m.reset(torch.ones(n, dtype=torch.bool), lay)
    runs: list[list[torch.Tensor]] = [[] for _ in motions]
    for _ in range(steps):
        active = torch.rand(n, generator=gen) > 0.1
        for m, run in zip(motions, runs, strict=True):
            run.append(m.advance(active, lay)[1].clone())
    return runs


@pytest.mark.skipif(
    not (shutil.which("g++") or shutil.which("c++")), reason="torch.compile needs a C++ compiler"
)
def test_the_compiled_motion_follows_the_eager_one_for_every_model_over_200_steps():
    """env.dynamic.compile_motion: recipe=dynamic's layouts, 64 worlds, 200 control steps, compiled
    (its first step timed) against eager: loops, back-and-forth paths and crossing agents within 1e-5 m
    at every step (the compiled norm, sin and cos may differ from eager's in the last bit); a bouncing
    obstacle within 1e-3 m (1.3e-5 m measured: each bounce off a round obstacle magnifies a last-bit
    difference of its normal, so the bound is loose, and a missed bounce would be off by metres)."""
    env = build_env("recipe=dynamic", "env.sim.backend=mujoco", "env.num_envs=64", "seed=5")
    lay, n = env.layout, 64
    args = (n, lay.moving_slots, env.half_x, env.half_y, DT, "cpu")
    compiled = Motion(*args, compile=True)
    fast, eager = _motion_runs(n, 200, compiled, Motion(*args), lay=lay)
    assert compiled._compiled is not None and compiled.compile_s > 0  # compiled, no eager fallback
    gap = torch.stack([(a - b).norm(dim=-1) for a, b in zip(fast, eager, strict=True)]).amax(0)  # [N, M]
    for mode, bound in ((LOOP, 1e-5), (BACK_AND_FORTH, 1e-5), (CROSSING, 1e-5), (BOUNCE, 1e-3)):
        assert float(gap[lay.mov_mode == mode].max()) <= bound, (mode, float(gap[lay.mov_mode == mode].max()))


def test_the_motion_runs_eagerly_with_one_warning_when_compiling_fails(monkeypatch):
    """A torch.compile whose compiled step raises (no C++ compiler here): the first step warns once,
    naming the key and the error, and every step equals the eager motion's bit for bit (10 steps,
    recipe=dynamic, 8 worlds); no second warning."""
    import warnings

    def no_compiler(fn, **kwargs):
        def fail(*args):
            raise RuntimeError("no C++ compiler found")

        return fail

    env = build_env("recipe=dynamic", "env.sim.backend=mujoco", "env.num_envs=8", "seed=5")
    lay = env.layout
    args = (8, lay.moving_slots, env.half_x, env.half_y, DT, "cpu")
    monkeypatch.setattr(torch, "compile", no_compiler)
    failing = Motion(*args, compile=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tried, eager = _motion_runs(8, 10, failing, Motion(*args), lay=lay)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1, messages
    assert "env.dynamic.compile_motion" in messages[0] and "no C++ compiler found" in messages[0]
    assert messages[0].endswith("it runs eagerly")
    assert all(torch.equal(a, b) for a, b in zip(tried, eager, strict=True))


def test_compile_motion_takes_a_bool():
    """env.dynamic.compile_motion='yes' (a config without the typed schema) fails in one line naming
    the key, the value and true | false."""
    from navexp.task.maps.moving import DynamicCfg, check_dynamic_cfg

    with pytest.raises(ValueError, match=r"dynamic.compile_motion='yes' is invalid; allowed: true \| false"):
        check_dynamic_cfg(DynamicCfg(compile_motion="yes"))


def test_yield_m_takes_a_gap_of_zero_or_more():
    """env.dynamic.yield_m=-0.2 fails in one line naming the key, the value and what is allowed."""
    env_err = r"dynamic.yield_m=-0.2 is invalid; allowed: >= 0 \(0: obstacles ignore the robot\)"
    from navexp.task.maps.moving import DynamicCfg, check_dynamic_cfg

    with pytest.raises(ValueError, match=env_err):
        check_dynamic_cfg(DynamicCfg(yield_m=-0.2))
