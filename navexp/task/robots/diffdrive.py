"""Differential-drive robot: forward velocity and yaw rate only, no sideways motion.

Action [N, 2] in [-1, 1]: (forward, yaw rate); ``forward * max_lin_vel_mps`` m/s along the heading,
``yaw_rate * max_ang_vel_radps`` rad/s.

How the simulator enforces "no sideways motion" (every physics substep, both backends): the base
keeps its slide x / slide y / hinge z joints, and three velocity servos act on it:
- ``forward``: a servo with a SITE transmission on the site ``base`` at the robot centre, gear
  ``1 0 0 0 0 0``: it drives the body-frame forward velocity (the site frame turns with the robot);
- ``lateral``: the same along ``0 1 0 0 0 0`` with its target held at 0, a stiff body-frame lateral
  servo (``params.lateral_kv``, default 1000 N s/m). Turning at omega with speed v needs the
  centripetal force m*omega*v; the servo's steady-state slip is m*omega*v/kv (1 kg * 2 rad/s *
  1.5 m/s / 1000 = 0.003 m/s). ``implicitfast`` integrates velocity servos implicitly, so a large
  kv is stable;
- ``yaw_rate``: the hinge servo, as for the holonomic robot.
A site servo's force direction depends on the yaw, so the implicit velocity derivative couples the
x and y slides; the scene gives this robot's body a negligible product of inertia so MuJoCo keeps
that coupling (``Robot.coupled_inertia``, see ``navexp.sim.scene.build_mjcf``).

Semi-implicit Euler moves the robot along the heading it had when a substep's forces were computed,
and turns it by omega*dt in the same substep; a velocity read together with the *new* heading
(``NavState.vel_body``) therefore shows a lateral component of -v*sin(omega*dt) (-0.06 m/s at
1.5 m/s, 2 rad/s and dt = 0.02 s) that is a sampling effect, not slip: it shrinks with
``env.sim.timestep_s`` and the path stays that of a robot without sideways motion.
"""

from __future__ import annotations

import torch

from navexp.task.robots.base import Robot, register_robot


@register_robot
class DiffDrive(Robot):
    name = "diffdrive"
    action_names = ("forward", "yaw_rate")
    action_units = ("m/s", "rad/s")
    linear_axes = (0,)
    default_params = {"lateral_kv": 1000.0, "lateral_force_limit_n": 200.0}
    positive_params = ("lateral_kv", "lateral_force_limit_n")  # <= 0: the robot slides sideways
    coupled_inertia = True

    def action_scale(self) -> list[float]:
        return [self.max_lin_vel_mps, self.max_ang_vel_radps]

    def sites_mjcf(self) -> str:
        return '      <site name="base" pos="0 0 0" size="0.01" group="5"/>'

    def actuators_mjcf(self) -> str:
        c, p = self.cfg, self.params
        v, w = self.max_lin_vel_mps, self.max_ang_vel_radps
        f, tq, fl = c.lin_force_limit_n, c.ang_torque_limit_nm, p["lateral_force_limit_n"]
        return f"""    <velocity name="forward" site="base" gear="1 0 0 0 0 0" kv="{c.lin_kv}"
              ctrllimited="true" ctrlrange="{-v} {v}" forcelimited="true" forcerange="{-f} {f}"/>
    <velocity name="lateral" site="base" gear="0 1 0 0 0 0" kv="{p["lateral_kv"]}" ctrllimited="false"
              forcelimited="true" forcerange="{-fl} {fl}"/>
    <velocity name="yaw_rate" joint="jz" kv="{c.ang_kv}" ctrllimited="true" ctrlrange="{-w} {w}"
              forcelimited="true" forcerange="{-tq} {tq}"/>"""

    def write_ctrl(self, action: torch.Tensor, qpos: torch.Tensor, ctrl: torch.Tensor) -> None:
        # Body-frame servos: no rotation here, the engine turns the site frame with the robot.
        ctrl[:, 0] = action[:, 0] * self.max_lin_vel_mps
        ctrl[:, 1] = 0.0  # lateral servo target: no sideways motion
        ctrl[:, 2] = action[:, 1] * self.max_ang_vel_radps
