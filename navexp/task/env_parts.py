"""The parts NavEnv wires, built from an experiment config before the simulator.

``build_env_parts(cfg)`` turns the ``env``, ``obs`` and ``reward`` groups into plain built objects: the
robot, the sizes terms read, the observation and reward managers, the layout and map specs, a scenario
file's layouts (with their goal distance fields), the layout pool, the simulator's build values, the
LiDAR realism model and the safety filter. Terms are resolved first and nothing here compiles a kernel,
so a config error costs no simulator build.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch

from navexp.sim import SimSpec, beam_angles, resolve_backend, resolve_device
from navexp.sim.layout import Layout
from navexp.sim.lidar import LidarRealism, RealismSpec
from navexp.sim.scene import SceneSpec
from navexp.task.maps import MapSpec
from navexp.task.maps.grid_path import paths_and_fields
from navexp.task.maps.pool import LayoutPool
from navexp.task.maps.random_family import LayoutSpec
from navexp.task.maps.scenario_files import load_scenario_file, resolve_scenario_path, scenario_entry_names
from navexp.task.obs.manager import ObservationManager
from navexp.task.rewards.manager import RewardManager
from navexp.task.robots import Robot, make_robot
from navexp.task.robots.safety_filter import SafetyFilter
from navexp.task.state import EnvDims

POOL_TOP_UP_STEPS = 64
"""Most control steps between layout-pool top-ups: the pool holds worlds x min(check_every, this)
layouts in reserve (a larger check_every adds a top-up sync every this many steps instead)."""


@dataclass
class EnvParts:
    """Everything NavEnv wires except the simulator and the episode buffers."""

    num_envs: int
    device: torch.device
    robot: Robot
    """Action width and meaning, and the action -> ctrl mapping (``navexp.task.robots``)."""
    dims: EnvDims
    """Sizes and scales the terms declare widths and normalise with."""
    control_dt: float
    """Control period (s): ``sim.timestep_s * sim.decimation``."""
    max_episode_length: int
    """Control steps of an episode (``episode_length_s / control_dt``, rounded up)."""
    obs_manager: ObservationManager
    reward_manager: RewardManager
    needs_moving_ttc: bool
    """An active term reads ``moving_ttc`` (the time to contact with a moving obstacle)."""
    needs_clearance: bool
    """An active term reads the analytic nearest-surface query (``clearance``, ``nearest_dir_body``)."""
    needs_path: bool
    """An active term reads ``path_dist`` or ``goal_field``: every layout keeps its goal distance field."""
    layout_spec: LayoutSpec
    map_spec: MapSpec
    scenarios: Layout | None
    """[S] a scenario file's layouts on the device (goal fields when ``needs_path``); None: drawn ones."""
    scenario_entries: int
    """Entries of the scenario file: row j of ``scenarios`` plays entry j mod this (a jittered entry's
    cases fill several rows; navexp.task.maps.scenario_jitter)."""
    check_every: int
    """Control steps between fault checks (the step path's one host sync)."""
    pool_every: int
    """Control steps between layout-pool top-ups (the fault checks, or more often)."""
    generator: torch.Generator
    """The layout and LiDAR noise generator, unseeded (``NavEnv.seed`` seeds it)."""
    layout_pool: LayoutPool
    """The device-side layouts resets take, empty until seeded."""
    layout_seed: int
    """``seed + env.layout_seed_offset``: the generator's seed."""
    backend: str
    """The simulator backend, resolved for the device (a registered name or ``module:Class``)."""
    sim_spec: SimSpec
    lidar_realism: LidarRealism
    """Clean scan -> the policy's scan (noise, dropout, jitter, bias/scale, min range, quantisation,
    latency), drawing from ``generator``."""
    safety_filter: SafetyFilter | None
    """Scales the commanded linear velocity on the policy's scan (``env.robot.safety_horizon_s``)."""


def build_env_parts(cfg: Any) -> EnvParts:
    """Build NavEnv's parts from a validated experiment config (``env``, ``obs``, ``reward``, ``seed``,
    optionally ``ppo``): terms first, then layouts, then the simulator's and the sensor's values."""
    env_cfg = cfg.env
    device = torch.device(resolve_device(str(env_cfg.device)))
    n = int(env_cfg.num_envs)
    robot = make_robot(env_cfg.robot)
    control_dt = env_cfg.sim.timestep_s * env_cfg.sim.decimation
    dims = env_dims(env_cfg, robot.num_actions)
    # Terms are resolved before anything else: a config error costs no layout draw and no kernel compile.
    obs_manager = ObservationManager(cfg.obs, dims, n, device)
    dims.scan_history_steps = obs_manager.scan_history_steps
    reward_manager = RewardManager(cfg.reward, env_cfg.position_window, n, device)
    # The analytic nearest-surface query and the path distance run only while an active term
    # reads their result; the path distance needs every layout's goal distance field.
    reads = obs_manager.reads | reward_manager.reads
    needs_path = bool(reads & {"path_dist", "goal_field"})
    layout_spec = LayoutSpec.from_env_cfg(env_cfg)
    map_spec = dataclasses.replace(MapSpec.from_env_cfg(env_cfg), keep_fields=needs_path)
    scenarios, scenario_entries = scenario_layouts(env_cfg, layout_spec, map_spec, device)
    check_every = fault_check_every(cfg)
    generator = torch.Generator(device=device)
    pool_every, reserve = pool_sizes(env_cfg, n, check_every, fixed=scenarios is not None)
    return EnvParts(
        num_envs=n,
        device=device,
        robot=robot,
        dims=dims,
        control_dt=control_dt,
        max_episode_length=int(math.ceil(env_cfg.episode_length_s / control_dt - 1e-9)),
        obs_manager=obs_manager,
        reward_manager=reward_manager,
        needs_clearance=bool(reads & {"clearance", "nearest_dir_body"}),
        needs_moving_ttc="moving_ttc" in reads,
        needs_path=needs_path,
        layout_spec=layout_spec,
        map_spec=map_spec,
        scenarios=scenarios,
        scenario_entries=scenario_entries,
        check_every=check_every,
        pool_every=pool_every,
        generator=generator,
        layout_pool=LayoutPool(layout_spec, reserve, generator, device, maps=map_spec),
        layout_seed=int(cfg.seed) + int(env_cfg.layout_seed_offset),
        backend=sim_backend(env_cfg, device),
        sim_spec=sim_spec(env_cfg, robot, n, device),
        lidar_realism=lidar_realism(env_cfg.lidar, n, generator, device),
        safety_filter=safety_filter(env_cfg, robot, device),
    )


def env_dims(env_cfg: Any, num_actions: int) -> EnvDims:
    """The sizes and scales terms read, from the env config and the robot's action width."""
    robot, lidar = env_cfg.robot, env_cfg.lidar
    return EnvDims(
        num_beams=lidar.num_beams,
        max_range_m=lidar.max_range_m,
        max_lin_vel_mps=robot.max_lin_vel_mps,
        max_ang_vel_radps=robot.max_ang_vel_radps,
        num_actions=num_actions,
        position_window=env_cfg.position_window,
        room_half_x_m=env_cfg.room.size_x_m / 2,
        room_half_y_m=env_cfg.room.size_y_m / 2,
        robot_radius_m=robot.radius_m,
        lidar_fov_deg=lidar.fov_deg,
    )


def scenario_layouts(
    env_cfg: Any, spec: LayoutSpec, maps: MapSpec, device: torch.device
) -> tuple[Layout | None, int]:
    """The layouts of ``env.scenarios`` on ``device`` ([S] rows, each with its goal distance field when
    ``maps.keep_fields``) and the file's entry count; ``(None, 0)`` without a scenario file."""
    if not env_cfg.scenarios:
        return None, 0
    file = resolve_scenario_path(str(env_cfg.scenarios))
    radius = float(env_cfg.goal_radius_m)  # a start within it would count as reached at once
    scenarios = load_scenario_file(file, spec, maps, radius).to(device)
    if maps.keep_fields:
        scenarios.goal_field = paths_and_fields(
            scenarios,
            spec.half_x,
            spec.half_y,
            spec.robot_radius_m,
            float(maps.cfg.path_cell_m),
            fields=True,
            margin_m=maps.cfg.path_margin_m,
            margin_cost=maps.cfg.path_margin_cost,
        )[1]
    return scenarios, len(scenario_entry_names(file))


def fault_check_every(cfg: Any) -> int:
    """``env.check_every``, or once per PPO rollout (``ppo.num_steps_per_env``; 32 without ``ppo``)."""
    every = cfg.env.check_every
    if every is None:
        every = int(cfg.ppo.num_steps_per_env) if "ppo" in cfg else 32
    return int(every)


def pool_sizes(env_cfg: Any, num_envs: int, check_every: int, fixed: bool) -> tuple[int, int]:
    """``(pool_every, reserve)``: control steps between layout-pool top-ups and the layouts the pool
    keeps in reserve; ``fixed``: a scenario file supplies the layouts."""
    # Reset layouts come from a device-side pool topped up at the fault checks, and every
    # POOL_TOP_UP_STEPS steps between rarer checks (a host sync of its own), so its size is
    # O(worlds) whatever check_every is: it must hold the most resets possible until the next
    # top-up (every world, every step; without auto-reset only reset() takes layouts, and it
    # checks right after; fixed scenarios take none).
    pooled = env_cfg.auto_reset and not fixed
    pool_every = min(check_every, POOL_TOP_UP_STEPS) if pooled else check_every
    return pool_every, num_envs * pool_every if pooled else num_envs


def sim_backend(env_cfg: Any, device: torch.device) -> str:
    """``env.sim.backend`` resolved for the device; a backend that cannot run there names both keys."""
    try:
        return resolve_backend(str(env_cfg.sim.backend), str(device))
    except ValueError as e:
        raise ValueError(f"env.sim.backend={env_cfg.sim.backend!r}, env.device={str(device)!r}: {e}") from e


def sim_spec(env_cfg: Any, robot: Robot, num_worlds: int, device: torch.device) -> SimSpec:
    """The simulator's build values, taken out of the env config once."""
    sim, lidar = env_cfg.sim, env_cfg.lidar
    return SimSpec(
        scene=SceneSpec.from_env_cfg(env_cfg, robot),
        num_worlds=num_worlds,
        device=str(device),
        beam_angles_rad=tuple(beam_angles(lidar.num_beams, lidar.fov_deg).tolist()),
        max_range_m=float(lidar.max_range_m),
        decimation=int(sim.decimation),
        nconmax_per_world=int(sim.nconmax_per_world),
        njmax_per_world=int(sim.njmax_per_world),
        cuda_graph=bool(sim.cuda_graph),
        nthread=sim.nthread,
    )


def lidar_realism(
    lidar: Any, num_worlds: int, generator: torch.Generator, device: torch.device
) -> LidarRealism:
    """The realism model of ``env.lidar`` for ``num_worlds`` scans, drawing from ``generator``."""
    spec = RealismSpec.from_lidar_cfg(lidar)
    return LidarRealism(
        spec, num_worlds, lidar.num_beams, lidar.fov_deg, lidar.max_range_m, generator, device
    )


def safety_filter(env_cfg: Any, robot: Robot, device: torch.device) -> SafetyFilter | None:
    """The robot's safety filter on the policy's scan; None while ``env.robot.safety_horizon_s`` is 0."""
    if robot.safety_horizon_s <= 0:
        return None
    lidar = env_cfg.lidar
    return SafetyFilter(
        beam_angles(lidar.num_beams, lidar.fov_deg).to(device, torch.float32),
        env_cfg.robot.radius_m,
        robot.safety_margin_m,
        robot.safety_horizon_s,
        robot.linear_axes,
        robot.max_lin_vel_mps,
    )
