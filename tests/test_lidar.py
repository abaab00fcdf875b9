"""LiDAR against inline scenes with hand-computed ranges (8 m x 8 m room: walls at x, y = +-4 m)."""

from __future__ import annotations

import math

import torch
from conftest import build_env

from navexp.sim.layout import Layout

# Beam b points at yaw + b * 5 deg: beam 0 forward, 18 left, 36 back, 54 right.
FWD, LEFT, BACK, RIGHT = 0, 18, 36, 54

SCENE = """
scenarios:
  - name: empty_centre
    robot: {x: 0.0, y: 0.0, yaw_deg: 0.0}
    goal: {x: 3.0, y: 3.0}
  - name: cylinder_ahead_box_left
    robot: {x: 0.0, y: 0.0, yaw_deg: 0.0}
    goal: {x: -3.0, y: -3.0}
    obstacles:
      - {kind: cylinder, x: 2.0, y: 0.0, radius: 0.5}
      - {kind: box, x: 0.0, y: 2.0, half_x: 0.5, half_y: 0.3}
  - name: same_rotated_90
    robot: {x: 0.0, y: 0.0, yaw_deg: 90.0}
    goal: {x: -3.0, y: -3.0}
    obstacles:
      - {kind: cylinder, x: 2.0, y: 0.0, radius: 0.5}
      - {kind: box, x: 0.0, y: 2.0, half_x: 0.5, half_y: 0.3}
  - name: off_centre
    robot: {x: 1.0, y: -2.5, yaw_deg: 0.0}
    goal: {x: -3.0, y: 3.0}
"""


def test_walls_read_their_distance_in_every_direction(scenario_file, backend):
    """In the empty room every beam reads the distance to the square wall: min(4/|cos a|, 4/|sin a|)."""
    env = build_env(
        backend, "env.num_envs=4", f"env.scenarios={scenario_file(SCENE)}", "env.lidar.max_range_m=10.0"
    )
    scan = env.state.scan_clean[0]
    angles = torch.arange(72) * (2 * math.pi / 72)
    expected = torch.minimum(
        4.0 / angles.cos().abs().clamp_min(1e-9), 4.0 / angles.sin().abs().clamp_min(1e-9)
    )
    assert torch.allclose(scan, expected, atol=1e-3)
    # Off centre at (1, -2.5): forward wall 3.0 m, back 5.0 m, left 6.5 m, right 1.5 m.
    off = env.state.scan_clean[3]
    assert torch.allclose(off[[FWD, BACK, LEFT, RIGHT]], torch.tensor([3.0, 5.0, 6.5, 1.5]), atol=1e-3)


def test_cylinder_and_box_at_known_positions(scenario_file, backend):
    """Cylinder centre 2 m ahead, radius 0.5 -> 1.50 m; box 2 m left, half_y 0.3 -> 1.70 m."""
    env = build_env(backend, "env.num_envs=4", f"env.scenarios={scenario_file(SCENE)}")
    scan = env.state.scan_clean[1]
    assert abs(scan[FWD].item() - 1.50) < 1e-3
    assert abs(scan[LEFT].item() - 1.70) < 1e-3
    assert abs(scan[BACK].item() - 4.00) < 1e-3
    assert abs(scan[RIGHT].item() - 4.00) < 1e-3
    # A beam 10 deg off the axis meets the cylinder later than the centre beam:
    # 2 cos10 - sqrt(0.25 - (2 sin10)^2).
    a = math.radians(10)
    assert abs(scan[2].item() - (2 * math.cos(a) - math.sqrt(0.25 - (2 * math.sin(a)) ** 2))) < 1e-3


def test_rotating_the_robot_rotates_the_scan(scenario_file, backend):
    """At yaw 90 deg the box (world +y) is ahead and the cylinder (world +x) is on the right."""
    env = build_env(backend, "env.num_envs=4", f"env.scenarios={scenario_file(SCENE)}")
    straight, turned = env.state.scan_clean[1], env.state.scan_clean[2]
    assert abs(turned[FWD].item() - 1.70) < 1e-3
    assert abs(turned[RIGHT].item() - 1.50) < 1e-3
    # The whole scan is the straight one shifted by 18 beams (90 deg).
    assert torch.allclose(torch.roll(turned, 18), straight, atol=1e-3)


def test_misses_read_max_range_and_the_robot_never_sees_itself(scenario_file, backend):
    """With a 3 m range every wall beyond 3 m reads exactly 3.0; nothing reads below the 0.2 m body."""
    env = build_env(
        backend, "env.num_envs=4", f"env.scenarios={scenario_file(SCENE)}", "env.lidar.max_range_m=3.0"
    )
    scan = env.state.scan_clean
    assert torch.isfinite(scan).all() and (scan >= 0).all() and (scan <= 3.0).all()
    assert torch.allclose(scan[0], torch.full((72,), 3.0))  # every wall is >= 4 m away
    assert (scan > 0.2).all()  # the robot's own sphere (radius 0.2) is excluded from the rays
    assert abs(scan[3, RIGHT].item() - 1.5) < 1e-3  # a real hit inside the range still reads its distance


def test_noise_only_on_the_policy_scan(scenario_file, backend):
    """range_noise_std_m perturbs state.scan but not state.scan_clean; both stay within [0, max]."""
    env = build_env(
        backend, "env.num_envs=4", f"env.scenarios={scenario_file(SCENE)}", "env.lidar.range_noise_std_m=0.05"
    )
    s = env.state
    diff = s.scan - s.scan_clean
    assert 0.02 < diff[1:, :].std().item() < 0.08
    assert (s.scan >= 0).all() and (s.scan <= env.dims.max_range_m).all()


def test_classic_sense_recasts_only_the_changed_worlds(scenario_file):
    """Classic MuJoCo casts a subset (the worlds just reset) in its threaded rollout: move the robots
    of worlds 0 and 1 one metre forward, sense world 1 only -> its forward beam drops from the
    cylinder's 1.50 m to 0.50 m, world 0 still reads the wall at 4.00 m until it is sensed."""
    env = build_env("env.sim.backend=mujoco", "env.num_envs=4", f"env.scenarios={scenario_file(SCENE)}")
    sim = env.sim
    sim.qpos[:2, 0] += 1.0
    sim.sense(torch.tensor([False, True, False, False]))
    assert abs(sim.ranges[1, FWD].item() - 0.50) < 1e-3
    assert abs(sim.ranges[0, FWD].item() - 4.00) < 1e-3
    sim.sense(torch.tensor([True, False, False, False]))
    assert abs(sim.ranges[0, FWD].item() - 3.00) < 1e-3
    assert abs(sim.ranges[1, FWD].item() - 0.50) < 1e-3


def test_a_parked_slot_placed_again_is_seen_and_touched_again(scenario_file, backend):
    """World 1's cylinder (centre 2 m ahead, radius 0.5) parked: a robot at x = 1.6 m (where the
    cylinder stood) reads the wall at x = 4 m, 2.40 m ahead, and touches nothing; placed again it reads
    1.50 m from the origin, and the robot at x = 1.6 m (inside it) is in contact. Classic MuJoCo drops
    a parked slot from its world's collision and ray passes; placing it again must bring it back to both
    (one geom per slot body, so the body's conaffinity is its geom's)."""
    env = build_env(backend, "env.num_envs=4", f"env.scenarios={scenario_file(SCENE)}")
    sim, world = env.sim, torch.tensor([False, True, False, False])
    placed = env.layout.index(world)
    parked = placed.index(torch.tensor([0]))
    parked.cyl_active[:] = False
    parked.box_active[:] = False

    def write_and_step(layout, robot_x: float) -> tuple[float, int]:
        """World 1's layout written, its robot at rest at (robot_x, 0): its forward beam and contact
        flag after one control step."""
        sim.write_layouts(world, Layout.cat([layout] * 4))
        sim.qpos[1, 0] = robot_x
        sim.step()
        sim.sense(world)  # Warp casts the LiDAR here; classic MuJoCo cast it in step already
        return sim.ranges[1, FWD].item(), int(sim.contact[1].item())

    fwd, contact = write_and_step(parked, 1.6)
    assert abs(fwd - 2.40) < 1e-3 and contact == 0  # the wall at x = 4 m, 2.4 m from x = 1.6 m
    fwd, contact = write_and_step(placed, 0.0)
    assert abs(fwd - 1.50) < 1e-3 and contact == 0
    fwd, contact = write_and_step(placed, 1.6)
    assert contact == 1
