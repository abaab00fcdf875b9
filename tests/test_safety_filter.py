"""The safety filter (env.robot.safety_horizon_s): hand-checked sweeps on a wall, the numpy twin against
the torch filter, and the filter in the real simulator (the robot stops at the margin instead of hitting)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import build_env
from test_env_dynamics import TWO_WORLDS

from navexp.deploy.safety_filter import filter_velocity as numpy_filter_velocity
from navexp.sim import beam_angles
from navexp.task.robots.safety_filter import SafetyFilter, filter_velocity

ANGLES = beam_angles(72, 360.0)
COS_SIN = torch.stack((ANGLES.cos(), ANGLES.sin()), dim=-1)
MAX_RANGE = 10.0


def wall_scan(x_m: float = math.inf, y_m: float = math.inf) -> torch.Tensor:
    """[72] ranges of a robot at the origin facing a wall x = x_m (ahead) and/or y = y_m (to the left)."""
    c, s = ANGLES.cos(), ANGLES.sin()
    ahead = torch.where(c > 1e-9, x_m / c.clamp(min=1e-9), torch.full_like(c, math.inf))
    left = torch.where(s > 1e-9, y_m / s.clamp(min=1e-9), torch.full_like(s, math.inf))
    return torch.minimum(ahead, left).clamp(max=MAX_RANGE)


def filtered(scan: torch.Tensor, vel: tuple[float, float], horizon_s: float = 0.5) -> list[float]:
    """One filtered command (m/s); radius 0.2 m, margin 0.02 m."""
    return filter_velocity(scan[None], COS_SIN, torch.tensor([vel]), 0.2, 0.02, horizon_s)[0].tolist()


def fraction(scan: torch.Tensor, vel: tuple[float, float], horizon_s: float = 0.5) -> float:
    """How much of one command's speed the filter keeps."""
    return math.hypot(*filtered(scan, vel, horizon_s)) / math.hypot(*vel)


def test_a_wall_ahead_scales_the_command_to_stop_at_the_margin():
    """Wall 0.50 m ahead, 1.5 m/s for 0.5 s sweeps 0.75 m; the disc (0.22 m) touches after 0.28 m:
    scale 0.28 / 0.75 = 0.373. Within one 0.1 s step (0.15 m) nothing is reached: 1.0."""
    scan = wall_scan(x_m=0.5)
    assert fraction(scan, (1.5, 0.0)) == pytest.approx(0.28 / 0.75, abs=1e-4)
    assert fraction(scan, (1.5, 0.0), horizon_s=0.1) == 1.0
    assert fraction(scan, (-1.5, 0.0)) == 1.0  # backing away
    assert fraction(scan, (0.0, 1.5)) == 1.0  # along the wall: the disc never gets nearer
    # Half-diagonal: the centre's x reaches 0.28 after 0.28 / (0.75 cos 45 deg) = 0.528 of the sweep;
    # the beams sample the wall every 5 deg, so the first sampled point is touched a little later.
    diag = 1.5 / math.sqrt(2)
    assert 0.528 <= fraction(scan, (diag, diag)) < 0.56


def test_inside_the_margin_the_robot_may_only_leave():
    """Wall 0.21 m ahead (1 cm from the edge, inside the 2 cm margin): forward 0, straight back kept.
    Sideways the disc keeps the present clearance to the returns inside the margin but the whole margin
    (0.22 m) to the others: the beam at 20 deg meets the wall 0.2235 m away at y = 0.21 tan 20 deg =
    0.0764 m, and the disc's centre reaches 0.22 m from it after 0.0764 - sqrt(0.22^2 - 0.21^2) =
    0.0109 m of the 0.5 m sweep: 2.2 % of the command, a crawl until the robot has left the margin.
    A half-diagonal loses its forward part, then crawls the same. A wall 0.5 m to the left stops
    nothing forward."""
    scan = wall_scan(x_m=0.21)
    crawl = (0.21 * math.tan(math.radians(20.0)) - math.sqrt(0.22**2 - 0.21**2)) / 0.5
    assert fraction(scan, (1.5, 0.0)) == 0.0
    assert fraction(scan, (-1.0, 0.0)) == 1.0
    assert fraction(scan, (0.0, -1.0)) == pytest.approx(crawl, abs=1e-4)
    assert filtered(scan, (1.0, 1.0)) == pytest.approx([0.0, crawl], abs=1e-4)
    assert fraction(wall_scan(y_m=0.5), (1.5, 0.0)) == 1.0
    assert fraction(wall_scan(y_m=0.5), (0.0, 1.5)) == pytest.approx(0.28 / 0.75, abs=1e-4)


@pytest.mark.parametrize("holonomic", [True, False])
def test_the_numpy_twin_gives_the_filter_s_command(holonomic):
    """Random scans and commands (some inside the margin, one standing still): torch and numpy agree
    within 1e-5 on every one, for a holonomic and a forward-only robot."""
    g = torch.Generator().manual_seed(3)
    scans = 0.2 + 2.0 * torch.rand(64, 72, generator=g)
    vels = 3.0 * torch.rand(64, 2, generator=g) - 1.5
    vels[0] = 0.0
    if not holonomic:
        vels[:, 1] = 0.0
    expected = filter_velocity(scans, COS_SIN, vels, 0.2, 0.02, 0.3, holonomic)
    got = [
        numpy_filter_velocity(
            s.double().numpy(), ANGLES.double().numpy(), v.double().numpy(), 0.2, 0.02, 0.3, holonomic
        )
        for s, v in zip(scans, vels, strict=True)
    ]
    assert np.abs(np.array(got) - expected.numpy()).max() < 1e-5
    kept = expected.norm(dim=1) / vels.norm(dim=1).clamp(min=1e-9)
    inside = scans.min(dim=1).values < 0.22
    assert inside.any() and (~inside).any() and (kept[1:] < 1 - 1e-6).any() and (kept > 1 - 1e-6).any()


def test_a_differential_drive_keeps_its_yaw_rate():
    """diffdrive: only the forward component (axis 0) is scaled; the yaw rate passes unchanged."""
    f = SafetyFilter(ANGLES, 0.2, 0.02, 0.5, (0,), 1.5)
    out = f(torch.tensor([[1.0, 0.7]]), wall_scan(x_m=0.5)[None])
    assert out[0, 0].item() == pytest.approx(0.28 / 0.75, abs=1e-4)
    assert out[0, 1].item() == pytest.approx(0.7)


def test_in_the_simulator_the_robot_stops_at_the_margin_instead_of_hitting(scenario_file):
    """Full speed at a cylinder whose surface is 0.70 m ahead: without the filter it collides within 4
    steps (tests/test_env_dynamics.py); with a 0.1 s horizon and the default 4 cm margin the command
    brings its centre to 0.70 - 0.24 = 0.46 m, the servo's ~10 ms lag carries it up to 1.5 cm further
    (the margin takes that up), and there it stops short of contact, never collides, and keeps
    turning at 2 rad/s. The open world drives at full speed."""
    env = build_env(
        "env.num_envs=2",
        f"env.scenarios={scenario_file(TWO_WORLDS)}",
        "env.auto_reset=false",
        "env.robot.safety_horizon_s=0.1",
    )
    for _ in range(12):
        _, _, done, _ = env.step(torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))
        assert not done.any()
    x0 = env.state.pos_xy[0, 0].item()
    assert 0.45 < x0 < 0.48
    assert env.state.min_scan[0].item() > 0.2  # not touching
    assert env.state.pos_xy[1, 1].item() > 12 * 0.15 - 0.05  # 1.5 m/s in the open
    env.step(torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]))
    assert env.state.omega[0].item() == pytest.approx(2.0, abs=0.1)
    assert env.state.pos_xy[0, 0].item() == pytest.approx(x0, abs=1e-3)  # turned, not moved


ALONG_A_WALL = """
scenarios:
  - name: along_a_wall
    robot: {x: -2.5, y: 0.0, yaw_deg: 0.0}
    goal: {x: 3.5, y: 3.0}
    obstacles:
      - {kind: box, x: 0.0, y: -0.45, half_x: 3.0, half_y: 0.2, yaw_deg: 0.0}
"""


def test_turning_into_a_wall_while_sliding_along_it_never_touches_it(scenario_file):
    """32 worlds start 5 cm from a wall's face (y = -0.25 m), with the scan's default noise (1 cm) on, and
    command full speed forward, half speed towards the wall and a turn into it (-0.6 rad/s) for 28
    steps. The body turns under the command within each step, and the noisy scan places the wall
    up to a few cm off: with the present clearance kept to every return (the filter before this
    rule), 4 of the 32 worlds touched the wall. Keeping the whole margin to the returns outside it,
    none does, and every robot stays at least 1 cm from the face."""
    env = build_env(
        "env.num_envs=32",
        f"env.scenarios={scenario_file(ALONG_A_WALL)}",
        "env.auto_reset=false",
        "env.robot.safety_horizon_s=0.1",
        "env.lidar.range_noise_std_m=0.01",
    )
    closest = math.inf
    for _ in range(28):
        env.step(torch.tensor([[1.0, -0.5, -0.3]]).repeat(32, 1))
        assert not env.state.contact.any()
        closest = min(closest, (env.state.pos_xy[:, 1] + 0.25 - 0.2).min().item())
    assert closest > 0.01


@pytest.mark.parametrize("key", ["safety_horizon_s", "safety_margin_m"])
def test_a_negative_filter_setting_is_refused_naming_it(key):
    """env.robot.safety_horizon_s=-0.1 (or the margin) fails before anything is built, naming the key,
    the value and what is allowed."""
    from navexp import compose_config
    from navexp.task.validation import validate_env_cfg

    cfg = compose_config([f"env.robot.{key}=-0.1"])
    with pytest.raises(ValueError, match=rf"robot\.{key}.*-0\.1.*>= 0"):
        validate_env_cfg(cfg.env)
