"""Mapless memory: where the robot was, from its own odometry, in its current body frame. Torch-free:
one code path for the ``odom_history`` term (torch, on the env's position window) and the robot
(numpy, ``OdomHistory`` fed its odometry poses).

The env keeps the positions of the last W control steps and now (``NavState.pos_window`` [N, W + 1, 2],
W = ``env.position_window``; a new episode fills it with its start). The term reads ``points`` of them,
evenly spaced back to the oldest: the positions ``round((j + 1) W / points)`` steps ago, j = 0 ..
points - 1, each relative to the robot in its body frame, over ``dist_scale_m``. Nothing privileged:
a robot knows these from its wheel or visual odometry (drift aside).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np


def history_steps(window: int, points: int) -> list[int]:
    """Window indices (0 oldest .. window newest = now) of the ``points`` past positions read."""
    return [window - round((j + 1) * window / points) for j in range(points)]


def history_body(xp: Any, past_xy, pos_xy, yaw, dist_scale_m: float):
    """[N, 2 P] past positions ``past_xy`` [N, P, 2] relative to ``pos_xy`` [N, 2] in the body frame of
    ``yaw`` [N] (x forward, y left), over ``dist_scale_m``; ``xp``: numpy or torch."""
    d = past_xy - pos_xy[:, None, :]
    c, s = xp.cos(yaw)[:, None], xp.sin(yaw)[:, None]
    body = xp.stack((c * d[..., 0] + s * d[..., 1], -s * d[..., 0] + c * d[..., 1]), -1)
    return body.reshape(body.shape[0], -1) / dist_scale_m


class OdomHistory:
    """The robot's side of ``odom_history``: its last ``window + 1`` odometry positions.

    memory = OdomHistory(window=meta["obs"]["params"]["odom_history"]["window"])
    memory.reset((x, y))               # at each episode start
    memory.push((x, y))                # after every control step, before command()
    policy.command(scan, goal_body_xy, vel_body, omega, odom=memory, pose_odom=(x, y, yaw))
    """

    def __init__(self, window: int) -> None:
        self.window = int(window)
        self.xy: deque = deque(maxlen=self.window + 1)

    def reset(self, xy) -> None:
        """A new episode: the whole window holds its start, as in training."""
        self.xy.clear()
        self.xy.extend([np.asarray(xy, dtype=np.float64)[:2]] * (self.window + 1))

    def push(self, xy) -> None:
        """The position after a control step (odometry frame, m)."""
        if not self.xy:
            self.reset(xy)
        else:
            self.xy.append(np.asarray(xy, dtype=np.float64)[:2])

    def past(self, points: int) -> np.ndarray:
        """[P, 2] the positions the term reads (``history_steps``)."""
        window = np.stack(self.xy)
        return window[history_steps(self.window, points)]
