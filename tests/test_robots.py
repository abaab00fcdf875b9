"""Robots as a config group: the holonomic default, the differential drive, and the robot registry."""

from __future__ import annotations

import math

import torch
from conftest import build_env

OPEN_AT_YAW_90 = """
scenarios:
  - name: open
    robot: {x: 0.0, y: -2.0, yaw_deg: 90.0}
    goal: {x: -3.0, y: -3.0}
"""

DIFFDRIVE = ("robot=diffdrive", "env.num_envs=1", "env.episode_length_s=10.0")


def test_diffdrive_forward_command_moves_along_the_heading(scenario_file, backend):
    """diffdrive, yaw 90 deg, action (1, 0) = 1.0 m/s forward: 10 steps of 0.1 s move ~1.0 m along +y
    (less the servo's ~10 ms velocity lag) and nothing along x; the body-frame velocity is (1.0, 0)."""
    env = build_env(backend, *DIFFDRIVE, f"env.scenarios={scenario_file(OPEN_AT_YAW_90)}")
    for _ in range(10):
        env.step(torch.tensor([[1.0, 0.0]]))
    x, y = env.state.pos_xy[0].tolist()
    assert abs(x) < 1e-3
    assert 0.93 < y + 2.0 < 1.01  # started at y = -2
    fwd, lat = env.state.vel_body[0].tolist()
    assert abs(fwd - 1.0) < 0.02 and abs(lat) < 1e-3


def test_diffdrive_has_no_sideways_motion_while_turning(scenario_file, backend):
    """Full forward speed (1.0 m/s) and full yaw rate (2 rad/s) for 1 s (10 control steps, 50 physics
    steps of dt = 0.02 s). The lateral servo's slip is m*omega*v/kv = 1 kg * 2 * 1.0 / 1000 = 0.002 m/s
    in the frame the engine integrated the last substep in (heading yaw - omega*dt); read with the
    step's end heading, the velocity shows the sampling lag -v*sin(omega*dt) = -0.040 m/s (module
    docstring of navexp.robots.diffdrive). The robot really turns: yaw +2 rad, a 0.5 m radius arc."""
    env = build_env(backend, *DIFFDRIVE, f"env.scenarios={scenario_file(OPEN_AT_YAW_90)}")
    dt = env.env_cfg.sim.timestep_s
    yaw0 = env.state.yaw[0].item()
    for _ in range(10):
        env.step(torch.tensor([[1.0, 1.0]]))
        s = env.state
        v, w, yaw = s.vel_world[0], s.omega[0].item(), s.yaw[0].item()
        integrated_heading = yaw - w * dt
        lateral = -math.sin(integrated_heading) * v[0].item() + math.cos(integrated_heading) * v[1].item()
        assert abs(lateral) < 0.02
        assert abs(s.vel_body[0, 1].item() - (-1.0 * math.sin(2.0 * dt))) < 0.01
    assert abs(env.state.yaw[0].item() - yaw0 - 2.0) < 0.1  # 2 rad/s for 1 s, less the servo lag
    # A 1.0 m/s, 2 rad/s arc has radius 0.5 m: after 2 rad the robot is 2 r sin(1) = 0.84 m from the start.
    dist = (env.state.pos_xy[0] - torch.tensor([0.0, -2.0])).norm().item()
    assert abs(dist - 2 * 0.5 * math.sin(1.0)) < 0.05
