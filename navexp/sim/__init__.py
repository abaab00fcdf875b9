"""Simulation layer (knows nothing of RL): scene, layouts, scenarios and interchangeable backends.

The backend contract is ``navexp.sim.base.Simulator`` (built from a ``SimSpec`` by ``make_sim``);
the built-in backends are ``warp`` (MuJoCo Warp, CPU and CUDA) and ``mujoco`` (classic MuJoCo, CPU).
The LiDAR (beam pattern, miss handling, rangefinder MJCF, realism model) lives in
``navexp.sim.lidar``; ``beam_angles`` is re-exported here.
"""

from __future__ import annotations

import torch

from navexp.sim.base import BACKENDS, SimSpec, Simulator, make_sim, register_backend, resolve_backend
from navexp.sim.lidar import beam_angles

__all__ = [
    "BACKENDS",
    "Simulator",
    "SimSpec",
    "beam_angles",
    "make_sim",
    "register_backend",
    "resolve_backend",
    "resolve_device",
]


def resolve_device(device: str) -> str:
    """``auto`` -> cuda:0 when CUDA is present, else cpu; ``cuda`` -> cuda:0."""
    if device == "auto":
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        return "cuda:0"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"env.device={device!r} but CUDA is not available here; use env.device=cpu or auto")
    return device
