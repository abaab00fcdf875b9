"""The one check of the ``ppo`` config group (schema: ``navexp.learn.ppo_schema``) and what is derived
from it: the observation groups of actor and critic, and the flat hyperparameters of TensorBoard's view.

``navexp.learn.rl_cfg.build_train_cfg`` maps the sections to rsl_rl's dict; ``check_ppo_cfg`` holds
every range and choice check of these keys (``navexp.config.validation.validate_run_cfg`` calls it
once per run).
"""

from __future__ import annotations

from typing import Any

from navexp.learn.models import check_model_cfg, is_recurrent
from navexp.learn.ppo_schema import SECTIONS

SCHEDULES = ("adaptive", "fixed")
ACTIVATIONS = ("elu", "relu", "selu", "lrelu", "tanh", "sigmoid", "identity", "gelu", "softplus", "mish")
STD_TYPES = ("scalar", "log")
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")
"""``ppo.torch_compile_mode`` values rsl_rl 5.5 takes besides null (``rsl_rl.utils.compile_model``)."""
DEPLOYABLE_GROUPS = ("policy",)


def check_ppo_cfg(cfg: Any) -> None:
    """Raise ValueError naming the key, its value and what is allowed for the first bad ``ppo`` setting
    of the experiment config ``cfg`` (its ranges and choices, the batch sizes against ``env.num_envs``,
    the model kinds' own keys, the observation groups)."""
    ppo, a = cfg.ppo, cfg.ppo.algorithm
    for key in ("max_iterations", "num_steps_per_env", "save_interval", "average_checkpoints"):
        _check(ppo[key] >= 1, f"ppo.{key}", ppo[key], "an integer >= 1")
    budget = ppo.get("max_minutes")
    _check(budget is None or budget > 0, "ppo.max_minutes", budget, "minutes > 0, or null (no budget)")
    epochs = a.num_learning_epochs
    _check(epochs >= 1, "ppo.algorithm.num_learning_epochs", epochs, "an integer >= 1")
    for key, lo, hi in (
        ("clip_param", 0, 1),
        ("desired_kl", 0, None),
        ("learning_rate", 0, None),
        ("gamma", 0, 1),
        ("lam", 0, 1),
    ):
        _check(lo < a[key] and (hi is None or a[key] <= hi), f"ppo.algorithm.{key}", a[key], _range(lo, hi))
    _check(a.schedule in SCHEDULES, "ppo.algorithm.schedule", a.schedule, " | ".join(SCHEDULES))
    mode = ppo.get("torch_compile_mode")
    modes = " | ".join(("null", *COMPILE_MODES))
    _check(mode is None or mode in COMPILE_MODES, "ppo.torch_compile_mode", mode, modes)
    _check_mini_batches(cfg)
    _check_policy(cfg)
    _check_obs_groups(ppo, bool(cfg.obs.privileged_enabled))


def _check_mini_batches(cfg: Any) -> None:
    ppo, n = cfg.ppo, cfg.ppo.algorithm.num_mini_batches
    batch = int(cfg.env.num_envs) * int(ppo.num_steps_per_env)
    _check(
        1 <= n <= batch,
        "ppo.algorithm.num_mini_batches",
        n,
        f"1 <= value <= env.num_envs * ppo.num_steps_per_env = {cfg.env.num_envs} * "
        f"{ppo.num_steps_per_env} = {batch} (each mini-batch needs at least one transition)",
    )
    if is_recurrent(ppo.policy):  # rsl_rl's recurrent mini-batches are groups of whole worlds
        _check(
            n <= int(cfg.env.num_envs),
            "ppo.algorithm.num_mini_batches",
            n,
            f"1 <= value <= env.num_envs = {cfg.env.num_envs} with a recurrent ppo.policy.model or "
            f"ppo.policy.critic_model (recurrent mini-batches are groups of worlds)",
        )


def _check_policy(cfg: Any) -> None:
    p = cfg.ppo.policy
    _check(p.activation in ACTIVATIONS, "ppo.policy.activation", p.activation, " | ".join(ACTIVATIONS))
    _check(p.std_type in STD_TYPES, "ppo.policy.std_type", p.std_type, " | ".join(STD_TYPES))
    _check(p.init_std > 0, "ppo.policy.init_std", p.init_std, _range(0, None))
    lidar = cfg.obs.terms.get("lidar")
    check_model_cfg(p, bool(lidar.get("enabled", True)) if lidar is not None else True)


def _check_obs_groups(ppo: Any, privileged_enabled: bool) -> None:
    """A SIM_ONLY group in the actor, or a critic group the env does not produce, is an error."""
    groups = obs_groups(ppo, privileged_enabled)
    bad = [g for g in groups["actor"] if g not in DEPLOYABLE_GROUPS]
    if bad:
        raise ValueError(
            f"ppo config: ppo.actor_obs_groups={groups['actor']} contains {bad}: the actor may only read "
            f"deployable groups {list(DEPLOYABLE_GROUPS)} (SIM_ONLY groups such as 'privileged' are "
            f"critic-only)"
        )
    available = available_groups(privileged_enabled)
    missing = [g for g in groups["critic"] if g not in available]
    if missing:
        raise ValueError(
            f"ppo config: ppo.critic_obs_groups={groups['critic']} names {missing}, not produced by the "
            f"env (available: {available}; 'privileged' needs obs.privileged_enabled=true)"
        )


def available_groups(privileged_enabled: bool) -> list[str]:
    """The observation groups the env produces."""
    return ["policy", "privileged"] if privileged_enabled else ["policy"]


def obs_groups(ppo: Any, privileged_enabled: bool) -> dict[str, list[str]]:
    """The actor's and the critic's observation groups (the critic's default: every group the env
    produces)."""
    critic = ppo.critic_obs_groups
    return {
        "actor": list(ppo.actor_obs_groups),
        "critic": list(critic) if critic is not None else available_groups(privileged_enabled),
    }


def _range(lo: float, hi: float | None) -> str:
    return f"{lo} < value" + (f" <= {hi}" if hi is not None else "")


def _check(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ValueError(f"ppo config: {key}={value!r} is invalid; allowed: {allowed}")


def ppo_hparams(ppo: Any) -> dict[str, Any]:
    """The ``ppo`` group's numbers, strings and flags as flat ``ppo.<key>``, ``ppo.algorithm.<key>`` and
    ``ppo.policy.<key>`` entries (TensorBoard's hparams view takes no lists or nested dicts)."""
    out = {}
    for key in ppo:
        node = ppo[key]
        items = node.items() if key in SECTIONS else [(None, node)]
        for sub, value in items:
            if isinstance(value, (int, float, str)):
                out[f"ppo.{key}" if sub is None else f"ppo.{key}.{sub}"] = value
    return out
