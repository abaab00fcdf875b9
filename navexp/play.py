"""Replay a checkpoint: deterministic held-out rollouts, the evaluation metrics, trajectory plots.

    python -m navexp.play checkpoint=<run dir or model_<it>.pt> [episodes=16] [env=dense] [out=DIR]
                          [beam_every=10] [any config override]

Writes into DIR (default <run dir>/play/): metrics.json, grid.png (up to 16 episodes), one
failed_<n>_<reason>.png per failed episode, and trajectories.npz (positions, yaw, speed, reasons).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from navexp.plots import Episode, SceneInfo, episode_figure, grid_figure

OPTIONS = {"checkpoint": None, "episodes": "16", "out": None, "beam_every": "10"}
USAGE = (
    "python -m navexp.play checkpoint=<run dir or model_<it>.pt> [episodes=16] [out=DIR] [beam_every=10] "
    "[config overrides]"
)


def scene_info(env) -> SceneInfo:
    from navexp.sim import beam_angles

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
    """grid.png plus one figure per failed episode; returns the files written."""
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    files = []
    fig = grid_figure(episodes, info)
    fig.savefig(out / "grid.png", dpi=90)
    plt.close(fig)
    files.append(out / "grid.png")
    for i, ep in enumerate(episodes):
        if ep.reason_name != "success":
            f = out / f"failed_{i}_{ep.reason_name}.png"
            fig = episode_figure(ep, info, f"episode {i}: {ep.reason_name}", beam_every)
            fig.savefig(f, dpi=90)
            plt.close(fig)
            files.append(f)
    return files


def save_trajectories(episodes: list[Episode], path: Path) -> None:
    data = {"reasons": np.array([e.reason for e in episodes])}
    for i, e in enumerate(episodes):
        data[f"pos_{i}"], data[f"yaw_{i}"], data[f"speed_{i}"] = e.pos, e.yaw, e.speed
    np.savez_compressed(path, **data)


def main(argv: list[str] | None = None) -> dict:
    """CLI: replay ``episodes`` held-out episodes of a checkpoint; write plots, metrics and trajectories."""
    from navexp.checkpoint import load_checkpoint
    from navexp.cli import parse_command_line
    from navexp.evaluate import evaluation_record
    from navexp.rollout import EvalRun, evaluate, load_run_config

    args = parse_command_line(list(sys.argv[1:] if argv is None else argv), OPTIONS, USAGE, ("checkpoint",))
    opts, overrides = args.options, args.overrides
    episodes_n = int(opts["episodes"])
    ckpt = load_checkpoint(opts["checkpoint"])
    cfg = load_run_config(ckpt, [*overrides, f"eval.num_episodes={episodes_n}"])
    ev = EvalRun.build(ckpt, cfg)
    metrics, episodes = evaluate(ev.actor, ev.env, episodes_n, record=True)
    metrics.update(evaluation_record(cfg, ckpt["_path"], overrides))
    out = Path(opts["out"]) if "out" in opts else Path(ckpt["_path"]).parent / "play"
    files = write_plots(episodes, scene_info(ev.env), out, int(opts["beam_every"]))
    save_trajectories(episodes, out / "trajectories.npz")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    print(json.dumps(metrics, indent=2))
    print(f"[navexp] wrote {len(files)} plots, metrics.json and trajectories.npz to {out}")
    return metrics


if __name__ == "__main__":
    main()
