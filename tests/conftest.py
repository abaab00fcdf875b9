"""Shared helpers: small CPU worlds built from the app's own config (kernels compile once per session),
the one tiny training config ``TINY`` and the session-scoped ``tiny_run`` fixture that trains each
distinct tiny run once per session."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from navexp import compose_config, make_env
from navexp.task.maps.random_family import LayoutSpec
from navexp.train import run

BASE = ["env.device=cpu", "env.lidar.range_noise_std_m=0.0"]

TINY = [
    "env.device=cpu",
    "env.num_envs=4",
    "env.episode_length_s=1.0",
    "ppo.num_steps_per_env=16",
    "ppo.algorithm.num_mini_batches=2",
    "ppo.max_iterations=2",
    "env.maps.check_path=false",
]
"""A tiny but real training run: 4 worlds, 1 s episodes (10 control steps) so episodes end inside
16-step rollouts, 2 PPO iterations. The final evaluation skips the free-path check (it would draw the
shortest path of 256 pool layouts per suite entry, 2-4 s each on 2 loaded cores), so its SPL and BARN
score are left out; tests/test_suites.py turns it back on."""


NO_MEDIA = ["eval.plot_episodes=0", "eval.video_episodes=0"]
"""No trajectory figures or GIF at the end of a tiny run (tests that check them leave these out)."""


@pytest.fixture(scope="session", autouse=True)
def own_cores_registry(tmp_path_factory):
    """The tests' own core-sharing registry (navexp/learn/cores.py): a test counts only the navexp
    processes it starts, not trainings running on the host, which would change its threads and make an
    evaluation or a play run by a test yield to them (a lowered priority, one more console line)."""
    patch = pytest.MonkeyPatch()
    patch.setenv("NAVEXP_CORES_DIR", str(tmp_path_factory.mktemp("cores")))
    # An evaluation run in-process beside a training a test started would renice the test runner itself,
    # for good (raising a niceness back needs privileges): tests that check yielding set it themselves.
    patch.setenv("NAVEXP_YIELD_NICE", "0")
    yield
    patch.undo()


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """``tiny_run(overrides) -> run dir``: a finished in-process training (``navexp.train.run``) with
    these overrides (start from ``TINY``), trained once per session and shared by every test that asks
    for the same overrides. Tests that write into the run dir ask for a list of their own."""
    runs: dict[tuple[str, ...], Path] = {}

    def get(overrides: list[str]) -> Path:
        key = tuple(overrides)
        if key not in runs:
            d = tmp_path_factory.mktemp("tiny_run") / "run"
            run(compose_config(list(key)), d, list(key), quiet=True)
            runs[key] = d
        return runs[key]

    return get


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


ROOM_SPEC = LayoutSpec(
    half_x=4.0,
    half_y=4.0,
    cylinder_slots=2,
    box_slots=2,
    cylinder_count=(0, 0),
    box_count=(0, 0),
    cylinder_radius_m=(0.2, 0.2),
    box_half_size_m=(0.2, 0.2),
    wall_margin_m=0.5,
    robot_radius_m=0.2,
    spawn_clearance_m=0.15,
    min_start_goal_dist_m=2.0,
)
"""The default 8 m x 8 m room, robot radius 0.2 m, spawn clearance 0.15 m: draws keep 0.35 m."""
