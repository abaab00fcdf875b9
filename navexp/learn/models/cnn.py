"""``ppo.policy.model=cnn``: ``ScanCNNModel``, circular 1-D convolutions over the scan, then rsl_rl's MLP.

Why a navexp class: rsl_rl's ``CNNModel``/``CNN`` take [N, C, H, W] observation groups and build
``Conv2d`` layers with square kernels; a 72-beam scan as a 1 x 72 image with circular padding would
wrap the height of 1 as well (torch refuses padding wider than the input), and a separate observation
group would change the env, the checkpoint layout and the deployed observation. ``ScanCNNModel`` reads
the unchanged ``policy`` group, cuts each frame's scan out of it and convolves it circularly (beam 0
and beam B-1 are neighbours on a 360 deg scan); everything else (normaliser, distribution, MLP head,
PPO) is rsl_rl's ``MLPModel``. rsl_rl resolves it from ``class_name`` ``CNN_CLASS``.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
import torch.nn as nn
from rsl_rl.models import MLPModel
from rsl_rl.utils import resolve_nn_activation
from tensordict import TensorDict

from navexp.learn.models import ModelKind, register_model

CNN_CLASS = "navexp.learn.models.cnn:ScanCNNModel"


@register_model
class CNN(ModelKind):
    name = "cnn"

    def check(self, p: Any, lidar_enabled: bool) -> None:
        if not lidar_enabled:
            raise ValueError(
                "ppo.policy.model=cnn convolves the LiDAR scan; enable obs.terms.lidar.enabled=true"
            )
        n = len(p.cnn_channels)
        if n < 1 or len(p.cnn_kernel_sizes) != n or len(p.cnn_strides) != n:
            raise ValueError(
                f"ppo.policy.cnn_channels={list(p.cnn_channels)}, "
                f"ppo.policy.cnn_kernel_sizes={list(p.cnn_kernel_sizes)} and "
                f"ppo.policy.cnn_strides={list(p.cnn_strides)} are invalid; allowed: lists of one equal "
                f"length >= 1 (one entry per conv layer)"
            )
        for key in ("cnn_channels", "cnn_kernel_sizes", "cnn_strides"):
            if any(int(v) < 1 for v in getattr(p, key)):
                raise ValueError(
                    f"ppo.policy.{key}={list(getattr(p, key))} is invalid; allowed: integers >= 1"
                )
        if any(int(k) % 2 == 0 for k in p.cnn_kernel_sizes):
            raise ValueError(
                f"ppo.policy.cnn_kernel_sizes={list(p.cnn_kernel_sizes)} is invalid; allowed: odd integers "
                f"(a kernel centred on its beam)"
            )

    def rsl_rl_cfg(self, p: Any, num_beams: int, history_length: int) -> dict[str, Any]:
        return {
            "class_name": CNN_CLASS,
            "scan_width": int(num_beams),
            "history_length": int(history_length),
            "conv_channels": [int(c) for c in p.cnn_channels],
            "kernel_sizes": [int(k) for k in p.cnn_kernel_sizes],
            "strides": [int(s) for s in p.cnn_strides],
        }

    def export_meta(self, p: Any) -> dict[str, Any]:
        return {
            "cnn_channels": [int(c) for c in p.cnn_channels],
            "cnn_kernel_sizes": [int(k) for k in p.cnn_kernel_sizes],
            "cnn_strides": [int(s) for s in p.cnn_strides],
            "padding": "circular, (k - 1) / 2 beams per side",
        }

    def numpy_weights(self, actor: nn.Module) -> dict[str, np.ndarray]:
        """The conv layers: ``conv_w<i>`` [C_out, C_in, k], ``conv_b<i>``, ``conv_stride<i>``."""
        convs = [m for m in actor.conv if isinstance(m, nn.Conv1d)]
        out = {"conv_num_layers": np.array(len(convs)), "scan_width": np.array(actor.scan_width)}
        for i, c in enumerate(convs):
            out[f"conv_w{i}"] = c.weight.detach().double().numpy()
            out[f"conv_b{i}"] = c.bias.detach().double().numpy()
            out[f"conv_stride{i}"] = np.array(c.stride[0])
        return out


class CircularPad1d(nn.Module):
    """Wrap ``pad`` beams from each end of [..., B] around to the other end: [..., B + 2 pad]."""

    def __init__(self, pad: int) -> None:
        super().__init__()
        self.pad = int(pad)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pad == 0:
            return x
        # Slices + concat (not F.pad(mode="circular")) so ONNX and the numpy twin see the same ops.
        return torch.cat([x[..., -self.pad :], x, x[..., : self.pad]], dim=-1)


def conv_out_width(width: int, kernel: int, stride: int) -> int:
    """Beams after one circular conv layer (odd k): floor((B + 2 (k - 1) / 2 - k) / s) + 1."""
    return (width + 2 * ((kernel - 1) // 2) - kernel) // stride + 1


def scan_encoder(
    in_channels: int, width: int, channels: list[int], kernels: list[int], strides: list[int], activation: str
) -> tuple[nn.Sequential, int]:
    """Circular Conv1d stack over [N, C, B] scans, flattened; returns it and its output width."""
    layers: list[nn.Module] = []
    for c, k, s in zip(channels, kernels, strides, strict=True):
        layers += [
            CircularPad1d((k - 1) // 2),
            nn.Conv1d(in_channels, c, k, stride=s),
            resolve_nn_activation(activation),
        ]
        in_channels, width = c, conv_out_width(width, k, s)
    layers.append(nn.Flatten(start_dim=1))
    return nn.Sequential(*layers), in_channels * width


def split_scan(x: torch.Tensor, history: int, scan_width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[N, H*F] frames (oldest first, the scan first in each frame) -> scans [N, H, B] (one channel per
    frame) and the other columns [N, H*(F-B)] in their order."""
    frames = x.reshape(x.shape[0], history, -1)
    return frames[:, :, :scan_width], frames[:, :, scan_width:].reshape(x.shape[0], -1)


class ScanCNNModel(MLPModel):
    """rsl_rl ``MLPModel`` whose latent is [normalised non-scan columns, circular-conv features of the scan].

    The scan group (``policy``) is H frames of F columns, the first ``scan_width`` of each frame the
    LiDAR term (encoded into [0, 1], linear or log; not normalised: a per-beam normaliser would undo the
    convolution's shift invariance). Every other column, of this group and of any other group the
    model reads (the critic's ``privileged``), goes through the observation normaliser.
    """

    def __init__(
        self,
        obs: TensorDict,
        obs_groups: dict[str, list[str]],
        obs_set: str,
        output_dim: int,
        hidden_dims: tuple[int, ...] | list[int] = (256, 256),
        activation: str = "elu",
        obs_normalization: bool = False,
        distribution_cfg: dict | None = None,
        scan_group: str = "policy",
        scan_width: int = 72,
        history_length: int = 1,
        conv_channels: tuple[int, ...] | list[int] = (16, 16),
        kernel_sizes: tuple[int, ...] | list[int] = (5, 5),
        strides: tuple[int, ...] | list[int] = (2, 2),
    ) -> None:
        if scan_group not in obs_groups[obs_set]:
            raise ValueError(
                f"ScanCNNModel: {obs_set} reads {obs_groups[obs_set]}, not the scan group {scan_group!r}"
            )
        self.scan_group, self.scan_width, self.history_length = (
            scan_group,
            int(scan_width),
            int(history_length),
        )
        # Built as a plain attribute first: MLPModel.__init__ needs the latent width before nn.Module state.
        encoder, self.conv_latent_dim = scan_encoder(
            self.history_length,
            self.scan_width,
            list(conv_channels),
            list(kernel_sizes),
            list(strides),
            activation,
        )
        super().__init__(
            obs, obs_groups, obs_set, output_dim, hidden_dims, activation, obs_normalization, distribution_cfg
        )
        self.conv = encoder

    def _get_obs_dim(
        self, obs: TensorDict, obs_groups: dict[str, list[str]], obs_set: str
    ) -> tuple[list[str], int]:
        """Active groups and the width of the normalised (non-scan) columns."""
        groups, total = super()._get_obs_dim(obs, obs_groups, obs_set)
        width = obs[self.scan_group].shape[-1]
        if width % self.history_length or width // self.history_length <= self.scan_width:
            raise ValueError(
                f"ScanCNNModel: group {self.scan_group!r} is {width} wide, not {self.history_length} "
                f"frames of a {self.scan_width}-beam scan plus other terms"
            )
        return groups, total - self.scan_width * self.history_length

    def _get_latent_dim(self) -> int:
        return self.obs_dim + self.conv_latent_dim

    def _split(self, obs: TensorDict) -> tuple[torch.Tensor, torch.Tensor]:
        """Scans [N, H, B] and the other columns of every group read [N, obs_dim]."""
        scan, rest = split_scan(obs[self.scan_group], self.history_length, self.scan_width)
        others = [rest if g == self.scan_group else obs[g] for g in self.obs_groups]
        return scan, torch.cat(others, dim=-1)

    def get_latent(
        self, obs: TensorDict, masks: torch.Tensor | None = None, hidden_state=None
    ) -> torch.Tensor:
        scan, rest = self._split(obs)
        return torch.cat([self.obs_normalizer(rest), self.conv(scan)], dim=-1)

    def update_normalization(self, obs: TensorDict) -> None:
        if self.obs_normalization:
            self.obs_normalizer.update(self._split(obs)[1])  # type: ignore[operator]

    def as_jit(self) -> nn.Module:
        return ExportScanCNN(self)

    def as_onnx(self, verbose: bool = False) -> nn.Module:
        return ExportScanCNN(self)


class ExportScanCNN(nn.Module):
    """Deterministic ``ScanCNNModel`` actor on the concatenated ``policy`` group: [N, W] -> [N, A]
    (TorchScript and ONNX; the same input and output as the exported MLP)."""

    is_recurrent: bool = False

    def __init__(self, model: ScanCNNModel) -> None:
        super().__init__()
        if list(model.obs_groups) != [model.scan_group]:
            raise ValueError(
                f"only a model reading just {model.scan_group!r} exports; this one reads {model.obs_groups}"
            )
        self.history_length, self.scan_width = model.history_length, model.scan_width
        self.obs_normalizer = copy.deepcopy(model.obs_normalizer)
        self.conv = copy.deepcopy(model.conv)
        self.mlp = copy.deepcopy(model.mlp)
        self.deterministic_output = model.distribution.as_deterministic_output_module()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scan, rest = split_scan(x, self.history_length, self.scan_width)
        latent = torch.cat([self.obs_normalizer(rest), self.conv(scan)], dim=-1)
        return self.deterministic_output(self.mlp(latent))

    @torch.jit.export
    def reset(self) -> None:
        """No recurrent state (the same interface as rsl_rl's exported models)."""
        pass
