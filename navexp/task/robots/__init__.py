"""Robots: each module registers one ``Robot`` (action width and meaning, actuators, control mapping).

``make_robot(env.robot)`` builds the one a config names (``env.robot.name``, the ``robot`` config
group). Adding a robot: a module in this package with a ``@register_robot`` ``Robot`` subclass (every
module here is imported below, which registers it) and a ``configs/robot/<name>.yaml``.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from navexp.task.robots.base import ROBOTS, Robot, register_robot

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")  # registers its robot

DEFAULT_ROBOT = "holonomic"
"""Robot of a config without ``name`` (runs stored before robots were a config group)."""

__all__ = ["ROBOTS", "Robot", "make_robot", "register_robot", "robot_name"]


def robot_name(robot_cfg: Any) -> str:
    """The robot a config names (``DEFAULT_ROBOT`` when it names none)."""
    name = getattr(robot_cfg, "name", None)
    return str(name) if name is not None else DEFAULT_ROBOT


def make_robot(robot_cfg: Any) -> Robot:
    """Build the robot ``robot_cfg.name`` from its config; an unknown name lists the valid ones."""
    name = robot_name(robot_cfg)
    if name not in ROBOTS:
        raise ValueError(
            f"env.robot.name={name!r} is not a robot; valid: {sorted(ROBOTS)} (select one with robot=<name>)"
        )
    return ROBOTS[name](robot_cfg)
