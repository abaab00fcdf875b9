"""Observation terms. Each scales itself to O(1) and declares its width from params and env dims.

DEPLOYABLE terms (a real robot has them) form group ``policy``; SIM_ONLY terms (simulation truth)
form group ``privileged``. The group follows from the provenance given here, never from YAML. Every
DEPLOYABLE term has a numpy twin in ``navexp/task/obs/numpy_terms.py`` (torch-free), from which export and
deploy rebuild it on the robot.
"""

from __future__ import annotations

from enum import StrEnum

import torch

from navexp.sim.layout import rotate_xy
from navexp.task.obs import odom, route
from navexp.task.obs.numpy_terms import (
    NUMPY_TWINS,
    check_history,
    check_odom_params,
    check_route_params,
    check_scan_encoding,
    encode_scan,
)
from navexp.task.registry import Registry
from navexp.task.state import NavState, check_reads


class Provenance(StrEnum):
    DEPLOYABLE = "deployable"
    SIM_ONLY = "sim_only"


GROUP_OF = {Provenance.DEPLOYABLE: "policy", Provenance.SIM_ONLY: "privileged"}

OBS_TERMS = Registry("observation")


def obs_term(name: str, provenance: Provenance, width, enabled: bool = True, reads: tuple[str, ...] = ()):
    """Register an observation term; ``width(params, dims) -> int`` declares its output width.

    ``reads`` names the on-demand NavState fields the term uses (``ON_DEMAND_FIELDS``): the env
    computes those only while an active term reads them. A DEPLOYABLE term needs its numpy twin
    (``@numpy_twin(name)`` in ``navexp/task/obs/numpy_terms.py``) registered first."""
    check_reads(name, reads)
    if provenance == Provenance.DEPLOYABLE and name not in NUMPY_TWINS:
        raise ValueError(
            f"deployable observation term '{name}' has no numpy twin; register one with "
            f"@numpy_twin({name!r}) in navexp/task/obs/numpy_terms.py (deploy builds the term from it)"
        )
    return OBS_TERMS.register(name, provenance=provenance, width=width, enabled=enabled, reads=tuple(reads))


def _lidar_width(params: dict, dims) -> int:
    """The scan's width [B]; checks the encoding params against the LiDAR range when the config is built."""
    check_scan_encoding(params["encoding"], params["log_min_m"], dims.max_range_m)
    return dims.num_beams


@obs_term("lidar", Provenance.DEPLOYABLE, _lidar_width)
def lidar(s: NavState, encoding: str = "linear", log_min_m: float = 0.1) -> torch.Tensor:
    """[N, B] realistic scan (LiDAR realism model: noise, dropout, ...) encoded into [0, 1]:
    ``linear`` range / max range; ``log`` log(range / log_min_m) / log(max range / log_min_m), ranges
    below ``log_min_m`` reading 0 (6x the linear resolution between 0.2 and 0.3 m at 6 m range,
    where collisions are decided; ``navexp.task.obs.numpy_terms.encode_scan``)."""
    return encode_scan(s.scan, encoding, log_min_m, s.dims.max_range_m)


def _history_width(params: dict, dims) -> int:
    """``frames`` x B; checks frames and stride (integers >= 1) and the encoding when the config is built."""
    check_history(params["frames"], params["stride"])
    check_scan_encoding(params["encoding"], params["log_min_m"], dims.max_range_m)
    return params["frames"] * dims.num_beams


@obs_term("lidar_history", Provenance.DEPLOYABLE, _history_width, enabled=False)
def lidar_history(
    s: NavState, frames: int = 3, stride: int = 1, encoding: str = "linear", log_min_m: float = 0.1
) -> torch.Tensor:
    """[N, frames * B] the ``frames`` earlier scans ``stride``, 2 ``stride``, ... control steps ago (most
    recent first), encoded as ``lidar``; an episode's first steps repeat its first scan. With ``lidar``
    (the scan now) a policy sees how the scan moves: obstacles that move without privileged state.
    Off by default (``obs.terms.lidar_history.enabled=true``; ``obs=dynamic`` turns it on)."""
    idx = torch.arange(1, frames + 1, device=s.scan.device) * stride - 1
    past = encode_scan(s.scan_history[:, idx], encoding, log_min_m, s.dims.max_range_m)
    return past.reshape(past.shape[0], -1)


@obs_term("goal_polar", Provenance.DEPLOYABLE, lambda p, d: 3)
def goal_polar(s: NavState, dist_scale_m: float = 5.0) -> torch.Tensor:
    """[N, 3] [goal distance / dist_scale_m, sin bearing, cos bearing] (bearing in the body frame)."""
    b = s.goal_bearing
    return torch.stack((s.goal_dist / dist_scale_m, torch.sin(b), torch.cos(b)), dim=-1)


@obs_term("vel_body", Provenance.DEPLOYABLE, lambda p, d: 2)
def vel_body(s: NavState) -> torch.Tensor:
    """[N, 2] body-frame velocity (forward, left) / max linear speed."""
    return s.vel_body / s.dims.max_lin_vel_mps


@obs_term("omega", Provenance.DEPLOYABLE, lambda p, d: 1)
def omega(s: NavState) -> torch.Tensor:
    """[N, 1] yaw rate / max yaw rate."""
    return (s.omega / s.dims.max_ang_vel_radps).unsqueeze(-1)


@obs_term("action_prev", Provenance.DEPLOYABLE, lambda p, d: d.num_actions, enabled=False)
def action_prev(s: NavState) -> torch.Tensor:
    """[N, A] the last applied (clipped) action (A and order: the robot's, ``navexp.task.robots``)."""
    return s.action


@obs_term("truth_clearance", Provenance.SIM_ONLY, lambda p, d: 1, reads=("clearance",))
def truth_clearance(s: NavState) -> torch.Tensor:
    """[N, 1] true distance to the nearest obstacle/wall surface / max range, clipped to [-1, 1]."""
    return (s.clearance / s.dims.max_range_m).clamp(-1.0, 1.0).unsqueeze(-1)


@obs_term("truth_scan_clean", Provenance.SIM_ONLY, lambda p, d: d.num_beams)
def truth_scan_clean(s: NavState) -> torch.Tensor:
    """[N, B] noise-free scan / max range."""
    return s.scan_clean / s.dims.max_range_m


@obs_term("truth_contact", Provenance.SIM_ONLY, lambda p, d: 1)
def truth_contact(s: NavState) -> torch.Tensor:
    """[N, 1] 1.0 when the engine reported a robot contact."""
    return s.contact.float().unsqueeze(-1)


@obs_term("truth_nearest_dir", Provenance.SIM_ONLY, lambda p, d: 2, reads=("nearest_dir_body",))
def truth_nearest_dir(s: NavState) -> torch.Tensor:
    """[N, 2] unit vector to the nearest obstacle/wall surface point, body frame."""
    return s.nearest_dir_body


@obs_term("truth_path_dist", Provenance.SIM_ONLY, lambda p, d: 1, enabled=False, reads=("path_dist",))
def truth_path_dist(s: NavState, dist_scale_m: float = 5.0) -> torch.Tensor:
    """[N, 1] distance to the goal along the shortest free path / dist_scale_m (the goal distance field;
    off by default: a critic that knows how far the way round a trap is)."""
    return (s.path_dist / dist_scale_m).unsqueeze(-1)


_CONSTS: dict[tuple, route.RouteConsts] = {}
"""``route_subgoal``'s constants per (lookahead_m, cell, device) as tensors: made once, no copy per step."""


def _route_consts(lookahead_m: float, cell: float, device: torch.device) -> route.RouteConsts:
    key = (lookahead_m, cell, device)
    if key not in _CONSTS:
        c = route.route_consts(lookahead_m, cell)
        nb, fracs = (torch.from_numpy(a).to(device) for a in (c.neighbours, c.fracs))
        _CONSTS[key] = route.RouteConsts(nb, fracs, c.steps, c.lookahead_m)
    return _CONSTS[key]


def _route_width(params: dict, dims) -> int:
    check_route_params(params["lookahead_m"], params["dist_scale_m"])
    return 3


@obs_term("route_subgoal", Provenance.DEPLOYABLE, _route_width, enabled=False, reads=("goal_field",))
def route_subgoal(s: NavState, lookahead_m: float = 3.0, dist_scale_m: float = 5.0) -> torch.Tensor:
    """[N, 3] [subgoal distance / dist_scale_m, sin bearing, cos bearing] (body frame) of the next
    subgoal along the shortest free path to the goal: the end of the route's first stretch in sight
    within ``lookahead_m`` (``navexp.task.obs.route``, on the goal distance field; the goal itself once
    in sight within the lookahead). Off by default; on the robot its twin plans on the robot's map
    (``RoutePlanner``)."""
    field, dims = s.goal_field, s.dims
    ny, nx = field.shape[1:]
    cell = max(2 * dims.room_half_x_m / max(nx, 1), 2 * dims.room_half_y_m / max(ny, 1))
    consts = _route_consts(float(lookahead_m), cell, s.pos_xy.device)
    sub = route.route_subgoal(
        torch, field, s.pos_xy, s.goal_xy, dims.room_half_x_m, dims.room_half_y_m, consts
    )
    rel = rotate_xy(sub - s.pos_xy, -s.yaw)
    b = torch.atan2(rel[:, 1], rel[:, 0])
    return torch.stack((rel.norm(dim=-1) / dist_scale_m, torch.sin(b), torch.cos(b)), dim=-1)


_STEPS: dict[tuple, torch.Tensor] = {}
"""``odom_history``'s window indices per (window length, window, points, device)."""


def _odom_width(params: dict, dims) -> int:
    check_odom_params(params["points"], params["window"], params["dist_scale_m"], dims.position_window)
    return 2 * params["points"]


@obs_term("odom_history", Provenance.DEPLOYABLE, _odom_width, enabled=False)
def odom_history(s: NavState, points: int = 5, window: int = 25, dist_scale_m: float = 5.0) -> torch.Tensor:
    """[N, 2 points] where the robot was (mapless memory, from odometry): its positions round(j window /
    points) control steps ago, j = 1 .. points, relative to it in its body frame / dist_scale_m
    (``navexp.task.obs.odom``; ``window`` <= ``env.position_window``). Off by default."""
    full, dev = s.pos_window.shape[1] - 1, s.pos_xy.device
    key = (full, window, points, dev)
    if key not in _STEPS:  # made once per device: no host-to-device copy per step
        _STEPS[key] = torch.tensor(
            [full - window + i for i in odom.history_steps(window, points)], device=dev
        )
    return odom.history_body(torch, s.pos_window[:, _STEPS[key]], s.pos_xy, s.yaw, dist_scale_m)
