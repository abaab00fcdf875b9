"""Actor and critic networks, chosen by ``ppo.policy.model``: a registry of model kinds.

Each kind is one module of this package with a ``@register_model`` ``ModelKind`` subclass (every
module here is imported below, which registers it): how its ``ppo.policy.<kind>_*`` keys are checked, the
rsl_rl ``actor``/``critic`` dicts it builds, whether it is recurrent, and what an export writes for
it (metadata, and the arrays its numpy twin reads; the twin itself is registered in
``navexp.deploy.numpy_nets`` with ``@numpy_model``, so the robot side stays torch-free).

- ``mlp``: rsl_rl's ``MLPModel`` (normalised observations -> MLP).
- ``rnn``: rsl_rl's ``RNNModel`` (normalised observations -> GRU/LSTM -> MLP) for actor and critic;
  rsl_rl's PPO then stores hidden states and trains on padded trajectories (its recurrent path).
- ``cnn``: navexp's ``ScanCNNModel`` (``cnn.py``): circular convolutions over the scan.

Adding a model: a module here with a ``ModelKind`` subclass (``name``, ``rsl_rl_cfg``, and ``check``,
``export_meta``, ``numpy_weights`` where it has keys or exports), its keys in ``PolicyCfg``
(``navexp.learn.ppo_schema``), and a ``@numpy_model`` loader in ``navexp.deploy.numpy_nets`` if it
deploys.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, ClassVar

import numpy as np
import torch.nn as nn


class ModelKind:
    """One ``ppo.policy.model`` choice (subclass it and decorate with ``@register_model``)."""

    name: ClassVar[str]
    """The ``ppo.policy.model`` value (also the ``model`` field of checkpoints and exports)."""
    recurrent: ClassVar[bool] = False
    """Carries a hidden state between steps (rsl_rl's recurrent PPO path; reset per episode)."""

    def check(self, p: Any, lidar_enabled: bool) -> None:
        """Raise ValueError naming the key, the value and what is allowed for this kind's ``ppo`` keys."""

    def rsl_rl_cfg(self, p: Any, num_beams: int, history_length: int) -> dict[str, Any]:
        """``class_name`` and the constructor arguments beyond hidden_dims/activation/normalisation."""
        raise NotImplementedError

    def export_meta(self, p: Any) -> dict[str, Any]:
        """What the export's metadata says of this network beyond its kind (e.g. an RNN's state)."""
        return {}

    def numpy_weights(self, actor: nn.Module) -> dict[str, np.ndarray]:
        """The arrays the numpy twin reads besides the MLP head (``w<i>``, ``b<i>``)."""
        return {}


MODELS: dict[str, ModelKind] = {}
"""Model kinds by name, in registration order."""


def register_model(cls: type[ModelKind]) -> type[ModelKind]:
    """Class decorator: register a ``ModelKind`` under its ``name``; a duplicate name raises."""
    if cls.name in MODELS:
        raise ValueError(f"model {cls.name!r} is already registered ({type(MODELS[cls.name]).__name__})")
    MODELS[cls.name] = cls()
    return cls


def get_model(name: str) -> ModelKind:
    """The registered kind ``name``; an unknown one fails listing the valid ones."""
    if name not in MODELS:
        raise ValueError(f"ppo.policy.model={name!r} is invalid; allowed: {list(MODELS)}")
    return MODELS[name]


def critic_kind(p: Any) -> str:
    """The critic's kind: ``ppo.policy.critic_model``, or the actor's ``ppo.policy.model`` when unset."""
    critic = getattr(p, "critic_model", None)  # a run stored before the key existed has none
    return str(p.model if critic is None else critic)


def is_recurrent(p: Any) -> bool:
    """Whether actor or critic carries a state (rsl_rl's PPO then trains on padded trajectories)."""
    return get_model(str(p.model)).recurrent or get_model(critic_kind(p)).recurrent


def check_model_cfg(p: Any, lidar_enabled: bool) -> None:
    """Raise ValueError naming the key, the value and what is allowed for the keys of the ``ppo.policy``
    section ``p`` that its model kinds own (called by ``navexp.learn.ppo_cfg.check_ppo_cfg``)."""
    get_model(str(p.model)).check(p, lidar_enabled)
    critic = critic_kind(p)
    if critic not in MODELS:
        raise ValueError(
            f"ppo.policy.critic_model={critic!r} is invalid; allowed: {list(MODELS)} or null "
            f"(= ppo.policy.model)"
        )
    if critic != str(p.model):
        get_model(critic).check(p, lidar_enabled)


def model_cfgs(p: Any, num_beams: int, history_length: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The rsl_rl ``actor`` and ``critic`` dicts (``class_name`` + constructor arguments) of the
    ``ppo.policy`` section ``p`` (the critic of ``critic_model`` when set)."""
    common: dict[str, Any] = {
        "hidden_dims": [int(h) for h in p.hidden_dims],
        "activation": str(p.activation),
        "obs_normalization": bool(p.obs_normalization),
    }
    base = {**common, **get_model(str(p.model)).rsl_rl_cfg(p, num_beams, history_length)}
    critic = {**common, **get_model(critic_kind(p)).rsl_rl_cfg(p, num_beams, history_length)}
    actor = {
        **base,
        "distribution_cfg": {
            "class_name": "HeteroscedasticGaussianDistribution"
            if p.state_dependent_std
            else "GaussianDistribution",
            "init_std": float(p.init_std),
            "std_type": str(p.std_type),
        },
    }
    return actor, critic


def reset_hidden(policy: nn.Module, dones=None) -> None:
    """Zero the recurrent state of the worlds in ``dones`` [N] (all worlds, for any batch size, when
    None); a no-op for feed-forward models. rsl_rl's ``RNNModel.reset`` does the masked write."""
    if getattr(policy, "is_recurrent", False):
        policy.reset(dones)


_BUILT_IN = ("mlp", "rnn", "cnn")  # registered first, in this order (the default first)
for _name in [*_BUILT_IN, *sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _BUILT_IN)]:
    importlib.import_module(f"{__name__}.{_name}")  # registers its model kind

__all__ = [
    "MODELS",
    "ModelKind",
    "check_model_cfg",
    "critic_kind",
    "is_recurrent",
    "get_model",
    "model_cfgs",
    "register_model",
    "reset_hidden",
]
