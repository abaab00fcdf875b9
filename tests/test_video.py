"""Episode videos (GIF), the end pose at robot size, and figures redrawn from trajectories.npz alone."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from conftest import BASE
from matplotlib.patches import Circle, Rectangle
from PIL import Image

from navexp import compose_config
from navexp.analysis.plots import (
    Episode,
    episode_figure,
    grid_figure,
    load_trajectories,
    redraw_from_npz,
    save_trajectories,
    write_plots,
)
from navexp.analysis.video import EpisodeAnimator, frame_plan, frame_stride, write_video

ROBOT_RADIUS_M = 0.2  # EnvCfg.robot.radius_m


@pytest.fixture(scope="module")
def recorded():
    """Two held-out 1 s episodes (at most 10 control steps, 11 states) of a constant action."""
    from navexp.analysis.plots import scene_info
    from navexp.analysis.rollout import evaluate
    from navexp.config.run_config import eval_env_cfg
    from navexp.task.env import NavEnv

    cfg = compose_config([*BASE, "env.num_envs=2", "env.episode_length_s=1.0", "eval.num_episodes=2"])
    env = NavEnv(eval_env_cfg(cfg))
    action = torch.full((2, env.num_actions), 0.5)
    _, episodes = evaluate(lambda obs: action, env, 2, record=True)
    assert cfg.env.robot.radius_m == ROBOT_RADIUS_M
    return episodes, scene_info(env)


def test_gif_has_one_frame_per_recorded_state(recorded, tmp_path):
    """Under max_frames, the GIF read back with Pillow holds exactly the recorded states (<= 2 x 11)."""
    episodes, info = recorded
    states = sum(len(ep.pos) for ep in episodes)
    path = tmp_path / "e.gif"
    assert write_video(episodes, info, path, fps=10, max_frames=300) == states
    with Image.open(path) as im:
        assert im.format == "GIF" and im.n_frames == states
        assert im.info["duration"] == 100  # 1000 ms / 10 fps
    assert 2 <= states <= 22 and path.stat().st_size < 40_000 * states  # kilobytes per frame, not more


def test_long_episodes_are_downsampled_keeping_each_last_state(recorded, tmp_path):
    """Two 11-state episodes in at most 5 frames: stride ceil(22 / 5) = 5, steps 0, 5, 10 of each."""
    assert frame_stride(22, 5) == 5 and frame_stride(22, 22) == 1 and frame_stride(23, 22) == 2
    fake = [Episode({}, np.zeros((n, 2)), np.zeros(n), np.zeros(n), np.zeros((n, 1)), 0) for n in (11, 8)]
    # 8 states (steps 0..7): 0, 5 and the last, 7.
    assert frame_plan(fake, 5) == [(0, 0), (0, 5), (0, 10), (1, 0), (1, 5), (1, 7)]
    episodes, info = recorded
    path = tmp_path / "short.gif"
    frames = write_video(episodes, info, path, max_frames=2)
    states = [len(ep.pos) for ep in episodes]
    stride = math.ceil(sum(states) / 2)
    expected = sum(len(range(0, n, stride)) + ((n - 1) % stride != 0) for n in states)
    with Image.open(path) as im:
        assert frames == expected == im.n_frames


def test_video_robot_is_drawn_at_its_radius_with_its_heading(recorded):
    """Each frame's robot circle has the config's 0.2 m radius, sits at the recorded position, and its
    heading mark runs 0.2 m from the centre along the recorded yaw."""
    episodes, info = recorded
    anim = EpisodeAnimator(episodes, info)
    try:
        for j in (0, len(anim.plan) - 1):
            e, k = anim.plan[j]
            anim.draw(j)
            (robot,) = [p for p in anim.ax.patches if p.get_gid() == "robot"]
            assert robot.radius == pytest.approx(ROBOT_RADIUS_M)
            assert np.allclose(robot.center, episodes[e].pos[k])
            xs, ys = anim.heading.get_data()
            yaw = episodes[e].yaw[k]
            tip = episodes[e].pos[k] + ROBOT_RADIUS_M * np.array([math.cos(yaw), math.sin(yaw)])
            assert np.allclose([xs[1], ys[1]], tip, atol=1e-6)
            assert len(anim.beams.get_segments()) == len(info.beam_angles) == 72
    finally:
        anim.close()


def _touching_episode() -> Episode:
    """A collision ending at (0.5, 0) beside a 0.3 m cylinder at (1, 0), plus a vertical wall segment.

    The end pose's circle touches the cylinder: |(1, 0) - (0.5, 0)| = 0.5 = 0.3 + 0.2. The wall, centre
    (-1, 0), half extents (1, 0.05), yaw 90 deg, covers x in [-1.05, -0.95] and y in [-1, 1].
    """
    layout = {
        "cyl_xy": np.array([[1.0, 0.0], [0.0, 2.0]]),
        "cyl_r": np.array([0.3, 0.4]),
        "cyl_active": np.array([True, False]),
        "box_xy": np.zeros((1, 2)),
        "box_half": np.full((1, 2), 0.1),
        "box_yaw": np.zeros(1),
        "box_active": np.array([False]),
        "wall_xy": np.array([[-1.0, 0.0]]),
        "wall_half": np.array([[1.0, 0.05]]),
        "wall_yaw": np.array([math.pi / 2]),
        "wall_active": np.array([True]),
        "robot_xy": np.array([-0.5, 0.0]),
        "robot_yaw": np.array(0.0),
        "goal_xy": np.array([2.0, 2.0]),
    }
    pos = np.stack((np.linspace(-0.5, 0.5, 6), np.zeros(6)), axis=1)
    return Episode(layout, pos, np.zeros(6), np.full(6, 1.0), np.full((6, 72), 3.0), 2)  # 2: collision


def test_end_pose_is_drawn_at_robot_size_and_touches_the_obstacle(recorded):
    """A collision's end pose is a 0.2 m circle whose rim meets the cylinder's (centres 0.5 m apart)."""
    _, info = recorded
    ep = _touching_episode()
    assert ep.reason_name == "collision"
    fig = episode_figure(ep, info, "touch")
    ax = fig.axes[0]
    (end,) = [p for p in ax.patches if p.get_gid() == "robot_end"]
    (cyl,) = [p for p in ax.patches if p.get_gid() == "cyl"]  # the inactive slot is not drawn
    assert end.radius == pytest.approx(ROBOT_RADIUS_M) and np.allclose(end.center, [0.5, 0.0])
    gap = math.dist(end.center, cyl.center) - end.radius - cyl.radius
    assert gap == pytest.approx(0.0, abs=1e-9)
    (wall,) = [p for p in ax.patches if p.get_gid() == "wall"]
    corners = wall.get_corners()
    assert np.allclose(corners.min(axis=0), [-1.05, -1.0]) and np.allclose(corners.max(axis=0), [-0.95, 1.0])
    plt.close(fig)


def _geometry(fig) -> list[tuple]:
    """Every patch's kind, gid and geometry, and every line collection's segments, rounded to 1e-6."""
    ax = fig.axes[0]
    out = []
    for p in ax.patches:
        if isinstance(p, Circle):
            out.append(("circle", p.get_gid(), *np.round([*p.center, p.radius], 6)))
        elif isinstance(p, Rectangle):
            out.append(
                ("rect", p.get_gid(), *np.round([*p.get_xy(), p.get_width(), p.get_height(), p.angle], 6))
            )
    for c in ax.collections:
        segs = c.get_segments() if hasattr(c, "get_segments") else []
        out.append(("segments", len(segs), np.round(np.sum([s.sum() for s in segs]), 4)))
    return out


def test_npz_alone_redraws_the_same_figure(recorded, tmp_path):
    """A figure redrawn from trajectories.npz has the same patches at the same places (room, obstacles,
    goal, start and end pose, a wall kind the simulator does not have yet) and the same beams and path."""
    episodes, info = recorded
    episodes = [*episodes, _touching_episode()]
    path = tmp_path / "trajectories.npz"
    save_trajectories(episodes, info, path)
    loaded, info2 = load_trajectories(path)
    assert info2.robot_radius_m == ROBOT_RADIUS_M and info2.half_x == info.half_x
    assert np.array_equal(info2.beam_angles, info.beam_angles)
    assert sorted(loaded[2].layout) == sorted(episodes[2].layout)
    for i, ep in enumerate(episodes):
        original = episode_figure(ep, info, f"episode {i}: {ep.reason_name}", 10)
        redrawn = redraw_from_npz(path, i)
        assert _geometry(redrawn) == _geometry(original)
        kinds = {g[1] for g in _geometry(redrawn) if g[0] != "segments"}
        assert {"room", "goal", "robot_start", "robot_end"} <= kinds
        plt.close(original)
        plt.close(redrawn)
    assert "wall" in {g[1] for g in _geometry(redraw_from_npz(path, 2))}
    with pytest.raises(ValueError, match=r"index=3 is invalid; allowed: 0 <= index < 3"):
        redraw_from_npz(path, 3)
    np.savez(tmp_path / "bare.npz", reasons=np.zeros(1))
    with pytest.raises(ValueError, match="holds no scene"):
        load_trajectories(tmp_path / "bare.npz")


def test_invalid_video_options_fail_naming_the_value_and_the_choices(recorded, tmp_path):
    """video=, fps=, video_lidar= and the file format reject bad values with the valid ones listed."""
    from matplotlib.animation import writers

    from navexp.play import OPTIONS, video_options

    assert video_options(dict(OPTIONS)) is None  # video=false
    assert video_options({**OPTIONS, "video": "TRUE"})["format"] == "gif"
    with pytest.raises(ValueError, match=r"video='maybe' is invalid; allowed: false \| true \| gif \| mp4"):
        video_options({**OPTIONS, "video": "maybe"})
    with pytest.raises(ValueError, match=r"fps='0' is invalid; allowed: float >= 0.1"):
        video_options({**OPTIONS, "video": "true", "fps": "0"})
    with pytest.raises(ValueError, match=r"video_lidar='yes' is invalid; allowed: true \| false"):
        video_options({**OPTIONS, "video": "true", "video_lidar": "yes"})
    episodes, info = recorded
    with pytest.raises(ValueError, match=r"format 'avi'; allowed: gif \| mp4"):
        write_video(episodes, info, tmp_path / "e.avi")
    if not writers.is_available("ffmpeg"):
        with pytest.raises(ValueError, match="needs ffmpeg"):
            write_video(episodes, info, tmp_path / "e.mp4")
    with pytest.raises(ValueError, match=r"eval.video_episodes=-1 is invalid; allowed: an integer >= 0"):
        from navexp.config.validation import validate_run_cfg

        validate_run_cfg(compose_config([*BASE, "eval.video_episodes=-1"]))


def _long_episode(states: int = 151) -> Episode:
    """A 15 s time-out (151 states) in the touching episode's room, every beam hitting at 3 m."""
    ep = _touching_episode()
    pos = np.stack((np.linspace(-2.0, 2.0, states), np.linspace(-2.0, -1.0, states)), axis=1)
    scan = np.full((states, 72), 3.0)
    return Episode(ep.layout, pos, np.zeros(states), np.full(states, 0.5), scan, 4)  # 4: time_out


def test_trajectory_figures_name_their_markers_axes_and_colours(recorded, tmp_path):
    """grid.png and failed_<i>_<reason>.png as write_plots saves them: a legend naming the start, the
    goal and each end shown (here a collision and a time out), axes x (m) and y (m) with integer metre
    ticks inside the room (+-4 m), a colour bar "path colour: speed (m/s)" from 0 to the top speed
    (1.5 * sqrt(2) = 2.12 m/s), and nothing cut at the image's edge: its outermost pixel rows and
    columns are white (before: no legend, no ticks, no colour bar on the grid, titles cut at the top)."""
    episodes, info = recorded
    eps = [_touching_episode(), _long_episode(), *episodes]
    fig = grid_figure(eps, info)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[:2] == ["start (robot size)", "goal (its radius)"]
    assert {"end: collision", "end: time out"} <= set(labels)
    assert "moving obstacle (at the end)" not in labels  # static episodes: no moving obstacle to name
    (bar,) = [a for a in fig.axes if a.get_ylabel() == "path colour: speed (m/s)"]
    assert bar.get_ylim() == pytest.approx((0.0, 1.5 * math.sqrt(2)))
    panels = fig.axes[: len(eps)]
    assert [a.get_ylabel() for a in panels] == ["y (m)"] + [""] * (len(eps) - 1)  # one row: x on each
    assert all(a.get_xlabel() == "x (m)" for a in panels)
    for ax in panels:
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert len(ticks) >= 3 and all(float(t).is_integer() and abs(t) <= 4 for t in ticks)
    plt.close(fig)
    files = write_plots(eps, info, tmp_path)
    assert [f.name for f in files][:3] == ["grid.png", "failed_0_collision.png", "failed_1_time_out.png"]
    for f in files:
        rgb = np.asarray(Image.open(f).convert("RGB"))
        border = np.concatenate([rgb[0], rgb[-1], rgb[:, 0], rgb[:, -1]])
        assert (border == 255).all(), f.name


def test_the_lidar_fan_does_not_cover_the_room(recorded):
    """A 15 s episode drawn as a failed_* figure (beam_every=10): LiDAR rays at the last step only, at
    most 36 of the 72 beams (every 2nd), and the 15 earlier scans as hit points; together they change
    under 10 % of the axes' pixels (7.8 % here; before: 16 fans of 72 rays each, 1152 rays, 46 %)."""
    _, info = recorded
    fig = episode_figure(_long_episode(), info, "episode 0: time_out", 10)
    ax = fig.axes[0]
    (rays,) = [c for c in ax.collections if c.get_gid() == "lidar"]
    assert len(rays.get_segments()) == 36
    (hits,) = [c for c in ax.collections if c.get_gid() == "lidar_hits"]
    assert len(hits.get_offsets()) == 15 * 36
    fig.canvas.draw()
    box = ax.get_window_extent().bounds
    x0, y0, w, h = (int(round(v)) for v in box)
    height = fig.canvas.get_width_height()[1]

    def pixels():
        fig.canvas.draw()
        return np.asarray(fig.canvas.buffer_rgba())[height - y0 - h : height - y0, x0 : x0 + w, :3].copy()

    with_fan = pixels()
    rays.set_visible(False)
    hits.set_visible(False)
    changed = (pixels() != with_fan).any(axis=2).mean()
    assert changed < 0.10, changed
    plt.close(fig)


VIOLET = np.array([238, 130, 238])  # matplotlib's "violet", a moving obstacle's face (plots.MOVING_STYLE)


def _moving_episode() -> Episode:
    """2 s (21 states at 0.1 s) of a robot standing at (-3, -3) while a 0.4 m moving cylinder walks
    from (-2, 1) along +x at 1 m/s: at step k its centre is (-2 + 0.1 k, 1), (0, 1) at the last step.
    A second moving slot is out of play (mode 0), its track at (2, -2)."""
    t = np.arange(21) * 0.1
    track = np.zeros((21, 2, 2))
    track[:, 0] = np.stack((-2.0 + t, np.ones(21)), axis=1)
    track[:, 1] = [2.0, -2.0]
    layout = {
        "goal_xy": np.array([3.0, 3.0]),
        "mov_mode": np.array([2, 0]),
        "mov_size": np.array([[0.4, 0.4], [0.3, 0.3]]),
        "mov_is_box": np.array([False, False]),
        "mov_track": track,
    }
    pos = np.full((21, 2), -3.0)
    return Episode(layout, pos, np.zeros(21), np.zeros(21), np.full((21, 72), 3.0), 4)  # 4: time_out


def _rgb_at(frame: np.ndarray, anim: EpisodeAnimator, xy, dpi: int = 72) -> np.ndarray:
    """The GIF frame's colour at world point ``xy`` (the axes' data transform, scaled to the GIF's dpi;
    image rows count from the top)."""
    px, py = anim.ax.transData.transform(xy) * dpi / anim.fig.dpi
    return frame[int(round(frame.shape[0] - py)), int(round(px))].astype(int)


def _is_violet(rgb: np.ndarray) -> bool:
    return bool(np.abs(rgb - VIOLET).max() <= 20)


def test_the_video_draws_moving_obstacles_where_they_are_in_each_frame(recorded, tmp_path):
    """The GIF of the scripted episode, 21 frames: frame 0 shows the cylinder's violet at its start
    (-2, 1) and not at (0, 1); frame 10 at (-1, 1); frame 20 at (0, 1) and 0.3 m either side of it along
    x (inside its 0.4 m radius), and no longer at the start, 2 m behind. The slot out of play is never
    drawn: the floor's white at (2, -2)."""
    _, info = recorded
    ep = _moving_episode()
    path = tmp_path / "moving.gif"
    assert write_video([ep], info, path, fps=10, max_frames=300, lidar=False) == 21
    anim = EpisodeAnimator([ep], info, lidar=False)  # the same figure: its transform maps metres to pixels
    anim.draw(0)
    frames = []
    with Image.open(path) as im:
        for j in (0, 10, 20):
            im.seek(j)
            frames.append(np.asarray(im.convert("RGB")))
    try:
        first, middle, last = frames
        assert _is_violet(_rgb_at(first, anim, (-2.0, 1.0)))
        assert not _is_violet(_rgb_at(first, anim, (0.0, 1.0)))
        assert _is_violet(_rgb_at(middle, anim, (-1.0, 1.0)))
        for x in (-0.3, 0.0, 0.3):
            assert _is_violet(_rgb_at(last, anim, (x, 1.0))), x
        floor = _rgb_at(last, anim, (1.0, -1.0))  # an empty point of the room: white (252 in the palette)
        assert (floor >= 250).all()
        assert (_rgb_at(last, anim, (-2.0, 1.0)) == floor).all()  # the start: the bare floor again
        assert all((_rgb_at(f, anim, (2.0, -2.0)) == floor).all() for f in frames)
    finally:
        anim.close()


def test_a_recorded_moving_scenario_moves_the_obstacles_in_the_video(tmp_path):
    """The shipped moving scenario's crossing person (a 0.25 m cylinder from (0, -3) to (0, 3) at
    1 m/s, back and forth), recorded for 1 s: each frame's moving patch sits at the recorded track's
    position for that step, 0.1 m further each step."""
    from navexp.analysis.plots import scene_info
    from navexp.analysis.rollout import evaluate
    from navexp.config.run_config import eval_env_cfg
    from navexp.task.env import NavEnv

    overrides = ["env=dynamic", "env.scenarios=moving", "env.num_envs=1", "env.episode_length_s=1.0"]
    cfg = compose_config([*BASE, *overrides, "eval.num_episodes=1"])
    env = NavEnv(eval_env_cfg(cfg))
    _, (ep,) = evaluate(lambda obs: torch.zeros(1, env.num_actions), env, 1, record=True)
    anim = EpisodeAnimator([ep], scene_info(env), lidar=False)
    try:
        centres = []
        for j in range(len(anim.plan)):
            anim.draw(j)
            (patch,) = [p for p in anim.ax.patches if p.get_gid() == "moving"]
            assert np.allclose(patch.center, ep.layout["mov_track"][j, 0])
            centres.append(patch.center)
        assert patch.radius == pytest.approx(0.25)
        steps = np.diff(np.array(centres), axis=0)
        assert np.allclose(steps, [0.0, 0.1], atol=1e-4), steps
    finally:
        anim.close()
    for fig in (grid_figure([ep], scene_info(env)), episode_figure(ep, scene_info(env), "moving")):
        labels = [t.get_text() for t in fig.legends[0].get_texts()]
        assert {"moving obstacle (at the end)", "its track"} <= set(labels), labels
        plt.close(fig)
