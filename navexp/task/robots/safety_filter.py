"""Safety filter: slow the commanded linear velocity so the robot cannot reach a scanned surface within
a horizon (``env.robot.safety_horizon_s``, off at 0).

Each beam's return is a point ``p`` in the body frame. Moving at the commanded body velocity ``v`` for
``horizon_s`` sweeps the robot's disc (radius ``radius_m + margin_m``) along ``d = v * horizon_s``; the
first fraction ``t`` of that sweep at which the disc touches ``p`` solves ``|p - t d| = rho``. The
command is scaled by the smallest such ``t`` over the beams (1 where no point is in the way), so its
direction is kept: motion along a wall or away from a surface is untouched, motion towards one is
slowed to what stops the disc at the margin, and stopped once the margin is reached. The yaw rate is
never changed. A robot declares which action components are linear (``Robot.linear_axes``); the robot
and deploy read the same values (``navexp.deploy.safety_filter`` is the numpy twin, tests compare them).
"""

from __future__ import annotations

import torch


def sweep_fraction(
    scan_m: torch.Tensor,
    cos_sin: torch.Tensor,
    vel_body: torch.Tensor,
    radius_m: float,
    margin_m: float,
    horizon_s: float,
) -> torch.Tensor:
    """[N] scale in [0, 1] for the body-frame linear velocity ``vel_body`` [N, 2] (m/s) given the scan
    ``scan_m`` [N, B] (m, misses at max range) along beam directions ``cos_sin`` [B, 2]."""
    points = scan_m.unsqueeze(-1) * cos_sin  # [N, B, 2]
    sweep = vel_body * horizon_s  # [N, 2]
    a = (sweep * sweep).sum(-1, keepdim=True)  # [N, 1]
    b = (points * sweep.unsqueeze(1)).sum(-1)  # [N, B] > 0: the point lies ahead of the motion
    rho = radius_m + margin_m
    c = (points * points).sum(-1) - rho * rho  # [N, B] < 0: already inside the margin
    disc = b * b - a * c
    t = (b - disc.clamp(min=0.0).sqrt()) / a.clamp(min=1e-12)
    hit = (b > 0) & (disc >= 0)
    t = torch.where(hit, t.clamp(min=0.0), torch.ones_like(t))
    return t.min(dim=-1).values.clamp(max=1.0)


class SafetyFilter:
    """The filter of one env: beam directions, robot radius and the two config values, resolved once."""

    def __init__(
        self,
        beam_angles_rad: torch.Tensor,
        radius_m: float,
        margin_m: float,
        horizon_s: float,
        linear_axes: tuple[int, ...],
        max_lin_vel_mps: float,
    ) -> None:
        self.cos_sin = torch.stack((beam_angles_rad.cos(), beam_angles_rad.sin()), dim=-1)
        self.radius_m, self.margin_m, self.horizon_s = float(radius_m), float(margin_m), float(horizon_s)
        self.linear_axes = list(linear_axes)
        self.max_lin_vel_mps = float(max_lin_vel_mps)

    def __call__(self, action: torch.Tensor, scan_m: torch.Tensor) -> torch.Tensor:
        """Clipped actions [N, A] -> the same with the linear components scaled (a new tensor)."""
        lin = action[:, self.linear_axes] * self.max_lin_vel_mps
        vel = torch.nn.functional.pad(lin, (0, 2 - lin.shape[1]))  # diffdrive: (forward, 0)
        scale = sweep_fraction(scan_m, self.cos_sin, vel, self.radius_m, self.margin_m, self.horizon_s)
        out = action.clone()
        out[:, self.linear_axes] = action[:, self.linear_axes] * scale.unsqueeze(-1)
        return out
