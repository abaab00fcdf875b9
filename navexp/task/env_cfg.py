"""Typed schema of the ``env`` config group (room, obstacles, robot, LiDAR, simulator, map families),
registered by ``navexp.config.schemas.register_configs`` as ``base_env``. Cross-field checks live in
``navexp.task.validation.validate_env_cfg``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from navexp.sim.lidar import RealismSpec
from navexp.task.maps.families import MapsCfg
from navexp.task.maps.moving import DynamicCfg
from navexp.task.maps.scenario_jitter import DEFAULT_GOAL_RADIUS_M


@dataclass
class RoomCfg:
    size_x_m: float = 8.0
    """Inner length of the room along x (wall face to wall face)."""
    size_y_m: float = 8.0
    """Inner length of the room along y."""
    wall_thickness_m: float = 0.1
    wall_height_m: float = 1.0


@dataclass
class ObstaclesCfg:
    cylinder_slots: int = 8
    """Cylinder obstacles compiled into the model; unused ones are parked below the floor."""
    box_slots: int = 4
    """Box obstacles compiled into the model (random yaw per episode)."""
    wall_slots: int = 0
    """Wall segments (boxes in slots of their own, after the boxes) compiled into the model; the map
    families other than ``random`` and occupancy-grid maps place their walls here."""
    cylinder_count: list[int] = field(default_factory=lambda: [2, 5])
    """[min, max] cylinders placed per episode (inclusive), max <= cylinder_slots."""
    box_count: list[int] = field(default_factory=lambda: [1, 3])
    """[min, max] boxes placed per episode (inclusive), max <= box_slots."""
    cylinder_radius_m: list[float] = field(default_factory=lambda: [0.15, 0.45])
    """[min, max] cylinder radius."""
    box_half_size_m: list[float] = field(default_factory=lambda: [0.15, 0.5])
    """[min, max] half-extent of a box side (each side drawn independently)."""
    height_m: float = 1.0
    wall_margin_m: float = 0.0
    """Obstacle centres keep at least this distance from the wall faces."""


@dataclass
class RobotCfg:
    """The ``robot`` config group, placed at ``env.robot`` (``configs/robot/<name>.yaml``)."""

    name: str = "holonomic"
    """Robot module (``navexp.task.robots``): holonomic | diffdrive. Select with ``robot=<name>``."""
    radius_m: float = 0.2
    """Collision radius (a sphere proxy at the LiDAR height: exact for the planar task)."""
    half_height_m: float = 0.15
    """Half-height of the reference cylinder body; the sphere centre and the LiDAR sit at this z."""
    mass_kg: float = 1.0
    max_lin_vel_mps: float = 1.5
    """Linear velocity servo ctrlrange (action 1.0 maps to this): vx and vy, or forward (diffdrive)."""
    max_ang_vel_radps: float = 2.0
    """Yaw-rate servo ctrlrange."""
    lin_kv: float = 100.0
    """Gain of the linear velocity servos (N s/m), > 0."""
    ang_kv: float = 2.0
    """Gain of the yaw-rate servo (N m s/rad), > 0."""
    lin_force_limit_n: float = 200.0
    """Force range of the linear velocity servos (N), > 0."""
    ang_torque_limit_nm: float = 20.0
    """Torque range of the yaw-rate servo (N m), > 0."""
    safety_horizon_s: float = 0.0
    """Safety filter (``navexp.task.robots.safety_filter``): each control step the commanded linear
    velocity is scaled down so the robot, moving at it for this long, stops ``safety_margin_m`` short of
    every point of its scan (direction and yaw rate kept; inside the margin the approach to the nearest
    return is removed). 0 turns it off; the control period (0.1 s) stops it within one step. Part of
    the robot: exported with the policy and applied by deploy."""
    safety_margin_m: float = 0.04
    """Gap (m) between the robot's edge and a scanned surface that the safety filter keeps: it also takes
    up the servo's stopping distance (~1.5 cm at 1.5 m/s, 2.1 at the diagonal) and the scan's noise (a
    2 cm margin left the grid at 87.5 %, 4 cm at 95 %: BENCHMARKS.md)."""
    params: dict[str, Any] = field(default_factory=dict)
    """Robot-specific settings (the robot's ``default_params``; unknown keys raise when the env is built;
    those in its ``positive_params`` must be > 0)."""


@dataclass
class LidarCfg(RealismSpec):
    """The LiDAR: beam geometry here, the realism keys (noise, dropout, jitter, scale, bias, minimum
    range, resolution, latency) inherited from ``navexp.sim.lidar.RealismSpec``, declared once."""

    num_beams: int = 72
    fov_deg: float = 360.0
    """Beams are spread evenly over the field of view, centred on the body x axis."""
    max_range_m: float = 6.0
    """Misses and hits beyond this read max_range_m."""


@dataclass
class SimCfg:
    backend: str = "auto"
    """auto | warp | mujoco | <module>:<Class>. auto: MuJoCo Warp on CUDA, classic MuJoCo (faster there)
    on the CPU. A class path selects your own backend (navexp.sim.base.Simulator)."""
    timestep_s: float = 0.02
    decimation: int = 5
    """Physics steps per control step: control period = timestep_s * decimation."""
    nconmax_per_world: int = 8
    """warp: contact buffer per world (only robot-vs-obstacle pairs collide)."""
    njmax_per_world: int = 32
    """Unused: the warp step has no constraints (navexp.sim.warp_backend.contact_free); kept so older
    configs load, and for a backend of your own with fixed constraint buffers."""
    cuda_graph: bool = True
    """Capture the physics substeps in a CUDA graph (ignored on CPU)."""
    capture_step: bool = True
    """With ``cuda_graph`` on a GPU (warp): capture the whole control step, its torch part included,
    as one graph (navexp.task.step_graph); false: only the physics and LiDAR kernels."""
    nthread: int | None = None
    """mujoco: worker threads of the rollout pool; None: every core this process may use (under
    torchrun, its share)."""


@dataclass
class EnvCfg:
    name: str = "room"
    """The env variant (``env=<name>``, set by each ``configs/env/<name>.yaml``): the label of the run's
    own env in its evaluation (the default suite's first entry, ``run_env``)."""
    num_envs: int = 64
    """Parallel worlds (mujoco_warp nworld)."""
    device: str = "auto"
    """auto | cpu | cuda | cuda:N. auto picks cuda:0 when CUDA is present, else cpu."""
    room: RoomCfg = field(default_factory=RoomCfg)
    obstacles: ObstaclesCfg = field(default_factory=ObstaclesCfg)
    robot: RobotCfg = field(default_factory=RobotCfg)
    lidar: LidarCfg = field(default_factory=LidarCfg)
    sim: SimCfg = field(default_factory=SimCfg)
    episode_length_s: float = 25.0
    """Episode length; its control steps bound ``lidar.latency_steps`` (below them)."""
    goal_radius_m: float = DEFAULT_GOAL_RADIUS_M
    """An episode succeeds when the robot's centre comes closer to the goal than this (m)."""
    min_start_goal_dist_m: float = 2.0
    spawn_clearance_m: float = 0.15
    """Free space required around the robot's surface and around the goal at spawn."""
    position_window: int = 25
    """Control steps of position history kept (reward terms such as stuck read it)."""
    auto_reset: bool = True
    """Reset finished worlds inside step (training). False: hold them until reset() (evaluation)."""
    maps: MapsCfg = field(default_factory=MapsCfg)
    dynamic: DynamicCfg = field(default_factory=DynamicCfg)
    """Moving obstacles (``navexp.task.maps.moving``): none unless slots are given (``env=dynamic``)."""
    scenarios: str | None = None
    """Fixed-layout YAML (path, or a name in configs/scenarios/), or a ROS map_server map YAML (an
    occupancy grid, merged into wall slots); worlds cycle through its entries."""
    layout_seed_offset: int = 0
    """Added to the seed for layout sampling; evaluation uses a separate, held-out offset."""
    check_finite: bool = True
    """Stop with the offending worlds named when actions, state, observations or rewards turn NaN/inf."""
    check_every: int | None = None
    """Control steps between fault checks (the one host sync of the step path); faults found in
    between are kept on the device with their worlds and first step. None: ppo.num_steps_per_env,
    once per PPO rollout (the runner also checks before every PPO update). Above 64 the layout pool is
    still topped up every 64 steps (a sync of its own; ``NavEnv.POOL_TOP_UP_STEPS``), so its memory
    stays max(256, 2 x worlds x 64) layouts whatever check_every is."""
