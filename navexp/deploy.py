"""Robot-side policy: numpy only (no torch, no simulator). Raw sensor values in, velocity command out.

    from navexp.deploy import NumpyPolicy
    policy = NumpyPolicy.load("outputs/<run>/export/policy.npz")     # written by `python -m navexp.export`
    vx, vy, wz = policy.command(scan_m, goal_body_xy, vel_body, omega)   # m/s, m/s, rad/s in the body frame

Inputs (body frame: x forward, y left): ``scan_m`` [B] ranges in metres, beam 0 forward then
counter-clockwise (misses may be inf or nan: they read max range); ``goal_body_xy`` [2] goal
position relative to the robot (m); ``vel_body`` [2] forward/left velocity (m/s); ``omega`` yaw rate
(rad/s). The observation is rebuilt exactly as in training from the metadata stored in the file.
"""

from __future__ import annotations

import json
import math
from collections import deque

import numpy as np

ACTIVATIONS = {
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "relu": lambda x: np.maximum(x, 0),
    "tanh": np.tanh,
    "identity": lambda x: x,
}


def check_inputs(goal_body_xy, vel_body, omega) -> None:
    """Raise ValueError naming the input when the goal, velocity or yaw rate is not finite or misshapen."""
    for name, value, shape in (
        ("goal_body_xy", goal_body_xy, (2,)),
        ("vel_body", vel_body, (2,)),
        ("omega", omega, ()),
    ):
        arr = np.asarray(value, dtype=np.float64)
        if arr.shape != shape:
            raise ValueError(f"{name} must have shape {shape}; got {arr.shape} ({value!r})")
        if not np.isfinite(arr).all():
            raise ValueError(
                f"{name}={arr.tolist()!r} is not finite; allowed: finite numbers (NaN/inf is only "
                f"meaningful in scan_m, where it reads max range)"
            )


class NumpyPolicy:
    """The exported actor (normalizer + MLP + mean action) and the observation builder."""

    def __init__(
        self,
        layers: list[tuple[np.ndarray, np.ndarray]],
        activation: str,
        obs_mean: np.ndarray,
        obs_std: np.ndarray,
        eps: float,
        meta: dict,
    ) -> None:
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"activation {activation!r} is not supported here; supported: {sorted(ACTIVATIONS)}"
            )
        self.layers, self.act_fn = layers, ACTIVATIONS[activation]
        self.obs_mean, self.obs_std, self.eps, self.meta = obs_mean, obs_std, eps, meta
        self.history: deque = deque(maxlen=int(meta["obs"]["history_length"]))
        self.prev_action = np.zeros(3)

    @classmethod
    def load(cls, path: str) -> NumpyPolicy:
        f = np.load(path)
        meta = json.loads(str(f["meta"]))
        n = int(f["num_layers"])
        layers = [(f[f"w{i}"], f[f"b{i}"]) for i in range(n)]
        return cls(layers, str(f["activation"]), f["obs_mean"], f["obs_std"], float(f["eps"]), meta)

    def reset(self) -> None:
        """Start of an episode: forget the frame history and the previous action."""
        self.history.clear()
        self.prev_action = np.zeros(3)

    def frame(self, scan_m, goal_body_xy, vel_body, omega) -> np.ndarray:
        """One observation frame, term by term in the exported order."""
        m, parts = self.meta, []
        max_range = m["lidar"]["max_range_m"]
        for name, width in m["obs"]["terms"]:
            if name == "lidar":
                scan = np.nan_to_num(np.asarray(scan_m, dtype=np.float64), nan=max_range, posinf=max_range)
                part = np.clip(scan, 0.0, max_range) / max_range
            elif name == "goal_polar":
                gx, gy = goal_body_xy
                b = math.atan2(gy, gx)
                part = np.array(
                    [math.hypot(gx, gy) / m["scales"]["goal_dist_scale_m"], math.sin(b), math.cos(b)]
                )
            elif name == "vel_body":
                part = np.asarray(vel_body, dtype=np.float64) / m["scales"]["max_lin_vel_mps"]
            elif name == "omega":
                part = np.array([omega / m["scales"]["max_ang_vel_radps"]])
            elif name == "action_prev":
                part = self.prev_action
            else:
                raise ValueError(f"observation term {name!r} is not available on the robot")
            if part.shape != (width,):
                raise ValueError(f"term {name!r} built {part.shape[0]} values, the policy expects {width}")
            parts.append(part)
        return np.concatenate(parts)

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Normalised observation -> MLP -> mean action, clipped to [-1, 1] as the env clips it."""
        x = (np.asarray(obs, dtype=np.float64) - self.obs_mean) / (self.obs_std + self.eps)
        for i, (w, b) in enumerate(self.layers):
            x = x @ w.T + b
            if i < len(self.layers) - 1:
                x = self.act_fn(x)
        return np.clip(x, -1.0, 1.0)

    def observation(self, scan_m, goal_body_xy, vel_body, omega) -> np.ndarray:
        """The (stacked) observation the actor reads; the first frame of an episode fills the history."""
        f = self.frame(scan_m, goal_body_xy, vel_body, omega)
        if not self.history:
            self.history.extend([f] * self.history.maxlen)
        else:
            self.history.append(f)
        return np.concatenate(list(self.history))

    def command(self, scan_m, goal_body_xy, vel_body, omega) -> tuple[float, float, float]:
        """Body-frame velocity command (forward m/s, left m/s, yaw rate rad/s) for raw sensor values.

        A NaN/inf goal, velocity or yaw rate raises ValueError naming the input (the policy's output
        would be NaN); NaN/inf scan beams keep their meaning: no return, read as max range.
        """
        check_inputs(goal_body_xy, vel_body, omega)
        a = self.act(self.observation(scan_m, goal_body_xy, vel_body, omega))
        self.prev_action = a
        scale = self.meta["action"]["scale"]
        return float(a[0] * scale[0]), float(a[1] * scale[1]), float(a[2] * scale[2])
