"""The step path never waits for the device: host syncs counted on Warp's CPU device, masked resets.

On a GPU a host sync stalls Python until the device catches up; on the CPU nothing stalls, so the
syncs are counted from the calls themselves (navexp.analysis.sync_audit: every ATen op through a
TorchDispatchMode, plus Tensor.cpu/numpy/tolist).
"""

from __future__ import annotations

import tempfile

import torch
from conftest import build_env
from test_env_dynamics import FORWARD, TWO_WORLDS

from navexp import compose_config, make_env
from navexp.analysis.sync_audit import SyncAudit
from navexp.learn.rl_cfg import build_train_cfg
from navexp.learn.runner import NavRunner

WARP_SHORT = ["env.sim.backend=warp", "env.num_envs=16", "env.episode_length_s=1.0"]
"""16 worlds with 10-step episodes: every world resets several times in 50 steps."""


def _actions(n_steps: int, n_worlds: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.rand(n_worlds, 3, generator=g) * 2 - 1 for _ in range(n_steps)]


def test_the_audit_sees_the_syncs_it_is_meant_to_count():
    """The counter itself: item, bool, nonzero, tolist and a bool-mask index are 5 syncs; x + 1 none."""
    x = torch.arange(4.0)
    with SyncAudit() as audit:
        y = x + 1
        y.sum().item()
        bool(y.any())
        y.nonzero()
        y.tolist()
        y[y > 2]
    assert audit.num_syncs == 5, audit.syncs
    assert audit.ops["aten.add"] == 1


def test_warp_step_makes_no_host_sync_with_resets_happening():
    """50 steps of 16 worlds with 10-step episodes (about 80 resets): zero host syncs inside
    NavEnv.step on the warp backend; with check_every=25 exactly the 2 fault checks sync."""
    env = build_env(*WARP_SHORT, "env.check_every=1000")
    actions = _actions(50, 16)
    episodes_before = env.episode_count.sum().item()
    with SyncAudit() as audit:
        for a in actions:
            env.step(a)
    resets = env.episode_count.sum().item() - episodes_before
    assert resets >= 16 * 4, resets  # every world ended at least 4 episodes (time-outs every 10 steps)
    assert audit.num_syncs == 0, dict(audit.syncs)
    print(f"torch ops per step: {audit.num_ops / 50:.0f}")

    env = build_env(*WARP_SHORT, "env.check_every=25")
    with SyncAudit() as audit:
        for a in actions:
            env.step(a)
    assert audit.num_syncs == 2, dict(audit.syncs)  # bool(flags.any()) at steps 25 and 50


def test_the_safety_filter_adds_no_host_sync():
    """env.robot.safety_horizon_s=0.5 (the filter slows most commands here): still zero host syncs in
    50 warp steps with resets, and it did change commands (the worlds move slower than unfiltered)."""
    runs = {}
    for horizon in (0.0, 0.5):
        env = build_env(*WARP_SHORT, "env.check_every=1000", f"env.robot.safety_horizon_s={horizon}")
        travelled = torch.zeros(16)
        with SyncAudit() as audit:
            for a in _actions(50, 16):
                env.step(a)
                travelled += env.state.vel_body.norm(dim=1) * env.control_dt
        assert audit.num_syncs == 0, dict(audit.syncs)
        runs[horizon] = travelled.sum().item()
    assert runs[0.5] < 0.95 * runs[0.0], runs


def test_a_ppo_rollout_makes_no_host_sync():
    """rsl_rl's collection loop as NavRunner runs it (policy act, env step, storage, episode
    bookkeeping) over a 20-step rollout: one sync, the env's fault check on the rollout's last step
    (check_every defaults to ppo.num_steps_per_env)."""
    cfg = compose_config(["env.device=cpu", *WARP_SHORT, "ppo.num_steps_per_env=20"])
    env = make_env(cfg)
    runner = NavRunner(env, build_train_cfg(cfg), tempfile.mkdtemp(), "cpu", infos={}, quiet=True)
    runner.logger.init_logging_writer()
    obs = env.get_observations()
    finished = torch.zeros((), dtype=torch.long)
    with torch.inference_mode(), SyncAudit() as audit:
        for _ in range(20):
            actions = runner.alg.act(obs)
            obs, rewards, dones, extras = env.step(actions)
            runner.alg.process_env_step(obs, rewards, dones, extras)
            runner.logger.process_env_step(rewards, dones, extras, None)
            finished += dones.sum()  # a device op, no sync
    assert audit.num_syncs == 1, dict(audit.syncs)
    assert runner.logger.cur_episode_length.max().item() < 10  # episodes ended and were booked
    # Every world times out after 10 steps at the latest (2 episodes in 20 steps); a random action
    # may end one earlier (a collision), so each finished episode is booked exactly once.
    assert int(finished) >= 16 * 2
    assert len(runner.logger.returns.values()) == int(finished)


def test_resets_elsewhere_leave_a_running_world_bit_for_bit_unchanged(scenario_file, backend):
    """Two runs with the same seed: in run A world 0 drives into its cylinder and auto-resets every
    few steps, in run B it stands still. World 1 gets the same actions in both: its pose, velocity,
    noisy scan and observations are identical bit for bit at every step."""

    def run(world0: torch.Tensor) -> tuple[list[torch.Tensor], int]:
        env = build_env(
            backend,
            "env.num_envs=2",
            f"env.scenarios={scenario_file(TWO_WORLDS)}",
            "env.lidar.range_noise_std_m=0.01",
        )
        trace = []
        for k in range(12):
            a = torch.stack((world0, 0.3 * FORWARD + torch.tensor([0.0, 0.1 * (k % 3), 0.2])))
            obs, _, _, _ = env.step(a)
            s = env.state
            trace.append(torch.cat((s.pos_xy[1], s.vel_body[1], s.scan[1], obs["policy"][1])))
        return trace, int(env.episode_count[0].item())

    crashing, episodes_a = run(FORWARD)
    standing, episodes_b = run(torch.zeros(3))
    assert episodes_a >= 3 and episodes_b == 1  # world 0 reset at least twice in run A, never in B
    for a, b in zip(crashing, standing, strict=True):
        assert torch.equal(a, b)


def test_the_first_step_advances_exactly_one_control_step(scenario_file):
    """warp: 1.5 m/s forward for one 0.1 s control step from rest moves the robot 0.15 m (+- 0.02 for
    the servo's rise), not 0.30 m (two steps)."""
    env = build_env("env.sim.backend=warp", "env.num_envs=2", f"env.scenarios={scenario_file(TWO_WORLDS)}")
    env.step(FORWARD.repeat(2, 1))
    assert abs(env.state.pos_xy[1, 1].item() - 0.15) < 0.02  # world 1 faces +y


def test_graph_capture_does_not_advance_state_and_replays_the_eager_step():
    """Warp captures graphs on its CPU device too: with capture forced on, 30 steps of 16 worlds with
    resets match the eager run bit for bit (so capture ran nothing by itself and the graphs see
    every in-place layout write), and both graphs exist afterwards."""

    def run(graph: bool) -> torch.Tensor:
        env = build_env(*WARP_SHORT)
        env.sim.graph_enabled = graph  # on CUDA this is the default; here it is forced
        poses = []
        for a in _actions(30, 16):
            env.step(a)
            poses.append(torch.cat((env.sim.qpos, env.state.scan_clean), dim=1).clone())
        if graph:
            assert set(env.sim._graphs) == {"physics", "sense"}
        assert env.episode_count.sum().item() > 16 * 2  # resets happened
        return torch.stack(poses)

    assert torch.equal(run(True), run(False))
