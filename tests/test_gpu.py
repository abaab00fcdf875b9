"""CUDA-only checks of the warp backend: CUDA graphs, host syncs, parity with the CPU backend.

They skip without CUDA (the CPU suite proves the same properties where it can: zero counted syncs,
masked resets; see test_hot_path.py). ``scripts/gpu_check.sh`` runs them on a lent GPU.
"""

from __future__ import annotations

import pytest
import torch
from test_backend_parity import rollout
from test_env_dynamics import FORWARD, TWO_WORLDS

from navexp import compose_config, make_env

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs CUDA (a GPU); the CPU suite covers the rest"
    ),
]


def _env(*overrides: str):
    return make_env(compose_config(["env.device=cuda:0", "env.sim.backend=warp", *overrides]))


def test_the_physics_and_lidar_graphs_capture_without_advancing_state(scenario_file):
    """``env.sim.capture_step=false``: the simulator's own graphs. The first step() after build
    captures and launches once: 1.5 m/s forward for 0.1 s from rest moves 0.15 m (+- 0.02), not
    0.30 m; both graphs (physics, sense) exist afterwards."""
    env = _env("env.num_envs=2", f"env.scenarios={scenario_file(TWO_WORLDS)}", "env.sim.capture_step=false")
    assert env.sim.graph_enabled and env.step_graph is None
    env.step(FORWARD.repeat(2, 1).cuda())
    assert abs(env.state.pos_xy[1, 1].item() - 0.15) < 0.02
    assert set(env.sim._graphs) == {"physics", "sense"}


def test_the_whole_step_is_one_graph_and_each_call_advances_one_step(scenario_file):
    """The default (issue 47): the first step() runs eagerly, the second captures and replays the
    whole step, the third replays: 0.15 m each at 1.5 m/s (+- 0.02), 0.45 m after three."""
    env = _env("env.num_envs=2", f"env.scenarios={scenario_file(TWO_WORLDS)}")
    assert env.step_graph is not None and not env.sim.graph_enabled
    for k in range(3):
        env.step(FORWARD.repeat(2, 1).cuda())
        assert abs(env.state.pos_xy[1, 1].item() - 0.15 * (k + 1)) < 0.02 * (k + 1)
    assert env.step_graph.graph is not None and env.step_graph.failed is None


def test_observations_kept_across_a_replayed_step_stay_as_they_were():
    """rsl_rl holds the observations it acted on until the next step has run: the third step (a replay)
    must not rewrite the second's."""
    env = _env("env.num_envs=16")
    a = torch.rand(16, 3, device="cuda") * 2 - 1
    env.step(a)
    obs, *_ = env.step(a)  # the capture and first replay
    kept = obs["policy"].clone()
    new, *_ = env.step(-a)
    assert torch.equal(obs["policy"], kept) and not torch.equal(new["policy"], kept)


@pytest.mark.parametrize(
    "capture, extra",
    [
        ("step", ()),
        ("physics", ()),
        ("step", ("env.lidar.range_noise_std_m=0.02", "env.lidar.latency_steps=2")),
        ("step", ("recipe=dynamic", "env.episode_length_s=1.0")),
    ],
    ids=["step", "physics", "step_noisy_lidar", "step_moving_recipe"],
)
def test_graph_and_eager_agree_over_100_steps(capture, extra):
    """Same seed, same actions, a graph (the whole step, or physics and LiDAR) and none: poses within
    1e-5 m, the same episode ends and rewards within 1e-5, with resets and pool top-ups on the way
    (1 s episodes, a fault check every 10 steps); the whole-step graph captured without a fallback."""

    def run(*overrides: str):
        env = _env("env.num_envs=64", "env.episode_length_s=1.0", "env.check_every=10", "seed=3", *overrides)
        g = torch.Generator(device="cuda").manual_seed(0)
        poses, dones, rewards = [], [], []
        for _ in range(100):
            _, r, d, _ = env.step(torch.rand(64, env.num_actions, generator=g, device="cuda") * 2 - 1)
            poses.append(env.state.pos_xy.clone())
            dones.append(d.clone())
            rewards.append(r.clone())
        if "env.sim.capture_step=true" in overrides:
            assert env.step_graph.failed is None and env.step_graph.graph is not None
        return torch.stack(poses), torch.stack(dones), torch.stack(rewards)

    graph = run(f"env.sim.capture_step={str(capture == 'step').lower()}", *extra)
    eager = run("env.sim.cuda_graph=false", *extra)
    assert torch.equal(graph[1], eager[1])
    assert (graph[0] - eager[0]).norm(dim=-1).max().item() < 1e-5
    assert (graph[2] - eager[2]).abs().max().item() < 1e-5


def test_no_host_sync_in_50_steps_under_cuda_sync_debug_mode():
    """torch.cuda.set_sync_debug_mode('error') raises on any synchronising call: 50 steps of 256 worlds
    with resets run through (check_every beyond the window)."""
    env = _env("env.num_envs=256", "env.episode_length_s=1.0", "env.check_every=1000")
    g = torch.Generator(device="cuda").manual_seed(0)
    actions = [torch.rand(256, 3, generator=g, device="cuda") * 2 - 1 for _ in range(50)]
    env.step(actions[0])  # the eager first step and the capture outside the checked window
    env.step(actions[1])
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for a in actions:
            env.step(a)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert env.episode_count.sum().item() > 256 * 4


def test_warp_on_cuda_matches_mujoco_on_the_cpu():
    """The parity check of test_backend_parity with warp on the GPU: the same episode ends; until each
    world's last step poses within 1e-4 m and ranges within 1e-3 m (at a collision warp holds the
    robot where it touched, mujoco lets it slide on)."""
    p_gpu, s_gpu, e_gpu = rollout("warp", "cuda:0")
    p_cpu, s_cpu, e_cpu = rollout("mujoco", "cpu")
    assert e_gpu == e_cpu and len(e_gpu) == 3
    for w, (end, _) in e_gpu.items():
        assert (p_gpu[:end, w] - p_cpu[:end, w]).norm(dim=-1).max() < 1e-4
        assert (s_gpu[:end, w] - s_cpu[:end, w]).abs().max() < 1e-3
