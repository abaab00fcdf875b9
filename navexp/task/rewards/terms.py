"""Reward terms: small functions ``(state, **params) -> [N]`` (unweighted); the config sets weights.

Terms that need history declare it with ``needs_window``: the env config must keep at least that
many steps of position history, checked when the reward config is built.
"""

from __future__ import annotations

import torch

from navexp.sim.lidar import beam_angles
from navexp.task.registry import Registry
from navexp.task.state import NavState, check_reads

REWARD_TERMS = Registry("reward")


def reward_term(name: str, needs_window: str | None = None, reads: tuple[str, ...] = ()):
    """Register a reward term; ``needs_window`` names the param that must be <= env.position_window,
    ``reads`` the on-demand NavState fields it uses (``ON_DEMAND_FIELDS``)."""
    check_reads(name, reads)
    return REWARD_TERMS.register(name, needs_window=needs_window, reads=tuple(reads))


@reward_term("goal")
def goal(s: NavState) -> torch.Tensor:
    """1 on the step the episode ends in success."""
    return s.success.float()


@reward_term("progress")
def progress(s: NavState, gamma: float = 1.0) -> torch.Tensor:
    """Potential-based progress d_{t-1} - d_t (m); gamma < 1 adds (1 - gamma) * d_t.

    With potential phi = -d, gamma * phi(s') - phi(s) = (d_{t-1} - d_t) + (1 - gamma) * d_t.
    """
    return s.prev_goal_dist - s.goal_dist + (1.0 - gamma) * s.goal_dist


@reward_term("path_progress", reads=("path_dist",))
def path_progress(s: NavState, clip_m: float = 0.5) -> torch.Tensor:
    """Potential-based progress along the shortest free path, p_{t-1} - p_t (m), clipped to
    [-clip_m, clip_m]: unlike ``progress`` (straight-line distance) it pays for the detour out of a dead
    end or through a slalom's doors and charges for driving into a dead end. The path distance comes
    from the map's occupancy grid (sim-only; the policy does not observe it)."""
    return (s.prev_path_dist - s.path_dist).clamp(-clip_m, clip_m)


@reward_term("face_goal")
def face_goal(s: NavState, motion_weighted: bool = True) -> torch.Tensor:
    """cos(goal bearing), times |v_forward| / v_max when motion_weighted (zero when standing still)."""
    r = torch.cos(s.goal_bearing)
    if motion_weighted:
        r = r * s.vel_body[:, 0].abs() / s.dims.max_lin_vel_mps
    return r


@reward_term("time")
def time(s: NavState) -> torch.Tensor:
    """1 every step."""
    return torch.ones_like(s.goal_dist)


@reward_term("near_obstacle")
def near_obstacle(s: NavState, safe_dist: float = 0.25) -> torch.Tensor:
    """clip((safe_dist - min_scan) / safe_dist, 0, 1); min_scan from the robot centre (m)."""
    return ((safe_dist - s.min_scan) / safe_dist).clamp(0.0, 1.0)


_BEAM_DIRS: dict[tuple[int, float, str], torch.Tensor] = {}


def beam_directions(s: NavState) -> torch.Tensor:
    """[B, 2] unit vector of every beam in the body frame (cached per beam pattern and device)."""
    key = (s.dims.num_beams, s.dims.lidar_fov_deg, str(s.scan_clean.device))
    if key not in _BEAM_DIRS:
        a = beam_angles(s.dims.num_beams, s.dims.lidar_fov_deg).to(s.scan_clean)
        _BEAM_DIRS[key] = torch.stack([a.cos(), a.sin()], dim=-1)
    return _BEAM_DIRS[key]


@reward_term("closing_speed")
def closing_speed(s: NavState, zone_m: float = 0.3) -> torch.Tensor:
    """How fast the robot closes on a surface near its edge: the max over beams k of
    (max(0, v . u_k) / v_max)^2 * clip(1 - gap_k / zone_m, 0, 1), with u_k the beam's direction and
    gap_k = range_k - robot radius the free way beyond the robot's edge along it (m, clean scan).

    Zero when the robot moves along a wall or away from it, or when nothing is within ``zone_m`` of
    its edge; 1 at full speed into a surface it touches. Squared in speed, so slowing down near a
    surface pays more than the progress it costs (a linear penalty would only rescale progress).
    The scan is the one the action was chosen on, the velocity the one the action produced (body
    frame at the end of the step; the yaw turned by at most ``max_ang_vel * control_dt`` between)."""
    closing = (s.vel_body @ beam_directions(s).T).clamp_min(0.0) / s.dims.max_lin_vel_mps  # [N, B]
    near = (1.0 - (s.scan_clean - s.dims.robot_radius_m) / zone_m).clamp(0.0, 1.0)
    return (closing.square() * near).amax(dim=-1)


@reward_term("moving_ttc", reads=("moving_ttc",))
def moving_ttc(s: NavState, horizon_s: float = 1.0) -> torch.Tensor:
    """clip(1 - ttc / horizon_s, 0, 1) with ttc the time to contact with a moving obstacle
    (``NavState.moving_ttc``: gaps closing at today's rates): 0 while no moving obstacle would reach
    the robot within ``horizon_s``, 1 in contact. Privileged (the policy does not observe it), so it
    teaches giving way before a contact rather than after; zero in a world without moving obstacles."""
    return (1.0 - s.moving_ttc / horizon_s).clamp(0.0, 1.0)


@reward_term("action_smooth")
def action_smooth(s: NavState) -> torch.Tensor:
    """||a_t - a_{t-1}||^2 of the clipped actions."""
    return (s.action - s.prev_action).square().sum(dim=-1)


@reward_term("backward")
def backward(s: NavState, thresh: float = -0.05) -> torch.Tensor:
    """max(0, thresh - v_cmd_forward), v_cmd_forward the forward action in [-1, 1]."""
    return (thresh - s.action[:, 0]).clamp_min(0.0)


@reward_term("stuck", needs_window="window")
def stuck(s: NavState, window: int = 25, min_move: float = 0.30) -> torch.Tensor:
    """1 when the net displacement over the last ``window`` steps is < min_move (m), once step >= window."""
    disp = (s.pos_window[:, -1] - s.pos_window[:, -1 - window]).norm(dim=-1)
    return ((disp < min_move) & (s.step >= window)).float()


@reward_term("collision")
def collision(s: NavState) -> torch.Tensor:
    """1 when the episode ends in a collision."""
    return s.collision.float()


@reward_term("timeout")
def timeout(s: NavState) -> torch.Tensor:
    """1 on the truncation step."""
    return s.time_out.float()


@reward_term("out_of_bounds")
def out_of_bounds(s: NavState) -> torch.Tensor:
    """1 when the robot centre left the room."""
    return s.out_of_bounds.float()
