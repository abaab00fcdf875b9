"""Progress along the shortest free path (reward term ``path_progress``, ``reward=path``): the goal
distance field of a layout read at the robot's position matches the hand-computed way round a wall,
and driving away from the goal towards the way round pays, where straight-line progress charges."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import build_env

from navexp.sim.layout import Layout
from navexp.task.maps.grid_path import path_distance, paths_and_fields

R = 0.2
"""The robot's radius (robot=holonomic)."""


def around_wall(x: float, y: float) -> float:
    """Shortest way for a disc of radius R from (x, y), left of the wall x in [-0.1, 0.1], y in [-4, 2],
    to the goal (3, 0): tangent to the circle of radius R round the top corner (-0.1, 2), the arc, 0.2 m
    across the top, and the mirror image of the first part from the goal (tests/test_maps.py derives
    it: 7.498 m from (-3, 0))."""

    def half(px: float, py: float) -> float:
        d = math.hypot(-0.1 - px, 2.0 - py)
        return math.sqrt(d * d - R * R) + R * (math.atan2(2.0 - py, -0.1 - px) + math.asin(R / d))

    return half(x, y) + 0.2 + half(-3.0, 0.0)


def wall_room() -> Layout:
    lay = Layout.empty(1, 0, 0, "cpu", wall_slots=1)
    lay.robot_xy[0], lay.goal_xy[0] = torch.tensor([-3.0, 0.0]), torch.tensor([3.0, 0.0])
    lay.wall_xy[0, 0], lay.wall_half[0, 0] = torch.tensor([0.0, -1.0]), torch.tensor([0.1, 3.0])
    lay.wall_active[0, 0] = True
    return lay


def wall_scenario(half_y: float) -> str:
    """A scenario file: start (-3, 0) facing +y, goal (3, 0), a wall x in [-0.1, 0.1] from the room's
    bottom (y = -4) up to y = 2 * half_y - 4 (half_y 3: the wall of ``wall_room``; 4: the whole room)."""
    return f"""
        scenarios:
          - name: wall
            robot: {{x: -3.0, y: 0.0, yaw_deg: 90.0}}
            goal: {{x: 3.0, y: 0.0}}
            obstacles:
              - {{kind: box, x: 0.0, y: {half_y - 4.0}, half_x: 0.1, half_y: {half_y}, yaw_deg: 0.0}}
        """


def path_progress_sum(env) -> float:
    """World 0's weighted path_progress sum over its running episode."""
    column = [t.name for t in env.reward_manager.terms].index("path_progress")
    return env.reward_manager.episode_sums[0, column].item()


def test_the_field_reads_the_way_round_a_wall_anywhere_in_the_room():
    """From the start 7.50 m (straight line 6.00); from (-3, 1.5) the hand-computed 6.83 m; from
    (0, 3), above the wall, the straight 4.24 m to the goal; 1.00 m from (3, 1). Each at most 2.7 % (the
    grid's stencil) plus 1.5 diagonals of a 0.2 m cell (0.43 m) above, never below by more than 1 cm.
    Points 1 cm apart read at most about 1 cm apart (no steps at cell borders)."""
    shortest, field = paths_and_fields(wall_room(), 4.0, 4.0, R, 0.2, fields=True)
    assert field.shape == (1, 40, 40) and shortest.item() == pytest.approx(7.498, abs=0.2)
    points = torch.tensor([[-3.0, 0.0], [-3.0, 1.5], [0.0, 3.0], [3.0, 1.0]])
    got = path_distance(field.expand(4, -1, -1), points, 4.0, 4.0)
    want = [around_wall(-3.0, 0.0), around_wall(-3.0, 1.5), math.hypot(3.0, 3.0), 1.0]
    assert want[0] == pytest.approx(7.498, abs=1e-3) and want[1] == pytest.approx(6.833, abs=1e-3)
    for g, w in zip(got.tolist(), want, strict=True):
        assert w - 0.01 <= g <= 1.027 * w + 0.43, (g, w)
    line = torch.stack((torch.full((201,), -3.0), torch.linspace(-1.0, 1.0, 201)), dim=1)
    steps = path_distance(field.expand(201, -1, -1), line, 4.0, 4.0).diff().abs()
    assert float(steps.max()) < 0.02


def test_path_progress_pays_for_the_detour_that_straight_progress_charges(scenario_file):
    """The robot starts at (-3, 0) facing +y (away from the wall's gap at y > 2) with the goal at
    (3, 0) behind the wall. Driving forward 10 steps: the straight-line distance grows, the path
    distance shrinks by the hand-computed amount (within the grid's accuracy), and the reward's
    path_progress sum is the weight (2.0) times that shrinkage."""
    path = scenario_file(wall_scenario(half_y=3.0))
    env = build_env("reward=path", f"env.scenarios={path}", "env.num_envs=1", "env.sim.backend=mujoco")
    s = env.state
    start_path, start_goal = s.path_dist.item(), s.goal_dist.item()
    assert around_wall(-3.0, 0.0) - 0.01 <= start_path <= 1.027 * around_wall(-3.0, 0.0) + 0.43
    assert start_goal == pytest.approx(6.0)
    for _ in range(10):
        env.step(torch.tensor([[1.0, 0.0, 0.0]]))
    x, y = s.pos_xy[0].tolist()
    assert y > 0.8 and abs(x + 3.0) < 0.05
    assert s.goal_dist.item() > start_goal + 0.05  # straight-line progress is negative
    assert around_wall(x, y) - 0.01 <= s.path_dist.item() <= 1.027 * around_wall(x, y) + 0.43
    gained = start_path - s.path_dist.item()
    assert gained > 0.5
    assert path_progress_sum(env) == pytest.approx(2.0 * gained, rel=1e-3)


def test_without_a_term_that_reads_it_no_field_is_kept():
    """The default reward (bcppo) reads no path distance: layouts keep no goal field and the state's
    path distance stays NaN (an undeclared read would fail the env's finite check)."""
    env = build_env("env.num_envs=2", "env.sim.backend=mujoco")
    assert env.layout.goal_field.numel() == 0 and not env.map_spec.keep_fields
    assert torch.isnan(env.state.path_dist).all()


def test_the_critic_can_observe_the_path_distance(scenario_file):
    """obs=asymmetric with truth_path_dist on: the privileged group's last column is the path distance
    / 5 m (7.50-7.86 m from the start behind the wall: about 1.5-1.6), while the default reward reads
    no path distance; the policy group is unchanged (78 wide)."""
    path = scenario_file(wall_scenario(half_y=3.0))
    env = build_env(
        "obs=asymmetric",
        "obs.terms.truth_path_dist.enabled=true",
        f"env.scenarios={path}",
        "env.num_envs=1",
        "env.sim.backend=mujoco",
    )
    obs = env.get_observations()
    assert obs["policy"].shape == (1, 78) and obs["privileged"].shape == (1, 77)
    assert obs["privileged"][0, -1].item() == pytest.approx(env.state.path_dist.item() / 5.0)
    assert 7.49 / 5.0 <= obs["privileged"][0, -1].item() <= (1.027 * 7.498 + 0.43) / 5.0


def test_the_trap_recipe_obs_reads_a_log_scan_and_gives_the_critic_the_path(scenario_file):
    """obs=path_critic (the trap recipe): the actor's 78 columns with the scan log-encoded (beam 0 points
    +y from (-3, 0), 4.00 m to the room's wall: log(40) / log(60) = 0.9010); the critic's privileged
    group is 74 wide (clean scan 72, contact 1, path distance 1), its last column the path distance / 5 m
    as with obs=asymmetric above, and no analytic clearance is computed."""
    path = scenario_file(wall_scenario(half_y=3.0))
    env = build_env("obs=path_critic", f"env.scenarios={path}", "env.num_envs=1", "env.sim.backend=mujoco")
    obs = env.get_observations()
    assert obs["policy"].shape == (1, 78) and obs["privileged"].shape == (1, 74)
    assert obs["policy"][0, 0].item() == pytest.approx(math.log(40) / math.log(60), abs=2e-3)
    assert 7.49 / 5.0 <= obs["privileged"][0, -1].item() <= (1.027 * 7.498 + 0.43) / 5.0
    assert not env.needs_clearance


def test_an_unreachable_goal_reads_the_straight_line_and_pays_no_path_progress(scenario_file):
    """A hand-made map may have no free path (a wall across the whole room): the field gives no value,
    so the episode's path distance starts at the straight line (6.00 m), not at another episode's
    value, and driving pays no path_progress."""
    path = scenario_file(wall_scenario(half_y=4.0))  # y in [-4, 4]: the whole room
    env = build_env("reward=path", f"env.scenarios={path}", "env.num_envs=1", "env.sim.backend=mujoco")
    assert torch.isinf(env.layout.shortest_path_m).all()
    assert env.state.path_dist.item() == pytest.approx(6.0) == env.state.prev_path_dist.item()
    for _ in range(5):
        env.step(torch.tensor([[1.0, 0.0, 0.0]]))
    assert path_progress_sum(env) == 0.0


def lane_room() -> Layout:
    """A lane 0.7 m wide along y = 0.1 between two walls from x = -3 to x = 2 (inner faces at y = 0.45
    and y = -0.25), goal (3.5, 0.1) past its right end. On the 0.2 m grid only the row y = 0.1 is free
    inside the lane: its cells keep 0.35 m from both walls."""
    lay = Layout.empty(1, 0, 0, "cpu", wall_slots=2)
    lay.robot_xy[0], lay.goal_xy[0] = torch.tensor([-2.5, 0.1]), torch.tensor([3.5, 0.1])
    lay.wall_xy[0] = torch.tensor([[-0.5, 0.95], [-0.5, -0.75]])
    lay.wall_half[0] = torch.tensor([[2.5, 0.5], [2.5, 0.5]])
    lay.wall_active[0] = True
    return lay


def field_at(field: torch.Tensor, x: float, y: float) -> float:
    """The field's value at the cell whose centre is (x, y) (room [-4, 4]^2, 0.2 m cells)."""
    return field[0, round((y + 3.9) / 0.2), round((x + 3.9) / 0.2)].item()


def test_a_margin_field_charges_the_metres_closer_than_the_margin():
    """env.maps.path_margin_m=0.3 with cost 1: the lane's cells keep 0.35 m, 0.15 m closer than radius
    + margin (0.5 m), so each metre along the lane costs 1 + 0.15 / 0.3 = 1.5: from x = -1.9 to 0.9
    (2.8 m) the field drops 4.20 instead of 2.80. Far from every obstacle it is the plain field's metre
    (the last 0.4 m before the goal drop by 0.40), and the shortest path stays plain metres."""
    plain_path, plain = paths_and_fields(lane_room(), 4.0, 4.0, R, 0.2, fields=True)
    path, margin = paths_and_fields(lane_room(), 4.0, 4.0, R, 0.2, fields=True, margin_m=0.3, margin_cost=1.0)
    assert path.item() == plain_path.item() == pytest.approx(6.0, abs=0.05)
    assert field_at(plain, -1.9, 0.1) - field_at(plain, 0.9, 0.1) == pytest.approx(2.8, abs=0.01)
    assert field_at(margin, -1.9, 0.1) - field_at(margin, 0.9, 0.1) == pytest.approx(4.2, abs=0.01)
    assert field_at(margin, 3.1, 0.1) - field_at(margin, 3.5, 0.1) == pytest.approx(0.4, abs=0.01)
    assert math.isinf(field_at(margin, -1.9, -0.1))  # 0.15 m from the lower wall: blocked


def test_a_margin_field_leads_through_the_wide_way():
    """A wall across the room at x = 0 with a door 0.6 m wide on the straight line (y in [-0.3, 0.3])
    and one 2 m wide at y in [1.5, 3.5]. The plain field leads through the narrow door (its value at
    the start is about the straight 6 m). With a 0.2 m margin at cost 10 the narrow door's free cells
    (0.2 m from a jamb: touching) cost 11 per metre, so its way costs at least 6 + 10 x 0.2 = 8 m; the
    field leads past the wide door's lower jamb (1.5, the wall 0.2 m thick) instead, between the plain
    way there keeping the radius, 2 x hypot(3, 1.7) = 6.90 m, and the way keeping radius + margin,
    2 x hypot(3, 1.9) + 0.2 = 7.30 m (within the grid's 2.7 % + 0.43 m: under 8)."""
    lay = Layout.empty(1, 0, 0, "cpu", wall_slots=3)
    lay.robot_xy[0], lay.goal_xy[0] = torch.tensor([-3.0, 0.0]), torch.tensor([3.0, 0.0])
    lay.wall_xy[0] = torch.tensor([[0.0, -2.15], [0.0, 0.9], [0.0, 3.75]])
    lay.wall_half[0] = torch.tensor([[0.1, 1.85], [0.1, 0.6], [0.1, 0.25]])
    lay.wall_active[0] = True
    _, plain = paths_and_fields(lay, 4.0, 4.0, R, 0.2, fields=True)
    _, wide = paths_and_fields(lay, 4.0, 4.0, R, 0.2, fields=True, margin_m=0.2, margin_cost=10.0)
    start = torch.tensor([[-3.0, 0.0]])
    assert 6.0 - 0.01 <= path_distance(plain, start, 4.0, 4.0).item() <= 1.027 * 6.0 + 0.43
    low, high = 2 * math.hypot(3.0, 1.7), 2 * math.hypot(3.0, 1.9) + 0.2
    assert (low, high) == pytest.approx((6.90, 7.30), abs=0.01)
    assert low - 0.01 <= path_distance(wide, start, 4.0, 4.0).item() <= 1.027 * high + 0.43 < 8.0
