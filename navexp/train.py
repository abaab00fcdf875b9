"""``python -m navexp.train``: config -> env -> rsl_rl runner -> logging -> evaluation -> success rate.

The Hydra app only calls ``run``; ``run`` returns the held-out evaluation success rate, which is
the objective for sweeps. Everything of a run lands in its run directory: resolved config,
run_info.json, TensorBoard events, checkpoints, W&B files and eval.json.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from navexp.config import register_configs
from navexp.rundir import claim_run_dir, releases_run_dirs
from navexp.validation import validate_env_cfg, validate_run_cfg

register_configs()


def _logger_cfg(cfg: DictConfig, run_dir: Path, run_id: str | None) -> str | dict:
    lg = cfg.logger
    if lg.type == "tensorboard":
        return "tensorboard"
    if lg.type != "wandb":
        raise ValueError(f"logger.type={lg.type!r} is invalid; allowed: tensorboard | wandb")
    return {
        "class_name": "navexp.wandb_writer:WandbWriter",
        "project": str(lg.project),
        "mode": str(lg.mode),
        "entity": lg.entity,
        "group": lg.group or str(cfg.experiment_name),
        "name": lg.name or run_dir.name,
        "tags": list(lg.tags),
        "run_id": run_id,
        "config": OmegaConf.to_container(cfg, resolve=True),
    }


def _hparams(cfg: DictConfig) -> dict:
    """Flat hyperparameters for TensorBoard's hparams view (PPO keys and reward weights)."""
    hp = {
        f"ppo.{k}": v for k, v in OmegaConf.to_container(cfg.ppo).items() if isinstance(v, (int, float, str))
    }
    hp.update({f"reward.{k}": float(v.weight) for k, v in cfg.reward.terms.items()})
    hp.update({"seed": int(cfg.seed), "env.num_envs": int(cfg.env.num_envs)})
    return hp


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


@releases_run_dirs
def run(
    cfg: DictConfig, run_dir: Path, overrides: list[str] | None = None, quiet: bool = False
) -> float | list[float]:
    """Train, evaluate and return the objective: the evaluation success rate (or the values of
    ``sweep.objectives`` when a study asks for several)."""
    from navexp.checkpoint import check_resume, load_checkpoint, write_atomic
    from navexp.env import NavEnv
    from navexp.evaluate import evaluation_record
    from navexp.presets import apply_size_preset, resolve_size
    from navexp.repro import seed_everything, write_run_record
    from navexp.rl_cfg import build_train_cfg
    from navexp.runner import NavRunner
    from navexp.sim import resolve_device
    from navexp.sweep.trial import objective, pruning_callback, record_metrics

    validate_env_cfg(cfg.env)  # env.device=cuda without CUDA fails here, before a preset is picked
    device = resolve_device(str(cfg.env.device))
    size = resolve_size(str(cfg.size), device)
    applied = apply_size_preset(cfg, size, list(overrides or []))
    validate_run_cfg(cfg)  # batch sizes, iterations and path-forming names, with the preset applied
    print(
        f"[navexp] device {device}; size preset '{size}' set {applied or 'nothing'} "
        f"(override any of these on the command line, or size=none to keep the composed values)"
    )
    ckpt, wandb_id = None, None
    if cfg.resume:
        ckpt = load_checkpoint(cfg.resume)  # a missing/truncated/foreign file fails here, nothing touched
        run_dir = Path(ckpt["_path"]).parent
        info = run_dir / "run_info.json"
        wandb_id = json.loads(info.read_text()).get("wandb_run_id") if info.is_file() else None
        print(f"[navexp] resuming {ckpt['_path']} (iteration {ckpt['iter']}) in {run_dir}")
    claim_run_dir(run_dir, fresh=ckpt is None)  # one owner, checked at once; released when run() ends
    seed_everything(int(cfg.seed))
    env = NavEnv(cfg)
    print(
        f"[navexp] simulator backend: {env.backend} (env.sim.backend={cfg.env.sim.backend}; "
        f"auto = warp on CUDA, classic mujoco on the CPU)"
    )
    om = env.obs_manager
    train_cfg = build_train_cfg(cfg)
    if ckpt is not None:
        check_resume(ckpt, cfg, env, train_cfg)  # layout, groups, model shapes: before any write
    train_cfg["logger"] = _logger_cfg(cfg, run_dir, wandb_id)
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    infos = {
        "obs_layout": om.layout(),
        "group_widths": om.group_widths,
        "history_length": om.history_length,
        "obs_groups": train_cfg["obs_groups"],
        "config": OmegaConf.to_container(cfg, resolve=True),
    }
    record = {
        "seed": int(cfg.seed),
        "device": device,
        "sim_backend": env.backend,
        "size_preset": size,
        "size_applied": applied,
        "wandb_run_id": wandb_id,
        "resumed_from": ckpt["_path"] if ckpt is not None else None,
    }
    write_run_record(run_dir, **record)
    runner = NavRunner(env, train_cfg, str(run_dir), device, infos, quiet=quiet)
    if ckpt is not None:
        runner.load_for_resume(ckpt)
    prune = pruning_callback(cfg)
    if prune is not None:
        runner.iteration_callbacks.append(prune)
    remaining = int(cfg.ppo.max_iterations) - runner.current_learning_iteration
    old = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        if remaining > 0:
            runner.learn(
                remaining, init_at_random_ep_len=bool(cfg.ppo.init_at_random_ep_len) and ckpt is None
            )
    except KeyboardInterrupt:
        path = runner.checkpoint_path()
        runner.save(path)
        print(f"[navexp] interrupted: saved {path}; continue with resume={run_dir}")
        raise
    finally:
        signal.signal(signal.SIGTERM, old)
    writer = runner.logger.writer
    record["wandb_run_id"] = getattr(writer, "run_id", None) or wandb_id
    write_run_record(run_dir, **record)
    metrics = {"success_rate": float("nan")}
    if cfg.eval.enabled:
        metrics, figures = _evaluate_and_plot(runner.get_inference_policy(device), cfg, run_dir)
        metrics.update(evaluation_record(cfg, runner.last_checkpoint, list(overrides or [])))
        print(
            f"[navexp] eval over {metrics['num_episodes']} held-out episodes: "
            f"success {metrics['success_rate']:.1%}, collision {metrics['collision_rate']:.1%}, "
            f"timeout {metrics['timeout_rate']:.1%} -> {run_dir}/eval.json"
        )
        write_atomic(run_dir / "eval.json", json.dumps(metrics, indent=2))
        _log_final(writer, cfg, metrics, runner.current_learning_iteration, figures)
        record_metrics(cfg, metrics, str(run_dir))
    if hasattr(writer, "finish"):
        writer.finish()
    return objective(cfg, metrics)


def _evaluate_and_plot(policy, cfg: DictConfig, run_dir: Path) -> tuple[dict, dict]:
    """The final evaluation, recorded: metrics plus trajectory figures (also saved under plots/)."""
    import torch

    from navexp.env import NavEnv
    from navexp.evaluate import eval_env_cfg
    from navexp.play import record_episodes, scene_info, write_plots
    from navexp.plots import grid_figure

    ecfg = eval_env_cfg(cfg)
    env = NavEnv(ecfg)
    with torch.inference_mode():
        episodes, metrics = record_episodes(policy, env, int(ecfg.eval.num_episodes))
    figures = {}
    if int(cfg.eval.plot_episodes) > 0:
        info = scene_info(env)
        shown = episodes[: int(cfg.eval.plot_episodes)]
        write_plots(shown, info, run_dir / "plots")
        figures["Eval/trajectories"] = grid_figure(shown, info)
    return metrics, figures


def _log_final(writer, cfg: DictConfig, metrics: dict, it: int, figures: dict) -> None:
    if writer is None:
        return
    for tag, fig in figures.items():
        writer.add_figure(tag, fig, it)  # closes the figure
    from navexp.evaluate import RECORD_KEYS  # what was evaluated (layout_seed, ...) is not a result

    scalars = {
        f"Eval/{k}": float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and v is not None and k not in RECORD_KEYS
    }
    for tag, value in scalars.items():
        writer.add_scalar(tag, value, it)
    writer.add_hparams(_hparams(cfg), {f"hparam/{k[5:]}": v for k, v in scalars.items()}, run_name="hparams")
    if hasattr(writer, "log_summary"):
        writer.log_summary(scalars)
    writer.flush()


@hydra.main(config_path="../configs", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | list[float]:
    hc = HydraConfig.get()
    return run(cfg, Path(hc.runtime.output_dir), list(hc.overrides.task))


if __name__ == "__main__":
    main()
