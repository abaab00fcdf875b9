"""``ppo.policy.model=mlp``: rsl_rl's ``MLPModel`` (normalised observations -> MLP), the default."""

from __future__ import annotations

from typing import Any

from navexp.learn.models import ModelKind, register_model


@register_model
class MLP(ModelKind):
    name = "mlp"

    def rsl_rl_cfg(self, p: Any, num_beams: int, history_length: int) -> dict[str, Any]:
        return {"class_name": "MLPModel"}
