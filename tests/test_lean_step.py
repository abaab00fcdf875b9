"""A lean control step: few torch ops, the state written in place, and the same numbers as the plain
formulas (issue 47, items 1 and 2).

The op count comes from navexp.analysis.sync_audit (every ATen op through a TorchDispatchMode, views
included), the same counter as ``python -m navexp.bench``'s ``torch_ops_per_step``. The reference
numbers are the straightforward per-field formulas the fused step replaced (``rotate_xy``, a wrapped
``atan2``, the priority chain of the end reasons, each reward term function alone).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from conftest import build_env

from navexp.analysis.sync_audit import SyncAudit
from navexp.sim.layout import rotate_xy
from navexp.task.obs.numpy_terms import encode_scan
from navexp.task.state import COLLISION, OUT_OF_BOUNDS, SUCCESS, TIME_OUT

SHORT = ["env.num_envs=16", "env.episode_length_s=1.0"]
"""16 worlds with 10-step episodes: every world resets several times in 40 steps."""


def _actions(n_steps: int, n_worlds: int, n_actions: int = 3) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(n_steps):
        a = torch.rand(n_worlds, n_actions, generator=g) * 2 - 1
        a[:, 0] = a[:, 0].abs()  # mostly forward: some worlds reach obstacles, walls or the goal
        out.append(a)
    return out


def test_a_warp_step_issues_at_most_300_torch_ops():
    """The default config's NavEnv.step on the warp backend, 20 steps with resets happening, counted
    by the bench's op counter: at most 300 ATen ops per step (267 measured; 438 before the fused
    step), and still no host sync."""
    audit = _audited_steps()
    assert audit.num_syncs == 0, dict(audit.syncs)
    assert audit.num_ops / 20 <= 300, (audit.num_ops / 20, audit.ops.most_common(10))


def test_a_warp_step_with_moving_obstacles_issues_at_most_470_torch_ops():
    """env=dynamic (2-4 moving obstacles of every motion model), 16 worlds, 20 steps with resets
    happening, on warp: at most 470 ATen ops per step (461 measured with the path geometry kept in the
    layout; 497 with the fused motion recomputing it each step, 554 before that, 272 for the static
    room), and no host sync."""
    audit = _audited_steps("env=dynamic")
    assert audit.num_syncs == 0, dict(audit.syncs)
    assert audit.num_ops / 20 <= 470, (audit.num_ops / 20, audit.ops.most_common(10))


def test_the_motion_step_issues_at_most_180_torch_ops():
    """``Motion.advance`` of env=dynamic (every motion model in play), 16 worlds: at most 180 ATen ops
    (172 measured: the path geometry read from the layout, 22 ops for every slot's path point; 208
    when it was recomputed from the waypoints every step, 45 ops), and no host sync."""
    env = build_env("env.sim.backend=warp", "env=dynamic", *SHORT)
    active = torch.ones(16, dtype=torch.bool)
    env.motion.advance(active, env.layout)
    with SyncAudit() as audit:
        env.motion.advance(active, env.layout)
    assert audit.num_syncs == 0, dict(audit.syncs)
    assert audit.num_ops <= 180, (audit.num_ops, audit.ops.most_common(10))


def _audited_steps(*overrides: str) -> SyncAudit:
    """The audit of 20 warp steps of 16 worlds (after one unaudited step), resets happening."""
    env = build_env("env.sim.backend=warp", *overrides, *SHORT, "env.check_every=1000")
    actions = _actions(20, 16)
    env.step(actions[0])
    with SyncAudit() as audit:
        for a in actions:
            env.step(a)
    return audit


def _state_tensors(env) -> dict[str, torch.Tensor]:
    """Every tensor a step carries over to the next: the state, the layouts, the episode and fault
    bookkeeping, the simulator buffers the env reads and writes."""
    out = {f"state.{f.name}": getattr(env.state, f.name) for f in dataclasses.fields(env.state)}
    out = {k: v for k, v in out.items() if isinstance(v, torch.Tensor)}
    out.update({f"layout.{f.name}": getattr(env.layout, f.name) for f in dataclasses.fields(env.layout)})
    for name in ("episode_length_buf", "episode_count", "held"):
        out[name] = getattr(env, name)
    out["episode_sums"] = env.reward_manager.episode_sums
    out["fault_bits"], out["fault_first_step"] = env.faults.bits, env.faults.first_step
    for name in ("qpos", "qvel", "ctrl", "contact", "ranges"):
        out[f"sim.{name}"] = getattr(env.sim, name)
    return out


@pytest.mark.parametrize(
    "extra", [[], ["recipe=traps"], ["obs=asymmetric"]], ids=["default", "traps", "asym"]
)
def test_every_carried_tensor_keeps_its_storage_across_steps(extra):
    """40 steps of 16 worlds with resets happening: every state field, layout field and bookkeeping
    tensor is the same tensor at the same address as before (written in place, never reassigned),
    which is what lets a captured step (a CUDA graph) replay into them. Before the fused step, 11
    state fields were new tensors every step."""
    env = build_env("env.sim.backend=warp", *SHORT, "env.check_every=1000", *extra)
    env.step(_actions(1, 16)[0])
    before = {k: (v, v.data_ptr(), tuple(v.shape)) for k, v in _state_tensors(env).items()}
    episodes = int(env.episode_count.sum())
    for a in _actions(40, 16):
        env.step(a)
    assert int(env.episode_count.sum()) - episodes >= 16 * 3  # every world reset 3 times or more
    after = _state_tensors(env)
    moved = [k for k, (t, ptr, shape) in before.items() if after[k] is not t or after[k].data_ptr() != ptr]
    assert moved == []
    assert all(tuple(after[k].shape) == shape for k, (_, _, shape) in before.items())


def _wrap(a: torch.Tensor) -> torch.Tensor:
    return torch.atan2(torch.sin(a), torch.cos(a))


def test_fused_step_equals_the_plain_formulas_over_60_steps(backend):
    """60 steps of 16 worlds from seed 3 (about 40 episode ends): after every step the observation
    and the reward of every world that did not reset equal what the plain
    per-field formulas give on the simulator's own values, within float32 rounding (1e-5); the
    end reasons are the next test's.

    By hand, per world: yaw = qpos[2]; body velocity = R(-yaw) qvel[:2]; goal bearing = wrap(atan2(goal
    - pos) - yaw); the policy frame = [encode(scan), |goal - pos| / 5, sin, cos bearing, v_body / v_max,
    omega / w_max]; the reward sum_i w_i term_i(state) with the scan the action was chosen on."""
    env = build_env(backend, *SHORT, "seed=3")
    s, sim, rm = env.state, env.sim, env.reward_manager
    dims = s.dims
    ends = 0
    for a in _actions(60, 16):
        scan_before, min_scan_before = s.scan_clean.clone(), s.min_scan.clone()
        length_before = env.episode_length_buf.clone()
        obs, rew, dones, _ = env.step(a)
        done = dones.bool()
        ends += int(done.sum())
        # Observation, after the resets: from qpos, qvel, the layout's goal and the ranges alone.
        yaw = sim.qpos[:, 2]
        to_goal = env.layout.goal_xy - sim.qpos[:, :2]
        bearing = _wrap(torch.atan2(to_goal[:, 1], to_goal[:, 0]) - yaw)
        lidar_cfg = env.cfg.obs.terms.lidar.params
        frame = torch.cat(
            (
                encode_scan(sim.ranges, lidar_cfg.encoding, lidar_cfg.log_min_m, dims.max_range_m),
                torch.stack((to_goal.norm(dim=-1) / 5.0, bearing.sin(), bearing.cos()), dim=-1),
                rotate_xy(sim.qvel[:, :2], -yaw) / dims.max_lin_vel_mps,
                sim.qvel[:, 2:3] / dims.max_ang_vel_radps,
            ),
            dim=-1,
        )
        torch.testing.assert_close(obs["policy"], frame, atol=1e-5, rtol=0)
        # Rewards of the worlds that kept going, term by term on the state they were computed on.
        keep = ~done
        at_reward = dataclasses.replace(s, scan_clean=scan_before, min_scan=min_scan_before)
        expected = sum(t.weight * t.fn(at_reward, **t.params) for t in rm.terms)
        torch.testing.assert_close(rew[keep], expected[keep], atol=1e-5, rtol=0)
        assert bool((env.episode_length_buf[keep] == length_before[keep] + 1).all())
    assert ends >= 30, ends


def test_end_reasons_follow_the_priority_of_the_plain_chain():
    """Every combination of the four raw events (contact, outside, at goal, step limit) on 16 worlds,
    one held: the fused terminations give the reason of the plain chain (collision > out_of_bounds >
    success; time_out only without a termination), and a held world keeps its latched reason."""
    from navexp.task.rewards.terminations import compute_terminations
    from navexp.task.state import EnvDims, NavState

    dims = EnvDims(8, 6.0, 0.7, 1.5, 3, 25, 4.0, 4.0)
    s = NavState.zeros(16, dims, "cpu")
    bits = torch.arange(16)
    s.contact = (bits & 1) == 1
    s.pos_xy = torch.stack((torch.where((bits & 2) == 2, 4.5, 0.0), torch.zeros(16)), dim=-1)
    s.goal_dist = torch.where((bits & 4) == 4, 0.1, 2.0)
    length = torch.where((bits & 8) == 8, 250, 10)
    s.reason = torch.full((16,), 9)  # a latched value only a held world keeps
    active = bits != 15
    done = compute_terminations(s, active, length, 250, 0.3, 4.0, 4.0)
    by_hand = []
    for b in range(16):
        if b == 15:
            by_hand.append(9)
        elif b & 1:
            by_hand.append(COLLISION)
        elif b & 2:
            by_hand.append(OUT_OF_BOUNDS)
        elif b & 4:
            by_hand.append(SUCCESS)
        elif b & 8:
            by_hand.append(TIME_OUT)
        else:
            by_hand.append(0)
    assert s.reason.tolist() == by_hand
    assert done.tolist() == [0 < r < 9 for r in by_hand]
    assert (s.collision | s.out_of_bounds | s.success | s.time_out).tolist() == done.tolist()
