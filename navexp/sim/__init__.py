"""Simulation layer (knows nothing of RL): scene, layouts, scenarios and two interchangeable backends.

Both backends take the same constructor arguments and expose the same tensors and methods:
``qpos``/``qvel``/``ctrl`` [N, 3], ``contact`` [N], ``overflow`` [N] (per-world bitmask, 0: none),
``ranges`` [N, B]; ``write_layouts(mask, layout)`` (worlds where the [N] bool mask is set take their
row of an N-row layout), ``step()`` (physics; ``contact`` covers the substeps and the final pose),
``sense(changed)`` (bring ``ranges`` up to date at the current poses; ``changed`` marks worlds
written since the last step), ``synchronize()``, ``overflow_reason(bits)``.
"""

from __future__ import annotations

import math

import torch

BACKENDS = ("auto", "warp", "mujoco")


def resolve_device(device: str) -> str:
    """``auto`` -> cuda:0 when CUDA is present, else cpu; ``cuda`` -> cuda:0."""
    if device == "auto":
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        return "cuda:0"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"env.device={device!r} but CUDA is not available here; use env.device=cpu or auto")
    return device


def resolve_backend(backend: str, device: str) -> str:
    """``auto`` -> ``warp`` on CUDA, ``mujoco`` (classic MuJoCo) on the CPU."""
    if backend not in BACKENDS:
        raise ValueError(f"env.sim.backend={backend!r} is invalid; allowed: {' | '.join(BACKENDS)}")
    if backend == "auto":
        return "warp" if device.startswith("cuda") else "mujoco"
    if backend == "mujoco" and device != "cpu":
        raise ValueError(
            f"env.sim.backend=mujoco runs on the CPU, not env.device={device!r}; "
            f"use env.device=cpu or env.sim.backend=warp"
        )
    return backend


def make_sim(backend: str, *args, **kwargs):
    """Build the chosen backend (``warp`` or ``mujoco``) with WarpSim's constructor arguments."""
    if backend == "warp":
        from navexp.sim.warp_backend import WarpSim

        return WarpSim(*args, **kwargs)
    from navexp.sim.mujoco_backend import MujocoSim

    return MujocoSim(*args, **kwargs)


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
