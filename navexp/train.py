"""``python -m navexp.train``: config -> env -> rsl_rl runner -> logging -> evaluation -> success rate.

The Hydra app only calls ``run``; ``run`` returns the held-out evaluation success rate, which is
the objective for sweeps. Everything of a run lands in its run directory: resolved config,
run_info.json, TensorBoard events, checkpoints, W&B files and eval.json.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from navexp.config import register_configs
from navexp.rundir import claim_run_dir, releases_run_dirs
from navexp.validation import validate_env_cfg, validate_run_cfg

if TYPE_CHECKING:
    from navexp.distributed import DistContext
    from navexp.env import NavEnv
    from navexp.runner import NavRunner

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
    ``sweep.objectives`` when a study asks for several).

    Under torchrun (WORLD_SIZE > 1) this runs on every rank: each trains on its own device and worlds,
    rank 0 writes the run directory and evaluates; the other ranks return NaN.
    """
    from navexp import distributed

    ctx = distributed.setup(str(cfg.env.device))  # checks the device before anything is allocated
    try:
        return _run(cfg, run_dir, list(overrides or []), quiet or not ctx.is_main, ctx)
    finally:
        if ctx.enabled:
            distributed.shutdown()


def _with_seed(cfg: DictConfig, seed: int) -> DictConfig:
    """``cfg`` itself when it already has ``seed``, else a copy with it (a rank's own layouts and noise)."""
    if int(cfg.seed) == seed:
        return cfg
    copy = cfg.copy()
    with open_dict(copy):
        copy.seed = seed
    return copy


def _run(
    cfg: DictConfig, run_dir: Path, overrides: list[str], quiet: bool, ctx: DistContext
) -> float | list[float]:
    from navexp import distributed
    from navexp.checkpoint import check_model, check_resume, load_checkpoint, write_atomic
    from navexp.curriculum import CurriculumHook, make_curriculum, restore_curriculum
    from navexp.env import NavEnv
    from navexp.evaluate import evaluation_record
    from navexp.presets import applied_preset
    from navexp.repro import seed_everything, write_run_record
    from navexp.rl_cfg import build_train_cfg
    from navexp.runner import NavRunner
    from navexp.sim import resolve_device
    from navexp.sweep.trial import objective, pruning_callback, record_metrics

    validate_env_cfg(cfg.env)  # env.device=cuda without CUDA fails here, before anything is built
    device = resolve_device(str(cfg.env.device)) if not ctx.enabled else ctx.device
    if ctx.enabled:
        with open_dict(cfg):
            cfg.env.device = device  # cuda:<LOCAL_RANK> or cpu
    size = str(cfg.size)  # the preset group Hydra composed (the app resolved size=auto before that)
    applied = applied_preset(size, overrides)
    validate_run_cfg(cfg)  # batch sizes, iterations and path-forming names
    # A bad curriculum config fails here, before anything is written.
    curriculum = make_curriculum(cfg, NavEnv.OUTCOME_WINDOW)
    if ctx.is_main:
        print(
            f"[navexp] device {device}; size preset '{size}' set {applied or 'nothing'} "
            f"(override any of these on the command line, or size=none to keep the composed values)"
        )
    ckpt, wandb_id = None, None
    if cfg.resume:
        ckpt = load_checkpoint(cfg.resume)  # a missing/truncated/foreign file fails here, nothing touched
        check_model(ckpt, str(cfg.ppo.model))  # another ppo.model: refused before anything is built
        run_dir = Path(ckpt["_path"]).parent
        info = run_dir / "run_info.json"
        wandb_id = json.loads(info.read_text()).get("wandb_run_id") if info.is_file() else None
        print(f"[navexp] resuming {ckpt['_path']} (iteration {ckpt['iter']}) in {run_dir}")
    if ctx.enabled:  # one run directory and one checkpoint for all ranks, chosen by rank 0
        chosen_dir, chosen_ckpt = distributed.broadcast((str(run_dir), ckpt and ckpt["_path"]), ctx)
        if (ckpt and ckpt["_path"]) != chosen_ckpt:
            raise RuntimeError(
                f"rank {ctx.rank} resolved resume={cfg.resume} to {ckpt and ckpt['_path']}, "
                f"rank 0 to {chosen_ckpt}; give resume=<run>/model_<it>.pt"
            )
        run_dir = Path(chosen_dir)
    if curriculum is not None or ckpt is not None:
        restore_curriculum(curriculum, ckpt, quiet or not ctx.is_main)
    if ctx.is_main:
        claim_run_dir(run_dir, fresh=ckpt is None)  # one owner, checked at once; released when run() ends
    rank_seed = int(cfg.seed) + ctx.rank  # ranks draw their own layouts and noise
    seed_everything(rank_seed)
    with distributed.cpu_count_limited(ctx.threads):  # the MuJoCo rollout pool takes this rank's share
        # Under a curriculum the env is built at its level (its first layouts are the level's).
        env_cfg = cfg if curriculum is None else curriculum.experiment_cfg_at(cfg, curriculum.state.level)
        env = NavEnv(_with_seed(env_cfg, rank_seed))
    if ctx.is_main:
        print(
            f"[navexp] simulator backend: {env.backend} (env.sim.backend={cfg.env.sim.backend}; "
            f"auto = warp on CUDA, classic mujoco on the CPU)"
        )
    om = env.obs_manager
    train_cfg = build_train_cfg(cfg)
    if ckpt is not None:
        check_resume(ckpt, cfg, env, train_cfg)  # layout, groups, model shapes: before any write
    train_cfg["logger"] = _logger_cfg(cfg, run_dir, wandb_id)
    if ctx.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    infos = {
        "obs_layout": om.layout(),
        "group_widths": om.group_widths,
        "history_length": om.history_length,
        "obs_groups": train_cfg["obs_groups"],
        "model": {"kind": str(cfg.ppo.model), "recurrent": str(cfg.ppo.model) == "rnn"},
        "robot": env.robot.action_meta(),
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
        "world_size": ctx.world_size,
        "dist_backend": ctx.backend,
        "num_envs_total": env.num_envs * ctx.world_size,
    }
    if ctx.is_main:
        write_run_record(run_dir, **record)
    runner = NavRunner(env, train_cfg, str(run_dir), device, infos, quiet=quiet)
    if ckpt is not None:
        runner.load_for_resume(ckpt)
    if ctx.enabled:
        record["ranks"] = distributed.gather(_rank_record(ctx, env, runner, rank_seed), ctx)
        if ctx.is_main:
            write_run_record(run_dir, **record)
    prune = pruning_callback(cfg)
    if prune is not None:
        runner.iteration_callbacks.append(prune)
    if curriculum is not None:  # before the stop check: an interrupt saves the iteration's state
        runner.iteration_callbacks.append(
            CurriculumHook(curriculum, env, runner, ctx if ctx.enabled else None, quiet=quiet)
        )
    remaining = int(cfg.ppo.max_iterations) - runner.current_learning_iteration
    stop = distributed.StopRequest(ctx)  # under torchrun: all ranks stop together after an iteration
    if ctx.enabled:
        runner.iteration_callbacks.append(stop.check)
    old = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        with stop if ctx.enabled else contextlib.nullcontext():
            if remaining > 0:
                runner.learn(
                    remaining, init_at_random_ep_len=bool(cfg.ppo.init_at_random_ep_len) and ckpt is None
                )
    except KeyboardInterrupt:
        if ctx.is_main:
            path = runner.checkpoint_path()
            runner.save(path)
            print(f"[navexp] interrupted: saved {path}; continue with resume={run_dir}", flush=True)
        else:
            print(f"[navexp] rank {ctx.rank}: stopped with rank 0", flush=True)
        raise
    finally:
        signal.signal(signal.SIGTERM, old)
    if ctx.enabled:
        digests = distributed.gather(_policy_digest(runner), ctx)
        record["policy_digest_per_rank"] = digests  # equal: the ranks trained one policy
        if len(set(digests)) != 1:
            raise RuntimeError(
                f"ranks hold different policies after training ({digests}); gradients were not all-reduced"
            )
    if ctx.enabled and curriculum is not None:
        states = distributed.gather(curriculum.state_dict(), ctx)
        record["curriculum_per_rank"] = states  # equal: rank 0's decisions are broadcast
        if any(st != states[0] for st in states):
            raise RuntimeError(f"ranks ended at different curriculum states ({states})")
    if not ctx.is_main:
        return objective(cfg, {"success_rate": float("nan")})
    writer = runner.logger.writer
    record["wandb_run_id"] = getattr(writer, "run_id", None) or wandb_id
    if curriculum is not None:
        record["curriculum"] = curriculum.state_dict()
    write_run_record(run_dir, **record)
    metrics = {"success_rate": float("nan")}
    if cfg.eval.enabled:
        metrics, figures, videos = _evaluate_and_plot(runner.get_inference_policy(device), cfg, run_dir)
        metrics.update(evaluation_record(cfg, runner.last_checkpoint, overrides, cfg.eval.get("suite")))
        print(
            f"[navexp] eval over {metrics['num_episodes']} held-out episodes: "
            f"success {metrics['success_rate']:.1%}, collision {metrics['collision_rate']:.1%}, "
            f"timeout {metrics['timeout_rate']:.1%} -> {run_dir}/eval.json"
        )
        write_atomic(run_dir / "eval.json", json.dumps(metrics, indent=2))
        _log_final(writer, cfg, metrics, runner.current_learning_iteration, figures, videos)
        record_metrics(cfg, metrics, str(run_dir))
    if hasattr(writer, "finish"):
        writer.finish()
    return objective(cfg, metrics)


def _rank_record(ctx: DistContext, env: NavEnv, runner: NavRunner, seed: int) -> dict:
    """What one rank runs with (printed by the rank, gathered into run_info.json by rank 0)."""
    import torch

    from navexp.distributed import tensor_digest

    torch_threads = torch.get_num_threads()
    sim_threads = getattr(getattr(env.sim, "_rollout", None), "nthread", None)  # classic MuJoCo's pool
    rec = {
        "rank": ctx.rank,
        "local_rank": ctx.local_rank,
        "device": str(env.device),
        "seed": seed,
        "num_envs": env.num_envs,
        "torch_threads": torch_threads,
        "sim_threads": sim_threads,
        "first_layout_digest": tensor_digest([v for v in vars(env.layout).values()]),
        "start_iteration": runner.current_learning_iteration,
    }
    print(
        f"[navexp] rank {ctx.rank}/{ctx.world_size} (local {ctx.local_rank}, {ctx.backend}): device "
        f"{rec['device']}, seed {seed}, {env.num_envs} worlds of {env.num_envs * ctx.world_size}, "
        f"{torch_threads} torch thread(s), {sim_threads or '-'} MuJoCo rollout thread(s), "
        f"starts at iteration {rec['start_iteration']}",
        flush=True,
    )
    return rec


def _policy_digest(runner: NavRunner) -> str:
    """Digest of the actor and critic (weights and normalizer statistics) of this rank."""
    from navexp.distributed import tensor_digest

    saved = runner.alg.save()
    return tensor_digest([*saved["actor_state_dict"].values(), *saved["critic_state_dict"].values()])


def _evaluate_and_plot(policy, cfg: DictConfig, run_dir: Path) -> tuple[dict, dict, dict]:
    """The final evaluation (``eval.suite``), recorded: metrics, trajectory figures of the main entry
    (also saved under plots/) and the GIF of its first ``eval.video_episodes`` episodes (plots/eval.gif),
    as {tag: path}."""
    from navexp.env import NavEnv
    from navexp.play import scene_info, write_plots
    from navexp.plots import grid_figure
    from navexp.rollout import eval_env_cfg
    from navexp.suites import evaluate_suite
    from navexp.video import write_video

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


def _log_final(writer, cfg: DictConfig, metrics: dict, it: int, figures: dict, videos: dict) -> None:
    if writer is None:
        return
    from navexp.video import log_gif

    for tag, fig in figures.items():
        writer.add_figure(tag, fig, it)  # closes the figure
    for tag, path in videos.items():
        log_gif(writer, tag, path, it)
    from navexp.evaluate import RECORD_KEYS  # what was evaluated (layout_seed, ...) is not a result
    from navexp.suites import eval_scalars

    scalars = eval_scalars(metrics, skip=RECORD_KEYS)  # Eval/<metric>, Eval/<entry>/[<group>/]<metric>
    for tag, value in scalars.items():
        writer.add_scalar(tag, value, it)
    main = {f"hparam/{k[5:]}": v for k, v in scalars.items() if k.count("/") == 1}  # the main entry's
    writer.add_hparams(_hparams(cfg), main, run_name="hparams")
    if hasattr(writer, "log_summary"):
        writer.log_summary(scalars)
    writer.flush()


@hydra.main(config_path="../configs", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | list[float]:
    hc = HydraConfig.get()
    if hc.mode == RunMode.MULTIRUN and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ValueError(
            f"sweeps (-m) under torchrun (WORLD_SIZE={os.environ['WORLD_SIZE']}) are not supported; "
            f"run a sweep with `python -m navexp.train -m ...` or train one run with torchrun"
        )
    return run(cfg, Path(hc.runtime.output_dir), list(hc.overrides.task))


def app_argv(argv: list[str]) -> list[str]:
    """The command line Hydra composes from: ``size=auto`` (the default) resolved to ``size=gpu|cpu``
    first, so the composed config is the run's config (in a sweep, every trial inherits the choice);
    under torchrun only rank 0 gets a Hydra run directory."""
    from navexp.distributed import worker_hydra_overrides
    from navexp.presets import size_override_argv

    try:
        argv = size_override_argv(argv)
    except ValueError as e:
        raise SystemExit(f"Error: {e}") from None
    return worker_hydra_overrides(argv)


if __name__ == "__main__":
    sys.argv = app_argv(sys.argv)
    main()
