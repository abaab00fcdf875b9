"""Slow learning checks: PPO on the real simulator learns to reach goals in an empty room, with each
robot (the holonomic default and the differential drive's 2-D action)."""

from __future__ import annotations

import pytest

from navexp import compose_config
from navexp.train import run


@pytest.mark.slow
@pytest.mark.parametrize("robot", ["holonomic", "diffdrive"])
def test_empty_room_reaches_a_high_success_rate(tmp_path, robot):
    """env=empty, 64 worlds, 60 iterations (~123k steps, a few minutes on 2 CPU cores):
    >= 80 % held-out success."""
    overrides = [
        "env=empty",
        f"robot={robot}",
        "env.device=cpu",
        "env.num_envs=64",
        "ppo.num_steps_per_env=32",
        "ppo.max_iterations=60",
        "ppo.save_interval=30",
        "eval.num_episodes=100",
        "size=none",
        "seed=1",
    ]
    success = run(compose_config(overrides), tmp_path / "run", overrides, quiet=True)
    assert success >= 0.8, f"{robot}: held-out success {success:.2%} after 60 iterations"
