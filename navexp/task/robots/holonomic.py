"""Holonomic robot (the default): forward, sideways and yaw-rate velocity servos.

Action [N, 3] in [-1, 1]: body-frame (forward, left, yaw rate). The servos act on the world-frame
slide joints, so each control step the body-frame command is rotated into the world frame at the
current yaw: ``ctrl[:, :2] = R(yaw) (a_xy * v_max)``, ``ctrl[:, 2] = a_z * w_max``.
"""

from __future__ import annotations

import torch

from navexp.sim.layout import rotation_matrices
from navexp.task.robots.base import Robot, register_robot


@register_robot
class Holonomic(Robot):
    name = "holonomic"
    action_names = ("forward", "left", "yaw_rate")
    action_units = ("m/s", "m/s", "rad/s")

    def action_scale(self) -> list[float]:
        return [self.max_lin_vel_mps, self.max_lin_vel_mps, self.max_ang_vel_radps]

    def actuators_mjcf(self) -> str:
        c = self.cfg
        v, w = self.max_lin_vel_mps, self.max_ang_vel_radps
        f, tq = c.lin_force_limit_n, c.ang_torque_limit_nm
        return f"""    <velocity name="vx" joint="jx" kv="{c.lin_kv}" ctrllimited="true" ctrlrange="{-v} {v}"
              forcelimited="true" forcerange="{-f} {f}"/>
    <velocity name="vy" joint="jy" kv="{c.lin_kv}" ctrllimited="true" ctrlrange="{-v} {v}"
              forcelimited="true" forcerange="{-f} {f}"/>
    <velocity name="wz" joint="jz" kv="{c.ang_kv}" ctrllimited="true" ctrlrange="{-w} {w}"
              forcelimited="true" forcerange="{-tq} {tq}"/>"""

    def write_ctrl(self, action: torch.Tensor, qpos: torch.Tensor, ctrl: torch.Tensor) -> None:
        # Body-frame command -> world-frame servo targets: v_world = R(yaw) (a_xy * v_max), the sum
        # over j of R[i, j] v[j] written straight into the servo targets.
        ctrl[:, 2] = action[:, 2] * self.max_ang_vel_radps
        v_body = (action[:, :2] * self.max_lin_vel_mps).unsqueeze(1)  # [N, 1, 2]
        torch.sum(rotation_matrices(qpos[:, 2]) * v_body, dim=-1, out=ctrl[:, :2])
