"""Numpy twin of ``navexp.task.robots.safety_filter`` for the robot side (no torch): the same rule on
one scan, read from the ``action.safety_filter`` block of the export metadata."""

from __future__ import annotations

import numpy as np

INSIDE_SLACK_M = 1e-3
"""As ``navexp.task.robots.safety_filter.INSIDE_SLACK_M``."""


def filter_velocity(
    scan_m: np.ndarray,
    beam_angles_rad: np.ndarray,
    vel_body: np.ndarray,
    radius_m: float,
    margin_m: float,
    horizon_s: float,
    holonomic: bool = True,
) -> np.ndarray:
    """[2] the body-frame linear velocity ``vel_body`` [2] (m/s) filtered on one scan [B] (m)."""
    reach = radius_m + margin_m
    i = int(np.argmin(scan_m))
    present = min(reach, float(scan_m[i]) - INSIDE_SLACK_M)
    rho = np.where(scan_m < reach, present, reach)  # per return: the present clearance inside the margin
    cos_sin = np.stack((np.cos(beam_angles_rad), np.sin(beam_angles_rad)), axis=-1)
    vel = np.asarray(vel_body, dtype=np.float64)
    approach = float(vel @ cos_sin[i])
    if scan_m[i] < reach and approach > 0:  # inside the margin: not towards the nearest
        vel = vel - approach * cos_sin[i] if holonomic else np.zeros(2)
    points = cos_sin * scan_m[:, None]
    sweep = vel * horizon_s
    a = float(sweep @ sweep)
    if a == 0.0:
        return vel
    b = points @ sweep
    c = (points * points).sum(-1) - rho * rho
    disc = b * b - a * c
    hit = (b > 0) & (disc >= 0)
    t = (b[hit] - np.sqrt(disc[hit])) / a
    return vel * min(1.0, t.min(initial=1.0))


def apply_safety_filter(command: np.ndarray, scan_m, meta: dict) -> np.ndarray:
    """The physical command [A] with its linear components filtered as the training env filtered them;
    ``meta`` is the whole export metadata (its ``action.safety_filter`` and ``lidar`` blocks)."""
    sf = meta["action"]["safety_filter"]
    axes = list(sf["linear_axes"])
    vel = np.zeros(2)
    vel[: len(axes)] = command[axes]
    angles = np.asarray(meta["lidar"]["beam_angles_rad"], dtype=np.float64)
    scan = np.asarray(scan_m, dtype=np.float64)
    max_range = float(meta["lidar"]["max_range_m"])
    no_return = ~np.isfinite(scan) | (scan < 0)  # as the lidar term reads them: max range
    scan = np.where(no_return, max_range, np.minimum(scan, max_range))
    vel = filter_velocity(
        scan, angles, vel, sf["radius_m"], sf["margin_m"], sf["horizon_s"], holonomic=len(axes) == 2
    )
    out = np.array(command, dtype=np.float64)
    out[axes] = vel[: len(axes)]
    return out
