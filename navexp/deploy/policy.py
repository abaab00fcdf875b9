"""Robot-side policy: numpy only (no torch, no simulator). Raw sensor values in, velocity command out.

    from navexp.deploy import NumpyPolicy
    policy = NumpyPolicy.load("outputs/<run>/export/policy.npz")     # written by `python -m navexp.export`
    vx, vy, wz = policy.command(scan_m, goal_body_xy, vel_body, omega)   # holonomic: m/s, m/s, rad/s
    v, wz = policy.command(scan_m, goal_body_xy, vel_body, omega)        # diffdrive: m/s, rad/s

A recurrent policy (``ppo.policy.model=rnn``) keeps its GRU/LSTM state between ``command`` calls: one
NumpyPolicy per robot, ``reset()`` at every episode start. The networks are ``navexp.deploy.numpy_nets``.

The command has the trained robot's action width and order (``policy.action_names``, the metadata's
``action`` block), each component clipped to [-1, 1] and scaled to its unit, in the body frame.

Inputs (body frame: x forward, y left): ``scan_m`` [B] ranges in metres, beam 0 forward then
counter-clockwise (a miss may be NaN, +-inf or negative: it reads max range); ``goal_body_xy`` [2] goal
position relative to the robot (m); ``vel_body`` [2] forward/left velocity (m/s); ``omega`` yaw rate
(rad/s). The observation is rebuilt exactly as in training from the metadata stored in the file,
term by term with the numpy twins of ``navexp.task.obs.numpy_terms`` (torch-free as well).
"""

from __future__ import annotations

import json
import zipfile
from collections import deque
from collections.abc import Mapping

import numpy as np

from navexp.deploy.numpy_nets import ACTIVATIONS, NUMPY_MODELS, NumpyRNN, mlp, scan_cnn_latent
from navexp.deploy.safety_filter import apply_safety_filter
from navexp.task.obs.numpy_terms import get_twin, history_steps


def check_inputs(goal_body_xy, vel_body, omega) -> None:
    """Raise ValueError naming the input when the goal, velocity or yaw rate is not finite or misshapen."""
    for name, value, shape in (
        ("goal_body_xy", goal_body_xy, (2,)),
        ("vel_body", vel_body, (2,)),
        ("omega", omega, ()),
    ):
        try:
            arr = (
                None
                if value is None or isinstance(value, str | bytes)
                else np.asarray(value, dtype=np.float64)
            )
        except (TypeError, ValueError):
            arr = None
        if arr is None:
            raise ValueError(
                f"{name}={value!r} ({type(value).__name__}) is invalid; expected numbers of shape {shape}"
            )
        if arr.shape != shape:
            raise ValueError(f"{name} must have shape {shape}; got {arr.shape} ({value!r})")
        if not np.isfinite(arr).all():
            raise ValueError(
                f"{name}={arr.tolist()!r} is not finite; allowed: finite numbers (NaN/inf is only "
                f"meaningful in scan_m, where it reads max range)"
            )


def check_scan(scan_m, num_beams: int) -> None:
    """Raise TypeError when ``scan_m`` is not a sequence of numbers, ValueError when it does not hold
    ``num_beams`` ranges (NaN/inf/negative entries are allowed: they mean no return)."""
    expected = f"a sequence of {num_beams} ranges in metres (shape ({num_beams},), beam 0 forward, CCW)"
    try:
        arr = None if isinstance(scan_m, str | bytes) else np.asarray(scan_m, dtype=np.float64)
    except (TypeError, ValueError):
        arr = None
    if scan_m is None or arr is None:
        raise TypeError(f"scan_m={scan_m!r} ({type(scan_m).__name__}) is invalid; expected {expected}")
    if arr.shape != (num_beams,):
        raise ValueError(f"scan_m has shape {arr.shape}; expected {expected}")


class BadPolicyFile(ValueError):
    """What is wrong in a policy.npz (``NumpyPolicy.load`` names the file)."""


class PolicyArrays(Mapping):
    """The arrays of a policy.npz read without pickle, by kind: a missing array, an object array or one
    of the wrong kind raises ``BadPolicyFile`` naming it."""

    def __init__(self, npz) -> None:
        self.npz, self.files = npz, list(npz.files)

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self.files:
            raise BadPolicyFile(f"no {key!r} array")
        try:
            return self.npz[key]
        except ValueError:  # numpy refuses an object array without allow_pickle
            raise BadPolicyFile(f"array {key!r} holds Python objects (never loaded: no pickle)") from None

    def __iter__(self):
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def text(self, key: str) -> str:
        """A string array (the metadata's JSON, the activation's name)."""
        value = self[key]
        if value.dtype.kind != "U" or value.ndim:
            raise BadPolicyFile(f"array {key!r} is not a string ({value.dtype}, shape {value.shape})")
        return str(value)

    def integer(self, key: str) -> int:
        """A scalar integer array (``num_layers``, ``rnn_hidden_dim``, ...)."""
        value = self[key]
        if value.ndim or value.dtype.kind not in "iu":
            raise BadPolicyFile(f"array {key!r} is not an integer: {str(value)[:40]!r}")
        return int(value)

    def numbers(self, key: str, ndim: int) -> np.ndarray:
        """A finite float array of ``ndim`` dimensions (weights, biases, normaliser statistics)."""
        value = self[key]
        if value.dtype.kind not in "iuf":
            kind = "text" if value.dtype.kind in "US" else value.dtype.name
            raise BadPolicyFile(f"array {key!r} holds {kind}, not numbers")
        if value.ndim != ndim or not np.isfinite(value).all():
            raise BadPolicyFile(f"array {key!r} is not a finite {ndim}-D array (shape {value.shape})")
        return value.astype(np.float64)


def policy_meta(text: str) -> dict:
    """policy.npz's metadata: JSON holding at least ``obs.terms``, ``obs.history_length`` and
    ``action.scale`` (what ``NumpyPolicy`` reads before any command)."""
    try:
        meta = json.loads(text)
    except ValueError as e:
        raise BadPolicyFile(f"its 'meta' is not JSON: {e}") from None
    needed = "obs.terms, obs.history_length, action.scale"
    obs = meta.get("obs") if isinstance(meta, dict) else None
    action = meta.get("action") if isinstance(meta, dict) else None
    if not (isinstance(obs, dict) and isinstance(action, dict)):
        raise BadPolicyFile(f"its 'meta' lacks {needed}")
    terms, history, scale = obs.get("terms"), obs.get("history_length"), action.get("scale")
    if not (
        isinstance(terms, list)
        and all(isinstance(t, list) and len(t) == 2 and isinstance(t[1], int) for t in terms)
        and isinstance(history, int)
        and history >= 1
        and isinstance(scale, list)
        and all(isinstance(v, int | float) for v in scale)
    ):
        raise BadPolicyFile(
            f"its 'meta' lacks {needed} (or they are not [[name, width], ...], >= 1, [numbers])"
        )
    return meta


def check_layers(layers: list[tuple[np.ndarray, np.ndarray]], num_actions: int) -> None:
    """The MLP head chains: each bias fits its weight's rows, each layer reads the previous one's
    outputs, the last outputs one value per action."""
    for i, (w, b) in enumerate(layers):
        if b.shape != (w.shape[0],) or (i and w.shape[1] != layers[i - 1][0].shape[0]):
            before = f", w{i - 1} is {layers[i - 1][0].shape}" if i else ""
            raise BadPolicyFile(f"layer {i}: w{i} is {w.shape}, b{i} is {b.shape}{before}")
    if not layers or layers[-1][0].shape[0] != num_actions:
        raise BadPolicyFile(
            f"the last layer does not output the {num_actions} actions of meta's action.scale"
        )


class NumpyPolicy:
    """The exported actor (normalizer + [GRU/LSTM | circular scan CNN] + MLP + mean action) and the
    observation builder. A recurrent policy keeps its state between ``command`` calls; ``reset()``
    clears it (and the frame history) at the start of every episode."""

    def __init__(
        self,
        layers: list[tuple[np.ndarray, np.ndarray]],
        activation: str,
        obs_mean: np.ndarray,
        obs_std: np.ndarray,
        eps: float,
        meta: dict,
        rnn: NumpyRNN | None = None,
        convs: list[tuple[np.ndarray, np.ndarray, int]] | None = None,
        scan_width: int = 0,
    ) -> None:
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"activation {activation!r} is not supported here; supported: {sorted(ACTIVATIONS)}"
            )
        self.layers, self.act_fn = layers, ACTIVATIONS[activation]
        self.obs_mean, self.obs_std, self.eps, self.meta = obs_mean, obs_std, eps, meta
        self.rnn, self.convs, self.scan_width = rnn, convs, int(scan_width)
        """ppo.policy.model=rnn: the recurrent layers and their state; =cnn: the conv layers."""
        self.history: deque = deque(maxlen=int(meta["obs"]["history_length"]))
        obs = meta["obs"]
        steps = history_steps(obs.get("params", {}).get("lidar_history", {}))
        keeps = "lidar_history" in dict(obs.get("terms", []))  # a policy without it keeps no scans
        self.scan_history: deque = deque(maxlen=steps if keeps else 0)
        """The earlier raw scans the ``lidar_history`` term reads, most recent first (empty without it)."""
        self.action_scale = np.asarray(meta["action"]["scale"], dtype=np.float64)
        """[A] physical value of action 1.0 per component (``meta["action"]["units"]``)."""
        self.action_names: list[str] = list(meta["action"].get("order", []))
        self.prev_action = np.zeros(self.action_scale.size)

    @classmethod
    def load(cls, path: str) -> NumpyPolicy:
        """The policy of ``navexp.export``'s ``policy.npz``. Another file, or a damaged or crafted one (an
        object array, a missing array, metadata that is not a policy's, misshapen layers), fails in one
        ``ValueError`` naming the file and what is wrong; nothing in the file is executed (no pickle)."""
        try:
            f = np.load(path, allow_pickle=False)
            if not hasattr(f, "files") or "meta" not in f.files:
                raise ValueError("no 'meta' array")
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
            raise ValueError(
                f"{path} is not a policy.npz of navexp.export ({str(e).splitlines()[0][:120]}); load the "
                f"policy.npz of <run>/export/ (policy.onnx and policy_meta.json are for other runtimes)"
            ) from None
        try:
            return cls._from_arrays(PolicyArrays(f))
        except BadPolicyFile as e:
            reason = str(e)
        except (KeyError, ValueError, TypeError, IndexError, AttributeError) as e:  # a shape the checks miss
            reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        raise ValueError(
            f"{path} is not a usable policy.npz of navexp.export: {reason[:200]}; export the run again "
            f"(python -m navexp.export checkpoint=<run>)"
        ) from None

    @classmethod
    def _from_arrays(cls, f: PolicyArrays) -> NumpyPolicy:
        """The policy of a policy.npz's arrays, each checked as it is read (``BadPolicyFile``)."""
        meta = policy_meta(f.text("meta"))
        layers = [(f.numbers(f"w{i}", 2), f.numbers(f"b{i}", 1)) for i in range(f.integer("num_layers"))]
        check_layers(layers, len(meta["action"]["scale"]))
        kind = f.text("model") if "model" in f.files else "mlp"
        if kind not in NUMPY_MODELS:
            raise BadPolicyFile(f"model {kind!r} is not supported here; supported: {list(NUMPY_MODELS)}")
        extra = NUMPY_MODELS[kind](f)
        norm = (f.numbers("obs_mean", 1), f.numbers("obs_std", 1), float(f.numbers("eps", 0)))
        try:
            return cls(layers, f.text("activation"), *norm, meta, **extra)
        except ValueError as e:  # the constructor's own check (an unknown activation)
            raise BadPolicyFile(str(e)) from None

    def reset(self) -> None:
        """Start of an episode: forget the frame history, the previous action and the RNN state."""
        self.history.clear()
        self.scan_history.clear()
        if self.rnn is not None:
            self.rnn.reset()
        self.prev_action = np.zeros(self.action_scale.size)

    def frame(self, scan_m, goal_body_xy, vel_body, omega, **extra) -> np.ndarray:
        """One observation frame, term by term in the exported order (each term's numpy twin)."""
        m, parts = self.meta, []
        num_beams = dict(m["obs"]["terms"]).get("lidar")
        if num_beams is not None:  # a policy without the lidar term never reads the scan
            check_scan(scan_m, int(num_beams))
        inputs = {
            "scan_m": scan_m,
            "goal_body_xy": goal_body_xy,
            "vel_body": vel_body,
            "omega": omega,
            "prev_action": self.prev_action,
            **extra,
        }
        if self.scan_history.maxlen:  # an episode's first scan stands in for the scans before it
            past = list(self.scan_history)
            inputs["scan_history_m"] = past + [past[-1] if past else scan_m] * (
                self.scan_history.maxlen - len(past)
            )
        term_params = m["obs"].get("params", {})
        for name, width in m["obs"]["terms"]:
            part = np.asarray(get_twin(name)(inputs, term_params.get(name, {}), m), dtype=np.float64)
            if part.shape != (width,):
                raise ValueError(f"term {name!r} built shape {part.shape}, the policy expects ({width},)")
            parts.append(part)
        if self.scan_history.maxlen:
            self.scan_history.appendleft(np.asarray(scan_m, dtype=np.float64).copy())
        return np.concatenate(parts)

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Observation -> mean action, clipped to [-1, 1] as the env clips it: normalised columns ->
        [RNN step (advances its state) | with the scan's conv features] -> MLP."""
        x = np.asarray(obs, dtype=np.float64)
        if self.convs is not None:
            frames = x.reshape(self.history.maxlen, -1)
            rest = frames[:, self.scan_width :].reshape(-1)
            latent = np.concatenate(
                [self._normalize(rest), scan_cnn_latent(frames, self.scan_width, self.convs, self.act_fn)]
            )
        elif self.rnn is not None:
            latent = self.rnn.step(self._normalize(x))
        else:
            latent = self._normalize(x)
        return np.clip(mlp(latent, self.layers, self.act_fn), -1.0, 1.0)

    def _normalize(self, x: np.ndarray) -> np.ndarray:
        """rsl_rl's EmpiricalNormalization: (x - mean) / (std + eps)."""
        return (x - self.obs_mean) / (self.obs_std + self.eps)

    def observation(self, scan_m, goal_body_xy, vel_body, omega, **extra) -> np.ndarray:
        """The (stacked) observation the actor reads; the first frame of an episode fills the history."""
        f = self.frame(scan_m, goal_body_xy, vel_body, omega, **extra)
        if not self.history:
            self.history.extend([f] * self.history.maxlen)
        else:
            self.history.append(f)
        return np.concatenate(list(self.history))

    def command(self, scan_m, goal_body_xy, vel_body, omega, **extra) -> tuple[float, ...]:
        """Body-frame velocity command for raw sensor values: one value per action component, in
        ``action_names`` order (holonomic: forward m/s, left m/s, yaw rate rad/s; diffdrive: forward
        m/s, yaw rate rad/s). ``extra`` keyword inputs reach the numpy twins of added terms.

        A NaN/inf goal, velocity or yaw rate raises ValueError naming the input (the policy's output
        would be NaN); NaN, +-inf or negative scan beams keep their meaning: no return, read as max
        range. A missing or misshapen scan raises TypeError/ValueError naming ``scan_m`` and its shape.
        A robot trained with the safety filter (``action.safety_filter`` in the metadata) gets its
        command through the same filter, on this scan (``navexp.deploy.safety_filter``).
        """
        check_inputs(goal_body_xy, vel_body, omega)
        a = self.act(self.observation(scan_m, goal_body_xy, vel_body, omega, **extra))
        if a.shape != self.action_scale.shape:
            raise ValueError(
                f"the policy outputs {a.shape[0]} actions, the action block names {self.action_names}"
            )
        self.prev_action = a
        command = a * self.action_scale
        if "safety_filter" in self.meta["action"]:  # the robot was trained with it: apply it the same way
            command = apply_safety_filter(command, scan_m, self.meta)
        return tuple(float(v) for v in command)
