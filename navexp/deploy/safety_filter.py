"""Numpy twin of ``navexp.task.robots.safety_filter`` for the robot side (no torch): the same sweep
rule on one scan, read from the ``action.safety_filter`` block of the export metadata."""

from __future__ import annotations

import numpy as np


def sweep_fraction(
    scan_m: np.ndarray,
    beam_angles_rad: np.ndarray,
    vel_body: np.ndarray,
    radius_m: float,
    margin_m: float,
    horizon_s: float,
) -> float:
    """Scale in [0, 1] for the body-frame linear velocity ``vel_body`` [2] (m/s) given one scan [B] (m)."""
    points = np.stack((np.cos(beam_angles_rad), np.sin(beam_angles_rad)), axis=-1) * scan_m[:, None]
    sweep = np.asarray(vel_body, dtype=np.float64) * horizon_s
    a = float(sweep @ sweep)
    if a == 0.0:
        return 1.0
    b = points @ sweep
    rho = radius_m + margin_m
    c = (points * points).sum(-1) - rho * rho
    disc = b * b - a * c
    hit = (b > 0) & (disc >= 0)
    t = (b[hit] - np.sqrt(disc[hit])) / a
    return float(min(1.0, np.clip(t, 0.0, None).min(initial=1.0)))


def apply_safety_filter(command: np.ndarray, scan_m: np.ndarray, meta: dict) -> np.ndarray:
    """The physical command [A] with its linear components scaled as the training env scaled them;
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
    scale = sweep_fraction(scan, angles, vel, sf["radius_m"], sf["margin_m"], sf["horizon_s"])
    out = np.array(command, dtype=np.float64)
    out[axes] = command[axes] * scale
    return out
