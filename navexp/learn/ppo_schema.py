"""The ``ppo`` config group's schema, shaped like rsl_rl's runner dict (no torch: the comparison and
the config layer read it without loading the learner).

    ppo:                 rsl_rl's runner level (num_steps_per_env, max_iterations, save_interval,
                         init_at_random_ep_len, observation groups) + navexp's (max_minutes,
                         average_checkpoints)
      algorithm:         rsl_rl PPO's constructor arguments, passed through as they are
      policy:            the actor and critic networks (``ppo.policy.model``: navexp.learn.models)

Before the sections existed the keys of both sat directly under ``ppo`` (``ppo.clip_param``);
``nest_ppo`` moves a stored run's flat keys into their sections, and ``navexp.config.aliases`` holds the
table of old names that command lines still accept. The checks of these keys: ``navexp.learn.ppo_cfg``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


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
    torch_compile_mode: str | None = None
    """rsl_rl's ``torch.compile`` of actor and critic (its runner key): None (off) | default |
    max-autotune-no-cudagraphs. rsl_rl refuses the CUDA-graph modes (reduce-overhead, max-autotune):
    graph replay would overwrite the output one model's forward hands the next."""
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
