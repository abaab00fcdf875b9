"""The exported actors in numpy (no torch): MLP head, GRU/LSTM cells and circular 1-D convolutions.

Each function reproduces the torch layer it replaces, in torch's weight layout and gate order, so the
weights of ``policy.npz`` (``navexp.deploy.export.numpy_arrays``) drop in unchanged. float64 throughout.
``NUMPY_MODELS`` holds, per ``ppo.policy.model`` kind, the loader of its weights (``@numpy_model``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

ACTIVATIONS = {
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "relu": lambda x: np.maximum(x, 0),
    "tanh": np.tanh,
    "identity": lambda x: x,
}


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)), without overflow for large |x|."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def mlp(x: np.ndarray, layers: list[tuple[np.ndarray, np.ndarray]], act) -> np.ndarray:
    """Linear layers ``x @ W.T + b`` with ``act`` between them (none after the last)."""
    for i, (w, b) in enumerate(layers):
        x = x @ w.T + b
        if i < len(layers) - 1:
            x = act(x)
    return x


def gru_cell(x: np.ndarray, h: np.ndarray, w_ih, w_hh, b_ih, b_hh) -> np.ndarray:
    """One step of torch.nn.GRU's layer; rows of ``w_ih`` [3H, I] are the r, z, n gates:

    r = sigma(W_ir x + b_ir + W_hr h + b_hr)
    z = sigma(W_iz x + b_iz + W_hz h + b_hz)
    n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
    h' = (1 - z) * n + z * h
    """
    gi, gh = x @ w_ih.T + b_ih, h @ w_hh.T + b_hh
    i_r, i_z, i_n = np.split(gi, 3, axis=-1)
    h_r, h_z, h_n = np.split(gh, 3, axis=-1)
    r, z = sigmoid(i_r + h_r), sigmoid(i_z + h_z)
    n = np.tanh(i_n + r * h_n)
    return (1.0 - z) * n + z * h


def lstm_cell(x: np.ndarray, h: np.ndarray, c: np.ndarray, w_ih, w_hh, b_ih, b_hh) -> tuple:
    """One step of torch.nn.LSTM's layer; rows of ``w_ih`` [4H, I] are the i, f, g, o gates:

    c' = sigma(f) * c + sigma(i) * tanh(g),   h' = sigma(o) * tanh(c')
    """
    g = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    i, f, gg, o = np.split(g, 4, axis=-1)
    c_new = sigmoid(f) * c + sigmoid(i) * np.tanh(gg)
    return sigmoid(o) * np.tanh(c_new), c_new


class NumpyRNN:
    """A stacked GRU/LSTM with its state kept between calls: ``h`` (and ``c``) [L, H] per layer."""

    def __init__(self, rnn_type: str, weights: list[tuple[np.ndarray, ...]], hidden_dim: int) -> None:
        if rnn_type not in ("gru", "lstm"):
            raise ValueError(f"rnn_type {rnn_type!r} is not supported; supported: ['gru', 'lstm']")
        self.rnn_type, self.weights, self.hidden_dim = rnn_type, weights, int(hidden_dim)
        self.reset()

    def reset(self) -> None:
        """Zero state: the start of an episode (rsl_rl starts every episode from zeros)."""
        zeros = np.zeros((len(self.weights), self.hidden_dim))
        self.h, self.c = zeros, zeros.copy()

    def step(self, x: np.ndarray) -> np.ndarray:
        """Advance one control step on input [I]; return the top layer's output [H]."""
        h, c = self.h.copy(), self.c.copy()
        for layer, w in enumerate(self.weights):
            if self.rnn_type == "gru":
                h[layer] = gru_cell(x, h[layer], *w)
            else:
                h[layer], c[layer] = lstm_cell(x, h[layer], c[layer], *w)
            x = h[layer]
        self.h, self.c = h, c
        return x


def circular_conv1d(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int) -> np.ndarray:
    """torch.nn.Conv1d after wrapping (k - 1) / 2 beams around each end: [C_in, B] -> [C_out, B_out].

    out[o, j] = b[o] + sum_c sum_t w[o, c, t] * xp[c, j * stride + t],  xp = [x[:, -p:], x, x[:, :p]].
    """
    k = w.shape[-1]
    p = (k - 1) // 2
    xp = np.concatenate([x[:, x.shape[1] - p :], x, x[:, :p]], axis=1) if p else x
    n_out = (xp.shape[1] - k) // stride + 1
    # windows [C_in, n_out, k]: xp[c, j * stride + t]
    idx = np.arange(n_out)[:, None] * stride + np.arange(k)[None, :]
    windows = xp[:, idx]
    return np.einsum("oct,cjt->oj", w, windows) + b[:, None]


def scan_cnn_latent(
    frames: np.ndarray, scan_width: int, convs: list[tuple[np.ndarray, np.ndarray, int]], act
) -> np.ndarray:
    """``ScanCNNModel``'s conv features: the scan of each frame is a channel ([H, B]), conv layers
    with ``act`` after each, flattened channel-major as torch's Flatten does."""
    x = frames[:, :scan_width]
    for w, b, stride in convs:
        x = act(circular_conv1d(x, w, b, stride))
    return x.reshape(-1)


NumpyLoader = Callable[[Mapping[str, np.ndarray]], dict]
"""``policy.npz`` arrays -> the model-specific keyword arguments of ``NumpyPolicy`` (``rnn``, ``convs``,
``scan_width``); an MLP needs none."""

NUMPY_MODELS: dict[str, NumpyLoader] = {}
"""The numpy twin of each ``ppo.policy.model`` kind (``navexp.learn.models.MODELS``) that deploys."""


def numpy_model(name: str) -> Callable[[NumpyLoader], NumpyLoader]:
    """Decorator: the loader of model kind ``name``'s weights from ``policy.npz``; a duplicate raises."""

    def deco(fn: NumpyLoader) -> NumpyLoader:
        if name in NUMPY_MODELS:
            raise ValueError(f"numpy model {name!r} is already registered")
        NUMPY_MODELS[name] = fn
        return fn

    return deco


@numpy_model("mlp")
def _mlp(f: Mapping[str, np.ndarray]) -> dict:
    return {}


@numpy_model("rnn")
def _rnn(f: Mapping[str, np.ndarray]) -> dict:
    names = ("w_ih", "w_hh", "b_ih", "b_hh")
    weights = [tuple(f[f"rnn_{k}{i}"] for k in names) for i in range(int(f["rnn_num_layers"]))]
    return {"rnn": NumpyRNN(str(f["rnn_type"]), weights, int(f["rnn_hidden_dim"]))}


@numpy_model("cnn")
def _cnn(f: Mapping[str, np.ndarray]) -> dict:
    n = int(f["conv_num_layers"])
    convs = [(f[f"conv_w{i}"], f[f"conv_b{i}"], int(f[f"conv_stride{i}"])) for i in range(n)]
    return {"convs": convs, "scan_width": int(f["scan_width"])}
