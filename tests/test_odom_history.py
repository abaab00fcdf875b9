"""The mapless memory term ``odom_history`` (issue 51): where the robot was, from odometry, in its body
frame; its numpy twin on the robot; its params checked."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import build_env

from navexp.task.obs.numpy_terms import get_twin
from navexp.task.obs.odom import OdomHistory, history_steps
from navexp.task.obs.terms import odom_history
from navexp.task.state import EnvDims, NavState

DIMS = EnvDims(36, 6.0, 1.5, 3.0, 3, 25, 4.0, 4.0)
PARAMS = {"points": 5, "window": 25, "dist_scale_m": 5.0}


def _driven(yaw: float) -> NavState:
    """A robot that drove 0.1 m per control step along +x for 25 steps: window x = 0.0 .. 2.5, now at
    (2.5, 0) with ``yaw``."""
    s = NavState.zeros(1, DIMS, "cpu")
    xs = torch.arange(26) * 0.1
    s.pos_window = torch.stack((xs, torch.zeros(26)), -1)[None]
    s.pos_xy, s.yaw = s.pos_window[:, -1].clone(), torch.tensor([yaw])
    return s


def test_odom_history_reads_where_the_robot_was_in_its_body_frame():
    """points=5 of a 25-step window: 5, 10, 15, 20, 25 steps ago, i.e. 0.5 .. 2.5 m behind. Facing +x
    they lie straight behind: body (-0.5, 0) .. (-2.5, 0), / 5 m = -0.1 .. -0.5; facing +y (yaw pi/2)
    the same places lie to the robot's left: body (0, 0.5) .. (0, 2.5) -> +0.1 .. +0.5 in y."""
    assert history_steps(25, 5) == [20, 15, 10, 5, 0]
    ahead = odom_history(_driven(0.0), **PARAMS)[0]
    assert ahead.tolist() == pytest.approx([-0.1, 0, -0.2, 0, -0.3, 0, -0.4, 0, -0.5, 0], abs=1e-6)
    left = odom_history(_driven(math.pi / 2), **PARAMS)[0]
    assert left.tolist() == pytest.approx([0, 0.1, 0, 0.2, 0, 0.3, 0, 0.4, 0, 0.5], abs=1e-6)


def test_the_robot_side_history_gives_the_terms_values():
    """An OdomHistory reset at the start and pushed the same 25 positions gives the term's 10 values
    (to 1e-6); without one, the twin names its inputs; a window other than trained is refused."""
    s = _driven(0.7)
    memory = OdomHistory(window=25)
    memory.reset((0.0, 0.0))
    for x, y in s.pos_window[0, 1:].tolist():
        memory.push((x, y))
    twin = get_twin("odom_history")
    got = twin({"odom": memory, "pose_odom": (2.5, 0.0, 0.7)}, PARAMS, {})
    np.testing.assert_allclose(got, odom_history(s, **PARAMS)[0].numpy(), atol=1e-6)
    with pytest.raises(
        ValueError, match=r"'odom_history' needs odom=.*OdomHistory.* and pose_odom=\(x, y, yaw\)"
    ):
        twin({}, PARAMS, {})
    with pytest.raises(ValueError, match=r"OdomHistory\(window=10\): the policy was trained with window=25"):
        short = OdomHistory(window=10)
        short.reset((0.0, 0.0))
        twin({"odom": short, "pose_odom": (0.0, 0.0, 0.0)}, PARAMS, {})


def test_a_new_episode_remembers_only_its_start_and_bad_params_are_named():
    """Right after reset the window holds the start: all 10 values 0; window beyond env.position_window
    (25) is refused naming the key and the bound."""
    env = build_env("env.num_envs=2", "obs.terms.odom_history.enabled=true")
    assert env.obs_manager.layout()["policy"][-1] == ("odom_history", 10)
    assert torch.equal(env.get_observations()["policy"][:, -10:], torch.zeros(2, 10))
    with pytest.raises(
        ValueError,
        match=r"odom_history.params.window=40 is invalid; allowed: an integer in \[1, env.position_window=25",
    ):
        build_env("obs.terms.odom_history.enabled=true", "obs.terms.odom_history.params.window=40")
