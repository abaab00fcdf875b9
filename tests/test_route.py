"""Route guidance (issue 51): the ``route_subgoal`` observation term on a hand-made L-shaped route, the
same subgoal from numpy and torch, the robot-side planner on a ROS map equal to training's, no host
sync on warp, and its params checked.

The default room is 8 m x 8 m (half 4 m), the robot radius 0.2 m, the grid's cells 0.2 m.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import NO_MEDIA, TINY, build_env
from PIL import Image

from navexp import compose_config
from navexp.sim.layout import Layout
from navexp.task.env_parts import scenario_layouts
from navexp.task.maps import MapSpec, generate_layouts
from navexp.task.maps.grid_path import _MOVES, paths_and_fields
from navexp.task.maps.random_family import LayoutSpec
from navexp.task.obs import route
from navexp.task.obs.numpy_terms import get_twin
from navexp.task.obs.terms import route_subgoal
from navexp.task.state import EnvDims, NavState

DIMS = EnvDims(36, 6.0, 1.5, 3.0, 3, 10, 4.0, 4.0)


def _l_route(start, goal) -> Layout:
    """An L-shaped way: a corridor 1.2 m wide along y in [-4, -2.8] from the left wall to x = 2.0,
    turning up along x in [0.8, 2.0] to the top wall (blocks: x in [-4, 0.8] x y in [-2.8, 4] and
    x in [2.0, 4] over the whole height). For the robot's centre (radius 0.2) the inner corner is at
    (1.0, -3.0); the corner square of the two legs is x in [0.8, 2.0], y in [-4, -2.8]."""
    lay = Layout.empty(1, 0, 0, "cpu", 2)
    for j, (x0, x1, y0, y1) in enumerate(((-4.0, 0.8, -2.8, 4.0), (2.0, 4.0, -4.0, 4.0))):
        lay.wall_xy[0, j] = torch.tensor([(x0 + x1) / 2, (y0 + y1) / 2])
        lay.wall_half[0, j] = torch.tensor([(x1 - x0) / 2, (y1 - y0) / 2])
        lay.wall_active[0, j] = True
    lay.robot_xy[0], lay.goal_xy[0] = torch.tensor(start), torch.tensor(goal)
    return lay


def _state(field: torch.Tensor, pos: torch.Tensor, yaw: torch.Tensor, goal: torch.Tensor) -> NavState:
    s = NavState.zeros(len(pos), DIMS, "cpu")
    s.pos_xy, s.yaw, s.goal_xy = pos, yaw, goal.expand(len(pos), -1)
    s.goal_field = field.expand(len(pos), -1, -1)
    return s


def _world(obs: torch.Tensor, s: NavState, scale: float = 5.0) -> torch.Tensor:
    """The term's subgoals back in the world frame: distance and bearing from each pose."""
    d, b = obs[:, 0] * scale, torch.atan2(obs[:, 1], obs[:, 2]) + s.yaw
    return s.pos_xy + d.unsqueeze(1) * torch.stack((torch.cos(b), torch.sin(b)), 1)


def test_the_subgoal_is_the_corner_of_an_l_shaped_route_until_the_robot_passes_it():
    """Goal (1.4, 3.0) up the second leg; the robot drives along the first leg at y = -3.4, facing +y
    (the term is body-frame). lookahead 3 m: from x = -3.0 the corner (4 m on) is beyond it and the
    subgoal lies ~3 m ahead along the leg (x = -0.1); from x = -2.0 to 0.4 it is in the corner square,
    at the cell hugging the inner corner (0.9, -3.1); once past the inner corner (x >= 0.8) it lies up
    the second leg (y > -2.5), and from (1.4, 0.5), 2.5 m before the goal, it is the goal itself."""
    lay = _l_route((-3.0, -3.4), (1.4, 3.0))
    field = paths_and_fields(lay, 4, 4, 0.2, 0.2, fields=True)[1]
    xs = [-3.0, -2.0, -1.0, 0.0, 0.4, 0.8, 1.2, 1.4]
    pos = torch.tensor([[x, -3.4] for x in xs] + [[1.4, 0.5]])
    s = _state(field, pos, torch.full((len(pos),), math.pi / 2), lay.goal_xy)
    sub = _world(route_subgoal(s, lookahead_m=3.0), s)
    assert sub[0].tolist() == pytest.approx([-0.1, -3.1], abs=0.2)
    for k in range(1, 5):
        x, y = sub[k].tolist()
        assert 0.8 <= x <= 2.0 and -4.0 <= y <= -2.8, (xs[k], x, y)  # in the corner square
        assert (x, y) == pytest.approx((0.9, -3.1), abs=1e-3)
    for k in range(5, 8):
        assert sub[k, 1] > -2.5 and 0.8 <= sub[k, 0] <= 2.0, (xs[k], sub[k])
    assert sub[8].tolist() == pytest.approx([1.4, 3.0], abs=1e-4)


def test_numpy_and_torch_give_the_same_subgoals_on_floor_plans():
    """``route_subgoal`` on numpy and on torch: the same subgoals (to float32 rounding) for 8 floor plans
    x 24 positions each (start, goal and random points of the room, free or not)."""
    spec = LayoutSpec.from_env_cfg(compose_config(["env=families"]).env)
    lay, ok = generate_layouts(MapSpec(check_path=True), spec, "rooms", torch.arange(8))
    field = paths_and_fields(lay, 4, 4, 0.2, 0.2, fields=True)[1]
    g = torch.Generator().manual_seed(0)
    pos = torch.cat(
        (lay.robot_xy[:, None], lay.goal_xy[:, None], torch.rand(8, 22, 2, generator=g) * 7.6 - 3.8), 1
    )
    c = route.route_consts(3.0, 0.2)
    tc = route.RouteConsts(torch.from_numpy(c.neighbours), torch.from_numpy(c.fracs), c.steps, c.lookahead_m)
    f = field.repeat_interleave(24, 0)
    p, goal = pos.reshape(-1, 2), lay.goal_xy.repeat_interleave(24, 0)
    on_torch = route.route_subgoal(torch, f, p, goal, 4.0, 4.0, tc)
    on_numpy = route.route_subgoal(np, f.numpy(), p.numpy(), goal.numpy(), 4.0, 4.0, c)
    np.testing.assert_allclose(on_numpy, on_torch.numpy(), atol=1e-5)
    assert (np.abs(on_numpy - goal.numpy()).sum(1) > 0.1).mean() > 0.5  # mostly subgoals, not the goal


def test_the_deploy_planner_uses_the_moves_of_training():
    """The robot's Dijkstra relaxes the 16 moves of training's fast sweeping (same cells passed)."""
    assert route.MOVES == tuple(_MOVES)


def _write_map(tmp_path) -> tuple[str, np.ndarray]:
    """A 40 x 40 px map at 0.2 m (the 8 m room, origin (-4, -4)): a wall 0.4 m thick at x in [-0.2, 0.2]
    with a 1.0 m door at y in [-2.4, -1.4], a 0.6 m block at x in [1.8, 2.4], y in [1.0, 1.6]. Returns
    the YAML's path and the blocked pixels (row 0 at the lowest y)."""
    blocked = np.zeros((40, 40), dtype=bool)
    blocked[:, 19:21] = True
    blocked[8:13, 19:21] = False
    blocked[25:28, 29:32] = True
    Image.fromarray(np.where(blocked[::-1], 0, 254).astype(np.uint8)).save(tmp_path / "plan.pgm")
    (tmp_path / "plan.yaml").write_text(
        "image: plan.pgm\nresolution: 0.2\norigin: [-4.0, -4.0, 0.0]\noccupied_thresh: 0.65\n"
        "free_thresh: 0.196\nnegate: 0\nstarts_goals:\n  - robot: {x: -3.0, y: 2.0, yaw_deg: 0.0}\n"
        "    goal: {x: 3.0, y: 2.5}\n"
    )
    return str(tmp_path / "plan.yaml"), blocked


def test_the_robot_side_planner_on_a_ros_map_gives_the_training_subgoal(tmp_path):
    """The env's goal distance field of a ROS map (its merged wall rectangles in the room) and the
    robot's RoutePlanner on the same map's pixels (Dijkstra): the same free cells and the same field
    (float16, the same inf cells); the numpy twin's observation equals the term's at 12 poses on both
    sides of the wall (to 1e-5)."""
    from navexp.task.maps.ros_map import read_blocked, read_map_header

    file, blocked = _write_map(tmp_path)
    env_cfg = compose_config([f"env.scenarios={file}", "env.obstacles.wall_slots=16"]).env
    spec = LayoutSpec.from_env_cfg(env_cfg)
    maps = MapSpec(check_path=True, keep_fields=True)
    lay = scenario_layouts(env_cfg, spec, maps, torch.device("cpu"))[0]
    import yaml

    header = read_map_header(tmp_path / "plan.yaml", yaml.safe_load(open(file)))
    assert np.array_equal(read_blocked(tmp_path / "plan.yaml", header), blocked)
    planner = route.RoutePlanner(blocked, 0.2, (-4.0, -4.0), robot_radius_m=0.2)
    planner.set_goal((3.0, 2.5))
    train = lay.goal_field[0].numpy()
    assert np.array_equal(np.isinf(train), np.isinf(planner.field[0]))
    np.testing.assert_allclose(planner.field[0][np.isfinite(train)], train[np.isfinite(train)], atol=1e-2)
    g = torch.Generator().manual_seed(1)
    pos = torch.cat(
        (
            torch.tensor([[-3.0, 2.0], [-1.0, -3.0], [1.0, -1.9], [2.5, 0.3]]),
            torch.rand(8, 2, generator=g) * 7 - 3.5,
        )
    )
    yaw = torch.rand(12, generator=g) * 6 - 3
    s = _state(lay.goal_field[:1], pos, yaw, lay.goal_xy[:1])
    term = route_subgoal(s, lookahead_m=3.0).numpy()
    twin = get_twin("route_subgoal")
    params, meta = {"lookahead_m": 3.0, "dist_scale_m": 5.0}, {}
    for k in range(12):
        inputs = {"route": planner, "pose_map": (*pos[k].tolist(), float(yaw[k]))}
        np.testing.assert_allclose(twin(inputs, params, meta), term[k], atol=1e-5, err_msg=str(k))
    far = _world(torch.from_numpy(term[:1]), s)[0]
    assert far[0] < -0.2 and -2.4 < far[1] < 2.0  # from (-3, 2) the way leads down to the door


def test_the_twin_without_a_planner_names_its_inputs():
    """On the robot the term needs route= and pose_map=: missing, one ValueError line naming both."""
    with pytest.raises(
        ValueError, match=r"'route_subgoal' needs route=.*RoutePlanner.* and pose_map=\(x, y, yaw\)"
    ):
        get_twin("route_subgoal")({}, {"lookahead_m": 3.0, "dist_scale_m": 5.0}, {})
    planner = route.RoutePlanner(np.zeros((4, 4), dtype=bool), 0.5, (0.0, 0.0), 0.2)
    with pytest.raises(ValueError, match=r"RoutePlanner has no goal: call set_goal"):
        planner.subgoal((1.0, 1.0), 3.0)


def test_bad_route_params_are_refused_when_the_config_is_built():
    """obs.terms.route_subgoal.params.lookahead_m=0: one ValueError naming the key and the range."""
    with pytest.raises(
        ValueError, match=r"route_subgoal.params.lookahead_m=0.0 is invalid; allowed: a distance in \(0, 20\]"
    ):
        build_env("obs.terms.route_subgoal.enabled=true", "obs.terms.route_subgoal.params.lookahead_m=0.0")


def test_warp_step_with_the_route_subgoal_and_odom_history_makes_no_host_sync():
    """env=families with route_subgoal on, warp backend: 20 steps of 16 worlds with 1 s episodes (resets
    take new layouts and their fields) make no host sync, with odom_history on too (mapless memory); the
    policy group grows by the terms' 3 and 10, and the subgoals lie within the lookahead (distance <= 3 m:
    value <= 0.6 at the 5 m scale)."""
    from navexp.analysis.sync_audit import SyncAudit

    base = [
        "env=families",
        "env.sim.backend=warp",
        "env.num_envs=16",
        "env.episode_length_s=1.0",
        "env.check_every=50",
    ]
    env = build_env(*base, "obs.terms.route_subgoal.enabled=true", "obs.terms.odom_history.enabled=true")
    assert env.needs_path and env.obs_manager.layout()["policy"][-2:] == [
        ("route_subgoal", 3),
        ("odom_history", 10),
    ]
    before = env.episode_count.sum().item()
    with SyncAudit() as audit:
        for _ in range(20):
            obs, *_ = env.step(torch.zeros(16, 3))
    assert env.episode_count.sum().item() - before >= 16
    assert audit.num_syncs == 0, dict(audit.syncs)
    assert (obs["policy"][:, -13] <= 0.6 + 1e-4).all()


def test_recipe_floorplans_trains_tiny_and_its_export_expects_subgoals(tiny_run, tmp_path):
    """recipe=floorplans composes to env=floorplans (rooms 0.3), reward=path, the GRU and route_subgoal on;
    2 tiny iterations train; the export lists route_subgoal in its observation (the robot must plan),
    and the numpy policy commands with a RoutePlanner and refuses to run without one."""
    from navexp import export
    from navexp.deploy import NumpyPolicy

    overrides = ["recipe=floorplans", *TINY, *NO_MEDIA]
    cfg = compose_config(overrides)
    assert cfg.recipe == "floorplans" and cfg.env.maps.weights.rooms == 0.3 and cfg.ppo.policy.model == "rnn"
    assert cfg.obs.terms.route_subgoal.enabled and cfg.reward.terms.path_progress.weight > 0
    run_dir = tiny_run(overrides)
    files = export.main([f"checkpoint={run_dir}", f"out={tmp_path}"])
    policy = NumpyPolicy.load(str(files["numpy"]))
    assert ["route_subgoal", 3] in policy.meta["obs"]["terms"]
    assert "RoutePlanner" in policy.meta["terms"]["route_subgoal"]
    planner = route.RoutePlanner(np.zeros((40, 40), dtype=bool), 0.2, (-4.0, -4.0), robot_radius_m=0.2)
    planner.set_goal((3.0, 0.0))
    raw = ([2.0] * 72, [6.0, 0.0], [0.0, 0.0], 0.0)
    command = policy.command(*raw, route=planner, pose_map=(-3.0, 0.0, 0.0))
    assert len(command) == 3 and all(math.isfinite(v) for v in command)
    with pytest.raises(ValueError, match="'route_subgoal' needs route="):
        policy.command(*raw)


def test_recipe_floorplans_is_the_documented_command():
    """recipe=floorplans composes to exactly recipe=traps env=floorplans obs.terms.route_subgoal.enabled=true
    (docs/configuration.md, Recipes); only ``recipe`` differs."""
    from omegaconf import OmegaConf

    by_name = OmegaConf.to_container(compose_config(["size=cpu", "recipe=floorplans"]))
    by_keys = OmegaConf.to_container(
        compose_config(["size=cpu", "recipe=traps", "env=floorplans", "obs.terms.route_subgoal.enabled=true"])
    )
    assert (by_name.pop("recipe"), by_keys.pop("recipe")) == ("floorplans", "traps")
    assert by_name == by_keys
