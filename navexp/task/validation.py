"""Checks of the env config that its schema cannot express; they run before anything is built.

``validate_env_cfg`` guards the env group: NavEnv calls it unless the caller has validated the whole
run already (``navexp.config.validation.validate_run_cfg`` calls it once per run).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import yaml

from navexp.sim.base import BACKENDS, backend_choices
from navexp.sim.lidar import RealismSpec, beam_spacing_deg
from navexp.task.checks import check as _check
from navexp.task.checks import check_all_finite
from navexp.task.checks import check_range as _check_range
from navexp.task.env_cfg import RobotCfg
from navexp.task.maps.families import FAMILIES, REGISTRY, MapSpec, wall_slots_needed
from navexp.task.maps.families.cluttered import check_slots as check_cluttered_slots
from navexp.task.maps.grid_path import grid_shape
from navexp.task.maps.moving import check_dynamic_cfg
from navexp.task.maps.random_source import SPLITS
from navexp.task.maps.scenario_files import resolve_scenario_path
from navexp.task.robots import ROBOTS, robot_name

FINITE_EXEMPT: frozenset[str] = frozenset()
"""Env keys (dotted, below ``env.``) that may be NaN or inf; none today: every float is a size, a
range, a time, a gain or a weight, all of which must be finite."""

MAX_PATH_CELLS_PER_SIDE = 256
"""Most occupancy-grid cells of the free-path check along a room side (``maps.path_cell_m`` >= the
longer side / this): 0.03125 m cells in the 8 m room, rooms up to 51 m at 0.2 m (0.001 m cells asked
for 197 GB). The check's working memory stays that of the default grid (``generate`` draws fewer
layouts a chunk on finer grids); a goal distance field kept per layout is 2 bytes a cell (128 KB at
256 x 256)."""
SERVO_KEYS = ("lin_kv", "ang_kv", "lin_force_limit_n", "ang_torque_limit_nm")
"""``env.robot`` gains and force limits of the velocity servos; each must be > 0 (a negative gain
pushes the robot away from its command, 0 never moves it)."""


def validate_env_cfg(cfg: Any) -> None:
    """Raise ValueError naming the key, the value and what is allowed for an impossible env config."""
    check_all_finite(cfg, "env", FINITE_EXEMPT)  # first: inf passes every range check below
    _check_device(cfg)
    _check_room_and_robot(cfg.room, cfg.robot)
    _check_obstacles(cfg.obstacles, cfg.robot)
    _check_spawn(cfg)
    _check_lidar(cfg.lidar, cfg.robot)
    _check_sim(cfg.sim)
    _check_episode(cfg)
    if "dynamic" in cfg:  # absent in a checkpoint's config of before moving obstacles
        check_dynamic_cfg(cfg.dynamic)
    if "maps" in cfg:  # absent in a checkpoint's config of before map families (then: random only)
        _validate_maps(cfg)
    if cfg.get("scenarios"):
        check_scenario_file(str(cfg.scenarios))


def _check_device(cfg: Any) -> None:
    """``num_envs`` and ``device`` (a CUDA device only where CUDA is)."""
    _check(cfg.num_envs >= 1, "num_envs", cfg.num_envs, "an integer >= 1")
    dev = str(cfg.device)
    _check(
        dev in ("auto", "cpu", "cuda") or (dev.startswith("cuda:") and dev[5:].isdigit()),
        "device",
        dev,
        "auto | cpu | cuda | cuda:N",
    )
    _check_cuda(dev)


def _check_room_and_robot(room: Any, robot: Any) -> None:
    """Room sizes, the robot's body, velocities, servo gains, own params and safety filter: all > 0
    (the filter's horizon and margin >= 0)."""
    for key in ("size_x_m", "size_y_m", "wall_thickness_m", "wall_height_m"):
        _check(getattr(room, key) > 0, f"room.{key}", getattr(room, key), "> 0")
    for key in ("radius_m", "half_height_m", "mass_kg", "max_lin_vel_mps", "max_ang_vel_radps"):
        _check(getattr(robot, key) > 0, f"robot.{key}", getattr(robot, key), "> 0")
    for key in SERVO_KEYS:
        value = getattr(robot, key, getattr(RobotCfg, key))
        _check(value > 0, f"robot.{key}", value, "> 0 (a velocity servo's gain or force limit)")
    _check_robot_params(robot)
    for key in ("safety_horizon_s", "safety_margin_m"):
        _check(getattr(robot, key, 0.0) >= 0, f"robot.{key}", getattr(robot, key, 0.0), ">= 0")


def _check_obstacles(obst: Any, robot: Any) -> None:
    """Slot counts, per-episode counts within the slots, sizes, and a height the LiDAR plane cuts."""
    _check(obst.cylinder_slots >= 0, "obstacles.cylinder_slots", obst.cylinder_slots, ">= 0")
    _check(obst.box_slots >= 0, "obstacles.box_slots", obst.box_slots, ">= 0")
    walls = getattr(obst, "wall_slots", 0)
    _check(walls >= 0, "obstacles.wall_slots", walls, ">= 0")
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


def _check_spawn(cfg: Any) -> None:
    """Goal radius, robot size with its spawn clearance and the start-goal distance fit in the room."""
    room, robot = cfg.room, cfg.robot
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


def _check_lidar(lidar: Any, robot: Any) -> None:
    """Beams, field of view, a range beyond the robot's own radius, then the realism keys."""
    _check(lidar.num_beams >= 1, "lidar.num_beams", lidar.num_beams, "an integer >= 1")
    _check(0 < lidar.fov_deg <= 360, "lidar.fov_deg", lidar.fov_deg, "0 < fov_deg <= 360")
    _check(
        lidar.max_range_m > robot.radius_m,
        "lidar.max_range_m",
        lidar.max_range_m,
        f"> robot.radius_m ({robot.radius_m})",
    )
    _check_lidar_realism(lidar)


def _check_sim(sim: Any) -> None:
    """A known backend, its threads, a positive timestep and decimation, and its buffer sizes."""
    known = sim.backend == "auto" or sim.backend in BACKENDS or ":" in str(sim.backend)
    _check(known, "sim.backend", sim.backend, backend_choices())
    _check(sim.nthread is None or sim.nthread >= 1, "sim.nthread", sim.nthread, "null or an integer >= 1")
    _check(sim.timestep_s > 0, "sim.timestep_s", sim.timestep_s, "> 0")
    _check(sim.decimation >= 1, "sim.decimation", sim.decimation, "an integer >= 1")
    _check(sim.nconmax_per_world >= 1, "sim.nconmax_per_world", sim.nconmax_per_world, ">= 1")
    _check(sim.njmax_per_world >= 1, "sim.njmax_per_world", sim.njmax_per_world, ">= 1")


def _check_episode(cfg: Any) -> None:
    """An episode of at least one control step and longer than the LiDAR latency; the position window
    and the fault-check period."""
    control_dt = cfg.sim.timestep_s * cfg.sim.decimation
    _check(
        cfg.episode_length_s >= control_dt,
        "episode_length_s",
        cfg.episode_length_s,
        f">= one control period ({control_dt} s)",
    )
    steps = math.ceil(cfg.episode_length_s / control_dt - 1e-9)  # NavEnv.max_episode_length
    latency = getattr(cfg.lidar, "latency_steps", 0)
    _check(
        latency < steps,
        "lidar.latency_steps",
        latency,
        f"an integer in [0, {steps - 1}]: shorter than an episode ({steps} control steps of "
        f"{control_dt:g} s)",
    )
    _check(cfg.position_window >= 1, "position_window", cfg.position_window, "an integer >= 1")
    _check(
        cfg.check_every is None or cfg.check_every >= 1,
        "check_every",
        cfg.check_every,
        "null (once per PPO rollout) or an integer >= 1",
    )


def _validate_maps(cfg: Any) -> None:
    """The map families (env.maps): known names, weights, seeds, the path check's cell, and, for the
    families with weight only, their own keys (each one's registered ``check``) and the wall and
    cylinder slots they need."""
    maps, obst = cfg.maps, cfg.obstacles
    for name, w in maps.weights.items():
        _check(name in FAMILIES, f"maps.weights.{name}", w, f"a family of {' | '.join(FAMILIES)}")
        _check(w >= 0, f"maps.weights.{name}", w, ">= 0")
    total = sum(maps.weights.values())  # 1e308 + 1e308 overflows to inf: every share would read 0
    _check(
        0 < total < math.inf,
        "maps.weights",
        dict(maps.weights),
        f"at least one weight > 0 and a finite sum (they are normalised by it; here {total})",
    )
    _check(maps.rng in ("stream", "hashed"), "maps.rng", maps.rng, "stream | hashed")
    _check(maps.split in SPLITS, "maps.split", maps.split, " | ".join(SPLITS))
    _check(maps.path_margin_m >= 0, "maps.path_margin_m", maps.path_margin_m, ">= 0 (0: plain metres)")
    _check(maps.path_margin_cost >= 0, "maps.path_margin_cost", maps.path_margin_cost, ">= 0")
    _check(maps.wall_half_thickness_m > 0, "maps.wall_half_thickness_m", maps.wall_half_thickness_m, "> 0")
    _check_range("maps.wall_thickness_scale", maps.wall_thickness_scale, 1e-3)
    spec = MapSpec.from_env_cfg(cfg)
    _check_path_cell(cfg, spec)
    for name, _ in spec.active_families:  # a family that is off draws nothing: its keys are not checked
        family = REGISTRY[name]
        if family.cfg is not None:
            family.check(getattr(spec.cfg, name), cfg)
    for name, _ in spec.active_families:
        need = wall_slots_needed(spec, name)
        _check(
            obst.wall_slots >= need,
            "obstacles.wall_slots",
            obst.wall_slots,
            f">= {need} for map family {name} (env.maps.weights.{name} > 0)",
        )
        if name == "cluttered":
            check_cluttered_slots(spec.cfg.cluttered, cfg)


def _check_path_cell(cfg: Any, spec: MapSpec) -> None:
    """``maps.path_cell_m``: fine enough that the free-path check cannot step over the thinnest obstacle
    the config draws, and at most MAX_PATH_CELLS_PER_SIDE cells along a room side (never above the robot
    radius, so the range is never empty).

    The check (navexp.task.maps.grid_path) marks a cell free when its centre keeps the robot radius r
    from every obstacle: an obstacle of thickness w becomes a blocked band w + 2 r wide, and every move
    of the grid passes through side-neighbouring free cells, one cell c apart (the room side over a
    whole number of cells: c = path_cell_m in the 8 m room). The start's and goal's cells count as free
    even when their centres are not (a start keeps r from obstacles, its cell centre lies within 0.71 c
    of it), so a step over the band needs 1.71 c >= w + 2 r: the check is exact while 1.71 c < 2 r +
    w_min, w_min the thinnest obstacle (``_thinnest_obstacle_m``: 0.1 m walls by default). At the
    default 0.2 m radius that allows cells up to 0.29 m, at 0.15 m up to 0.23 m: the default 0.2 m
    serves both; a 0.1 m robot needs 0.17 m."""
    maps, room, r = cfg.maps, cfg.room, cfg.robot.radius_m
    longest = max(room.size_x_m, room.size_y_m)
    finest = min(longest / MAX_PATH_CELLS_PER_SIDE, r)
    thinnest = _thinnest_obstacle_m(cfg, spec)
    coarsest = (2 * r + thinnest) / 1.71
    # The grid's own cell: the room side over a whole number of cells (at most 1.25 path_cell_m).
    cell = (
        max(grid_shape(room.size_x_m / 2, room.size_y_m / 2, maps.path_cell_m)[2:])
        if maps.path_cell_m > 0
        else 0
    )
    _check(
        finest <= maps.path_cell_m and cell < coarsest,
        "maps.path_cell_m",
        maps.path_cell_m,
        f"{finest:.4g} <= path_cell_m < {coarsest:.4g}: below (2 x robot.radius_m ({r}) + the thinnest "
        f"obstacle ({thinnest:g} m)) / 1.71, so the free-path check cannot step over an obstacle, and at "
        f"most {MAX_PATH_CELLS_PER_SIDE} cells along the room's {longest} m side",
    )


def _thinnest_obstacle_m(cfg: Any, spec: MapSpec) -> float:
    """The thinnest obstacle the env config draws: the room's walls, the random family's cylinders and
    boxes, the structured families' walls (at their thinnest scale), the grid family's cells, the
    cluttered family's cylinders and the rooms family's furniture. A scenario file's obstacles are not
    known here: a wall thinner than these needs a finer ``path_cell_m`` (docs/configuration.md)."""
    maps, obst = cfg.maps, cfg.obstacles
    sizes = [cfg.room.wall_thickness_m, 2 * obst.cylinder_radius_m[0], 2 * obst.box_half_size_m[0]]
    active = {name for name, _ in spec.active_families}
    if active & {"corridor", "staggered", "cul_de_sac", "rooms"}:
        sizes.append(2 * maps.wall_half_thickness_m * maps.wall_thickness_scale[0])
    if "rooms" in active:  # its furniture
        sizes += [2 * spec.cfg.rooms.furniture_half_m[0], 2 * spec.cfg.rooms.furniture_radius_m[0]]
    if "grid" in active:
        sizes.append(spec.cfg.grid.cell_m)
    if "cluttered" in active:
        sizes.append(2 * spec.cfg.cluttered.radius_m[0])
    return float(min(sizes))


def _check_robot_params(robot: Any) -> None:
    """The robot's own ``params`` that must be > 0 (``Robot.positive_params``: the gain and force limit
    of diffdrive's lateral servo); an unknown robot or key is left to ``make_robot``, which lists the
    valid ones."""
    cls = ROBOTS.get(robot_name(robot))
    if cls is None:
        return
    params = getattr(robot, "params", None) or {}
    for key in cls.positive_params:
        value = params.get(key, cls.default_params[key])
        ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
        _check(ok, f"robot.params.{key}", value, f"a number > 0 (robot {cls.name})")


def _check_lidar_realism(lidar: Any) -> None:
    """The realism keys of ``env.lidar`` (navexp.sim.lidar.LidarRealism); a key an older run's stored
    config lacks is checked at its default."""
    latency = getattr(lidar, "latency_steps", 0)
    _check(
        isinstance(latency, int) and not isinstance(latency, bool) and latency >= 0,
        "lidar.latency_steps",
        latency,
        "an integer >= 0 (control steps)",
    )
    p = RealismSpec.from_lidar_cfg(lidar)
    max_r = float(lidar.max_range_m)
    _check(p.range_noise_std_m >= 0, "lidar.range_noise_std_m", p.range_noise_std_m, ">= 0 (m)")
    _check(0 <= p.dropout_prob < 1, "lidar.dropout_prob", p.dropout_prob, "0 <= dropout_prob < 1")
    spacing = beam_spacing_deg(int(lidar.num_beams), float(lidar.fov_deg))
    _check(
        0 <= p.jitter_deg <= spacing,
        "lidar.jitter_deg",
        p.jitter_deg,
        f"0 <= jitter_deg <= the beam spacing ({spacing:g} deg for {lidar.num_beams} beams over "
        f"{lidar.fov_deg:g} deg)",
    )
    _check(
        abs(p.range_bias_m) < max_r, "lidar.range_bias_m", p.range_bias_m, f"|bias| < max_range_m ({max_r})"
    )
    _check(0 < p.range_scale <= 2, "lidar.range_scale", p.range_scale, "0 < range_scale <= 2")
    _check(
        0 <= p.min_range_m < max_r, "lidar.min_range_m", p.min_range_m, f"0 <= value < max_range_m ({max_r})"
    )
    _check(
        0 <= p.resolution_m < max_r,
        "lidar.resolution_m",
        p.resolution_m,
        f"0 <= value < max_range_m ({max_r})",
    )


def _check_cuda(device: str) -> None:
    """A CUDA device on a machine without CUDA fails here, before a preset or a buffer is chosen."""
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(
            f"env config: device={device!r} but CUDA is not available on this machine; "
            f"allowed here: auto | cpu"
        )


def check_scenario_file(name_or_path: str) -> None:
    """Parse a scenario YAML; a syntax error names the file, line and column (not ``<unicode string>``)."""
    file = resolve_scenario_path(name_or_path)
    try:
        with open(file) as f:
            yaml.safe_load(f)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "unknown position"
        problem = getattr(e, "problem", None) or str(e)
        raise ValueError(
            f"env.scenarios={name_or_path!r}: {file} is not valid YAML at {where}: {problem}"
        ) from None
