"""Numpy twins of the deployable observation terms: the same values from raw robot-side inputs.

Torch-free (``navexp.deploy`` imports it on the robot). Each twin is registered under its term's
name with ``@numpy_twin("<term>")`` and computes ``fn(inputs, params, meta) -> np.ndarray [width]``:
- ``inputs``: the raw values ``NumpyPolicy.command`` receives, by name: ``scan_m`` [B] ranges (m;
  NaN, +-inf and negative values read max range), ``goal_body_xy`` [2] (m, body frame),
  ``vel_body`` [2] forward/left (m/s), ``omega`` (rad/s), ``prev_action`` [A] the last clipped
  action, plus any extra keyword inputs;
- ``params``: the term's resolved params as trained (``policy_meta.json`` ``obs.params``);
- ``meta``: the export metadata (LiDAR geometry, ``scales``).
A deployable term in ``navexp/task/obs/terms.py`` names its twin (``obs_term(..., numpy_twin=...)``);
export writes the description (the twin's docstring) and deploy builds the observation from here,
so a new deployable term needs no edits in either.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from navexp.task.obs.odom import OdomHistory, history_body
from navexp.task.obs.route import RoutePlanner

NumpyTwin = Callable[[dict[str, Any], dict[str, Any], dict[str, Any]], np.ndarray]

NUMPY_TWINS: dict[str, NumpyTwin] = {}
"""Numpy twins by observation term name."""


def numpy_twin(name: str) -> Callable[[NumpyTwin], NumpyTwin]:
    """Decorator: register ``fn`` as the numpy twin of term ``name``; a duplicate name raises."""

    def deco(fn: NumpyTwin) -> NumpyTwin:
        if name in NUMPY_TWINS:
            raise ValueError(f"numpy twin of observation term '{name}' is already registered")
        NUMPY_TWINS[name] = fn
        return fn

    return deco


def get_twin(name: str) -> NumpyTwin:
    """The twin of term ``name``; ValueError listing the terms a robot can compute when it has none."""
    if name not in NUMPY_TWINS:
        raise ValueError(
            f"observation term {name!r} is not available on the robot (no numpy twin); "
            f"available: {sorted(NUMPY_TWINS)}"
        )
    return NUMPY_TWINS[name]


def describe(name: str) -> str:
    """First docstring line of the twin of term ``name`` (the export metadata's term description)."""
    return (get_twin(name).__doc__ or "").strip().splitlines()[0]


SCAN_ENCODINGS = ("linear", "log")
"""Encodings of the ``lidar`` term (its ``encoding`` param)."""


def check_scan_encoding(encoding: str, log_min_m: float, max_range_m: float) -> None:
    """ValueError naming the ``lidar`` term's param when the encoding or its floor is not allowed."""
    if encoding not in SCAN_ENCODINGS:
        raise ValueError(
            f"obs.terms.lidar.params.encoding={encoding!r} is not an encoding; "
            f"allowed: {list(SCAN_ENCODINGS)}"
        )
    if not (math.isfinite(log_min_m) and 0 < log_min_m < max_range_m):
        raise ValueError(
            f"obs.terms.lidar.params.log_min_m={log_min_m!r} must lie in (0, env.lidar.max_range_m="
            f"{max_range_m}) (the range the log encoding reads as 0)"
        )


def encode_scan(scan, encoding: str, log_min_m: float, max_range_m: float):
    """Ranges [..., B] (m, in [0, max_range_m]; torch or numpy) -> the ``lidar`` term's values in [0, 1]:
    ``linear`` r / max_range_m; ``log`` log(max(r, log_min_m) / log_min_m) / log(max_range_m / log_min_m)."""
    if encoding == "linear":
        return scan / max_range_m
    ratio = scan.clip(log_min_m) / log_min_m
    logs = np.log(ratio) if isinstance(ratio, np.ndarray) else ratio.log()  # this module imports no torch
    return logs / math.log(max_range_m / log_min_m)


@numpy_twin("lidar")
def lidar(inputs: dict[str, Any], params: dict[str, Any], meta: dict[str, Any]) -> np.ndarray:
    """range in [0, 1] by the param encoding (linear or log); NaN, +-inf or negative reads max range.

    linear: range / max_range_m; log: log(max(range, log_min_m) / log_min_m) / log(max_range_m /
    log_min_m) (``encode_scan``)."""
    max_range = meta["lidar"]["max_range_m"]
    scan = np.asarray(inputs["scan_m"], dtype=np.float64)
    no_return = ~np.isfinite(scan) | (scan < 0)  # as the simulator's clamp_ranges (a miss reads -1)
    ranges = np.where(no_return, max_range, np.minimum(scan, max_range))
    # Files exported before the encoding was a param hold no lidar params: they were linear.
    return encode_scan(ranges, params.get("encoding", "linear"), params.get("log_min_m", 0.1), max_range)


def check_history(frames: object, stride: object) -> None:
    """ValueError naming the ``lidar_history`` term's param unless frames and stride are integers >= 1."""
    for key, v in (("frames", frames), ("stride", stride)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(
                f"obs.terms.lidar_history.params.{key}={v!r} is invalid; allowed: an integer >= 1"
            )


def history_steps(params: dict[str, Any]) -> int:
    """Control steps of scans the ``lidar_history`` term with ``params`` looks back (frames x stride)."""
    return int(params.get("frames", 3)) * int(params.get("stride", 1))


@numpy_twin("lidar_history")
def lidar_history(inputs: dict[str, Any], params: dict[str, Any], meta: dict[str, Any]) -> np.ndarray:
    """the frames earlier scans stride, 2 stride, ... steps ago (most recent first), each as lidar.

    ``inputs["scan_history_m"]``: the earlier raw scans, most recent first, kept by ``NumpyPolicy``
    (an episode's first steps repeat its first scan)."""
    past = inputs["scan_history_m"]
    stride, frames = int(params.get("stride", 1)), int(params.get("frames", 3))
    scans = [past[k * stride - 1] for k in range(1, frames + 1)]
    return np.concatenate([lidar({**inputs, "scan_m": scan}, params, meta) for scan in scans])


@numpy_twin("goal_polar")
def goal_polar(inputs: dict[str, Any], params: dict[str, Any], meta: dict[str, Any]) -> np.ndarray:
    """[|g| / dist_scale_m, sin b, cos b]; g: goal (body frame), b = atan2(gy, gx)."""
    # Files exported before term params were recorded hold the scale under "scales".
    scale = params.get("dist_scale_m", meta.get("scales", {}).get("goal_dist_scale_m"))
    gx, gy = (float(v) for v in inputs["goal_body_xy"])
    b = math.atan2(gy, gx)
    return np.array([math.hypot(gx, gy) / scale, math.sin(b), math.cos(b)])


@numpy_twin("vel_body")
def vel_body(inputs: dict[str, Any], params: dict[str, Any], meta: dict[str, Any]) -> np.ndarray:
    """[v_forward, v_left] / max_lin_vel_mps."""
    return np.asarray(inputs["vel_body"], dtype=np.float64) / meta["scales"]["max_lin_vel_mps"]


@numpy_twin("omega")
def omega(inputs: dict[str, Any], params: dict[str, Any], meta: dict[str, Any]) -> np.ndarray:
    """yaw rate / max_ang_vel_radps."""
    return np.array([float(inputs["omega"]) / meta["scales"]["max_ang_vel_radps"]])


@numpy_twin("action_prev")
def action_prev(inputs: dict[str, Any], params: dict[str, Any], meta: dict[str, Any]) -> np.ndarray:
    """last clipped action (width and order: the action block)."""
    return np.asarray(inputs["prev_action"], dtype=np.float64)


def check_route_params(lookahead_m: float, dist_scale_m: float) -> None:
    """ValueError naming the ``route_subgoal`` param that is not allowed."""
    key = "obs.terms.route_subgoal.params"
    if not (isinstance(lookahead_m, int | float) and math.isfinite(lookahead_m) and 0 < lookahead_m <= 20):
        raise ValueError(f"{key}.lookahead_m={lookahead_m!r} is invalid; allowed: a distance in (0, 20] (m)")
    if not (isinstance(dist_scale_m, int | float) and math.isfinite(dist_scale_m) and dist_scale_m > 0):
        raise ValueError(f"{key}.dist_scale_m={dist_scale_m!r} is invalid; allowed: a distance > 0 (m)")


def subgoal_polar(sub_xy, pos_xy, yaw, dist_scale_m: float):
    """[|s| / dist_scale_m, sin b, cos b] of subgoals ``sub_xy`` [..., 2] seen from poses ``pos_xy``
    [..., 2], ``yaw`` [...] (s in the body frame, b = atan2(s_y, s_x); numpy)."""
    rel = np.asarray(sub_xy, dtype=np.float64) - np.asarray(pos_xy, dtype=np.float64)
    b = np.arctan2(rel[..., 1], rel[..., 0]) - yaw
    return np.stack((np.hypot(rel[..., 0], rel[..., 1]) / dist_scale_m, np.sin(b), np.cos(b)), -1)


@numpy_twin("route_subgoal")
def route_subgoal(inputs: dict[str, Any], params: dict[str, Any], meta: dict[str, Any]) -> np.ndarray:
    """route's next subgoal s: [|s| / dist_scale_m, sin b, cos b]; inputs route=RoutePlanner, pose_map.

    s in the body frame, b = atan2(s_y, s_x); extra inputs: ``route`` a RoutePlanner on the robot's map
    with its goal set, ``pose_map`` (x, y, yaw) of the robot in the map's frame."""
    route, pose = inputs.get("route"), inputs.get("pose_map")
    if not isinstance(route, RoutePlanner) or pose is None or len(pose) != 3:
        raise ValueError(
            "observation term 'route_subgoal' needs route=<navexp.task.obs.route.RoutePlanner with "
            f"set_goal() called> and pose_map=(x, y, yaw) (map frame); got route={type(route).__name__}, "
            f"pose_map={pose!r}"
        )
    x, y, yaw = (float(v) for v in pose)
    sub = route.subgoal((x, y), float(params["lookahead_m"]))
    return subgoal_polar(sub, (x, y), yaw, float(params["dist_scale_m"]))


def check_odom_params(points: int, window: int, dist_scale_m: float, env_window: int) -> None:
    """ValueError naming the ``odom_history`` param that is not allowed (``env_window``: the env's
    ``position_window``, the control steps of positions it keeps)."""
    key = "obs.terms.odom_history.params"
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= env_window:
        raise ValueError(
            f"{key}.window={window!r} is invalid; allowed: an integer in [1, env.position_window="
            f"{env_window}] (raise env.position_window for a longer memory)"
        )
    if isinstance(points, bool) or not isinstance(points, int) or not 1 <= points <= window:
        raise ValueError(f"{key}.points={points!r} is invalid; allowed: an integer in [1, window={window}]")
    if not (isinstance(dist_scale_m, int | float) and math.isfinite(dist_scale_m) and dist_scale_m > 0):
        raise ValueError(f"{key}.dist_scale_m={dist_scale_m!r} is invalid; allowed: a distance > 0 (m)")


@numpy_twin("odom_history")
def odom_history(inputs: dict[str, Any], params: dict[str, Any], meta: dict[str, Any]) -> np.ndarray:
    """past positions (odometry) in the body frame / dist_scale_m; inputs odom=OdomHistory, pose_odom.

    [x_1, y_1, ..., x_P, y_P]: the positions round(j W / P) control steps ago (j = 1 .. P, W the
    param ``window``), relative to the robot, body frame; ``odom`` an OdomHistory pushed every control step,
    ``pose_odom`` (x, y, yaw) now in the same odometry frame."""
    memory, pose = inputs.get("odom"), inputs.get("pose_odom")
    if not isinstance(memory, OdomHistory) or not memory.xy or pose is None or len(pose) != 3:
        raise ValueError(
            "observation term 'odom_history' needs odom=<navexp.task.obs.odom.OdomHistory, reset() at the "
            f"episode start> and pose_odom=(x, y, yaw); got odom={type(memory).__name__}, pose_odom={pose!r}"
        )
    if memory.window != int(params["window"]):
        raise ValueError(
            f"odom=OdomHistory(window={memory.window}): the policy was trained with window={params['window']}"
        )
    past = memory.past(int(params["points"]))[None]
    pos, yaw = np.array([pose[:2]], dtype=np.float64), np.array([float(pose[2])])
    return history_body(np, past, pos, yaw, float(params["dist_scale_m"]))[0]
