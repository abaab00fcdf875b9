"""Movement, contacts, resets and seeding of NavEnv in the real simulator (small CPU worlds)."""

from __future__ import annotations

import pytest
import torch
from conftest import build_env

TWO_WORLDS = """
scenarios:
  - name: cylinder_ahead
    robot: {x: 0.0, y: 0.0, yaw_deg: 0.0}
    goal: {x: -3.0, y: 3.0}
    obstacles:
      - {kind: cylinder, x: 1.0, y: 0.0, radius: 0.3}
  - name: open
    robot: {x: 0.0, y: 0.0, yaw_deg: 90.0}
    goal: {x: -3.0, y: -3.0}
"""

FORWARD = torch.tensor([1.0, 0.0, 0.0])


def test_forward_command_at_yaw_90_moves_along_plus_y(scenario_file, backend):
    """Body-frame forward at yaw 90 deg: 10 steps of 0.1 s at 1.5 m/s move ~1.5 m along +y, ~0 along x."""
    env = build_env(backend, "env.num_envs=2", f"env.scenarios={scenario_file(TWO_WORLDS)}")
    for _ in range(10):
        env.step(FORWARD.repeat(2, 1))
    x, y = env.state.pos_xy[1].tolist()
    assert abs(x) < 1e-3
    assert 1.40 < y < 1.51  # 1.5 m less the servo's ~10 ms velocity lag
    assert abs(env.state.vel_body[1, 0].item() - 1.5) < 0.02  # forward speed in the body frame


def test_worlds_collide_with_their_own_obstacles(scenario_file, backend):
    """World 0 hits its cylinder (surface 0.7 m ahead, minus 0.2 m radius) within
    4 steps; world 1 never does."""
    env = build_env(
        backend, "env.num_envs=2", f"env.scenarios={scenario_file(TWO_WORLDS)}", "env.auto_reset=false"
    )
    assert not torch.equal(env.state.scan_clean[0], env.state.scan_clean[1])
    collided_at = None
    for i in range(8):
        _, rew, done, extras = env.step(FORWARD.repeat(2, 1))
        if done[0] and collided_at is None:
            collided_at = i
    assert collided_at is not None and collided_at <= 4  # 0.5 m gap at 0.15 m per step
    assert env.state.reason.tolist() == [2, 0]  # world 0: collision; world 1 still running
    assert env.state.pos_xy[0, 0].item() < 0.55  # held at the obstacle (0.7 - 0.2 = 0.5 m), not through it


def test_actions_are_clipped_and_bad_actions_raise(scenario_file, backend):
    """An action of 5.0 drives at the 1.5 m/s limit; a wrong shape raises at once and leaves the env
    usable; actions that need grad or are float64 are taken as values."""
    env = build_env(backend, "env.num_envs=2", f"env.scenarios={scenario_file(TWO_WORLDS)}")
    env.step(torch.tensor([[0.0, 0.0, 0.0], [5.0, 0.0, 0.0]]))
    assert abs(env.state.vel_body[1, 0].item() - 1.5) < 0.02
    assert env.state.action[1, 0].item() == 1.0
    with pytest.raises(ValueError, match=r"shape \(2, 3\); got \(2, 2\)"):
        env.step(torch.zeros(2, 2))
    env.step(torch.full((2, 3), 0.5, requires_grad=True))
    env.step(torch.full((2, 3), 0.5, dtype=torch.float64))
    assert env.state.action[0].tolist() == [0.5, 0.5, 0.5]


def test_nan_action_is_zeroed_and_raised_at_the_next_check(scenario_file, backend):
    """check_every=3: a NaN action in world 1 at step 2 is not applied (world 1 stands still while
    world 0 drives) and the check after step 3 raises naming world 1 and step 2."""
    env = build_env(
        backend, "env.num_envs=2", f"env.scenarios={scenario_file(TWO_WORLDS)}", "env.check_every=3"
    )
    env.step(torch.zeros(2, 3))  # step 1
    start = env.state.pos_xy.clone()
    env.step(torch.tensor([[0.5, 0.0, 0.0], [float("nan"), 0.0, 0.0]]))  # step 2: no raise yet
    assert (env.state.pos_xy[1] - start[1]).norm().item() < 1e-6  # zero action in world 1
    assert (env.state.pos_xy[0] - start[0]).norm().item() > 0.02  # world 0 moved
    match = r"NaN/inf in actions in worlds \[1\] \(1 worlds\), first at env step 2"
    with pytest.raises(FloatingPointError, match=match):
        env.step(torch.zeros(2, 3))  # step 3: the check


def test_partial_reset_leaves_other_worlds_bit_for_bit_unchanged(backend):
    """Resetting worlds 1 and 3 changes their layouts; worlds 0 and 2 keep every state bit."""
    env = build_env(backend, "env.num_envs=4")
    for _ in range(3):
        env.step(torch.rand(4, 3, generator=torch.Generator().manual_seed(0)) * 2 - 1)
    before = {
        "qpos": env.sim.qpos.clone(),
        "qvel": env.sim.qvel.clone(),
        "scan": env.state.scan_clean.clone(),
        "goal": env.layout.goal_xy.clone(),
        "obst": env.layout.cyl_xy.clone(),
        "obs": env.get_observations()["policy"].clone(),
        "window": env.state.pos_window.clone(),
        "len": env.episode_length_buf.clone(),
    }
    env.reset(torch.tensor([1, 3]))
    keep, reset = [0, 2], [1, 3]
    for name, old in before.items():
        new = {
            "qpos": env.sim.qpos,
            "qvel": env.sim.qvel,
            "scan": env.state.scan_clean,
            "goal": env.layout.goal_xy,
            "obst": env.layout.cyl_xy,
            "obs": env.get_observations()["policy"],
            "window": env.state.pos_window,
            "len": env.episode_length_buf,
        }[name]
        assert torch.equal(new[keep], old[keep]), name
    assert not torch.equal(env.layout.goal_xy[reset], before["goal"][reset])
    assert (env.episode_length_buf[reset] == 0).all() and (env.sim.qvel[reset] == 0).all()


def test_spawned_poses_are_collision_free(backend):
    """64 dense random layouts: start and goal keep robot radius + clearance (0.35 m) from everything."""
    # obs=asymmetric: its privileged truth_clearance term makes the env compute state.clearance.
    env = build_env(backend, "env=dense", "env.num_envs=64", "obs=asymmetric")
    need = env.env_cfg.robot.radius_m + env.env_cfg.spawn_clearance_m
    assert (env.state.clearance >= need - 1e-5).all()
    from navexp.sim.layout import nearest_obstacle

    d_goal, _ = nearest_obstacle(env.layout.goal_xy.unsqueeze(1), env.layout, 4.0, 4.0)
    assert (d_goal >= need - 1e-5).all()
    assert (env.state.goal_dist >= env.env_cfg.min_start_goal_dist_m).all()
    env.step(torch.zeros(64, 3))
    assert not env.state.contact.any()  # standing still at spawn touches nothing


def test_impossible_layouts_fail_loudly(backend):
    """Start and goal 10.5 m apart cannot fit (free corners are at most 2 * 3.65 * sqrt 2 = 10.32 m apart)."""
    with pytest.raises(RuntimeError, match="no collision-free start/goal"):
        build_env(backend, "env=empty", "env.num_envs=2", "env.min_start_goal_dist_m=10.5")


def test_same_seed_same_episode_different_seed_different(backend):
    """Seed 7 twice: identical layouts and trajectories under the same actions; seed 8 differs."""
    actions = torch.rand(20, 4, 3, generator=torch.Generator().manual_seed(1)) * 2 - 1

    def rollout(seed: int):
        env = build_env(backend, "env.num_envs=4", f"seed={seed}", "env.lidar.range_noise_std_m=0.01")
        start = (env.layout.cyl_xy.clone(), env.layout.goal_xy.clone(), env.state.pos_xy.clone())
        obs = []
        for a in actions:
            obs.append(env.step(a)[0]["policy"].clone())
        return start, torch.stack(obs), env.sim.qpos.clone()

    a, b, c = rollout(7), rollout(7), rollout(8)
    for x, y in zip(a[0], b[0], strict=True):
        assert torch.equal(x, y)
    assert torch.equal(a[1], b[1]) and torch.equal(a[2], b[2])
    assert not torch.equal(a[0][1], c[0][1])


def test_non_finite_state_stops_with_the_worlds_named(backend):
    """check_every=4: a NaN velocity in world 2 is flagged on step 1 and raised by the check after
    step 4 (not before), naming world 2 and step 1; the runner's check_faults() raises at once."""
    env = build_env(backend, "env.num_envs=4", "env.check_every=4")
    env.sim.qvel[2, 0] = float("nan")
    for _ in range(3):
        env.step(torch.zeros(4, 3))
    with pytest.raises(FloatingPointError, match=r"worlds \[2\] \(1 worlds\), first at env step 1"):
        env.step(torch.zeros(4, 3))
    env.sim.qvel[0, 1] = float("inf")
    env.step(torch.zeros(4, 3))
    with pytest.raises(FloatingPointError, match=r"in worlds \[0[],].*first at env step 5"):
        env.check_faults()


WALL_AHEAD = """
scenarios:
  - name: wall_ahead
    robot: {x: 3.0, y: 0.0, yaw_deg: 0.0}
    goal: {x: -3.0, y: 3.0}
"""


def _drive_into_the_wall(backend: str, scenario: str):
    env = build_env(backend, "env.num_envs=1", f"env.scenarios={scenario}", "env.auto_reset=false")
    ended_at, poses = None, []
    for i in range(10):
        _, _, done, _ = env.step(FORWARD.repeat(1, 1))
        poses.append(env.state.pos_xy[0, 0].item())
        if done[0] and ended_at is None:
            ended_at = i
    return env, ended_at, poses


def test_a_robot_driven_into_a_wall_ends_as_collision_at_the_same_step_on_both_backends(scenario_file):
    """The warp backend steps without constraints (no contact force, no solver): driving at 1.5 m/s
    from x = 3.0 at the wall x = 4.0 (robot radius 0.2: contact from x >= 3.8, 0.15 m per step) ends
    as a collision at the same control step as on the mujoco backend, whose contacts push back. The
    warp robot is then held where its contact was found: at rest, at most one substep's travel
    (1.5 m/s x 0.02 s = 0.03 m) into the wall, and it stays there."""
    path = scenario_file(WALL_AHEAD)
    warp, warp_end, warp_x = _drive_into_the_wall("env.sim.backend=warp", path)
    mujoco, mujoco_end, _ = _drive_into_the_wall("env.sim.backend=mujoco", path)
    assert warp_end == mujoco_end and warp_end is not None and 4 <= warp_end <= 6
    assert warp.state.reason.tolist() == mujoco.state.reason.tolist() == [2]  # collision
    assert 3.8 <= warp_x[warp_end] <= 3.8 + 0.03 + 1e-6
    assert warp.sim.qvel.abs().max().item() == 0.0
    assert warp_x[-1] == warp_x[warp_end]  # held: no contact force moves it afterwards


def test_a_reset_elsewhere_does_not_touch_a_running_world(scenario_file, backend):
    """World 0 crashes and auto-resets; world 1's position window still gains exactly one entry per step
    and its noisy scan is drawn once per step (the reset reads only the reset world)."""
    env = build_env(
        backend,
        "env.num_envs=2",
        f"env.scenarios={scenario_file(TWO_WORLDS)}",
        "env.lidar.range_noise_std_m=0.01",
    )
    positions = [env.state.pos_xy[1].clone()]
    reset_seen = False
    for _ in range(6):
        scan_before = env.state.scan[1].clone()
        _, _, done, _ = env.step(FORWARD.repeat(2, 1))
        positions.append(env.state.pos_xy[1].clone())
        if done[0]:
            reset_seen = True
            window = env.state.pos_window[1]
            # The last 3 window entries are the last 3 positions, one per step: no extra shift.
            assert torch.equal(window[-3:], torch.stack(positions[-3:]))
            assert not torch.equal(env.state.scan[1], scan_before)
            assert env.state.step[0].item() == 0 and env.state.step[1].item() == len(positions) - 1
    assert reset_seen


def test_layout_pool_hands_out_fresh_layouts_deterministically():
    """A pool of 16 layouts with a reserve of 8: masks of 3, 2, 4 and 1 worlds get the next 10
    layouts in world order, none twice; the same seed replays them; low() turns true once fewer than
    8 are left (16 - 10 = 6) and refill() brings 16 new ones."""
    from navexp.task.maps.pool import LayoutPool

    env = build_env("env.num_envs=2")
    spec = env.layout_spec
    rows = ([1, 1, 0, 1], [0, 1, 1, 0], [1, 1, 1, 1], [0, 0, 1, 0])
    masks = [torch.tensor(m, dtype=torch.bool) for m in rows]

    def takes(seed: int) -> tuple[torch.Tensor, list[bool], LayoutPool]:
        pool = LayoutPool(spec, 8, torch.Generator().manual_seed(seed), "cpu", min_size=16)
        starts, low = [], []
        for m in masks:
            starts.append(pool.take(m).robot_xy[m])
            low.append(bool(pool.low()))
        return torch.cat(starts), low, pool

    (first, low, pool), (again, _, _), (other, _, _) = takes(0), takes(0), takes(1)
    assert first.shape == (10, 2) and low == [False, False, True, True]  # 13, 11, 7, 6 left
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert torch.cdist(first, first).add(torch.eye(10)).min() > 1e-6  # 10 distinct start positions
    pool.refill()
    assert not bool(pool.low())
    fresh = pool.take(torch.ones(4, dtype=torch.bool)).robot_xy
    assert torch.cdist(fresh, first).min() > 1e-6
    # Re-seeding the env drops what its pool still holds: reset() then replays the same layouts.
    env.seed(5)
    env.reset()
    goals = env.layout.goal_xy.clone()
    env.reset()
    assert not torch.equal(env.layout.goal_xy, goals)
    env.seed(5)
    env.reset()
    assert torch.equal(env.layout.goal_xy, goals)
