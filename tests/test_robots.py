"""Robots as a config group: the holonomic default, the differential drive, and the robot registry."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import build_env

from navexp import compose_config
from navexp.paths import CONFIG_DIR
from navexp.task.robots import ROBOTS, make_robot
from navexp.train import run

ROBOT_VARIANTS = sorted(p.stem for p in (CONFIG_DIR / "robot").glob("*.yaml"))

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
    docstring of navexp.task.robots.diffdrive). The robot really turns: yaw +2 rad, a 0.5 m radius arc."""
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


def test_unknown_robot_name_or_param_fails_with_the_valid_ones():
    """env.robot.name=tank lists the registered robots; an unknown diffdrive param lists its params."""
    with pytest.raises(
        ValueError, match=r"env.robot.name='tank' is not a robot; valid: \['diffdrive', 'holonomic'\]"
    ):
        make_robot(compose_config(["env.robot.name=tank"]).env.robot)
    with pytest.raises(
        KeyError,
        match=r"unknown key\(s\) \['lateral_k'\].*allowed: \['lateral_force_limit_n', 'lateral_kv'\]",
    ):
        make_robot(compose_config(["robot=diffdrive", "+env.robot.params.lateral_k=5"]).env.robot)
    assert sorted(ROBOTS) == ["diffdrive", "holonomic"]


@pytest.mark.parametrize("robot", ROBOT_VARIANTS)
def test_every_robot_variant_composes_and_steps(robot):
    """Each configs/robot/ variant names a registered robot, builds a NavEnv and takes one finite step
    with an action of its width."""
    env = build_env(f"robot={robot}", "env.num_envs=2")
    assert env.robot.name == robot and env.sim.ctrl.shape == (2, 3)
    obs, rew, *_ = env.step(torch.full((2, env.num_actions), 0.5))
    assert torch.isfinite(obs["policy"]).all() and torch.isfinite(rew).all()


def test_robot_group_selects_the_robot_and_keeps_env_robot_overrides():
    """robot=diffdrive composes at env.robot with its own limits; env.robot.* keys still override it,
    after env= too; the default is the holonomic robot with action width 3."""
    cfg = compose_config(["env=empty", "robot=diffdrive", "env.robot.max_lin_vel_mps=0.8"])
    robot = make_robot(cfg.env.robot)
    assert (robot.name, robot.num_actions, robot.action_scale()) == ("diffdrive", 2, [0.8, 2.0])
    assert robot.params == {"lateral_kv": 1000.0, "lateral_force_limit_n": 200.0}
    default = make_robot(compose_config([]).env.robot)
    assert (default.name, default.num_actions, default.action_scale()) == ("holonomic", 3, [1.5, 1.5, 2.0])


def test_diffdrive_action_width_is_2_in_the_env_and_its_observation():
    """The env takes [N, 2] actions (a [N, 3] one is refused naming the width) and action_prev is 2 wide."""
    env = build_env("robot=diffdrive", "env.num_envs=2", "obs.terms.action_prev.enabled=true")
    assert env.num_actions == 2 and env.dims.num_actions == 2
    assert env.obs_manager.layout()["policy"][-1] == ("action_prev", 2)
    obs, *_ = env.step(torch.tensor([[0.5, -0.25], [1.0, 1.0]]))
    assert obs["policy"][:, -2:].tolist() == [[0.5, -0.25], [1.0, 1.0]]
    with pytest.raises(ValueError, match=r"shape \(2, 2\); got \(2, 3\)"):
        env.step(torch.zeros(2, 3))


def test_diffdrive_export_and_deploy_have_action_width_2(tmp_path):
    """A tiny diffdrive run with action_prev on: the checkpoint records the robot, the export metadata's
    action block is (forward m/s, yaw_rate rad/s) scaled (1.0, 2.0), ONNX outputs [N, 2], and the numpy
    policy commands a 2-tuple equal to clip(actor output) * scale, feeding it back as action_prev."""
    import json

    import numpy as np
    import onnxruntime as ort
    from conftest import TINY

    from navexp import export
    from navexp.deploy import NumpyPolicy
    from navexp.learn.checkpoint import load_checkpoint

    overrides = [*TINY, "robot=diffdrive", "obs.terms.action_prev.enabled=true", "size=none"]
    overrides += ["eval.num_episodes=2", "eval.plot_episodes=0"]
    run(compose_config(overrides), tmp_path / "run", overrides, quiet=True)
    ckpt = load_checkpoint(tmp_path / "run")
    assert ckpt["infos"]["robot"]["robot"] == "diffdrive" and ckpt["infos"]["robot"]["scale"] == [1.0, 2.0]
    files = export.main([f"checkpoint={tmp_path / 'run'}", f"out={tmp_path / 'export'}"])
    meta = json.loads(files["meta"].read_text())
    assert meta["obs"]["terms"][-1] == ["action_prev", 2] and meta["obs"]["width"] == 72 + 3 + 2 + 1 + 2
    action = meta["action"]
    assert (action["order"], action["units"]) == (["forward", "yaw_rate"], ["m/s", "rad/s"])
    assert action["scale"] == [1.0, 2.0] and action["robot"] == "diffdrive"
    obs = np.random.default_rng(0).uniform(-1, 1, (5, meta["obs"]["width"])).astype(np.float32)
    out = ort.InferenceSession(str(files["onnx"])).run(["actions"], {"obs": obs})[0]
    assert out.shape == (5, 2)
    policy = NumpyPolicy.load(str(files["numpy"]))
    cmd = policy.command([3.0] * 72, [2.0, 1.0], [0.5, 0.0], 0.1)
    assert len(cmd) == 2
    first = np.clip(policy.act(policy.history[-1]), -1, 1)  # the frame just built, prev_action zeros
    assert np.allclose(cmd, first * [1.0, 2.0])
    assert np.array_equal(policy.prev_action, first)  # the next frame's action_prev


def test_evaluating_with_another_robot_fails_naming_both():
    """`robot=diffdrive` on an evaluate/play command line lands at env.robot of the stored run config;
    a checkpoint trained with holonomic then fails before any simulator is built, naming both robots."""
    from omegaconf import OmegaConf

    from navexp import compose_config
    from navexp.analysis.rollout import EvalRun
    from navexp.config.run_config import load_run_config

    ckpt = {
        "_path": "run/model_9.pt",
        "infos": {"config": OmegaConf.to_container(compose_config([])), "robot": {"robot": "holonomic"}},
    }
    cfg = load_run_config(ckpt, ["robot=diffdrive", "env.num_envs=3"])
    assert cfg.env.robot.name == "diffdrive" and cfg.env.robot.max_lin_vel_mps == 1.0
    assert "robot" not in cfg and cfg.env.num_envs == 3
    with pytest.raises(ValueError, match=r"trained with robot 'holonomic'; this config uses 'diffdrive'"):
        EvalRun.build(ckpt, cfg)
