"""Termination logic: success, collision and out-of-bounds end an episode; time_out truncates it."""

from __future__ import annotations

import torch

from navexp.task.state import COLLISION, MOVING_COLLISION, OUT_OF_BOUNDS, SUCCESS, TIME_OUT, NavState


def compute_terminations(
    s: NavState,
    active: torch.Tensor,
    episode_length: torch.Tensor,
    max_episode_length: int,
    goal_radius_m: float,
    half_x: float,
    half_y: float,
) -> None:
    """Set ``s.success/collision/out_of_bounds/time_out`` and ``s.reason`` in place.

    Priority: collision > out_of_bounds > success (a contact in the step that reaches the goal is a
    failure); time_out only where nothing terminated. A collision that touched a moving obstacle ends
    as ``moving_collision`` (``s.collision`` is set for both kinds). Inactive (held) worlds get no new
    event and keep their latched reason.
    """
    s.collision = s.contact & active
    outside = (s.pos_xy[:, 0].abs() > half_x) | (s.pos_xy[:, 1].abs() > half_y)
    s.out_of_bounds = outside & active & ~s.collision
    s.success = (s.goal_dist < goal_radius_m) & active & ~s.collision & ~s.out_of_bounds
    terminated = s.collision | s.out_of_bounds | s.success
    s.time_out = (episode_length >= max_episode_length) & active & ~terminated
    reason = torch.zeros_like(s.reason)
    for flag, code in (
        (s.success, SUCCESS),
        (s.collision, COLLISION),
        (s.out_of_bounds, OUT_OF_BOUNDS),
        (s.time_out, TIME_OUT),
        (s.collision & s.moving_contact, MOVING_COLLISION),
    ):
        reason = torch.where(flag, code, reason)
    s.reason = torch.where(active, reason, s.reason)
