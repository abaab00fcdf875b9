"""Weighted sum of reward terms with per-term episode sums for ``Episode_Reward/<term>``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from navexp.task.registry import check_term_keys
from navexp.task.rewards.terms import REWARD_TERMS
from navexp.task.state import NavState


@dataclass
class BoundRewardTerm:
    name: str
    fn: Any
    weight: float
    params: dict[str, Any]
    reads: tuple[str, ...] = ()


def resolve_reward_terms(reward_cfg, position_window: int) -> list[BoundRewardTerm]:
    """Check names, params and history needs; return the terms with non-zero weight."""
    terms = []
    for name, tcfg in reward_cfg.terms.items():
        term = REWARD_TERMS.get(name)  # KeyError listing the available terms
        check_term_keys("reward", name, tcfg, ("weight", "params"))
        params = term.resolve_params(tcfg.params, "reward")
        key = term.meta["needs_window"]
        if key is not None:
            need = params[key]
            if not (isinstance(need, int) and need >= 1):
                raise ValueError(
                    f"reward.terms.{name}.params.{key}={need!r} is invalid; allowed: an integer >= 1"
                )
            if need > position_window:
                raise ValueError(
                    f"reward term '{name}' needs {key}={need} steps of position history but the env keeps "
                    f"env.position_window={position_window}; set env.position_window>={need} or lower "
                    f"reward.terms.{name}.params.{key}"
                )
        if float(tcfg.weight) != 0.0:
            reads = tuple(term.meta.get("reads", ()))
            terms.append(BoundRewardTerm(name, term.fn, float(tcfg.weight), params, reads))
    return terms


class RewardManager:
    """reward = sum_i weight_i * term_i(state); weighted episode sums are kept per term."""

    def __init__(self, reward_cfg, position_window: int, num_envs: int, device: torch.device) -> None:
        self.terms = resolve_reward_terms(reward_cfg, position_window)
        self.weights = torch.tensor([t.weight for t in self.terms], device=device)
        self.episode_sums = torch.zeros(num_envs, len(self.terms), device=device)
        """[N, T] weighted per-term sums of the running episodes (columns in ``terms`` order)."""

    @property
    def reads(self) -> set[str]:
        """On-demand NavState fields the weighted terms read."""
        return {f for t in self.terms for f in t.reads}

    def compute(self, state: NavState, active: torch.Tensor | None = None) -> torch.Tensor:
        """Return the [N] reward; worlds where ``active`` is False (held after an episode end) get 0."""
        if not self.terms:
            return torch.zeros(self.episode_sums.shape[0], device=self.episode_sums.device)
        weighted = torch.stack([t.fn(state, **t.params) for t in self.terms], dim=1) * self.weights
        if active is not None:
            weighted = weighted * active.unsqueeze(-1)
        self.episode_sums += weighted
        return weighted.sum(dim=1)

    def clear_finished(self, done: torch.Tensor) -> None:
        """Clear the sums of the worlds where ``done`` [N] (read ``episode_sums`` first; masked, no sync)."""
        self.episode_sums.masked_fill_(done.unsqueeze(-1), 0.0)

    def take_episode_sums(self, done: torch.Tensor) -> torch.Tensor:
        """The sums [N, T] as they stand; rows where ``done`` [N] are then cleared (masked, no sync)."""
        sums = self.episode_sums.clone()
        self.episode_sums.masked_fill_(done.unsqueeze(-1), 0.0)
        return sums
