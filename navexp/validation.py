"""Checks of the env config that a schema cannot express; they run before any simulation is built."""

from __future__ import annotations

from typing import Any


def _check(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ValueError(f"env config: {key}={value!r} is invalid; allowed: {allowed}")


def _check_range(key: str, value: list, lo: float) -> None:
    _check(
        len(value) == 2 and lo <= value[0] <= value[1],
        key,
        list(value),
        f"[min, max] with {lo} <= min <= max",
    )


def validate_env_cfg(cfg: Any) -> None:
    """Raise ValueError naming the key, the value and what is allowed for an impossible env config."""
    _check(cfg.num_envs >= 1, "num_envs", cfg.num_envs, "an integer >= 1")
    dev = str(cfg.device)
    _check(
        dev in ("auto", "cpu", "cuda") or (dev.startswith("cuda:") and dev[5:].isdigit()),
        "device",
        dev,
        "auto | cpu | cuda | cuda:N",
    )
    room, obst, robot, lidar, sim = cfg.room, cfg.obstacles, cfg.robot, cfg.lidar, cfg.sim
    for key in ("size_x_m", "size_y_m", "wall_thickness_m", "wall_height_m"):
        _check(getattr(room, key) > 0, f"room.{key}", getattr(room, key), "> 0")
    for key in ("radius_m", "half_height_m", "mass_kg", "max_lin_vel_mps", "max_ang_vel_radps"):
        _check(getattr(robot, key) > 0, f"robot.{key}", getattr(robot, key), "> 0")
    _check(obst.cylinder_slots >= 0, "obstacles.cylinder_slots", obst.cylinder_slots, ">= 0")
    _check(obst.box_slots >= 0, "obstacles.box_slots", obst.box_slots, ">= 0")
    _check_range("obstacles.cylinder_count", obst.cylinder_count, 0)
    _check_range("obstacles.box_count", obst.box_count, 0)
    _check(
        obst.cylinder_count[1] <= obst.cylinder_slots,
        "obstacles.cylinder_count",
        list(obst.cylinder_count),
        f"max <= obstacles.cylinder_slots ({obst.cylinder_slots})",
    )
    _check(
        obst.box_count[1] <= obst.box_slots,
        "obstacles.box_count",
        list(obst.box_count),
        f"max <= obstacles.box_slots ({obst.box_slots})",
    )
    _check_range("obstacles.cylinder_radius_m", obst.cylinder_radius_m, 1e-3)
    _check_range("obstacles.box_half_size_m", obst.box_half_size_m, 1e-3)
    _check(
        obst.height_m > 2 * robot.half_height_m,
        "obstacles.height_m",
        obst.height_m,
        f"> 2 * robot.half_height_m ({2 * robot.half_height_m}) so the LiDAR plane cuts obstacles",
    )
    half_min = min(room.size_x_m, room.size_y_m) / 2
    _check(
        cfg.goal_radius_m > 0 and cfg.goal_radius_m < half_min,
        "goal_radius_m",
        cfg.goal_radius_m,
        f"0 < goal_radius_m < half the smaller room side ({half_min})",
    )
    _check(
        robot.radius_m + cfg.spawn_clearance_m < half_min,
        "robot.radius_m",
        robot.radius_m,
        f"radius + spawn_clearance_m < half the smaller room side ({half_min})",
    )
    diag = (room.size_x_m**2 + room.size_y_m**2) ** 0.5
    _check(
        0 <= cfg.min_start_goal_dist_m < diag - 2 * robot.radius_m,
        "min_start_goal_dist_m",
        cfg.min_start_goal_dist_m,
        f"0 <= value < room diagonal minus robot diameter ({diag:.2f})",
    )
    _check(cfg.spawn_clearance_m >= 0, "spawn_clearance_m", cfg.spawn_clearance_m, ">= 0")
    _check(lidar.num_beams >= 1, "lidar.num_beams", lidar.num_beams, "an integer >= 1")
    _check(0 < lidar.fov_deg <= 360, "lidar.fov_deg", lidar.fov_deg, "0 < fov_deg <= 360")
    _check(
        lidar.max_range_m > robot.radius_m,
        "lidar.max_range_m",
        lidar.max_range_m,
        f"> robot.radius_m ({robot.radius_m})",
    )
    _check(lidar.range_noise_std_m >= 0, "lidar.range_noise_std_m", lidar.range_noise_std_m, ">= 0")
    _check(sim.backend in ("auto", "warp", "mujoco"), "sim.backend", sim.backend, "auto | warp | mujoco")
    _check(sim.timestep_s > 0, "sim.timestep_s", sim.timestep_s, "> 0")
    _check(sim.decimation >= 1, "sim.decimation", sim.decimation, "an integer >= 1")
    _check(sim.nconmax_per_world >= 1, "sim.nconmax_per_world", sim.nconmax_per_world, ">= 1")
    _check(sim.njmax_per_world >= 1, "sim.njmax_per_world", sim.njmax_per_world, ">= 1")
    control_dt = sim.timestep_s * sim.decimation
    _check(
        cfg.episode_length_s >= control_dt,
        "episode_length_s",
        cfg.episode_length_s,
        f">= one control period ({control_dt} s)",
    )
    _check(cfg.position_window >= 1, "position_window", cfg.position_window, "an integer >= 1")
    _check(
        cfg.check_every is None or cfg.check_every >= 1,
        "check_every",
        cfg.check_every,
        "null (once per PPO rollout) or an integer >= 1",
    )
