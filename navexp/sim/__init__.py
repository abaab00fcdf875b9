"""Simulation layer (knows nothing of RL): scene, layouts, scenarios and interchangeable backends.

The backend contract is ``navexp.sim.base.Simulator`` (built from a ``SimSpec`` by ``make_sim``);
the built-in backends are ``warp`` (MuJoCo Warp, CPU and CUDA) and ``mujoco`` (classic MuJoCo, CPU).
"""

from __future__ import annotations

import math

import torch

from navexp.sim.base import BACKENDS, SimSpec, Simulator, make_sim, register_backend, resolve_backend

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


def beam_angles(num_beams: int, fov_deg: float) -> torch.Tensor:
    """Beam angles in the body frame [B] (rad): evenly spread, centred on the forward (x) axis.

    A full circle (360 deg) has beam 0 pointing forward and beams every 360/B deg counter-clockwise;
    a narrower fan spans [-fov/2, +fov/2] inclusive.
    """
    fov = math.radians(fov_deg)
    if num_beams == 1:
        return torch.zeros(1)
    if math.isclose(fov_deg, 360.0):
        return torch.arange(num_beams) * (2 * math.pi / num_beams)
    return torch.linspace(-fov / 2, fov / 2, num_beams)
