"""Replay plots, policy export (TorchScript, ONNX) and the numpy deployment path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY

RUN = [
    *TINY,
    "ppo.save_interval=1",
    "eval.num_episodes=4",
    "eval.plot_episodes=4",
    "size=none",
    "obs.terms.lidar.params.encoding=log",  # must travel through export (a file without it reads linear)
]


@pytest.fixture(scope="module")
def run_dir(tiny_run) -> Path:
    """One tiny trained run shared by the tests of this module."""
    return tiny_run(RUN)


@pytest.fixture(scope="module")
def recorded(run_dir):
    """The framework actor, 24 observations recorded from the env, and the raw sensor values behind them."""
    from navexp.config.run_config import load_run_config
    from navexp.learn.checkpoint import load_checkpoint
    from navexp.learn.rl_cfg import build_actor
    from navexp.sim.layout import rotate_xy
    from navexp.task.env import NavEnv

    ckpt = load_checkpoint(run_dir)
    cfg = load_run_config(ckpt, ["env.num_envs=4", "env.lidar.range_noise_std_m=0.01"])
    env = NavEnv(cfg)
    actor = build_actor(ckpt, cfg, env.get_observations(), env.num_actions)
    obs, raw = [], []
    with torch.inference_mode():
        for _ in range(6):
            o = env.get_observations()
            s = env.state
            goal_body = rotate_xy(s.goal_xy - s.pos_xy, -s.yaw)
            obs.append(o["policy"].clone())
            raw += [
                (
                    s.scan[i].numpy().copy(),
                    goal_body[i].numpy().copy(),
                    s.vel_body[i].numpy().copy(),
                    float(s.omega[i]),
                )
                for i in range(4)
            ]
            env.step(actor(o))
    return ckpt, actor, torch.cat(obs), raw


def test_torchscript_and_onnx_match_the_framework_actor(run_dir, recorded, tmp_path):
    """policy.pt and policy.onnx give rsl_rl's deterministic action within 1e-5 on 24 recorded obs; the
    export folder holds the four files and nothing else, and policy.onnx copied alone runs."""
    import onnxruntime as ort

    from navexp import export

    files = export.main([f"checkpoint={run_dir}", f"out={tmp_path}"])
    _, actor, obs, _ = recorded
    with torch.inference_mode():
        expected = actor(__import__("tensordict").TensorDict({"policy": obs}, batch_size=[len(obs)]))
    ts = torch.jit.load(str(files["torchscript"]))
    assert torch.allclose(ts(obs), expected, atol=1e-5)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f.name for f in files.values())
    alone = tmp_path / "alone"  # the ONNX file by itself (its weights inside), as a robot receives it
    alone.mkdir()
    (alone / "policy.onnx").write_bytes(files["onnx"].read_bytes())
    sess = ort.InferenceSession(str(alone / "policy.onnx"))
    onnx_out = sess.run(["actions"], {"obs": obs.numpy()})[0]
    assert np.abs(onnx_out - expected.numpy()).max() < 1e-5
    meta = __import__("json").loads(files["meta"].read_text())
    assert meta["obs"]["terms"] == [["lidar", 72], ["goal_polar", 3], ["vel_body", 2], ["omega", 1]]
    assert meta["obs"]["width"] == 78 and meta["lidar"]["num_beams"] == 72
    assert meta["action"]["scale"] == [1.5, 1.5, 2.0]


def test_numpy_deployment_reproduces_the_action_from_raw_sensors(run_dir, recorded, tmp_path):
    """NumpyPolicy rebuilds the 78 observation columns (the scan log-encoded as trained) from
    scan/goal/velocity; same action."""
    from navexp import export
    from navexp.deploy import NumpyPolicy

    files = export.main([f"checkpoint={run_dir}", f"out={tmp_path}"])
    _, actor, obs, raw = recorded
    policy = NumpyPolicy.load(str(files["numpy"]))
    with torch.inference_mode():
        expected = actor(__import__("tensordict").TensorDict({"policy": obs}, batch_size=[len(obs)]))
    for i, (scan, goal, vel, omega) in enumerate(raw):
        policy.reset()
        built = policy.observation(scan, goal, vel, omega)
        assert np.abs(built - obs[i].numpy()).max() < 1e-5
        a = policy.act(built)
        assert np.abs(a - expected[i].clamp(-1, 1).numpy()).max() < 1e-5
    vx, vy, wz = policy.command(*raw[0])
    assert abs(vx) <= 1.5 and abs(vy) <= 1.5 and abs(wz) <= 2.0
    # The deployment path needs numpy alone: no torch, Hydra or simulator is imported.
    code = (
        "import sys; from navexp.deploy import NumpyPolicy; "
        f"p = NumpyPolicy.load({str(files['numpy'])!r}); p.command([1.0] * 72, [2.0, 0.0], [0.0, 0.0], 0.0); "
        "bad = [m for m in ('torch', 'mujoco', 'warp', 'mujoco_warp', 'hydra') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_play_writes_plots_and_replays_the_same_path(run_dir, tmp_path):
    """Two plays with the same seed record identical trajectories; failed episodes get their own figure,
    and a failed-episode figure or video of an earlier play into the same folder does not stay beside them."""
    from navexp import play

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "failed_42_time_out.png").write_bytes(b"an earlier play's figure")
    (tmp_path / "a" / "episodes.gif").write_bytes(b"an earlier play's video")
    m1 = play.main([f"checkpoint={run_dir}", "episodes=5", f"out={tmp_path / 'a'}"])
    play.main([f"checkpoint={run_dir}", "episodes=5", f"out={tmp_path / 'b'}"])
    a, b = np.load(tmp_path / "a" / "trajectories.npz"), np.load(tmp_path / "b" / "trajectories.npz")
    assert sorted(a.files) == sorted(b.files) and len(a["reasons"]) == 5
    for k in a.files:
        assert np.array_equal(a[k], b[k]), k
    assert (tmp_path / "a" / "grid.png").stat().st_size > 10_000
    failed = sorted((tmp_path / "a").glob("failed_*.png"))
    assert len(failed) == 5 - round(m1["success_rate"] * 5)
    assert (
        not (tmp_path / "a" / "failed_42_time_out.png").exists()
        and not (tmp_path / "a" / "episodes.gif").exists()
    )
    assert all(f.stat().st_size > 10_000 for f in failed)
    assert (run_dir / "plots" / "grid.png").is_file()  # the end of training drew the evaluation too


def test_play_video_and_the_final_evaluation_gif(run_dir, tmp_path):
    """play video=true writes episodes.gif, one frame per recorded state of its first 2 episodes; the end
    of training wrote plots/eval.gif (eval.video_episodes=2) and logged those bytes to TensorBoard."""
    from PIL import Image
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from navexp import play
    from navexp.analysis.plots import load_trajectories

    play.main([f"checkpoint={run_dir}", "episodes=3", "video=true", "video_episodes=2", f"out={tmp_path}"])
    episodes, info = load_trajectories(tmp_path / "trajectories.npz")
    assert len(episodes) == 3 and info.robot_radius_m == 0.2
    with Image.open(tmp_path / "episodes.gif") as im:
        assert im.n_frames == len(episodes[0].pos) + len(episodes[1].pos)
    gif = run_dir / "plots" / "eval.gif"
    acc = EventAccumulator(str(run_dir), size_guidance={"images": 0})
    acc.Reload()
    (logged,) = acc.Images("Eval/video")
    assert logged.encoded_image_string == gif.read_bytes() and gif.read_bytes()[:6] == b"GIF89a"


def test_bad_checkpoints_fail_cleanly(run_dir, tmp_path):
    from navexp import export, play

    with pytest.raises(
        ValueError, match=r"(?s)trained on observation layout.*lidar.*this config produces.*action_prev"
    ):
        play.main([f"checkpoint={run_dir}", "obs.terms.action_prev.enabled=true", f"out={tmp_path}"])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        export.main([f"checkpoint={tmp_path / 'missing.pt'}"])
    junk = tmp_path / "junk.pt"
    torch.save({"weights": 1}, junk)
    with pytest.raises(ValueError, match="not an rsl_rl/navexp checkpoint"):
        export.main([f"checkpoint={junk}"])


def test_play_refuses_its_bad_options_before_any_episode(run_dir, tmp_path, monkeypatch):
    """beam_every=abc or -1, episodes below a scenario file's entries, and out= the run's own plots/
    (the training's evaluation figures, which a play would replace) are each refused in one message
    before any episode runs: the rollout is never reached and plots/ keeps its files."""
    from navexp import play

    def no_rollout(*args, **kwargs):
        raise AssertionError("an episode ran")

    monkeypatch.setattr(play, "evaluate", no_rollout)
    scenarios = tmp_path / "two.yaml"
    scenarios.write_text(
        "scenarios:\n"
        "  - {name: a, robot: {x: -3.0, y: 0.0}, goal: {x: 3.0, y: 0.0}}\n"
        "  - {name: b, robot: {x: -3.0, y: 1.0}, goal: {x: 3.0, y: 1.0}}\n"
    )
    plots = sorted(p.name for p in (run_dir / "plots").iterdir())
    for args, message in (
        (["beam_every=abc"], r"beam_every='abc' is invalid; allowed: int >= 1"),
        (["beam_every=-1"], r"beam_every='-1' is invalid; allowed: int >= 1"),
        (["episodes=1", f"env.scenarios={scenarios}"], r"episodes=1 is fewer than the 2 entries .*\['b'\]"),
        ([f"out={run_dir / 'plots'}"], r"holds the run's own files"),
        ([f"out={run_dir}"], r"holds the run's own files"),
    ):
        with pytest.raises(ValueError, match=message):
            play.main([f"checkpoint={run_dir}", *args])
    assert sorted(p.name for p in (run_dir / "plots").iterdir()) == plots


def test_play_of_a_scenario_file_without_episodes_plays_every_entry(run_dir, tmp_path):
    """The shipped maze_small map has 32 start/goal pairs, more than play's default 16 episodes: without
    episodes= every pair plays once (before: refused, or only the first 16 played)."""
    from navexp import play

    metrics = play.main(
        [
            f"checkpoint={run_dir}",
            "env.scenarios=maze_small",
            "env.obstacles.wall_slots=64",
            f"out={tmp_path}",
        ]
    )
    assert metrics["num_episodes"] == 32


def test_the_safety_filter_travels_with_the_export(run_dir, tmp_path):
    """Exported with env.robot.safety_horizon_s=0.1, the action block holds the filter; a full-speed
    forward command 0.27 m from a wall ahead (3 cm beyond the 4 cm margin) becomes 0.03 m / 0.1 s =
    0.30 m/s with the yaw rate kept, and NumpyPolicy.command passes its network's command through it."""
    import json

    from navexp.config.run_config import load_run_config
    from navexp.deploy import NumpyPolicy
    from navexp.deploy.export import export
    from navexp.deploy.safety_filter import apply_safety_filter
    from navexp.learn.checkpoint import load_checkpoint

    ckpt = load_checkpoint(run_dir)
    files = export(ckpt, load_run_config(ckpt, ["env.robot.safety_horizon_s=0.1"]), tmp_path)
    meta = json.loads(files["meta"].read_text())
    sf = meta["action"]["safety_filter"]
    assert (sf["horizon_s"], sf["margin_m"], sf["radius_m"], sf["linear_axes"]) == (0.1, 0.04, 0.2, [0, 1])
    angles = np.asarray(meta["lidar"]["beam_angles_rad"])
    cos = np.cos(angles)
    scan = np.where(cos > 1e-9, 0.27 / np.maximum(cos, 1e-9), np.inf)  # misses read max range
    assert apply_safety_filter(np.array([1.5, 0.0, 0.5]), scan, meta) == pytest.approx(
        [0.3, 0.0, 0.5], abs=1e-6
    )
    # Boxed in 1 cm from every side: whatever the network commands, the robot only turns.
    ring = np.full(angles.size, 0.21)
    policy = NumpyPolicy.load(str(files["numpy"]))
    unfiltered = policy.act(policy.observation(ring, [2.0, 0.0], [0.0, 0.0], 0.0)) * policy.action_scale
    policy.reset()
    got = policy.command(ring, [2.0, 0.0], [0.0, 0.0], 0.0)
    assert np.hypot(*unfiltered[:2]) > 0.05  # the network does command a motion here
    assert got == pytest.approx(apply_safety_filter(unfiltered, ring, meta).tolist(), abs=1e-9)
    assert np.hypot(*got[:2]) < 0.02 and got[2] == pytest.approx(unfiltered[2])
