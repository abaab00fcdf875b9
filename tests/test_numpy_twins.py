"""Numpy twins of the deployable observation terms: every deployable term has one, deploy stays torch-free."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from navexp.task.obs.numpy_terms import NUMPY_TWINS, get_twin
from navexp.task.obs.terms import GROUP_OF, OBS_TERMS, Provenance, obs_term


def test_every_deployable_term_has_a_numpy_twin():
    """The policy group's terms (lidar, lidar_history, goal_polar, vel_body, omega, action_prev,
    route_subgoal, odom_history) all have twins."""
    deployable = [n for n in OBS_TERMS.names() if GROUP_OF[OBS_TERMS.get(n).meta["provenance"]] == "policy"]
    assert deployable == [
        "lidar",
        "lidar_history",
        "goal_polar",
        "vel_body",
        "omega",
        "action_prev",
        "route_subgoal",
        "odom_history",
    ]
    assert set(deployable) <= set(NUMPY_TWINS)


def test_a_deployable_term_without_a_twin_is_refused_at_registration():
    """Registering a deployable term with no twin fails naming the term and where the twin goes."""
    with pytest.raises(
        ValueError, match=r"deployable observation term 'imu_tilt' has no numpy twin.*numpy_terms"
    ):
        obs_term("imu_tilt", Provenance.DEPLOYABLE, lambda p, d: 1)
    assert "imu_tilt" not in OBS_TERMS


def test_twins_compute_hand_checked_values():
    """goal (3, 4) m at dist_scale 5 m: [1.0, 0.8, 0.6]; a 3 m beam at 6 m max range: 0.5; NaN: 1.0."""
    meta = {"lidar": {"max_range_m": 6.0}, "scales": {"max_lin_vel_mps": 1.5, "max_ang_vel_radps": 2.0}}
    inputs = {
        "scan_m": [3.0, float("nan")],
        "goal_body_xy": [3.0, 4.0],
        "vel_body": [0.75, 0.0],
        "omega": 1.0,
    }
    assert np.allclose(get_twin("goal_polar")(inputs, {"dist_scale_m": 5.0}, meta), [1.0, 0.8, 0.6])
    assert np.allclose(get_twin("lidar")(inputs, {}, meta), [0.5, 1.0])
    assert np.allclose(get_twin("vel_body")(inputs, {}, meta), [0.5, 0.0])
    assert np.allclose(get_twin("omega")(inputs, {}, meta), [0.5])
    with pytest.raises(ValueError, match=r"'truth_contact' is not available on the robot.*available: \["):
        get_twin("truth_contact")


def test_deploy_imports_without_torch():
    """navexp.deploy (and the twins it uses) import numpy only."""
    code = "import sys; import navexp.deploy; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_log_encoded_lidar_twin_matches_the_simulator_term():
    """log encoding, floor 0.1 m, 6 m range: 0.6 m reads log(6)/log(60) = 0.4376, 0.05 m (inside the
    floor) 0, NaN and 9 m read the max range (1.0); the torch term's encoding gives the same values."""
    import torch

    from navexp.task.obs.numpy_terms import encode_scan

    meta = {"lidar": {"max_range_m": 6.0}}
    params = {"encoding": "log", "log_min_m": 0.1}
    got = get_twin("lidar")({"scan_m": [0.6, 0.05, float("nan"), 9.0]}, params, meta)
    assert np.allclose(got, [0.4376, 0.0, 1.0, 1.0], atol=1e-4)
    torch_values = encode_scan(torch.tensor([0.6, 0.05, 6.0, 6.0]), "log", 0.1, 6.0)
    assert np.allclose(torch_values.numpy(), got, atol=1e-6)
