"""Shared helpers: small CPU worlds built from the app's own config (kernels compile once per session)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from navexp import compose_config, make_env

BASE = ["env.device=cpu", "env.lidar.range_noise_std_m=0.0"]

TINY_TRAIN = [
    "env.device=cpu",
    "env.num_envs=4",
    "env.episode_length_s=1.0",
    "ppo.num_steps_per_env=16",
    "ppo.num_mini_batches=2",
    "ppo.max_iterations=2",
    "env.maps.check_path=false",
]
"""A tiny but real training run: 4 worlds, 1 s episodes (10 control steps) so episodes end inside
16-step rollouts, 2 PPO iterations. The final evaluation skips the free-path check (it would draw the
shortest path of 256 pool layouts per suite entry, 2-4 s each on 2 loaded cores), so its SPL and BARN
score are left out; tests/test_suites.py turns it back on."""


def build_env(*overrides: str):
    """A NavEnv on the CPU with noise-free LiDAR, plus the given overrides."""
    return make_env(compose_config([*BASE, *overrides]))


@pytest.fixture(params=["warp", "mujoco"])
def backend(request) -> str:
    """Both simulator backends: MuJoCo Warp (on Warp's CPU device) and classic MuJoCo."""
    return f"env.sim.backend={request.param}"


@pytest.fixture
def scenario_file(tmp_path: Path):
    """Write a scenario YAML (given as text) and return its path."""

    def write(text: str) -> str:
        path = tmp_path / "scenarios.yaml"
        path.write_text(textwrap.dedent(text))
        return str(path)

    return write
