"""Top-down trajectory plots from simulator state (matplotlib, no renderer): room, obstacles to scale,
start, goal with its radius, the path coloured by speed, LiDAR beams at chosen steps, the end reason."""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.patches import Circle, Rectangle  # noqa: E402

from navexp.state import REASONS  # noqa: E402

END_STYLE = {
    "success": ("*", "gold", 260),
    "collision": ("X", "red", 180),
    "out_of_bounds": ("P", "purple", 160),
    "time_out": ("s", "gray", 120),
    "none": ("o", "black", 60),
}


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
    half_x: float
    half_y: float
    goal_radius_m: float
    robot_radius_m: float
    max_range_m: float
    max_speed_mps: float
    beam_angles: np.ndarray
    control_dt: float


def draw_episode(
    ax, ep: Episode, info: SceneInfo, beam_steps: list[int] | None = None, title: str = ""
) -> None:
    """Draw one episode on ``ax``; LiDAR beams are drawn at ``beam_steps`` (default: start and end)."""
    hx, hy = info.half_x, info.half_y
    ax.add_patch(Rectangle((-hx, -hy), 2 * hx, 2 * hy, fill=False, lw=2.5, ec="dimgray"))
    lay = ep.layout
    for (x, y), r, on in zip(lay["cyl_xy"], lay["cyl_r"], lay["cyl_active"], strict=True):
        if on:
            ax.add_patch(Circle((x, y), r, fc="sandybrown", ec="saddlebrown"))
    # Boxes, then wall segments (map families, occupancy maps; absent in older recordings).
    kinds = [("box", "lightsteelblue", "steelblue"), ("wall", "darkgray", "dimgray")]
    for kind, fc, ec in kinds:
        if f"{kind}_xy" not in lay:
            continue
        for (x, y), (bx, by), yaw, on in zip(
            lay[f"{kind}_xy"], lay[f"{kind}_half"], lay[f"{kind}_yaw"], lay[f"{kind}_active"], strict=True
        ):
            if on:
                c, s = math.cos(yaw), math.sin(yaw)
                corner = (x - c * bx + s * by, y - s * bx - c * by)  # the box's own (-bx, -by) corner
                ax.add_patch(Rectangle(corner, 2 * bx, 2 * by, angle=math.degrees(yaw), fc=fc, ec=ec))
    gx, gy = lay["goal_xy"]
    ax.add_patch(Circle((gx, gy), info.goal_radius_m, fc="palegreen", ec="green", alpha=0.8))
    steps = beam_steps if beam_steps is not None else [0, len(ep.pos) - 1]
    for k in steps:
        if 0 <= k < len(ep.pos):
            a = ep.yaw[k] + info.beam_angles
            ends = ep.pos[k] + ep.scan[k][:, None] * np.stack((np.cos(a), np.sin(a)), axis=1)
            segs = np.stack((np.repeat(ep.pos[k][None], len(a), 0), ends), axis=1)
            ax.add_collection(LineCollection(segs, colors="deepskyblue", lw=0.4, alpha=0.5))
    pts = ep.pos.reshape(-1, 1, 2)
    if len(pts) > 1:
        lc = LineCollection(
            np.concatenate((pts[:-1], pts[1:]), axis=1),
            cmap="viridis",
            norm=plt.Normalize(0, info.max_speed_mps),
            lw=2,
        )
        lc.set_array(ep.speed[1:])
        ax.add_collection(lc)
    ax.add_patch(Circle(tuple(ep.pos[0]), info.robot_radius_m, fc="none", ec="black", lw=1))
    ax.plot(*ep.pos[0], "o", color="black", ms=3)
    marker, color, size = END_STYLE[ep.reason_name]
    ax.scatter(*ep.pos[-1], marker=marker, c=color, s=size, edgecolors="black", zorder=5)
    ax.set_xlim(-hx - 0.3, hx + 0.3)
    ax.set_ylim(-hy - 0.3, hy + 0.3)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    t = (len(ep.pos) - 1) * info.control_dt
    ax.set_title(title or f"{ep.reason_name} after {t:.1f} s", fontsize=9)


def grid_figure(episodes: list[Episode], info: SceneInfo, max_panels: int = 16):
    """A grid of up to ``max_panels`` episodes."""
    eps = episodes[:max_panels]
    cols = min(4, len(eps))
    rows = math.ceil(len(eps) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.2 * rows), squeeze=False)
    for ax in axes.flat[len(eps) :]:
        ax.axis("off")
    for i, (ax, ep) in enumerate(zip(axes.flat, eps, strict=False)):
        draw_episode(
            ax, ep, info, title=f"#{i} {ep.reason_name} ({(len(ep.pos) - 1) * info.control_dt:.1f} s)"
        )
    fig.tight_layout()
    return fig


def episode_figure(ep: Episode, info: SceneInfo, title: str, beam_every: int = 10):
    """One large episode, beams every ``beam_every`` steps and at the end, with a speed colour bar."""
    fig, ax = plt.subplots(figsize=(7, 7))
    steps = list(range(0, len(ep.pos), max(beam_every, 1))) + [len(ep.pos) - 1]
    draw_episode(ax, ep, info, beam_steps=steps, title=title)
    sm = plt.cm.ScalarMappable(cmap="viridis", norm=plt.Normalize(0, info.max_speed_mps))
    fig.colorbar(sm, ax=ax, fraction=0.046, pad=0.04, label="speed (m/s)")
    fig.tight_layout()
    return fig
