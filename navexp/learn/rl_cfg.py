"""Turn the ``ppo`` config group into a fresh rsl_rl ``OnPolicyRunner`` config dict.

Actor and critic are the ``ppo.model`` kind's rsl_rl models (``navexp.learn.models``).

rsl_rl mutates the dict it is given, so every call builds a new plain container.
"""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from rsl_rl.utils import resolve_class
from tensordict import TensorDict

from navexp.learn.models import check_model_cfg, model_cfgs
from navexp.learn.ppo import NAV_PPO

SCHEDULES = ("adaptive", "fixed")
ACTIVATIONS = ("elu", "relu", "selu", "lrelu", "tanh", "sigmoid", "identity", "gelu", "softplus", "mish")
DEPLOYABLE_GROUPS = ("policy",)


def obs_groups(ppo_cfg, privileged_enabled: bool) -> dict[str, list[str]]:
    """Resolve actor/critic observation sets; a SIM_ONLY group in the actor is a hard error."""
    actor = list(ppo_cfg.actor_obs_groups)
    bad = [g for g in actor if g not in DEPLOYABLE_GROUPS]
    if bad:
        raise ValueError(
            f"ppo.actor_obs_groups={actor} contains {bad}: the actor may only read deployable groups "
            f"{list(DEPLOYABLE_GROUPS)} (SIM_ONLY groups such as 'privileged' are critic-only)"
        )
    available = ["policy", "privileged"] if privileged_enabled else ["policy"]
    critic = list(ppo_cfg.critic_obs_groups) if ppo_cfg.critic_obs_groups is not None else available
    missing = [g for g in critic if g not in available]
    if missing:
        raise ValueError(
            f"ppo.critic_obs_groups={critic} names {missing}, not produced by the env "
            f"(available: {available}; "
            f"'privileged' needs obs.privileged_enabled=true)"
        )
    return {"actor": actor, "critic": critic}


def build_train_cfg(cfg, experiment_name: str | None = None) -> dict[str, Any]:
    """Return the rsl_rl runner dict for the experiment config ``cfg`` (groups ppo, obs, logger)."""
    p = cfg.ppo
    if p.schedule not in SCHEDULES:
        raise ValueError(f"ppo.schedule={p.schedule!r} is invalid; allowed: {list(SCHEDULES)}")
    if p.activation not in ACTIVATIONS:
        raise ValueError(f"ppo.activation={p.activation!r} is invalid; allowed: {list(ACTIVATIONS)}")
    if p.std_type not in ("scalar", "log"):
        raise ValueError(f"ppo.std_type={p.std_type!r} is invalid; allowed: ['scalar', 'log']")
    for key in ("num_steps_per_env", "num_learning_epochs", "num_mini_batches", "save_interval"):
        if int(getattr(p, key)) < 1:
            raise ValueError(f"ppo.{key}={getattr(p, key)} is invalid; allowed: an integer >= 1")
    for key, lo, hi in (
        ("clip_param", 0, 1),
        ("desired_kl", 0, None),
        ("learning_rate", 0, None),
        ("gamma", 0, 1),
        ("lam", 0, 1),
        ("init_std", 0, None),
    ):
        v = float(getattr(p, key))
        if not (v > lo and (hi is None or v <= hi)):
            raise ValueError(f"ppo.{key}={v} is invalid; allowed: {lo} < value" + (f" <= {hi}" if hi else ""))
    lidar = OmegaConf.select(cfg, "obs.terms.lidar")
    lidar_enabled = bool(lidar.get("enabled", True)) if lidar is not None else True
    check_model_cfg(p, lidar_enabled)
    actor, critic = model_cfgs(p, int(cfg.env.lidar.num_beams), int(cfg.obs.history_length))
    return {
        "num_steps_per_env": int(p.num_steps_per_env),
        "save_interval": int(p.save_interval),
        "experiment_name": experiment_name or str(cfg.experiment_name),
        "run_name": "",
        "logger": "tensorboard",
        # NavEnv keeps NaN/inf flags of actions, state, observations and rewards on the device and
        # NavRunner raises them before every PPO update; rsl_rl's per-step check would wait for the
        # device on every step.
        "check_for_nan": False,
        "obs_groups": obs_groups(p, bool(cfg.obs.privileged_enabled)),
        "algorithm": {
            "class_name": NAV_PPO,  # rsl_rl's PPO with navexp's update checks
            "num_learning_epochs": int(p.num_learning_epochs),
            "num_mini_batches": int(p.num_mini_batches),
            "clip_param": float(p.clip_param),
            "gamma": float(p.gamma),
            "lam": float(p.lam),
            "value_loss_coef": float(p.value_loss_coef),
            "entropy_coef": float(p.entropy_coef),
            "learning_rate": float(p.learning_rate),
            "max_grad_norm": float(p.max_grad_norm),
            "use_clipped_value_loss": bool(p.use_clipped_value_loss),
            "schedule": str(p.schedule),
            "desired_kl": float(p.desired_kl),
            "normalize_advantage_per_mini_batch": bool(p.normalize_advantage_per_mini_batch),
        },
        "actor": actor,
        "critic": critic,
    }


def build_actor(ckpt: dict, cfg: DictConfig, obs: TensorDict, num_actions: int) -> torch.nn.Module:
    """rsl_rl's actor of the config's ``ppo.model`` with the checkpoint's weights and normaliser, in eval
    mode, sized from an observation batch ``obs`` (an env's, or zeros of the recorded group widths); a
    recurrent one has no state yet (``run_episodes`` resets it per round)."""
    train_cfg = build_train_cfg(cfg)
    actor_class, actor_cfg = resolve_class(train_cfg["actor"])
    actor = actor_class(obs, train_cfg["obs_groups"], "actor", num_actions, **actor_cfg)
    actor.load_state_dict(ckpt["actor_state_dict"])
    return actor.eval()
