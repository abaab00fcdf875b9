"""Safety filter: slow the commanded linear velocity so the robot cannot reach a scanned surface within
a horizon (``env.robot.safety_horizon_s``, off at 0).

Each beam's return is a point ``p`` in the body frame. Moving at the commanded body velocity ``v`` for
``horizon_s`` sweeps the robot's disc (radius ``radius_m + margin_m``) along ``d = v * horizon_s``; the
first fraction ``t`` of that sweep at which the disc touches ``p`` solves ``|p - t d| = rho``. The
command is scaled by the smallest such ``t`` over the beams (1 where no point is in the way), so its
direction is kept: motion along a wall or away from a surface is untouched, motion towards one is
slowed to what stops the disc at the margin. Once the nearest return is inside the margin, the
command's component towards it is removed first (a robot that can only drive forward stops instead);
the sweep then keeps the robot's present clearance (less 1 mm) to the returns inside the margin and
the whole margin to every other return. So inside the margin the robot can leave the surface, but
not get nearer, and it slides along a wall only at a crawl until it has left the margin (the wall's
returns further along lie outside the margin). Keeping the present clearance to every return instead
let a robot graze a wall: the body turns within a step and the scan's noise (1 cm) moves the wall a
little in every scan, and at a clearance of a few mm that was enough for contact (BENCHMARKS.md,
"The safety filter keeps its margin"). The yaw rate is never changed. A robot
declares which action components are linear (``Robot.linear_axes``); ``navexp.deploy.safety_filter``
is the numpy twin (tests compare them). The margin also takes up the servo's lag (about 1.5 cm at
full speed with the default servos).
"""

from __future__ import annotations

import torch

INSIDE_SLACK_M = 1e-3
"""Inside the margin the sweep keeps the present clearance less this (m) to the returns inside it."""


def filter_velocity(
    scan_m: torch.Tensor,
    cos_sin: torch.Tensor,
    vel_body: torch.Tensor,
    radius_m: float,
    margin_m: float,
    horizon_s: float,
    holonomic: bool = True,
) -> torch.Tensor:
    """[N, 2] the body-frame linear velocity ``vel_body`` [N, 2] (m/s) filtered on the scan ``scan_m``
    [N, B] (m, misses at max range) along beam directions ``cos_sin`` [B, 2]. ``holonomic=False``: a
    robot that moves only along x (its y velocity must be 0)."""
    reach = radius_m + margin_m
    nearest, idx = scan_m.min(dim=-1)
    present = torch.minimum(nearest - INSIDE_SLACK_M, torch.full_like(nearest, reach))  # [N]
    # [N, B] the disc radius each return keeps: the present clearance inside the margin, else the margin
    rho = torch.where(scan_m < reach, present.unsqueeze(-1), reach)
    towards = cos_sin[idx]  # [N, 2] direction of the nearest return
    approach = (vel_body * towards).sum(-1, keepdim=True)
    blocked = (nearest < reach).unsqueeze(-1) & (approach > 0)
    if holonomic:
        vel_body = vel_body - torch.where(blocked, approach, 0.0) * towards
    else:
        vel_body = torch.where(blocked, 0.0, vel_body)
    points = scan_m.unsqueeze(-1) * cos_sin  # [N, B, 2]
    sweep = vel_body * horizon_s  # [N, 2]
    a = (sweep * sweep).sum(-1, keepdim=True)  # [N, 1]
    b = (points * sweep.unsqueeze(1)).sum(-1)  # [N, B] > 0: the point lies ahead of the motion
    c = (points * points).sum(-1) - rho * rho  # [N, B] > 0: every point is outside its rho
    disc = b * b - a * c
    t = (b - disc.clamp(min=0.0).sqrt()) / a.clamp(min=1e-12)
    t = torch.where((b > 0) & (disc >= 0), t, torch.ones_like(t))
    return vel_body * t.min(dim=-1, keepdim=True).values.clamp(max=1.0)


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
        self._axes = torch.tensor(self.linear_axes, device=beam_angles_rad.device)
        """The axes as a device index made once (a list index would copy it from the host every step)."""
        self.max_lin_vel_mps = float(max_lin_vel_mps)

    def __call__(self, action: torch.Tensor, scan_m: torch.Tensor) -> torch.Tensor:
        """Clipped actions [N, A] -> the same with the linear components filtered (a new tensor)."""
        n = len(self.linear_axes)
        vel = torch.nn.functional.pad(action.index_select(1, self._axes) * self.max_lin_vel_mps, (0, 2 - n))
        vel = filter_velocity(
            scan_m, self.cos_sin, vel, self.radius_m, self.margin_m, self.horizon_s, holonomic=n == 2
        )
        return action.index_copy(1, self._axes, vel[:, :n] / self.max_lin_vel_mps)
