"""NavEnv drives rsl_rl's own OnPolicyRunner (its PPO, its MLPModel) for 2 iterations; NavRunner
extends rsl_rl through its class names and subclasses (NavPPO, NavLogger), replacing none of its
objects' attributes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from rsl_rl.algorithms import PPO
from rsl_rl.runners import OnPolicyRunner
from rsl_rl.utils.logger import Logger

import navexp
from navexp import compose_config, make_env
from navexp.learn.logger import NavLogger
from navexp.learn.ppo import NAV_PPO, NavPPO, RejectedUpdate
from navexp.learn.rl_cfg import build_train_cfg
from navexp.learn.runner import NavRunner, NonFiniteLossError


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


def _nav_runner(tmp_path, *overrides: str) -> NavRunner:
    cfg = compose_config(
        [
            "env.device=cpu",
            "env.num_envs=4",
            "env.episode_length_s=1.0",
            "ppo.num_steps_per_env=8",
            *overrides,
        ]
    )
    return NavRunner(make_env(cfg), build_train_cfg(cfg), str(tmp_path), "cpu", infos={}, quiet=True)


def test_the_runner_uses_rsl_rls_extension_points(tmp_path):
    """rsl_rl builds NavPPO from cfg["algorithm"]["class_name"] (with the env handle) and the runner's
    logger is a NavLogger recording navexp's git state, not rsl_rl's install."""
    runner = _nav_runner(tmp_path)
    assert build_train_cfg(compose_config([]))["algorithm"]["class_name"] == NAV_PPO
    assert type(runner.alg) is NavPPO and runner.alg.env is runner.env
    assert isinstance(runner.logger, NavLogger) and isinstance(runner.logger, Logger)
    assert runner.logger.git_status_repos == [str(Path(navexp.__file__).parent)]


def test_a_nan_loss_is_rejected_by_navppo_and_named_by_the_runner(tmp_path, monkeypatch):
    """rsl_rl's update returns a NaN value loss in the 2nd update: NavPPO rejects it (a plain
    RejectedUpdate, no iteration known to it) and the runner stops with NonFiniteLossError naming
    iteration 1 and model_0.pt, the last good checkpoint (save_interval=1), which it wrote."""
    update, calls = PPO.update, {"n": 0}

    def nan_on_second(self):
        losses = update(self)
        calls["n"] += 1
        if calls["n"] == 2:
            losses["value"] = float("nan")
        return losses

    monkeypatch.setattr(PPO, "update", nan_on_second)
    runner = _nav_runner(tmp_path, "ppo.save_interval=1")
    with pytest.raises(
        NonFiniteLossError,
        match=r"^non-finite PPO loss at iteration 1: \{'value': nan\}; last good checkpoint: .*model_0\.pt$",
    ) as caught:
        runner.learn(3)
    assert isinstance(caught.value.__cause__, RejectedUpdate)
    assert str(caught.value.__cause__) == "non-finite PPO loss: {'value': nan}"
    assert sorted(p.name for p in tmp_path.glob("model_*.pt")) == ["model_0.pt"]


def test_a_learning_rate_set_on_navppo_reaches_the_optimizer(tmp_path):
    """set_learning_rate (a resume that changes ppo.algorithm.learning_rate): PPO's rate and every
    optimizer group hold it; load() takes the rate the checkpoint's optimizer held (2e-4 here)."""
    runner = _nav_runner(tmp_path)
    runner.set_learning_rate(2e-4)
    saved = runner.alg.save()
    runner.set_learning_rate(5e-3)
    assert runner.alg.learning_rate == 5e-3
    assert {g["lr"] for g in runner.alg.optimizer.param_groups} == {5e-3}
    runner.alg.load(saved, None, strict=True)
    assert runner.alg.learning_rate == 2e-4


REASSIGNED = re.compile(r"self\.alg\.[a-z_]* = |self\.logger\.[a-z_]* = |runner\.(alg|logger)\.[a-z_]* = ")


def test_no_attribute_of_an_rsl_rl_object_is_reassigned():
    """navexp extends rsl_rl through its class names (algorithm, log writer) and subclasses; no line
    under navexp/ replaces an attribute of the runner's algorithm or logger."""
    root = Path(navexp.__file__).parent
    hits = [
        f"{p.relative_to(root)}:{i}: {line.strip()}"
        for p in sorted(root.rglob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if REASSIGNED.search(line)
    ]
    assert hits == []


def test_rsl_rls_printout_shows_only_when_verbose(tmp_path, capsys):
    """rsl_rl prints the observation sets and both models when the runner is made: hidden by default
    (before: 30 lines before the first progress line), shown with verbose=true."""
    cfg = compose_config(["env.device=cpu", "env.num_envs=4", "ppo.num_steps_per_env=8"])
    env = make_env(cfg)
    NavRunner(env, build_train_cfg(cfg), str(tmp_path / "a"), "cpu", infos={}, quiet=True)
    assert "Actor Model" not in capsys.readouterr().out
    NavRunner(env, build_train_cfg(cfg), str(tmp_path / "b"), "cpu", infos={}, quiet=True, verbose=True)
    out = capsys.readouterr().out
    assert "Resolved observation sets" in out and "Actor Model" in out and "Critic Model" in out
