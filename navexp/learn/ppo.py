"""navexp's PPO: rsl_rl's PPO whose every update is checked before the runner goes on.

rsl_rl builds its algorithm from ``cfg["algorithm"]["class_name"]`` (``navexp.learn.rl_cfg`` names
``NAV_PPO``), so the checks live in a subclass instead of a wrapper around the runner's ``alg``:

- before the update, the env's fault flags (NaN/inf actions, state, observations, rewards, buffer
  overflows; kept on the device while it steps) are raised, so no update uses such data;
- after it, the losses must be finite, the actor's parameters finite, and the updated policy's
  deterministic actions on the worlds' current observations finite (finite weights of 1e30 pass the
  first two and overflow here). Under torchrun the three flags are summed over the ranks, so every
  rank rejects the same update and none saves a policy another rank refused.

A rejected update raises ``RejectedUpdate``; ``NavRunner`` words it with the iteration and the last
good checkpoint (``NonFiniteLossError``). The PPO maths are rsl_rl's, untouched.
"""

from __future__ import annotations

import math

import torch
from rsl_rl.algorithms import PPO
from rsl_rl.env import VecEnv
from tensordict import TensorDict

NAV_PPO = "navexp.learn.ppo:NavPPO"
"""The ``class_name`` rsl_rl resolves to ``NavPPO``."""


class RejectedUpdate(FloatingPointError):
    """An update whose losses, actor parameters or probed actions are not finite."""

    def __init__(self, kind: str, detail: str) -> None:
        self.kind = kind
        """``loss`` (a NaN/inf loss or parameter) or ``policy`` (NaN/inf actions of the probe)."""
        self.detail = detail
        super().__init__(self.describe(None))

    def describe(self, iteration: int | None) -> str:
        """The message, naming ``iteration`` when the caller knows it."""
        if self.kind == "loss":
            at = "" if iteration is None else f" at iteration {iteration}"
            return f"non-finite PPO loss{at}{self.detail}"
        of = "" if iteration is None else f" of iteration {iteration}"
        return f"the PPO update{of} left a policy whose actions {self.detail}"


class NavPPO(PPO):
    """rsl_rl's PPO + the env's fault check before each update and finiteness checks after it."""

    env: VecEnv | None = None
    """The env the rollouts come from (set by ``construct_algorithm``): its fault flags and the
    observations the probe reads."""

    @staticmethod
    def construct_algorithm(obs: TensorDict, env: VecEnv, cfg: dict, device: str) -> NavPPO:
        """rsl_rl's construction (models, storage, optimizer), keeping the env handle."""
        alg = PPO.construct_algorithm(obs, env, cfg, device)
        if not isinstance(alg, NavPPO):
            raise TypeError(f"cfg['algorithm']['class_name'] must name {NAV_PPO}, got {type(alg).__name__}")
        alg.use_env(env)
        return alg

    def use_env(self, env: VecEnv) -> None:
        """Check ``env``'s fault flags before each update and probe its observations after it."""
        self.env = env

    def update(self) -> dict[str, float]:
        """The env's fault check, rsl_rl's update, then the finiteness checks (``RejectedUpdate``)."""
        if self.env is not None and hasattr(self.env, "check_faults"):
            self.env.check_faults()  # the rollout's one host sync: before PPO uses its data
        losses = super().update()
        self._check_update(losses)
        return losses

    def _check_update(self, losses: dict[str, float]) -> None:
        bad = {k: v for k, v in losses.items() if not math.isfinite(float(v))}
        # One host read for all parameters (a read per tensor would wait for the device each time).
        params_ok = bool(torch.stack([torch.isfinite(p).all() for p in self.actor.parameters()]).all())
        probed = self._probe_actions() if not bad and params_ok else 0
        # Under torchrun every rank decides alike: the flags are summed over the ranks.
        flags = [float(bool(bad)), float(not params_ok), float(probed)]
        if self.is_multi_gpu:
            t = torch.tensor(flags, device=self.device, dtype=torch.float64)
            torch.distributed.all_reduce(t)
            flags = t.tolist()
        where = " (on some rank)" if self.is_multi_gpu else ""
        if flags[0] or flags[1]:
            what = bad or ("actor parameters" if not params_ok else "another rank")
            raise RejectedUpdate("loss", f"{where}: {what}")
        if flags[2]:
            worlds = self.env.num_envs * self.gpu_world_size
            raise RejectedUpdate(
                "policy",
                f"are NaN/inf on {int(flags[2])} of the {worlds} worlds' current observations "
                f"(learning rate {self.learning_rate:g})",
            )

    def _probe_actions(self) -> int:
        """How many worlds' current observations the updated policy maps to a NaN/inf action (its
        deterministic output; a recurrent policy's hidden state is put back); 0: the policy is good."""
        if self.env is None:
            return 0
        actor = self.get_policy()  # the uncompiled actor
        hidden = actor.get_hidden_state() if actor.is_recurrent else None
        try:
            with torch.inference_mode():
                actions = actor(self.env.get_observations().to(self.device))
        finally:
            if actor.is_recurrent:
                actor.reset(hidden_state=hidden)
        return int((~torch.isfinite(actions)).flatten(1).any(dim=1).sum())

    def set_learning_rate(self, lr: float) -> None:
        """Use ``lr`` from now on (the adaptive schedule goes on from it)."""
        self.learning_rate = lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr
