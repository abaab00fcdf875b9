"""Termination logic: success, collision and out-of-bounds end an episode; time_out truncates it."""

from __future__ import annotations

import torch

from navexp.task.state import COLLISION, MOVING_COLLISION, OUT_OF_BOUNDS, SUCCESS, TIME_OUT, NavState

PRIORITY = (COLLISION, OUT_OF_BOUNDS, SUCCESS, TIME_OUT)
"""The end reasons in priority order: the first event of a step in this order is the one that counts."""


class Terminations:
    """The episode ends of a step, with the room and goal constants on the device made once."""

    def __init__(
        self,
        max_episode_length: int,
        goal_radius_m: float,
        half_x: float,
        half_y: float,
        device,
        moving: bool = True,
    ) -> None:
        self.max_episode_length, self.goal_radius_m = int(max_episode_length), float(goal_radius_m)
        self.moving = bool(moving)
        """Tell collisions with a moving obstacle apart (``moving_collision``); False where no world
        has moving slots (``s.moving_contact`` is then never set), which saves two ops a step."""
        self.half = torch.tensor((half_x, half_y), device=device)
        """[2] half inner room size (m): the robot centre beyond it is out of bounds."""
        self.codes = torch.tensor(PRIORITY, device=device)
        """[4] the reason code of each event column."""

    def __call__(
        self,
        s: NavState,
        active: torch.Tensor,
        episode_length: torch.Tensor,
        out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Set ``s.success/collision/out_of_bounds/time_out`` and ``s.reason`` in place; return the
        [N] bool of worlds whose episode ended this step.

        Priority: collision > out_of_bounds > success (a contact in the step that reaches the goal is
        a failure); time_out only where nothing terminated. A collision that touched a moving
        obstacle ends as ``moving_collision`` (``s.collision`` is set for both kinds). Inactive
        (held) worlds get no new event and keep their latched reason. The four events are one
        [N, 4] tensor in ``PRIORITY`` order, and the one that counts is the first true column of a
        row (where the running count of events is 1), so a step costs a fixed, small number of
        tensor ops. With ``out`` ([N, 4] bool, the buffer the state's four flags already view) the
        events are written there in place."""
        raw = torch.stack(
            (
                s.contact,
                (s.pos_xy.abs() > self.half).any(dim=-1),
                s.goal_dist < self.goal_radius_m,
                episode_length >= self.max_episode_length,
            ),
            dim=1,
        )
        first = raw & (raw.cumsum(dim=1) == 1)
        events = torch.logical_and(first, active.unsqueeze(-1), out=out)  # [N, 4]: at most one per row
        if out is None:
            s.collision, s.out_of_bounds, s.success, s.time_out = events.unbind(dim=1)
        reason = (events * self.codes).sum(dim=1)
        if self.moving:
            reason = torch.where(events[:, 0] & s.moving_contact, MOVING_COLLISION, reason)
        # Inactive rows have no event (code 0): they keep the latched reason.
        torch.where(active, reason, s.reason, out=s.reason)
        return events.any(dim=1)


def compute_terminations(
    s: NavState,
    active: torch.Tensor,
    episode_length: torch.Tensor,
    max_episode_length: int,
    goal_radius_m: float,
    half_x: float,
    half_y: float,
) -> torch.Tensor:
    """``Terminations`` once: set the events and ``s.reason`` of ``s`` in place, return the ended [N]."""
    terminations = Terminations(max_episode_length, goal_radius_m, half_x, half_y, s.pos_xy.device)
    return terminations(s, active, episode_length)
