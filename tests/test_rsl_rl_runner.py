"""NavEnv drives rsl_rl's own OnPolicyRunner (its PPO, its MLPModel) for 2 iterations."""

from __future__ import annotations

import pytest
import torch
from rsl_rl.runners import OnPolicyRunner

from navexp import compose_config, make_env
from navexp.learn.rl_cfg import build_train_cfg


@pytest.mark.parametrize("obs_variant,critic_width", [("nav", 78), ("asymmetric", 154)])
def test_runner_trains_two_iterations(tmp_path, obs_variant, critic_width):
    """Actor reads 78 columns in both setups; the critic 78 (symmetric) or 154 (asymmetric)."""
    cfg = compose_config(
        [
            "env.device=cpu",
            "env.num_envs=4",
            f"obs={obs_variant}",
            "ppo.num_steps_per_env=8",
            "ppo.num_mini_batches=2",
            "ppo.hidden_dims=[32,32]",
        ]
    )
    env = make_env(cfg)
    runner = OnPolicyRunner(env, build_train_cfg(cfg), str(tmp_path), "cpu")
    before = runner.alg.actor.mlp[0].weight.clone()
    runner.learn(2, init_at_random_ep_len=True)
    assert runner.current_learning_iteration == 1
    assert runner.alg.actor.mlp[0].weight.shape == (32, 78)
    assert runner.alg.critic.mlp[0].weight.shape == (32, critic_width)
    assert not torch.equal(before, runner.alg.actor.mlp[0].weight)  # PPO updated the actor
    assert (tmp_path / "model_1.pt").is_file()
