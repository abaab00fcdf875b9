"""What NavEnv.step accepts as actions, and that a refused action leaves it usable."""

from __future__ import annotations

import pytest
import torch
from conftest import build_env

ACTION = [[0.5, -0.25, 2.0], [-1.5, 0.0, 0.1]]
CLIPPED = [[0.5, -0.25, 1.0], [-1.0, 0.0, 0.1]]  # clipped to [-1, 1] as the env documents


@pytest.fixture(scope="module")
def env():
    """Two worlds on the CPU (classic MuJoCo backend by default)."""
    return build_env("env.num_envs=2")


def test_float64_and_non_contiguous_actions_are_cast(env):
    """A float64 tensor and a transposed (non-contiguous) float32 view step like a plain float32 one."""
    env.reset()
    env.step(torch.tensor(ACTION, dtype=torch.float64))
    assert env.state.action.dtype == torch.float32
    assert torch.allclose(env.state.action, torch.tensor(CLIPPED))
    env.reset()
    transposed = torch.tensor(ACTION).T.contiguous().T  # same values, column-major strides
    assert not transposed.is_contiguous()
    env.step(transposed)
    assert torch.allclose(env.state.action, torch.tensor(CLIPPED))


def test_requires_grad_action_is_accepted_and_a_refused_action_changes_nothing(env):
    """An action with requires_grad steps normally (detached); a wrong-shape action raises naming the
    shape, leaves action/prev_action as they were, and the next step and reset still work."""
    env.reset()
    grad_action = torch.tensor(ACTION, requires_grad=True)
    env.step(grad_action)
    assert not env.state.action.requires_grad
    assert torch.allclose(env.state.action, torch.tensor(CLIPPED))
    action, prev = env.state.action.clone(), env.state.prev_action.clone()
    with pytest.raises(ValueError, match=r"actions must be a tensor of shape \(2, 3\); got \(3, 3\)"):
        env.step(torch.zeros(3, 3))
    assert torch.equal(env.state.action, action) and torch.equal(env.state.prev_action, prev)
    env.step(torch.zeros(2, 3))
    env.reset()
    env.step(torch.zeros(2, 3))
    assert torch.equal(env.state.action, torch.zeros(2, 3))
