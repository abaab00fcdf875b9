"""``ppo.policy.model=rnn``: rsl_rl's ``RNNModel`` (normalised observations -> GRU/LSTM -> MLP)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch.nn as nn

from navexp.learn.models import ModelKind, register_model

RNN_TYPES = ("gru", "lstm")


@register_model
class RNN(ModelKind):
    name = "rnn"
    recurrent = True

    def check(self, p: Any, lidar_enabled: bool) -> None:
        if p.rnn_type not in RNN_TYPES:
            raise ValueError(f"ppo.policy.rnn_type={p.rnn_type!r} is invalid; allowed: {list(RNN_TYPES)}")
        for key in ("rnn_hidden_dim", "rnn_num_layers"):
            if int(getattr(p, key)) < 1:
                raise ValueError(f"ppo.policy.{key}={getattr(p, key)} is invalid; allowed: an integer >= 1")

    def rsl_rl_cfg(self, p: Any, num_beams: int, history_length: int) -> dict[str, Any]:
        return {
            "class_name": "RNNModel",
            "rnn_type": str(p.rnn_type),
            "rnn_hidden_dim": int(p.rnn_hidden_dim),
            "rnn_num_layers": int(p.rnn_num_layers),
        }

    def export_meta(self, p: Any) -> dict[str, Any]:
        names = ["h"] + (["c"] if p.rnn_type == "lstm" else [])
        return {
            "rnn_type": str(p.rnn_type),
            "state_shape": [int(p.rnn_num_layers), "batch", int(p.rnn_hidden_dim)],
            "onnx_state_inputs": [f"{n}_in" for n in names],
            "onnx_state_outputs": [f"{n}_out" for n in names],
            "state": "zeros at the start of every episode; feed each step's outputs back as the next inputs",
        }

    def numpy_weights(self, actor: nn.Module) -> dict[str, np.ndarray]:
        """The layers in torch's gate order: ``rnn_w_ih<l>``, ``rnn_w_hh<l>``, ``rnn_b_ih<l>``,
        ``rnn_b_hh<l>``."""
        rnn = actor.rnn.rnn
        out = {
            "rnn_type": np.array("lstm" if isinstance(rnn, nn.LSTM) else "gru"),
            "rnn_num_layers": np.array(rnn.num_layers),
            "rnn_hidden_dim": np.array(rnn.hidden_size),
        }
        for name in ("w_ih", "w_hh", "b_ih", "b_hh"):
            for layer in range(rnn.num_layers):
                value = getattr(rnn, f"{name.replace('w_', 'weight_').replace('b_', 'bias_')}_l{layer}")
                out[f"rnn_{name}{layer}"] = value.detach().double().numpy()
        return out
