"""The robot contract: action width and meaning, MJCF actuators, and the action -> control mapping.

A robot is one module with one ``Robot`` subclass registered by name (``@register_robot``) plus one
YAML in ``configs/robot/``. Every robot shares the planar base the scene builds (slide x, slide y,
hinge z; ``qpos``/``qvel`` = [x, y, yaw] / [vx, vy, wz] in the world frame, one sphere collider,
the LiDAR at its centre); a robot adds its actuators (and any sites they need) and maps a policy
action [N, A] in [-1, 1] to the simulator's ``ctrl`` [N, nu] every control step. The env, the
observation terms, export and deploy read the action width, names, units and scales from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from navexp.task.env_cfg import RobotCfg

ROBOTS: dict[str, type[Robot]] = {}
"""Registered robot classes by name (``env.robot.name``)."""


def register_robot(cls: type[Robot]) -> type[Robot]:
    """Class decorator: register ``cls`` under ``cls.name``; a duplicate name raises."""
    if cls.name in ROBOTS:
        raise ValueError(f"robot '{cls.name}' is already registered ({ROBOTS[cls.name].__module__})")
    ROBOTS[cls.name] = cls
    return cls


class Robot:
    """A planar robot's actuation, built from the ``env.robot`` config (``RobotCfg``)."""

    name: ClassVar[str]
    """Registry key, the value of ``env.robot.name``."""
    action_names: ClassVar[tuple[str, ...]]
    """Meaning of each action component, in order (body frame)."""
    action_units: ClassVar[tuple[str, ...]]
    """Unit of each component after scaling."""
    linear_axes: ClassVar[tuple[int, ...]] = (0, 1)
    """Action components that command the body-frame linear velocity, (forward[, left]) in that order:
    the ones the safety filter scales (``navexp.task.robots.safety_filter``)."""
    default_params: ClassVar[dict[str, Any]] = {}
    """Robot-specific settings (``env.robot.params``) and their defaults."""
    positive_params: ClassVar[tuple[str, ...]] = ()
    """Keys of ``default_params`` that must be numbers > 0 (gains, force limits), checked with the env
    config before anything is built (``navexp.task.validation``)."""
    coupled_inertia: ClassVar[bool] = False
    """True when an actuator acts along a body-frame direction (a site transmission): see
    ``navexp.sim.scene.build_mjcf``, which then keeps the x-y coupling of the velocity derivative."""

    def __init__(self, cfg: Any) -> None:
        """Read the shared limits and resolve ``params`` over ``default_params`` (unknown keys raise)."""
        self.cfg = cfg
        self.max_lin_vel_mps = float(cfg.max_lin_vel_mps)
        self.max_ang_vel_radps = float(cfg.max_ang_vel_radps)
        # A config stored before the filter existed lacks its keys: the schema's defaults (off).
        self.safety_horizon_s = float(getattr(cfg, "safety_horizon_s", RobotCfg.safety_horizon_s))
        self.safety_margin_m = float(getattr(cfg, "safety_margin_m", RobotCfg.safety_margin_m))
        self.params = self.resolve_params(getattr(cfg, "params", None))

    @classmethod
    def resolve_params(cls, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """``default_params`` updated with ``params``; a key the robot does not have raises KeyError."""
        params = dict(params or {})
        unknown = sorted(set(params) - set(cls.default_params))
        if unknown:
            raise KeyError(
                f"env.robot.params has unknown key(s) {unknown} for robot '{cls.name}'; "
                f"allowed: {sorted(cls.default_params) or 'none'}"
            )
        return {**cls.default_params, **params}

    @property
    def num_actions(self) -> int:
        """Width A of the policy action."""
        return len(self.action_names)

    def action_scale(self) -> list[float]:
        """[A] physical value of action 1.0 per component (units ``action_units``)."""
        raise NotImplementedError

    def actuators_mjcf(self) -> str:
        """The ``<actuator>`` children (nu of them) driving the base joints ``jx``, ``jy``, ``jz``."""
        raise NotImplementedError

    def sites_mjcf(self) -> str:
        """Extra elements inside the robot body (sites the actuators act on); none by default."""
        return ""

    def write_ctrl(self, action: torch.Tensor, qpos: torch.Tensor, ctrl: torch.Tensor) -> None:
        """Write the servo targets for clipped actions [N, A] in [-1, 1] at poses qpos [N, 3] into the
        simulator's ctrl [N, nu] (in place: on the warp backend ctrl is a view of the engine's array)."""
        raise NotImplementedError

    def action_meta(self) -> dict[str, Any]:
        """The ``action`` block of the export metadata: how a robot turns the policy output into a
        command (``command = clip(output, -1, 1) * scale``, then the safety filter where it is on)."""
        meta = {
            "robot": self.name,
            "order": list(self.action_names),
            "clip": [-1.0, 1.0],
            "scale": self.action_scale(),
            "units": list(self.action_units),
            "frame": "body",
        }
        if self.safety_horizon_s > 0:
            meta["safety_filter"] = {
                "horizon_s": self.safety_horizon_s,
                "margin_m": self.safety_margin_m,
                "radius_m": float(self.cfg.radius_m),
                "linear_axes": list(self.linear_axes),
                "max_lin_vel_mps": self.max_lin_vel_mps,
                "rule": "scale the linear components by the first fraction of a sweep of the disc "
                "(radius_m + margin_m) along command * horizon_s that touches a scan point (1 if none); "
                "inside the margin first remove the approach to the nearest return, then sweep with the "
                "present clearance less 1 mm for the returns inside the margin and radius_m + margin_m "
                "for the others (navexp/deploy/safety_filter.py)",
            }
        return meta
