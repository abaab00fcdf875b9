"""Animated top-down videos of recorded episodes (matplotlib.animation, no renderer).

Each frame draws the room, the obstacles and the goal (``plots.draw_scene``), the moving obstacles where
they are at that step (their recorded ``mov_track``), the robot at its radius with a heading mark, the
path so far and, optionally, the LiDAR beams of that step. Episodes follow one
another; a GIF is written with Pillow (matplotlib's ``PillowWriter``, always available), an MP4 with
ffmpeg (``FFMpegWriter``) only where ffmpeg is installed. ``log_gif`` puts a GIF into TensorBoard's
Images tab (an animated image summary: ``SummaryWriter.add_video`` would need moviepy).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
from PIL import Image

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.animation import FFMpegWriter, FuncAnimation, PillowWriter, writers  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402

from navexp.analysis.plots import (  # noqa: E402
    END_STYLE,
    Episode,
    SceneInfo,
    beam_segments,
    draw_robot,
    draw_scene,
    move_patch,
    moving_patch,
    moving_slots,
)
from navexp.learn.wandb_writer import gif_summary  # noqa: E402

FORMATS = ("gif", "mp4")


class PalettePillowWriter(PillowWriter):
    """matplotlib's PillowWriter with every frame mapped, without dithering, to one palette of the
    first frame's colours: a plain top-down drawing keeps its flat colours, unchanged pixels stay
    equal between frames, and Pillow then stores only each frame's changed rectangle (several times
    smaller than dithered frames)."""

    colors: int = 64

    def finish(self) -> None:
        first = self._frames[0].convert("RGB")
        palette = first.quantize(self.colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
        frames = [f.convert("RGB").quantize(palette=palette, dither=Image.Dither.NONE) for f in self._frames]
        frames[0].save(
            self.outfile, save_all=True, append_images=frames[1:], duration=int(1000 / self.fps), loop=0
        )


def frame_stride(num_states: int, max_frames: int) -> int:
    """The smallest step stride that shows ``num_states`` recorded states in at most ``max_frames``."""
    if max_frames < 1:
        raise ValueError(f"max_frames={max_frames} is invalid; allowed: an integer >= 1")
    return max(1, math.ceil(num_states / max_frames))


def frame_plan(episodes: list[Episode], stride: int) -> list[tuple[int, int]]:
    """(episode, step) of every frame: every ``stride``-th state of each episode, and always its last
    (so the end pose is shown). With ``stride`` 1, one frame per recorded state."""
    plan = []
    for e, ep in enumerate(episodes):
        last = len(ep.pos) - 1
        steps = list(range(0, last + 1, stride))
        plan += [(e, k) for k in (steps if steps[-1] == last else [*steps, last])]
    return plan


class EpisodeAnimator:
    """One figure redrawn frame by frame: ``draw(j)`` shows frame j of ``plan``."""

    def __init__(
        self, episodes: list[Episode], info: SceneInfo, max_frames: int = 300, lidar: bool = True
    ) -> None:
        if not episodes:
            raise ValueError("no episodes to animate; allowed: a list of at least one recorded episode")
        self.episodes, self.info, self.lidar = episodes, info, lidar
        self.stride = frame_stride(sum(len(ep.pos) for ep in episodes), max_frames)
        self.plan = frame_plan(episodes, self.stride)
        size = 4.0 * np.array([info.half_x, info.half_y]) / max(info.half_x, info.half_y)
        self.fig, self.ax = plt.subplots(figsize=tuple(size + [0.0, 0.3]))
        self.fig.subplots_adjust(left=0.02, right=0.98, bottom=0.02, top=0.92)  # room for the title
        self._episode = -1

    def _start_episode(self, e: int) -> None:
        """Clear the axes and draw episode ``e``'s static scene and its moving artists."""
        ax, ep, info = self.ax, self.episodes[e], self.info
        ax.clear()
        draw_scene(ax, ep.layout, info)
        draw_robot(ax, ep.pos[0], ep.yaw[0], info.robot_radius_m, "none", "gray", "robot_start")
        # Aliased beams (flat pixels compress several times better in a GIF than antialiased ones), under
        # the obstacles and the goal, which they would hide near the robot.
        self.beams = LineCollection([], colors="lightskyblue", lw=0.5, antialiased=False, zorder=0.5)
        ax.add_collection(self.beams)
        # The moving obstacles at the episode's start; ``draw`` moves them along their recorded tracks.
        self.moving = [
            (j, moving_patch(ep.layout, j, ep.layout["mov_track"][0, j])) for j in moving_slots(ep.layout)
        ]
        for _, patch in self.moving:
            ax.add_patch(patch)
        (self.path,) = ax.plot([], [], color="tab:blue", lw=1.5, zorder=3)
        self.body, self.heading = draw_robot(
            ax, ep.pos[0], ep.yaw[0], info.robot_radius_m, "white", "black", "robot"
        )
        self._episode = e

    def draw(self, j: int) -> None:
        """Show frame ``j``: the robot and the moving obstacles at that step, the path up to it, its beams
        and the time."""
        e, k = self.plan[j]
        if e != self._episode:
            self._start_episode(e)
        ep, r = self.episodes[e], self.info.robot_radius_m
        for m, patch in self.moving:
            move_patch(patch, ep.layout["mov_track"][k, m])
        xy, yaw = ep.pos[k], float(ep.yaw[k])
        self.path.set_data(ep.pos[: k + 1, 0], ep.pos[: k + 1, 1])
        self.body.center = (float(xy[0]), float(xy[1]))
        self.heading.set_data([xy[0], xy[0] + r * math.cos(yaw)], [xy[1], xy[1] + r * math.sin(yaw)])
        if self.lidar:
            self.beams.set_segments(beam_segments(xy, yaw, ep.scan[k], self.info.beam_angles))
        last = k == len(ep.pos) - 1
        self.body.set_facecolor(END_STYLE[ep.reason_name][1] if last else "white")
        end = f" - {ep.reason_name}" if last else ""
        self.ax.set_title(f"episode {e}  t = {k * self.info.control_dt:.1f} s{end}", fontsize=9)

    def save(self, path: Path, fps: float, dpi: int = 72) -> None:
        """Write every frame to ``path`` (``.gif`` with Pillow, ``.mp4`` with ffmpeg)."""
        fmt = path.suffix.lstrip(".").lower()
        if fmt not in FORMATS:
            raise ValueError(f"video file {str(path)!r} has format {fmt!r}; allowed: {' | '.join(FORMATS)}")
        if fmt == "mp4" and not writers.is_available("ffmpeg"):
            raise ValueError(
                "an MP4 video needs ffmpeg on PATH (matplotlib's FFMpegWriter), not found; use gif"
            )
        writer = PalettePillowWriter(fps=fps) if fmt == "gif" else FFMpegWriter(fps=fps)
        anim = FuncAnimation(
            self.fig,
            self.draw,
            frames=len(self.plan),
            init_func=lambda: None,
            cache_frame_data=False,
            repeat=False,
        )
        anim.save(str(path), writer=writer, dpi=dpi)

    def close(self) -> None:
        plt.close(self.fig)


def write_video(
    episodes: list[Episode],
    info: SceneInfo,
    path: Path,
    fps: float = 10.0,
    max_frames: int = 300,
    lidar: bool = True,
    dpi: int = 72,
) -> int:
    """Animate ``episodes`` one after another into ``path`` (.gif or .mp4); returns the frame count.

    Frames show every state when the episodes hold at most ``max_frames`` of them, else every
    ``frame_stride``-th state (and each episode's last).
    """
    if fps <= 0:
        raise ValueError(f"fps={fps} is invalid; allowed: a number > 0")
    anim = EpisodeAnimator(episodes, info, max_frames, lidar)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        anim.save(path, fps, dpi)
    finally:
        anim.close()
    return len(anim.plan)


def log_gif(writer, tag: str, path: Path, step: int) -> None:
    """Log a GIF file to a SummaryWriter's TensorBoard events (and to W&B where the writer has a run)."""
    if hasattr(writer, "add_gif"):
        writer.add_gif(tag, path, step)  # navexp's W&B writer: both
    else:
        writer._get_file_writer().add_summary(gif_summary(tag, path), step)


def write_episode_video(episodes: list[Episode], info: SceneInfo, out: Path, video: dict) -> Path:
    """episodes.<format> of the first ``video["episodes"]`` episodes; prints what it wrote."""
    path = out / f"episodes.{video['format']}"
    shown = episodes[: video["episodes"]]
    frames = write_video(shown, info, path, video["fps"], video["max_frames"], video["lidar"])
    kind = "GIF (Pillow)" if video["format"] == "gif" else "MP4 (ffmpeg)"
    print(
        f"[navexp] wrote {kind} {path}: {len(shown)} episodes, {frames} frames at {video['fps']:g} fps, "
        f"{path.stat().st_size / 1e3:.0f} kB"
    )
    return path
