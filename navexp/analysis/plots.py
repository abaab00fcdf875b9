"""Top-down trajectory plots from simulator state (matplotlib, no renderer): room, obstacles to scale on
axes in metres, start and end pose at the robot's radius, goal with its radius, the path coloured by
speed (with a colour bar), the last step's LiDAR rays and earlier scans' hit points, the end reason, a
legend of the markers; ``trajectories.npz`` (``save_trajectories``) holds all of it, so
``redraw_from_npz`` draws a figure from the file alone."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path

import matplotlib

from navexp.sim import beam_angles

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Circle, Rectangle  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from navexp.task.state import REASONS  # noqa: E402

END_STYLE = {
    "success": ("*", "gold", 260),
    "collision": ("X", "red", 180),
    "out_of_bounds": ("P", "purple", 160),
    "time_out": ("s", "gray", 120),
    "moving_collision": ("X", "magenta", 180),
    "none": ("o", "black", 60),
}
MAX_RAYS = 36
"""LiDAR rays drawn per scan at most (every k-th beam of 72): the fan shows what the robot saw without
covering the room."""
RAY_STYLE = {"colors": "deepskyblue", "lw": 0.6, "alpha": 0.35, "zorder": 1}


@dataclass
class Episode:
    """One recorded episode (world frame, metres, radians); arrays over its T+1 states."""

    layout: dict[str, np.ndarray]
    pos: np.ndarray
    """[T+1, 2]"""
    yaw: np.ndarray
    """[T+1]"""
    speed: np.ndarray
    """[T+1] |v| (m/s)"""
    scan: np.ndarray
    """[T+1, B] the robot's ranges (m)"""
    reason: int

    @property
    def reason_name(self) -> str:
        return REASONS[self.reason]


@dataclass
class SceneInfo:
    """What every episode of an evaluation shares: the room, the radii, the LiDAR and the control period."""

    half_x: float
    """Half inner room size along x (m); the room's walls are at +-half_x, +-half_y."""
    half_y: float
    goal_radius_m: float
    robot_radius_m: float
    max_range_m: float
    max_speed_mps: float
    """Top of the path's speed colour scale (m/s)."""
    beam_angles: np.ndarray
    """[B] beam angles in the robot frame (rad)."""
    control_dt: float
    """Seconds per recorded step."""


CIRCLE_STYLE = {"cyl": ("sandybrown", "saddlebrown")}
"""Face and edge colour of each circle obstacle kind (layout key prefix); other kinds draw in gray."""
RECT_STYLE = {"box": ("lightsteelblue", "steelblue"), "wall": ("silver", "dimgray")}
"""Face and edge colour of each rotated-rectangle obstacle kind (layout key prefix)."""


def obstacle_kinds(layout: dict[str, np.ndarray]) -> tuple[list[str], list[str]]:
    """The circle kinds (``<p>_xy`` and ``<p>_r`` keys) and rotated-rectangle kinds (``<p>_xy``,
    ``<p>_half``, ``<p>_yaw``) of a layout dict, e.g. ``(["cyl"], ["box", "wall"])``."""
    prefixes = sorted(k[:-3] for k in layout if k.endswith("_xy") and k not in ("robot_xy", "goal_xy"))
    circles = [p for p in prefixes if f"{p}_r" in layout]
    rects = [p for p in prefixes if f"{p}_half" in layout and f"{p}_yaw" in layout]
    return circles, rects


def _active(layout: dict[str, np.ndarray], prefix: str) -> np.ndarray:
    """[S] bool: the kind's active slots (all of them when the layout has no ``<p>_active``)."""
    on = layout.get(f"{prefix}_active")
    return np.ones(len(layout[f"{prefix}_xy"]), dtype=bool) if on is None else np.asarray(on, dtype=bool)


def draw_scene(ax, layout: dict[str, np.ndarray], info: SceneInfo) -> None:
    """Room walls, every active obstacle (circles and rotated rectangles) to scale, and the goal."""
    hx, hy = info.half_x, info.half_y
    ax.add_patch(Rectangle((-hx, -hy), 2 * hx, 2 * hy, fill=False, lw=2.5, ec="dimgray", gid="room"))
    circles, rects = obstacle_kinds(layout)
    for p in circles:
        fc, ec = CIRCLE_STYLE.get(p, ("lightgray", "gray"))
        on = _active(layout, p)
        for (x, y), r in zip(layout[f"{p}_xy"][on], layout[f"{p}_r"][on], strict=True):
            ax.add_patch(Circle((x, y), r, fc=fc, ec=ec, gid=p))
    for p in rects:
        fc, ec = RECT_STYLE.get(p, ("lightgray", "gray"))
        on = _active(layout, p)
        for (x, y), (bx, by), yaw in zip(
            layout[f"{p}_xy"][on], layout[f"{p}_half"][on], layout[f"{p}_yaw"][on], strict=True
        ):
            c, s = math.cos(yaw), math.sin(yaw)
            corner = (x - c * bx + s * by, y - s * bx - c * by)  # the rectangle's own (-bx, -by) corner
            ax.add_patch(Rectangle(corner, 2 * bx, 2 * by, angle=math.degrees(yaw), fc=fc, ec=ec, gid=p))
    gx, gy = layout["goal_xy"]
    ax.add_patch(Circle((gx, gy), info.goal_radius_m, fc="palegreen", ec="green", alpha=0.8, gid="goal"))
    ax.set_xlim(-hx - 0.3, hx + 0.3)
    ax.set_ylim(-hy - 0.3, hy + 0.3)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])


def draw_robot(ax, xy, yaw: float, radius_m: float, fc: str, ec: str, gid: str, alpha: float = 1.0):
    """The robot at its radius with a heading mark (centre to rim along ``yaw``); returns both artists."""
    body = Circle(tuple(xy), radius_m, fc=fc, ec=ec, lw=1.2, alpha=alpha, gid=gid, zorder=4)
    ax.add_patch(body)
    tip = np.asarray(xy) + radius_m * np.array([math.cos(yaw), math.sin(yaw)])
    (heading,) = ax.plot([xy[0], tip[0]], [xy[1], tip[1]], color=ec, lw=1.2, zorder=4, gid=f"{gid}_heading")
    return body, heading


def beam_segments(pos: np.ndarray, yaw: float, scan: np.ndarray, beam_angles: np.ndarray) -> np.ndarray:
    """[B, 2, 2] LiDAR beam segments from the robot to each hit (world frame)."""
    a = yaw + beam_angles
    ends = pos + scan[:, None] * np.stack((np.cos(a), np.sin(a)), axis=1)
    return np.stack((np.repeat(pos[None], len(a), 0), ends), axis=1)


def label_metres(ax, xlabel: bool = True, ylabel: bool = True) -> None:
    """Axes in metres (world frame): a few ticks each way and, where asked, the axis names (a grid
    names them on its outer panels only)."""
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(MaxNLocator(5, integer=True))
    ax.tick_params(labelsize=7, length=2, pad=1)
    ax.set_xlabel("x (m)" if xlabel else "", fontsize=8, labelpad=1)
    ax.set_ylabel("y (m)" if ylabel else "", fontsize=8, labelpad=1)


def ray_segments(ep: Episode, k: int, info: SceneInfo) -> np.ndarray:
    """[R, 2, 2] the rays of step ``k`` to draw: at most ``MAX_RAYS`` evenly spread beams, only those that
    hit something (a miss reads max range and would only fill the room)."""
    every = max(1, math.ceil(len(info.beam_angles) / MAX_RAYS))
    segs = beam_segments(ep.pos[k], ep.yaw[k], ep.scan[k], info.beam_angles)[::every]
    hit = ep.scan[k][::every] < 0.999 * info.max_range_m
    return segs[hit]


def draw_episode(
    ax, ep: Episode, info: SceneInfo, beam_steps: list[int] | None = None, title: str = ""
) -> None:
    """Draw one episode on ``ax`` (axes in metres): the LiDAR rays (``ray_segments``) of the last step and
    the hit points of the scans at ``beam_steps`` before it.

    The start and the end pose are drawn at the robot's radius (a collision visibly touches), the end
    in its reason's colour with the reason's marker at the centre.
    """
    draw_scene(ax, ep.layout, info)
    label_metres(ax)
    last = len(ep.pos) - 1
    ax.add_collection(LineCollection(ray_segments(ep, last, info), gid="lidar", **RAY_STYLE))
    steps = [k for k in (beam_steps or []) if 0 <= k < last]
    if steps:  # earlier scans as their hit points only: rays at every step would cover the room
        hits = np.concatenate([ray_segments(ep, k, info)[:, 1] for k in steps] + [np.zeros((0, 2))])
        ax.scatter(
            hits[:, 0], hits[:, 1], s=2, c=RAY_STYLE["colors"], lw=0, alpha=0.8, zorder=2, gid="lidar_hits"
        )
    pts = ep.pos.reshape(-1, 1, 2)
    if len(pts) > 1:
        lc = LineCollection(
            np.concatenate((pts[:-1], pts[1:]), axis=1),
            cmap="viridis",
            norm=plt.Normalize(0, info.max_speed_mps),
            lw=2,
            zorder=3,
        )
        lc.set_array(ep.speed[1:])
        ax.add_collection(lc)
    draw_moving(ax, ep.layout)
    draw_robot(ax, ep.pos[0], ep.yaw[0], info.robot_radius_m, "none", "black", "robot_start")
    marker, color, size = END_STYLE[ep.reason_name]
    draw_robot(ax, ep.pos[-1], ep.yaw[-1], info.robot_radius_m, color, "black", "robot_end", alpha=0.6)
    ax.scatter(*ep.pos[-1], marker=marker, c=color, s=size / 3, edgecolors="black", zorder=5)
    t = (len(ep.pos) - 1) * info.control_dt
    ax.set_title(title or f"{ep.reason_name} after {t:.1f} s", fontsize=9)


def legend_handles(reasons: list[str], moving: bool = False) -> list[Line2D]:
    """What the markers mean: start pose, goal, the end of each reason shown, the moving obstacles and
    their tracks (``moving``: a shown episode had them), the LiDAR rays."""

    def dot(label: str, **kw) -> Line2D:
        return Line2D([], [], ls="none", label=label, **kw)

    handles = [
        dot("start (robot size)", marker="o", mfc="none", mec="black", ms=8),
        dot("goal (its radius)", marker="o", mfc="palegreen", mec="green", ms=9),
    ]
    for reason in [r for r in END_STYLE if r in reasons]:
        marker, color, _ = END_STYLE[reason]
        handles.append(dot(f"end: {reason.replace('_', ' ')}", marker=marker, mfc=color, mec="black", ms=8))
    if moving:
        style = dict(marker="o", mfc=MOVING_STYLE["fc"], mec=MOVING_STYLE["ec"], ms=9)
        handles.append(dot("moving obstacle (at the end)", **style))
        handles.append(Line2D([], [], label="its track", ls="--", lw=1.0, color="magenta", alpha=0.7))
    rays = dict(RAY_STYLE, color=RAY_STYLE["colors"])
    handles.append(Line2D([], [], label="LiDAR rays that hit (end)", **{k: rays[k] for k in ("color", "lw")}))
    return handles


def speed_bar(fig, axes, info: SceneInfo, **kw) -> None:
    """The path's colour scale: speed in m/s from 0 to ``info.max_speed_mps``."""
    sm = plt.cm.ScalarMappable(cmap="viridis", norm=plt.Normalize(0, info.max_speed_mps))
    bar = fig.colorbar(sm, ax=axes, label="path colour: speed (m/s)", **kw)
    bar.ax.tick_params(labelsize=7)


MOVING_STYLE = {"fc": "violet", "ec": "purple"}
"""Face and edge colour of a moving obstacle (figures and videos)."""


def moving_slots(layout: dict[str, np.ndarray]) -> np.ndarray:
    """The moving obstacles in play (slots with a motion model) that have a recorded ``mov_track``
    [T+1, M, 2]; empty for a layout without them."""
    if layout.get("mov_track") is None or layout.get("mov_mode") is None:
        return np.zeros(0, dtype=int)
    return np.flatnonzero(np.asarray(layout["mov_mode"]) > 0)


def moving_patch(layout: dict[str, np.ndarray], j: int, xy) -> Circle | Rectangle:
    """Moving obstacle ``j`` to scale at ``xy``: a circle of its radius, or its axis-aligned box."""
    hx, hy = layout["mov_size"][j]
    x, y = xy
    if layout["mov_is_box"][j]:
        return Rectangle((x - hx, y - hy), 2 * hx, 2 * hy, gid="moving", **MOVING_STYLE)
    return Circle((x, y), hx, gid="moving", **MOVING_STYLE)


def move_patch(patch: Circle | Rectangle, xy) -> None:
    """Put a ``moving_patch`` at ``xy`` (its centre)."""
    if isinstance(patch, Circle):
        patch.center = (float(xy[0]), float(xy[1]))
    else:
        patch.set_xy((float(xy[0]) - patch.get_width() / 2, float(xy[1]) - patch.get_height() / 2))


def draw_moving(ax, layout: dict[str, np.ndarray]) -> None:
    """Each moving obstacle's track over the episode (``mov_track`` [T+1, M, 2], recorded by the rollout),
    dashed, and the obstacle where the episode ended, to scale (nothing for a layout without them)."""
    for j in moving_slots(layout):
        xy = layout["mov_track"][:, j]
        ax.plot(xy[:, 0], xy[:, 1], ls="--", lw=1.0, color="magenta", alpha=0.7, gid="moving_track")
        ax.add_patch(moving_patch(layout, j, xy[-1]))


def grid_figure(episodes: list[Episode], info: SceneInfo, max_panels: int = 16):
    """A grid of up to ``max_panels`` episodes, axes in metres, one legend and one speed colour bar."""
    eps = episodes[:max_panels]
    cols = min(4, len(eps))
    rows = math.ceil(len(eps) / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(2.9 * cols + 0.6, 2.9 * rows + 0.7), squeeze=False, layout="constrained"
    )
    for ax in axes.flat[len(eps) :]:
        ax.axis("off")
    for i, (ax, ep) in enumerate(zip(axes.flat, eps, strict=False)):
        t = (len(ep.pos) - 1) * info.control_dt
        draw_episode(ax, ep, info, title=f"#{i} {ep.reason_name.replace('_', ' ')} ({t:.1f} s)")
        label_metres(ax, xlabel=i // cols == rows - 1, ylabel=i % cols == 0)
    speed_bar(fig, axes.ravel().tolist(), info, shrink=0.8, aspect=30)
    handles = legend_handles([ep.reason_name for ep in eps], any(len(moving_slots(ep.layout)) for ep in eps))
    fig.legend(
        handles=handles, loc="outside lower center", ncol=min(len(handles), 4), fontsize=8, frameon=False
    )
    return fig


def episode_figure(ep: Episode, info: SceneInfo, title: str, beam_every: int = 10):
    """One large episode (axes in metres): the LiDAR rays at the end, its hit points every ``beam_every``
    steps, a speed colour bar and a legend."""
    fig, ax = plt.subplots(figsize=(7, 7), layout="constrained")
    steps = list(range(0, len(ep.pos), max(beam_every, 1)))
    draw_episode(ax, ep, info, beam_steps=steps, title=title)
    speed_bar(fig, ax, info, fraction=0.046, pad=0.02)
    handles = legend_handles([ep.reason_name], len(moving_slots(ep.layout)) > 0)
    hits = dict(marker="o", ls="none", mfc=RAY_STYLE["colors"], mec="none", ms=3)
    handles.append(Line2D([], [], label=f"LiDAR hits every {max(beam_every, 1)} steps", **hits))
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    return fig


def save_trajectories(episodes: list[Episode], info: SceneInfo, path: Path) -> None:
    """Write episodes and their scene to a compressed npz that ``load_trajectories`` reads back alone.

    Keys: ``reasons`` [E]; per episode i ``pos_i`` [T+1, 2], ``yaw_i``, ``speed_i`` [T+1], ``scan_i``
    [T+1, B] and ``layout_<key>_i`` for every layout array (``cyl_xy``, ``box_half``, ``goal_xy``, ...,
    whatever obstacle kinds the layout has); ``scene_<field>`` for every ``SceneInfo`` field.
    """
    data = {"reasons": np.array([e.reason for e in episodes])}
    for f in fields(SceneInfo):
        data[f"scene_{f.name}"] = np.asarray(getattr(info, f.name))
    for i, e in enumerate(episodes):
        data[f"pos_{i}"], data[f"yaw_{i}"], data[f"speed_{i}"], data[f"scan_{i}"] = (
            e.pos,
            e.yaw,
            e.speed,
            e.scan,
        )
        for k, v in e.layout.items():
            data[f"layout_{k}_{i}"] = np.asarray(v)
    np.savez_compressed(path, **data)


def load_trajectories(path: Path | str) -> tuple[list[Episode], SceneInfo]:
    """The episodes and scene ``save_trajectories`` wrote to ``path``."""
    with np.load(path) as z:
        missing = [f"scene_{f.name}" for f in fields(SceneInfo) if f"scene_{f.name}" not in z.files]
        if missing:
            raise ValueError(f"{path} holds no scene ({', '.join(missing)} missing): not a trajectories.npz")
        scene = {f.name: z[f"scene_{f.name}"] for f in fields(SceneInfo)}
        info = SceneInfo(**{k: v if v.ndim else float(v) for k, v in scene.items()})
        layouts: dict[int, dict[str, np.ndarray]] = {}
        for k in z.files:
            if k.startswith("layout_"):
                name, i = k[len("layout_") :].rsplit("_", 1)
                layouts.setdefault(int(i), {})[name] = z[k]
        episodes = [
            Episode(layouts[i], z[f"pos_{i}"], z[f"yaw_{i}"], z[f"speed_{i}"], z[f"scan_{i}"], reason)
            for i, reason in enumerate(z["reasons"].tolist())
        ]
    return episodes, info


def redraw_from_npz(path: Path | str, index: int, beam_every: int = 10):
    """Episode ``index`` of a ``trajectories.npz`` drawn as ``episode_figure`` draws it (the same patches
    at the same places), from the file alone."""
    episodes, info = load_trajectories(path)
    if not 0 <= index < len(episodes):
        raise ValueError(
            f"index={index} is invalid; allowed: 0 <= index < {len(episodes)} (episodes in {path})"
        )
    ep = episodes[index]
    return episode_figure(ep, info, f"episode {index}: {ep.reason_name}", beam_every)


def scene_info(env) -> SceneInfo:
    c = env.env_cfg
    return SceneInfo(
        half_x=env.half_x,
        half_y=env.half_y,
        goal_radius_m=c.goal_radius_m,
        robot_radius_m=c.robot.radius_m,
        max_range_m=c.lidar.max_range_m,
        max_speed_mps=c.robot.max_lin_vel_mps * 2**0.5,
        beam_angles=beam_angles(c.lidar.num_beams, c.lidar.fov_deg).numpy(),
        control_dt=env.control_dt,
    )


def write_plots(episodes: list[Episode], info: SceneInfo, out: Path, beam_every: int = 10) -> list[Path]:
    """grid.png plus one figure per failed episode; returns the files written. The failed-episode
    figures of an earlier call into ``out`` go first: they belong to another evaluation."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("failed_*.png"):
        old.unlink()
    files = []
    fig = grid_figure(episodes, info)
    fig.savefig(out / "grid.png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    files.append(out / "grid.png")
    for i, ep in enumerate(episodes):
        if ep.reason_name != "success":
            f = out / f"failed_{i}_{ep.reason_name}.png"
            fig = episode_figure(ep, info, f"episode {i}: {ep.reason_name}", beam_every)
            fig.savefig(f, dpi=90, bbox_inches="tight")
            plt.close(fig)
            files.append(f)
    return files
