"""The ``ppo`` config group, shaped like rsl_rl's runner dict, and its one check.

    ppo:                 rsl_rl's runner level (num_steps_per_env, max_iterations, save_interval,
                         init_at_random_ep_len, observation groups) + navexp's (max_minutes,
                         average_checkpoints)
      algorithm:         rsl_rl PPO's constructor arguments, passed through as they are
      policy:            the actor and critic networks (``ppo.policy.model``: navexp.learn.models)

``navexp.learn.rl_cfg.build_train_cfg`` maps the sections to rsl_rl's dict; ``check_ppo_cfg`` holds
every range and choice check of these keys (``navexp.config.validation.validate_run_cfg`` calls it
once per run). Before the sections existed the keys of both sat directly under ``ppo``
(``ppo.clip_param``); ``nest_ppo`` moves a stored run's flat keys into their sections, and
``navexp.config.aliases`` holds the table of old names that command lines still accept.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from navexp.learn.models import check_model_cfg, is_recurrent


@dataclass
class AlgorithmCfg:
    """rsl_rl PPO's settings (``cfg["algorithm"]`` of its runner, one to one)."""

    learning_rate: float = 3.0e-4
    """Adam's learning rate at the start; the adaptive schedule changes it from there."""
    num_learning_epochs: int = 5
    num_mini_batches: int = 4
    clip_param: float = 0.2
    """PPO's ratio clip (and the value clip with ``use_clipped_value_loss``), in (0, 1]."""
    desired_kl: float = 0.01
    """The adaptive schedule's KL target: the rate / 1.5 above 2x it, x 1.5 below half of it."""
    schedule: str = "adaptive"
    """adaptive | fixed."""
    gamma: float = 0.99
    lam: float = 0.95
    value_loss_coef: float = 1.0
    entropy_coef: float = 0.005
    max_grad_norm: float = 1.0
    use_clipped_value_loss: bool = True
    normalize_advantage_per_mini_batch: bool = False


@dataclass
class PolicyCfg:
    """Actor and critic networks (``cfg["actor"]``/``cfg["critic"]`` of rsl_rl's runner, built by the
    ``model`` kind's registry entry in ``navexp.learn.models``)."""

    model: str = "mlp"
    """Actor and critic network: mlp (rsl_rl MLPModel) | rnn (rsl_rl RNNModel: GRU/LSTM, then the MLP) |
    cnn (navexp.learn.models.ScanCNNModel: 1-D circular convolution over the LiDAR scan, then the MLP)."""
    critic_model: str | None = None
    """The critic's network kind (same choices as ``model``); None: the actor's ``model``. With
    ``model=rnn`` and ``critic_model=mlp`` only the actor carries a recurrent state: a critic that reads
    the distance along the free path (``obs=path_critic``) needs less memory, and its updates skip the GRU."""
    hidden_dims: list[int] = field(default_factory=lambda: [256, 256])
    activation: str = "elu"
    obs_normalization: bool = True
    init_std: float = 1.0
    std_type: str = "scalar"
    """scalar | log."""
    state_dependent_std: bool = False
    """False: one learned action std per action dimension (rsl_rl GaussianDistribution). True: the actor's
    MLP outputs the std beside the mean (rsl_rl HeteroscedasticGaussianDistribution), so the policy can
    explore less where a small error costs a collision (a tight gap) and more in the open."""
    rnn_type: str = "gru"
    """model=rnn: gru | lstm."""
    rnn_hidden_dim: int = 128
    """model=rnn: width of the recurrent state (per layer; an LSTM keeps a cell state as well)."""
    rnn_num_layers: int = 1
    """model=rnn: stacked recurrent layers."""
    cnn_channels: list[int] = field(default_factory=lambda: [16, 16])
    """model=cnn: output channels of each circular conv layer over the scan."""
    cnn_kernel_sizes: list[int] = field(default_factory=lambda: [5, 5])
    """model=cnn: odd kernel width (beams) of each layer; padding (k - 1) / 2 wraps around the scan."""
    cnn_strides: list[int] = field(default_factory=lambda: [2, 2])
    """model=cnn: stride (beams) of each layer; 72 beams -> 36 -> 18 with the defaults."""


@dataclass
class PpoCfg:
    """rsl_rl's runner settings with the ``algorithm`` and ``policy`` sections (a fresh rsl_rl dict per
    run: ``navexp.learn.rl_cfg``)."""

    num_steps_per_env: int = 32
    max_iterations: int = 300
    save_interval: int = 50
    init_at_random_ep_len: bool = True
    actor_obs_groups: list[str] = field(default_factory=lambda: ["policy"])
    """Groups the actor reads; only DEPLOYABLE groups are allowed (a SIM_ONLY group is an error)."""
    critic_obs_groups: list[str] | None = None
    """Groups the critic reads; None = [policy] or [policy, privileged] with obs.privileged_enabled."""
    max_minutes: float | None = None
    """A wall-clock budget for this launch's training (minutes): it stops after the iteration that
    reaches it, saves that iteration and evaluates as at ``max_iterations``. None: no budget."""
    average_checkpoints: int = 1
    """The policy the run yields (final evaluation, ``navexp.evaluate``/``export``/``play`` of the run
    directory): 1, its last checkpoint; N > 1, the uniform average of the weights of its last N saved
    checkpoints (every ``save_interval`` iterations and the last), written as ``model_<it>_avg<N>.pt``.
    Resume always continues the training state, ``model_<it>.pt``."""
    algorithm: AlgorithmCfg = field(default_factory=AlgorithmCfg)
    policy: PolicyCfg = field(default_factory=PolicyCfg)


SECTIONS: dict[str, type] = {"algorithm": AlgorithmCfg, "policy": PolicyCfg}
"""The sections of ``ppo`` by name. Their keys sat under ``ppo`` itself before the sections existed
(``ppo.clip_param``): ``nest_ppo`` moves a stored run's keys, ``navexp.config.aliases`` translates the
old names on command lines."""


def section_of(key: str) -> str | None:
    """The section a key of the flat ``ppo`` node of old belongs in (``clip_param`` -> ``algorithm``);
    None for a runner-level key."""
    return next((name for name, cls in SECTIONS.items() if key in {f.name for f in fields(cls)}), None)


def nest_ppo(ppo: dict[str, Any]) -> dict[str, Any]:
    """A stored ``ppo`` node with its flat keys (a run from before the sections) moved into them; a
    node already in today's shape comes back equal."""
    out = {k: v for k, v in ppo.items() if section_of(k) is None}
    for key, value in ppo.items():
        section = section_of(key)
        if section is not None:
            out[section] = {**(out.get(section) or {}), key: value}
    return out


SCHEDULES = ("adaptive", "fixed")
ACTIVATIONS = ("elu", "relu", "selu", "lrelu", "tanh", "sigmoid", "identity", "gelu", "softplus", "mish")
STD_TYPES = ("scalar", "log")
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
