"""The typed state that observation and reward terms read (torch tensors on the env device)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

REASONS = ("none", "success", "collision", "out_of_bounds", "time_out", "moving_collision")
"""Episode-end reason codes: ``state.reason`` holds an index into this tuple. ``collision`` is a
contact with a wall or a static obstacle, ``moving_collision`` one with a moving obstacle."""
SUCCESS, COLLISION, OUT_OF_BOUNDS, TIME_OUT, MOVING_COLLISION = 1, 2, 3, 4, 5

ON_DEMAND_FIELDS = ("clearance", "nearest_dir_body", "path_dist", "goal_field", "moving_ttc")
"""NavState fields computed only while an active term declares it reads them (``reads=`` when the
term is registered); otherwise they hold NaN, so an undeclared read fails the env's finite check."""


def check_reads(term: str, reads: tuple[str, ...]) -> None:
    """Reject a ``reads`` declaration that names something other than an on-demand field."""
    unknown = sorted(set(reads) - set(ON_DEMAND_FIELDS))
    if unknown:
        raise ValueError(f"term '{term}' declares reads={unknown}; allowed: {list(ON_DEMAND_FIELDS)}")


@dataclass
class EnvDims:
    """Sizes and scales terms need to declare widths and normalise (from the env config)."""

    num_beams: int
    max_range_m: float
    max_lin_vel_mps: float
    max_ang_vel_radps: float
    num_actions: int
    position_window: int
    room_half_x_m: float
    room_half_y_m: float
    robot_radius_m: float = 0.2
    """Radius of the robot's collision cylinder (m); scan ranges are measured from its centre."""
    lidar_fov_deg: float = 360.0
    """Field of view of the scan (``navexp.sim.lidar.beam_angles`` gives each beam's angle)."""
    scan_history_steps: int = 0
    """Earlier scans the env keeps (``NavState.scan_history``): set from the active terms' needs."""


@dataclass
class NavState:
    """Everything terms may read. Shapes use N = num_envs, B = LiDAR beams, W = position window.

    Frames: ``*_world`` in the world frame; ``*_body`` in the robot frame (x forward, y left).

    The env's state is written in place: each field stays the same tensor from step to step (pose,
    velocity and the clean scan are views of the simulator's buffers, the goal of the layout's), so
    a value kept across a step must be copied (``.clone()``; on the CPU ``.cpu()`` is no copy).
    """

    pos_xy: torch.Tensor
    """[N, 2] robot position (m, world)."""
    yaw: torch.Tensor
    """[N] robot yaw (rad, world, unwrapped)."""
    vel_world: torch.Tensor
    """[N, 2] linear velocity (m/s, world)."""
    vel_body: torch.Tensor
    """[N, 2] linear velocity (m/s, body): forward, left."""
    omega: torch.Tensor
    """[N] yaw rate (rad/s)."""
    goal_xy: torch.Tensor
    """[N, 2] goal position (m, world)."""
    goal_dist: torch.Tensor
    """[N] distance robot centre -> goal (m)."""
    prev_goal_dist: torch.Tensor
    """[N] goal distance one control step earlier (the start distance on an episode's first step)."""
    goal_bearing: torch.Tensor
    """[N] bearing of the goal in the body frame (rad, 0 = straight ahead, + = left)."""
    scan_clean: torch.Tensor
    """[N, B] LiDAR ranges (m) from the engine, in [0, max_range]. The LiDAR is cast once per step,
    after the resets: while rewards are computed, the scan fields hold the scan the action was
    chosen on; the observations get the new one."""
    scan: torch.Tensor
    """[N, B] the robot's scan (m): the clean scan through the LiDAR realism model (``env.lidar``:
    Gaussian noise, dropout, jitter, bias and scale, min range, quantisation, latency), in
    [0, max_range]; the ``lidar`` observation term reads it."""
    min_scan: torch.Tensor
    """[N] smallest clean range (m), measured from the robot centre."""
    scan_history: torch.Tensor
    """[N, H, B] the policy's earlier scans (``scan``), H control steps back, most recent first; an
    episode's first steps repeat its first scan. H = what the ``lidar_history`` term reads (0 when off)."""
    contact: torch.Tensor
    """[N] bool: the engine reported a robot contact during the last control step."""
    moving_contact: torch.Tensor
    """[N] bool: one of those contacts was with a moving obstacle."""
    clearance: torch.Tensor
    """[N] true distance from the robot centre to the nearest obstacle or wall surface (m); on demand
    (``ON_DEMAND_FIELDS``)."""
    nearest_dir_body: torch.Tensor
    """[N, 2] unit vector to that nearest surface point (body frame); on demand."""
    path_dist: torch.Tensor
    """[N] distance robot centre -> goal along the shortest path free for the robot's radius (m), read
    from the layout's goal distance field (``Layout.goal_field``, exact to about a cell); on demand.
    Where the field gives no value (the robot pressed into an obstacle's inflated border) it keeps
    its last value."""
    prev_path_dist: torch.Tensor
    """[N] ``path_dist`` one control step earlier (the start's on an episode's first step); on demand
    with it."""
    moving_ttc: torch.Tensor
    """[N] time to contact with the nearest-in-time moving obstacle (s): each obstacle's gap to the
    robot's edge (its bounding circle) over the speed at which the two close, both velocities those of
    the last control step held constant; 0 in contact, inf when none closes or the world has none
    (``navexp.sim.motion.time_to_contact``); on demand."""
    pos_window: torch.Tensor
    """[N, W+1, 2] positions of the last W control steps and now (index -1 is now)."""
    action: torch.Tensor
    """[N, 3] clipped policy action of this step (dimensionless, body frame)."""
    prev_action: torch.Tensor
    """[N, 3] the action one step earlier (zeros on an episode's first step)."""
    step: torch.Tensor
    """[N] control steps taken in the current episode (long)."""
    success: torch.Tensor = field(default=None)  # type: ignore[assignment]
    """[N] bool: the episode ended in success this step."""
    collision: torch.Tensor = field(default=None)  # type: ignore[assignment]
    """[N] bool: the episode ended in a collision this step, with a static or a moving obstacle (takes
    priority over success; ``reason`` tells the two apart)."""
    out_of_bounds: torch.Tensor = field(default=None)  # type: ignore[assignment]
    """[N] bool: the robot centre left the room this step."""
    time_out: torch.Tensor = field(default=None)  # type: ignore[assignment]
    """[N] bool: the episode was truncated by the time limit this step (never with a termination)."""
    reason: torch.Tensor = field(default=None)  # type: ignore[assignment]
    """[N] long: index into REASONS of the last episode end (0 while running)."""
    goal_field: torch.Tensor = field(default=None)  # type: ignore[assignment]
    """[N, NY, NX] float16 each world's goal distance field (``Layout.goal_field``: metres along the
    shortest free path from each cell centre of the occupancy grid over the room, inf where blocked);
    on demand (a term that plans on it, ``route_subgoal``), else [N, 0, 0]."""
    dims: EnvDims = field(default=None)  # type: ignore[assignment]

    @staticmethod
    def zeros(n: int, dims: EnvDims, device: torch.device | str) -> NavState:
        """A state of zeros (terms evaluated on it give finite values)."""
        z = dict(device=device)
        b, w = dims.num_beams, dims.position_window
        full = torch.full((n, b), dims.max_range_m, **z)
        f = torch.zeros(n, dtype=torch.bool, **z)
        return NavState(
            pos_xy=torch.zeros(n, 2, **z),
            yaw=torch.zeros(n, **z),
            vel_world=torch.zeros(n, 2, **z),
            vel_body=torch.zeros(n, 2, **z),
            omega=torch.zeros(n, **z),
            goal_xy=torch.zeros(n, 2, **z),
            goal_dist=torch.zeros(n, **z),
            prev_goal_dist=torch.zeros(n, **z),
            goal_bearing=torch.zeros(n, **z),
            scan_clean=full,
            scan=full.clone(),
            min_scan=torch.full((n,), dims.max_range_m, **z),
            scan_history=torch.full((n, dims.scan_history_steps, b), dims.max_range_m, **z),
            contact=f.clone(),
            moving_contact=f.clone(),
            clearance=torch.full((n,), dims.max_range_m, **z),
            nearest_dir_body=torch.zeros(n, 2, **z),
            path_dist=torch.zeros(n, **z),
            prev_path_dist=torch.zeros(n, **z),
            moving_ttc=torch.full((n,), float("inf"), **z),
            pos_window=torch.zeros(n, w + 1, 2, **z),
            action=torch.zeros(n, dims.num_actions, **z),
            prev_action=torch.zeros(n, dims.num_actions, **z),
            step=torch.zeros(n, dtype=torch.long, **z),
            success=f.clone(),
            collision=f.clone(),
            out_of_bounds=f.clone(),
            time_out=f.clone(),
            reason=torch.zeros(n, dtype=torch.long, **z),
            goal_field=torch.zeros(n, 0, 0, dtype=torch.float16, **z),
            dims=dims,
        )
