"""Turn the ``ppo`` config group into a fresh rsl_rl ``OnPolicyRunner`` config dict.

The group has rsl_rl's shape (``navexp.learn.ppo_schema``): its runner-level keys, ``ppo.algorithm``
(rsl_rl's ``algorithm`` entry, passed through as it is, with navexp's PPO as ``class_name``) and
``ppo.policy`` (the ``actor`` and ``critic`` entries of the ``model`` kind: ``navexp.learn.models``).
The keys were checked once, before the run started (``check_ppo_cfg``).

rsl_rl mutates the dict it is given, so every call builds a new plain container.
"""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from rsl_rl.utils import resolve_class
from tensordict import TensorDict

from navexp.learn.models import model_cfgs
from navexp.learn.ppo import NAV_PPO
from navexp.learn.ppo_cfg import obs_groups


def build_train_cfg(cfg, experiment_name: str | None = None) -> dict[str, Any]:
    """Return the rsl_rl runner dict for the experiment config ``cfg`` (groups ppo, obs, logger)."""
    p = cfg.ppo
    actor, critic = model_cfgs(p.policy, int(cfg.env.lidar.num_beams), int(cfg.obs.history_length))
    return {
        "num_steps_per_env": int(p.num_steps_per_env),
        "save_interval": int(p.save_interval),
        "experiment_name": experiment_name or str(cfg.experiment_name),
        "run_name": "",
        "logger": "tensorboard",
        # NavEnv keeps NaN/inf flags of actions, state, observations and rewards on the device and
        # NavPPO raises them before every PPO update; rsl_rl's per-step check would wait for the
        # device on every step.
        "check_for_nan": False,
        "obs_groups": obs_groups(p, bool(cfg.obs.privileged_enabled)),
        "torch_compile_mode": p.get("torch_compile_mode"),  # rsl_rl compiles actor and critic (or not)
        "algorithm": {"class_name": NAV_PPO, **OmegaConf.to_container(p.algorithm)},  # rsl_rl's PPO, checked
        "actor": actor,
        "critic": critic,
    }


def build_actor(ckpt: dict, cfg: DictConfig, obs: TensorDict, num_actions: int) -> torch.nn.Module:
    """rsl_rl's actor of the config's ``ppo.policy.model`` with the checkpoint's weights and normaliser,
    in eval mode, sized from an observation batch ``obs`` (an env's, or zeros of the recorded group
    widths); a recurrent one has no state yet (``run_episodes`` resets it per round)."""
    train_cfg = build_train_cfg(cfg)
    actor_class, actor_cfg = resolve_class(train_cfg["actor"])
    actor = actor_class(obs, train_cfg["obs_groups"], "actor", num_actions, **actor_cfg)
    actor.load_state_dict(ckpt["actor_state_dict"])
    return actor.eval()
