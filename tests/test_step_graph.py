"""The whole control step is replayable (issue 47, item 2): what a CUDA graph needs, proven on the CPU.

A captured step replays its kernels on the memory and constants of the capture, so every step must
issue the same operations on the same long-lived tensors with the same Python constants.
``ReplayAudit`` records both (navexp.analysis.replay_audit); two warp steps with resets, moving
obstacles, a delayed noisy LiDAR, the path reward or a layout pool refill between them must agree.
The capture itself runs on a GPU (tests/test_gpu.py).
"""

from __future__ import annotations

import pytest
import torch
from conftest import build_env

from navexp.analysis.replay_audit import ReplayAudit

WARP = ["env.sim.backend=warp", "env.num_envs=16", "env.episode_length_s=0.3"]
"""Episodes of 3 control steps: every audited step resets some worlds."""


def audited_steps(env, count: int = 3, between=None) -> list[ReplayAudit]:
    """``count`` audited steps after 2 plain ones, the actions copied into one buffer first (as a
    captured step's input); ``between(env)`` runs before the last audited step."""
    g = torch.Generator().manual_seed(0)
    actions = torch.zeros(env.num_envs, env.num_actions)
    audits = []
    for k in range(2 + count):
        actions.copy_(torch.rand(env.num_envs, env.num_actions, generator=g) * 2 - 1)
        if between is not None and k == 1 + count:
            between(env)
        if k < 2:
            env.step(actions)
            continue
        with ReplayAudit() as audit:
            env._step_device(actions)
        audits.append(audit)
    return audits


@pytest.mark.parametrize(
    "overrides",
    [
        [],
        ["env=dynamic", "reward.terms.moving_ttc.weight=-0.5"],
        ["env.lidar.latency_steps=2", "env.lidar.range_noise_std_m=0.02", "env.lidar.jitter_deg=1.0"],
        ["recipe=traps", "env.episode_length_s=0.3"],
    ],
    ids=["room", "moving", "lidar_latency_noise", "trap_recipe"],
)
def test_every_step_replays_the_same_operations_on_the_same_memory(overrides):
    env = build_env(*WARP, *overrides)
    first, *rest = audited_steps(env)
    assert len(first.ops) > 200
    for other in rest:
        assert first.differences(other) == []
    assert int(env.episode_count.sum()) >= 16  # resets happened inside the audited steps


def test_a_pool_refill_keeps_the_pool_in_its_memory():
    """A refill between two steps draws new layouts into the same memory (generation unchanged), so a
    graph captured before it takes the new layouts."""
    env = build_env(*WARP)
    pool = env.layout_pool
    before = (pool.generation, pool._pool_rows.data_ptr(), pool._pool_rows[:4].clone())
    audits = audited_steps(env, between=lambda e: e.layout_pool.refill())
    assert audits[0].differences(audits[-1]) == []
    assert (pool.generation, pool._pool_rows.data_ptr()) == before[:2]
    assert not torch.equal(pool._pool_rows[:4], before[2])  # new layouts, same place


def test_the_fault_stamp_counts_on_the_device():
    """A NaN action at the 4th step is stamped 4 (the device step count, not a host constant)."""
    env = build_env("env.sim.backend=warp", "env.num_envs=2", "env.check_every=1000")
    a = torch.zeros(2, env.num_actions)
    for _ in range(3):
        env.step(a)
    bad = a.clone()
    bad[1, 0] = float("nan")
    env.step(bad)
    assert int(env._step_count) == 4 == env.steps_taken
    assert env.faults.first_step[1].max().item() == 4 and env.faults.first_step[0].max().item() == -1


class _Rebinds:
    def __init__(self):
        self.x = torch.zeros(4)
        self.steps = 0

    def rebound(self):
        self.x = self.x + 1.0  # the next step reads another tensor

    def host_constant(self):
        self.steps += 1
        self.x.fill_(self.steps)  # the capture would keep the first value

    def in_place(self):
        self.x.add_(1.0)
        self.x.copy_(torch.where(self.x > 2, self.x * 0.5, self.x))


def test_the_audit_sees_a_rebound_tensor_and_a_host_constant_and_passes_in_place_work():
    for method, expected in (("rebound", "held"), ("host_constant", "1 then 2"), ("in_place", None)):
        obj = _Rebinds()
        runs = []
        for _ in range(2):
            with ReplayAudit() as audit:
                getattr(obj, method)()
            runs.append(audit)
        found = runs[0].differences(runs[1])
        if expected is None:
            assert found == [], found
        else:
            assert len(found) == 1 and expected in found[0], found


def test_the_cpu_has_no_step_graph_and_the_switch_is_a_config_key():
    """The graph needs CUDA: on the CPU the step runs eagerly whatever the switch says."""
    for switch in ("true", "false"):
        env = build_env("env.sim.backend=warp", "env.num_envs=2", f"env.sim.capture_step={switch}")
        assert env.step_graph is None
