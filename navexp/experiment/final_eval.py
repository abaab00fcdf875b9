"""The end of a training: the policy the run yields (its last checkpoint, or the average of its last
checkpoints) and its held-out evaluation with trajectory figures and a GIF."""

from __future__ import annotations

from pathlib import Path

import torch
from omegaconf import DictConfig

from navexp.analysis.plots import grid_figure, scene_info, write_plots
from navexp.analysis.suites import evaluate_suite
from navexp.analysis.video import write_video
from navexp.config.run_config import eval_env_cfg
from navexp.learn.checkpoint import load_checkpoint, write_averaged_policy
from navexp.learn.runner import NavRunner
from navexp.task.env import NavEnv


def run_policy(cfg: DictConfig, runner: NavRunner, run_dir: Path, device: str) -> tuple[torch.nn.Module, str]:
    """The policy the run yields and its file: the runner's last checkpoint, or with
    ``ppo.average_checkpoints`` N > 1 the average of the last N saved checkpoints (written beside them),
    loaded into the runner's actor: training is over, and its last state is saved in ``model_<it>.pt``."""
    policy = runner.get_inference_policy(device)
    n = int(cfg.ppo.get("average_checkpoints", 1))
    path = write_averaged_policy(run_dir, n, runner.last_checkpoint) if n > 1 else None
    if path is None:
        if n > 1:
            print(
                f"[navexp] ppo.average_checkpoints={n}: the run saved fewer than two checkpoints, so its "
                f"policy is {runner.last_checkpoint}",
                flush=True,
            )
        return policy, runner.last_checkpoint
    averaged = load_checkpoint(path)
    its = averaged["infos"]["averaged_from"]
    if len(its) < n:
        print(f"[navexp] ppo.average_checkpoints={n}: the run saved {len(its)} checkpoints, averaging those")
    print(
        f"[navexp] the run's policy: the average of the checkpoints of iterations {its} -> {path}", flush=True
    )
    policy.load_state_dict(averaged["actor_state_dict"])
    return policy.eval(), str(path)


def evaluate_and_plot(policy, cfg: DictConfig, run_dir: Path) -> tuple[dict, dict, dict]:
    """The final evaluation (``eval.suite``), recorded: metrics, trajectory figures of the main entry
    (also saved under plots/) and the GIF of its first ``eval.video_episodes`` episodes (plots/eval.gif),
    as {tag: path}."""
    shown_n, video_n = int(cfg.eval.plot_episodes), int(cfg.eval.video_episodes)
    record = max(shown_n, video_n) > 0
    metrics, env, episodes = evaluate_suite(
        cfg, cfg.eval.get("suite"), lambda c: (policy, NavEnv(eval_env_cfg(c))), record=record
    )
    figures, videos = {}, {}
    info = scene_info(env)
    if shown_n > 0:
        shown = episodes[:shown_n]
        write_plots(shown, info, run_dir / "plots")
        figures["Eval/trajectories"] = grid_figure(shown, info)
    if video_n > 0:
        path = run_dir / "plots" / "eval.gif"
        ev = cfg.eval
        write_video(episodes[:video_n], info, path, float(ev.video_fps), int(ev.video_max_frames))
        videos["Eval/video"] = path
    return metrics, figures, videos
