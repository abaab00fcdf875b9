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
import torch

from navexp.evaluate import run_episodes, summarize
from navexp.plots import Episode, SceneInfo, episode_figure, grid_figure


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


def record_episodes(policy, env, total: int) -> tuple[list[Episode], dict]:
    """Run ``total`` held-out episodes (as evaluate does) and keep each one's trajectory and layout."""
    rounds: list[dict] = []

    def on_round(env) -> None:
        lay = {k: v.cpu().numpy().copy() for k, v in vars(env.layout).items()}
        s = env.state
        rounds.append(
            {
                "layout": lay,
                "pos": [s.pos_xy.cpu().numpy()],
                "yaw": [s.yaw.cpu().numpy()],
                "speed": [s.vel_world.norm(dim=-1).cpu().numpy()],
                "scan": [s.scan.cpu().numpy()],
                "active": [],
            }
        )

    def on_step(env, active) -> None:
        s, r = env.state, rounds[-1]
        r["pos"].append(s.pos_xy.cpu().numpy())
        r["yaw"].append(s.yaw.cpu().numpy())
        r["speed"].append(s.vel_world.norm(dim=-1).cpu().numpy())
        r["scan"].append(s.scan.cpu().numpy())
        r["active"].append(active.cpu().numpy())

    reasons, times, paths = run_episodes(policy, env, total, on_round=on_round, on_step=on_step)
    episodes = []
    for r in rounds:
        pos, yaw, speed, scan = (np.stack(r[k]) for k in ("pos", "yaw", "speed", "scan"))
        steps = np.stack(r["active"]).sum(axis=0)
        for w in range(pos.shape[1]):
            if len(episodes) == total:
                break
            t = int(steps[w]) + 1
            lay = {k: v[w] for k, v in r["layout"].items()}
            episodes.append(
                Episode(lay, pos[:t, w], yaw[:t, w], speed[:t, w], scan[:t, w], reasons[len(episodes)])
            )
    return episodes, summarize(reasons, times, paths)


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
    from navexp.checkpoint import check_compatible, load_checkpoint
    from navexp.env import NavEnv
    from navexp.evaluate import build_actor, eval_env_cfg, evaluation_record, load_run_config

    argv = list(sys.argv[1:] if argv is None else argv)
    opts = {
        k: a.split("=", 1)[1]
        for a in argv
        for k in ("checkpoint", "episodes", "out", "beam_every")
        if a.startswith(k + "=")
    }
    if "checkpoint" not in opts:
        raise SystemExit(
            "usage: python -m navexp.play checkpoint=<run dir or model_<it>.pt> [episodes=16] "
            "[env=...] [out=DIR] [beam_every=10]"
        )
    overrides = [a for a in argv if a.split("=", 1)[0] not in ("checkpoint", "episodes", "out", "beam_every")]
    episodes_n = int(opts.get("episodes", 16))
    ckpt = load_checkpoint(opts["checkpoint"])
    cfg = load_run_config(ckpt, [*overrides, f"eval.num_episodes={episodes_n}"])
    env = NavEnv(eval_env_cfg(cfg))
    check_compatible(
        ckpt, env.obs_manager.layout(), env.obs_manager.group_widths, env.obs_manager.history_length
    )
    policy = build_actor(ckpt, cfg, env)
    with torch.inference_mode():
        episodes, metrics = record_episodes(policy, env, episodes_n)
    metrics.update(evaluation_record(cfg, ckpt["_path"], overrides))
    out = Path(opts["out"]) if "out" in opts else Path(ckpt["_path"]).parent / "play"
    files = write_plots(episodes, scene_info(env), out, int(opts.get("beam_every", 10)))
    save_trajectories(episodes, out / "trajectories.npz")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    print(json.dumps(metrics, indent=2))
    print(f"[navexp] wrote {len(files)} plots, metrics.json and trajectories.npz to {out}")
    return metrics


if __name__ == "__main__":
    main()
