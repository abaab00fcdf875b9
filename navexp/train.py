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
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import hydra
import torch
import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.errors import CompactHydraException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from navexp.analysis.eval_record import (
    RECORD_KEYS,  # what was evaluated (layout_seed, ...) is not a result
    evaluation_record,
)
from navexp.analysis.plots import grid_figure, scene_info, write_plots
from navexp.analysis.suites import eval_scalars, evaluate_suite
from navexp.analysis.video import log_gif, write_video
from navexp.config.aliases import translate_argv
from navexp.config.presets import add_overrides, applied_preset, override_value, size_override_argv
from navexp.config.run_config import eval_env_cfg
from navexp.config.schemas import register_configs
from navexp.config.validation import validate_run_cfg
from navexp.experiment.repro import (
    SEGMENT_FOLDERS,
    archive_segment,
    flat_changes,
    seed_everything,
    write_run_record,
)
from navexp.experiment.rundir import claim_run_dir, releases_run_dirs
from navexp.learn import distributed
from navexp.learn.checkpoint import (
    check_resume,
    check_resume_source,
    later_checkpoints,
    load_checkpoint,
    resolve_checkpoint,
    stored_config,
    write_atomic,
    write_averaged_policy,
)
from navexp.learn.cores import HostShare, usable_cores
from navexp.learn.curriculum_hook import CurriculumHook
from navexp.learn.distributed import DistContext, tensor_digest, worker_hydra_overrides
from navexp.learn.ppo_cfg import ppo_hparams
from navexp.learn.rl_cfg import build_train_cfg
from navexp.learn.runner import NavRunner
from navexp.paths import overrides_record
from navexp.sim import resolve_device
from navexp.sweep.trial import objective, pruning_callback, record_metrics, trial_record
from navexp.task.curriculum import SuccessCurriculum, make_curriculum, restore_curriculum
from navexp.task.env import NavEnv
from navexp.task.maps.pool import LayoutSamplingError

register_configs()


def _logger_cfg(
    cfg: DictConfig, run_dir: Path, run_id: str | None, first_step: int | None = None
) -> str | dict:
    """rsl_rl's logger entry: TensorBoard, or navexp's W&B writer; a sweep trial's run is marked as one
    (``job_type="trial"``, tags, and ``config.optuna``: what was searched). A resume's writer hides the
    run's events from ``first_step`` on (TensorBoard's ``purge_step``): what an earlier segment logged
    after the checkpoint it continues (a run killed past its last save, a branch from an earlier
    checkpoint) leaves the curves, which the resumed segment draws again."""
    lg = cfg.logger
    if lg.type == "tensorboard":
        if first_step is None:
            return "tensorboard"
        return {
            "class_name": "torch.utils.tensorboard:SummaryWriter",
            "flush_secs": 10,
            "purge_step": first_step,
        }
    config = OmegaConf.to_container(cfg, resolve=True)
    tags, job_type = list(lg.tags), "train"
    optuna_record = trial_record(cfg)
    if optuna_record is not None:
        config["optuna"] = optuna_record
        job_type = "trial"
        tags += [f"study:{optuna_record['study']}", *(f"objective:{o}" for o in optuna_record["objectives"])]
        tags += [f"searched:{k}" for k in optuna_record["params"]]
    return {
        "class_name": "navexp.learn.wandb_writer:WandbWriter",
        "project": str(lg.project),
        "mode": str(lg.mode),
        "entity": lg.entity,
        "group": lg.group or str(cfg.experiment_name),
        "name": lg.name or run_dir.name,
        "tags": tags,
        "run_id": run_id,
        "config": config,
        "job_type": job_type,
        "purge_step": first_step,
    }


def _hparams(cfg: DictConfig) -> dict:
    """Flat hyperparameters for TensorBoard's hparams view (PPO keys and reward weights)."""
    hp = ppo_hparams(cfg.ppo)
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
    ctx = distributed.setup(str(cfg.env.device))  # checks the device before anything is allocated
    try:
        with HostShare() as host:  # trainings on one host share its cores (navexp/learn/cores.py)
            host.cap = ctx.threads  # a torchrun rank never takes more than its rank share
            threads = min(host.apply(quiet=True), ctx.threads or usable_cores())
            ctx = replace(ctx, threads=threads)
            return _run(cfg, run_dir, list(overrides or []), quiet or not ctx.is_main, ctx, host)
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


@dataclass
class Start:
    """What a run starts from, agreed by every rank before anything is built."""

    run_dir: Path
    device: str
    size: str
    """The size preset Hydra composed (the app resolved ``size=auto`` before that)."""
    applied: dict
    """The keys the preset set (those not overridden on the command line)."""
    curriculum: SuccessCurriculum | None
    ckpt: dict | None = None
    """The checkpoint a resume continues (None: a new run)."""
    wandb_id: str | None = None
    started: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    """When this launch (this segment of the run) started: its key in run_info.json's segments."""
    changed: dict = field(default_factory=dict)
    """A resume's config keys that differ from its checkpoint's: {key: [checkpoint's, this launch's]}."""


@dataclass
class Training:
    """A built run: the env, rsl_rl's runner and the run record (run_info.json)."""

    env: NavEnv
    runner: NavRunner
    record: dict = field(default_factory=dict)


def _run(
    cfg: DictConfig, run_dir: Path, overrides: list[str], quiet: bool, ctx: DistContext, host: HostShare
) -> float | list[float]:
    start = _prepare(cfg, run_dir, overrides, quiet, ctx)
    training = _build(cfg, start, quiet, ctx)
    training.runner.iteration_callbacks.insert(0, host.on_iteration)
    try:
        _learn(cfg, training.runner, start, ctx)
        _check_ranks_agree(training, start, ctx)
        if not ctx.is_main:
            return objective(cfg, {"success_rate": float("nan")})
        signalled: list[int] = []

        def on_sigterm(signum, frame):
            signalled.append(signum)
            _raise_keyboard_interrupt(signum, frame)

        old = signal.signal(signal.SIGTERM, on_sigterm)
        try:
            return _finish(cfg, training, start, overrides)
        except BaseException as e:
            # A KeyboardInterrupt raised inside a library can come out as that library's own error
            # (omegaconf's cleanup after an interrupted merge: AttributeError): a SIGTERM that arrived is
            # the reason whatever the exception says.
            if not (isinstance(e, KeyboardInterrupt) or signalled):
                raise
            print(
                f"[navexp] interrupted during the final evaluation: training finished and is saved in "
                f"{training.runner.last_checkpoint}; eval.json was not written. Evaluate it with "
                f"`python -m navexp.evaluate checkpoint={start.run_dir}` (resume={start.run_dir} trains "
                f"on to ppo.max_iterations if not reached, then runs the final evaluation)",
                flush=True,
            )
            if isinstance(e, KeyboardInterrupt):
                raise
            raise KeyboardInterrupt(f"signal {signalled[0]}") from e
        finally:
            signal.signal(signal.SIGTERM, old)
    except BaseException as e:
        _close_logger(training.runner.logger.writer, cfg, e)
        raise


def _close_logger(writer, cfg: DictConfig, error: BaseException) -> None:
    """A run that ends early: its W&B run records why (a trial's state) and is finished as failed,
    except a pruned trial, which is a normal end."""
    if not hasattr(writer, "finish"):
        return
    pruned = type(error).__name__ == "TrialPruned"
    state = "pruned" if pruned else "interrupted" if isinstance(error, KeyboardInterrupt) else "fail"
    summary = {"run/state": state, "run/error": f"{type(error).__name__}: {error}"}
    if cfg.sweep.trial_id is not None:
        summary["optuna/state"] = state
    writer.log_summary(summary)
    writer.finish(exit_code=0 if pruned else 1)


def _prepare(cfg: DictConfig, run_dir: Path, overrides: list[str], quiet: bool, ctx: DistContext) -> Start:
    """Validate the config (once, here), resolve a resume, agree on the run dir across ranks, claim it."""
    validate_run_cfg(cfg)  # env (CUDA without CUDA too), batch sizes, iterations, suite, path-forming names
    device = resolve_device(str(cfg.env.device)) if not ctx.enabled else ctx.device
    if ctx.enabled:
        with open_dict(cfg):
            cfg.env.device = device  # cuda:<LOCAL_RANK> or cpu
    size = str(cfg.size)
    # A bad curriculum config fails here, before anything is written.
    applied = applied_preset(size, overrides, cfg)
    start = Start(run_dir, device, size, applied, make_curriculum(cfg, NavEnv.OUTCOME_WINDOW))
    if ctx.is_main:
        print(
            f"[navexp] device {device}; size preset '{size}' set {start.applied or 'nothing'} "
            f"(override any of these on the command line, or size=none to keep the composed values)"
        )
    if cfg.resume:
        _resolve_resume(cfg, start)
    if ctx.enabled:  # one run directory and one checkpoint for all ranks, chosen by rank 0
        _agree_on_run_dir(cfg, start, ctx)
    if start.curriculum is not None or start.ckpt is not None:
        restore_curriculum(start.curriculum, start.ckpt, quiet or not ctx.is_main)
    if ctx.is_main:  # one owner, checked at once; released when run() ends
        claim_run_dir(start.run_dir, fresh=start.ckpt is None)
    return start


def _resolve_resume(cfg: DictConfig, start: Start) -> None:
    """Load the checkpoint to continue; a missing, truncated or foreign file fails here, nothing touched."""
    ckpt = load_checkpoint(cfg.resume)
    check_resume_source(ckpt, cfg)  # an averaged policy, another ppo.model: refused before anything is built
    start.ckpt, start.run_dir = ckpt, Path(ckpt["_path"]).parent
    info = start.run_dir / "run_info.json"
    start.wandb_id = json.loads(info.read_text()).get("wandb_run_id") if info.is_file() else None
    print(f"[navexp] resuming {ckpt['_path']} (iteration {ckpt['iter']}) in {start.run_dir}")


def _agree_on_run_dir(cfg: DictConfig, start: Start, ctx: DistContext) -> None:
    """Every rank takes rank 0's run dir; a rank that resolved another checkpoint fails."""
    mine = start.ckpt and start.ckpt["_path"]
    chosen_dir, chosen_ckpt = distributed.broadcast((str(start.run_dir), mine), ctx)
    if mine != chosen_ckpt:
        raise RuntimeError(
            f"rank {ctx.rank} resolved resume={cfg.resume} to {mine}, rank 0 to {chosen_ckpt}; "
            f"give resume=<run>/model_<it>.pt"
        )
    start.run_dir = Path(chosen_dir)


def _build(cfg: DictConfig, start: Start, quiet: bool, ctx: DistContext) -> Training:
    """The env (at the curriculum's level), the runner (resumed), the run record and the callbacks."""
    rank_seed = int(cfg.seed) + ctx.rank  # ranks draw their own layouts and noise
    seed_everything(rank_seed)
    with distributed.cpu_count_limited(ctx.threads):  # the MuJoCo rollout pool takes this rank's share
        cur = start.curriculum  # under a curriculum the env's first layouts are its level's
        env_cfg = cfg if cur is None else cur.experiment_cfg_at(cfg, cur.state.level)
        env = NavEnv(_with_seed(env_cfg, rank_seed), validated=cur is None)
    if ctx.is_main:
        print(
            f"[navexp] simulator backend: {env.backend} (env.sim.backend={cfg.env.sim.backend}; "
            f"auto = warp on CUDA, classic mujoco on the CPU)"
        )
    train_cfg = build_train_cfg(cfg)
    if start.ckpt is not None:
        check_resume(start.ckpt, cfg, env, train_cfg)  # layout, groups, model shapes: before any write
    if cfg.logger.type == "wandb" and start.wandb_id is None:
        # Chosen now and recorded in run_info.json below, so a run stopped before its end still
        # resumes into the same W&B run (the writer itself only starts inside rsl_rl's learn()).
        start.wandb_id = uuid.uuid4().hex[:8]
    first_step = None if start.ckpt is None else int(start.ckpt["iter"]) + 1  # the resumed segment's first
    train_cfg["logger"] = _logger_cfg(cfg, start.run_dir, start.wandb_id, first_step)
    if start.ckpt is not None:
        stored = stored_config(start.ckpt)
        start.changed = flat_changes(stored, OmegaConf.to_container(cfg, resolve=True))
        start.changed.pop("resume", None)
        device = start.changed.get("env.device")  # a torchrun rank stores its resolved device ("cpu")
        if device is not None and _same_device(str(device[0]), start.device):
            del start.changed["env.device"]  # the same device by another name ("auto"): no change
    if ctx.is_main:
        start.run_dir.mkdir(parents=True, exist_ok=True)
        if start.ckpt is not None:  # the earlier segment's config.yaml and eval.json: kept, not replaced
            later = later_checkpoints(start.run_dir, start.ckpt)
            evals = sorted(p.name for p in start.run_dir.glob("eval_*.json"))
            evals += [f"{d}/" for d in SEGMENT_FOLDERS if (start.run_dir / d).is_dir()]
            folder = archive_segment(start.run_dir, later)
            if later:
                print(
                    f"[navexp] resume from iteration {start.ckpt['iter']}: the earlier segment's later "
                    f"checkpoints {[p.name for p in later]} moved to {folder} (this run continues from "
                    f"{Path(start.ckpt['_path']).name})",
                    flush=True,
                )
            if evals:
                print(
                    f"[navexp] resume: the earlier segment's evaluations {evals} moved to {folder}",
                    flush=True,
                )
        write_atomic(start.run_dir / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
    record = _run_record(cfg, start, env, ctx)
    if ctx.is_main:
        write_run_record(start.run_dir, start.started, **record)
    runner = NavRunner(
        env, train_cfg, str(start.run_dir), start.device, _infos(cfg, env, train_cfg), quiet=quiet
    )
    if start.ckpt is not None:
        runner.load_for_resume(start.ckpt)
        if "ppo.algorithm.learning_rate" in start.changed:  # the optimizer state would restore the saved rate
            old_lr, new_lr = start.changed["ppo.algorithm.learning_rate"]
            runner.set_learning_rate(float(new_lr))
            if ctx.is_main:
                print(
                    f"[navexp] resume: ppo.algorithm.learning_rate={new_lr} from this launch's config "
                    f"replaces the checkpoint's (configured {old_lr}; its optimizer held "
                    f"{runner.resumed_learning_rate:g})"
                )
    if ctx.enabled:
        record["ranks"] = distributed.gather(_rank_record(ctx, env, runner, rank_seed), ctx)
        if ctx.is_main:
            write_run_record(start.run_dir, start.started, **record)
    prune = pruning_callback(cfg)
    if prune is not None:
        runner.iteration_callbacks.append(prune)
    if start.curriculum is not None:  # before the stop check: an interrupt saves the iteration's state
        hook = CurriculumHook(start.curriculum, env, runner, ctx if ctx.enabled else None, quiet=quiet)
        runner.iteration_callbacks.append(hook)
    return Training(env, runner, record)


def _infos(cfg: DictConfig, env: NavEnv, train_cfg: dict) -> dict:
    """What every checkpoint carries besides the weights (resume, evaluate and export read it)."""
    om = env.obs_manager
    return {
        "obs_layout": om.layout(),
        "group_widths": om.group_widths,
        "history_length": om.history_length,
        "obs_groups": train_cfg["obs_groups"],
        "model": {"kind": str(cfg.ppo.policy.model), "recurrent": str(cfg.ppo.policy.model) == "rnn"},
        "robot": env.robot.action_meta(),
        "config": OmegaConf.to_container(cfg, resolve=True),
    }


def _same_device(stored: str, resolved: str) -> bool:
    """Whether a checkpoint's ``env.device`` names the device this launch resolved (``cpu`` and ``auto``
    on a CPU machine); a device this machine lacks (``cuda:0`` without CUDA) is not it."""
    try:
        return resolve_device(stored) == resolved
    except ValueError:
        return False


def _run_record(cfg: DictConfig, start: Start, env: NavEnv, ctx: DistContext) -> dict:
    """The run's entries of run_info.json (``write_run_record`` adds the command line, versions, git)."""
    return {
        "seed": int(cfg.seed),
        "device": start.device,
        "sim_backend": env.backend,
        "size_preset": start.size,
        "size_applied": start.applied,
        "wandb_run_id": start.wandb_id,
        "resumed_from": start.ckpt["_path"] if start.ckpt is not None else None,
        "start_iteration": int(start.ckpt["iter"]) + 1 if start.ckpt is not None else 0,
        "changed": start.changed,
        "world_size": ctx.world_size,
        "dist_backend": ctx.backend,
        "num_envs_total": env.num_envs * ctx.world_size,
    }


def _learn(cfg: DictConfig, runner: NavRunner, start: Start, ctx: DistContext) -> None:
    """The remaining PPO iterations; Ctrl-C or SIGTERM saves the last finished iteration (rank 0)."""
    remaining = int(cfg.ppo.max_iterations) - runner.current_learning_iteration
    stop = distributed.StopRequest(ctx)  # under torchrun: all ranks stop together after an iteration
    if ctx.enabled:
        runner.iteration_callbacks.append(stop.check)
    if cfg.ppo.get("max_minutes") is not None:
        runner.iteration_callbacks.append(distributed.TimeBudget(cfg.ppo.max_minutes, ctx))
    old = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        with stop if ctx.enabled else contextlib.nullcontext():
            if remaining > 0:
                random_len = bool(cfg.ppo.init_at_random_ep_len) and start.ckpt is None
                runner.learn(remaining, init_at_random_ep_len=random_len)
            else:  # nothing left to train (a resume after an interrupted final evaluation): the writer
                runner.logger.init_logging_writer()  # that learn() would start logs the evaluation
    except distributed.TimeBudgetReached as e:
        if ctx.is_main:
            path = runner.save_last_good()
            print(f"[navexp] {e}: saved {path}", flush=True)
    except KeyboardInterrupt:
        if ctx.is_main:
            _save_on_stop(runner, start, "interrupted")
        else:
            print(f"[navexp] rank {ctx.rank}: stopped with rank 0", flush=True)
        raise
    except Exception as e:
        # Under torchrun a peer that dies (kill -9, out of memory) breaks the next collective here, and
        # torchrun then stops this rank: rank 0 saves its last finished iteration first.
        if ctx.enabled and ctx.is_main and not isinstance(e, FloatingPointError):
            why = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            _save_on_stop(runner, start, f"stopped by {why} (did a peer rank die?)")
        raise
    finally:
        signal.signal(signal.SIGTERM, old)


def _save_on_stop(runner: NavRunner, start: Start, why: str) -> None:
    """Save the last finished iteration (kept in memory by the runner) and say how to continue."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the save short
    try:
        before = runner.last_checkpoint
        path = runner.save_last_good()
    except Exception as e:
        print(f"[navexp] {why}: could not save the last finished iteration: {e}", flush=True)
        return
    if path is None:
        print(f"[navexp] {why}: no iteration finished, nothing to save", flush=True)
    elif path == before:
        print(f"[navexp] {why}: no iteration finished since {path}; continue with resume={start.run_dir}")
    else:
        print(f"[navexp] {why}: saved {path}; continue with resume={start.run_dir}", flush=True)


def _check_ranks_agree(training: Training, start: Start, ctx: DistContext) -> None:
    """Under torchrun: every rank ends with one policy and one curriculum state (recorded per rank)."""
    if not ctx.enabled:
        return
    digests = distributed.gather(_policy_digest(training.runner), ctx)
    training.record["policy_digest_per_rank"] = digests  # equal: the ranks trained one policy
    if len(set(digests)) != 1:
        raise RuntimeError(
            f"ranks hold different policies after training ({digests}); gradients were not all-reduced"
        )
    if start.curriculum is not None:
        states = distributed.gather(start.curriculum.state_dict(), ctx)
        training.record["curriculum_per_rank"] = states  # equal: rank 0's decisions are broadcast
        if any(st != states[0] for st in states):
            raise RuntimeError(f"ranks ended at different curriculum states ({states})")


def _finish(cfg: DictConfig, training: Training, start: Start, overrides: list[str]) -> float | list[float]:
    """Rank 0: the final run record, the held-out evaluation (eval.json, logs, the trial's metrics)."""
    runner, record, run_dir = training.runner, training.record, start.run_dir
    writer = runner.logger.writer
    record["wandb_run_id"] = getattr(writer, "run_id", None) or start.wandb_id
    if start.curriculum is not None:
        record["curriculum"] = start.curriculum.state_dict()
    write_run_record(run_dir, start.started, **record)
    metrics = {"success_rate": float("nan")}
    policy, policy_path = _run_policy(cfg, runner, start)
    if cfg.eval.enabled:
        print(f"[navexp] final evaluation ({cfg.eval.num_episodes} episodes) of {policy_path}", flush=True)
        metrics, figures, videos = _evaluate_and_plot(policy, cfg, run_dir)
        metrics.update(evaluation_record(cfg, policy_path, overrides, cfg.eval.get("suite")))
        print(
            f"[navexp] eval over {metrics['num_episodes']} held-out episodes: "
            f"success {metrics['success_rate']:.1%}, collision {metrics['collision_rate']:.1%}, "
            f"timeout {metrics['timeout_rate']:.1%} -> {run_dir}/eval.json"
        )
        write_atomic(run_dir / "eval.json", json.dumps(metrics, indent=2))
        _log_final(writer, cfg, metrics, runner.current_learning_iteration, figures, videos)
        record_metrics(cfg, metrics, str(run_dir))
    value = objective(cfg, metrics)
    if hasattr(writer, "finish"):
        summary = {"run/state": "complete"}
        if cfg.sweep.trial_id is not None:
            values = value if isinstance(value, list) else [value]
            summary.update(
                {
                    "optuna/state": "complete",
                    **{f"optuna/{k}": v for k, v in zip(cfg.sweep.objectives, values, strict=True)},
                }
            )
        writer.log_summary(summary)
        writer.finish()
    return value


def _run_policy(cfg: DictConfig, runner: NavRunner, start: Start) -> tuple[torch.nn.Module, str | None]:
    """The policy the run yields and its file: the runner's last checkpoint, or with
    ``ppo.average_checkpoints`` N > 1 the average of the last N saved checkpoints (written beside them),
    loaded into the runner's actor: training is over, and its last state is saved in ``model_<it>.pt``."""
    policy = runner.get_inference_policy(start.device)
    n = int(cfg.ppo.get("average_checkpoints", 1))
    path = write_averaged_policy(start.run_dir, n, runner.last_checkpoint) if n > 1 else None
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


def _rank_record(ctx: DistContext, env: NavEnv, runner: NavRunner, seed: int) -> dict:
    """What one rank runs with (printed by the rank, gathered into run_info.json by rank 0)."""
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
    saved = runner.alg.save()
    return tensor_digest([*saved["actor_state_dict"].values(), *saved["critic_state_dict"].values()])


def _evaluate_and_plot(policy, cfg: DictConfig, run_dir: Path) -> tuple[dict, dict, dict]:
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


def _log_final(writer, cfg: DictConfig, metrics: dict, it: int, figures: dict, videos: dict) -> None:
    if writer is None:
        return
    for tag, fig in figures.items():
        writer.add_figure(tag, fig, it)  # closes the figure
    for tag, path in videos.items():
        log_gif(writer, tag, path, it)
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
    try:
        return run(cfg, Path(hc.runtime.output_dir), list(hc.overrides.task))
    except LayoutSamplingError as e:  # map settings no layout satisfies: found on the first draw
        if hc.mode == RunMode.MULTIRUN:
            raise  # the sweeper records the trial as failed and goes on
        # Hydra prints a compact error as its message alone, after its callbacks removed the unused
        # run directory (a SystemExit would skip them).
        raise CompactHydraException(f"Error: {e}") from None


def app_argv(argv: list[str]) -> list[str]:
    """The command line Hydra composes from: ``size=auto`` (the default) resolved to ``size=gpu|cpu``
    first, so the composed config is the run's config (in a sweep, every trial inherits the choice);
    under torchrun only rank 0 gets a Hydra run directory."""
    try:
        argv = translate_argv(argv)  # old key names (ppo.clip_param) -> today's: navexp/config/aliases.py
        argv = resume_overrides_argv(argv)  # before size=auto resolves: the run's size is inherited
        argv = translate_argv(argv)  # the overrides a run recorded before the rename, too
        argv = size_override_argv(argv)
        argv = resume_run_dir_argv(argv)
    except (ValueError, FileNotFoundError) as e:
        raise SystemExit(f"Error: {e}") from None
    return worker_hydra_overrides(argv)


IGNORED_ON_RESUME = ("hydra.", "hydra/", "sweep.")
"""Override prefixes a resume does not repeat: Hydra's own, and a sweep trial's study keys (a resumed
trial trains on as a single run; its trial in the study has ended)."""


def resume_overrides_argv(argv: list[str]) -> list[str]:
    """A single-run ``resume=<run or checkpoint>`` continues the run it names: the run's latest task
    overrides (``.hydra/resume_<time>/overrides.yaml``, else ``.hydra/overrides.yaml``) go first, and
    this command line's overrides follow, so a key given here wins (a group choice such as ``env=room``
    replaces the group; the run's other keys stay). Without this, ``resume=<run>`` alone trained on
    the default env and reward and recorded them as changes. A run made without Hydra (the Python API)
    has no record: its resume composes from this command line alone, and says so."""
    resume = override_value(argv, "resume")
    multirun = any(a in ("-m", "--multirun") for a in argv[1:])
    if not resume or resume in ("null", "None") or multirun:
        return argv
    run_dir = resolve_checkpoint(resume).resolve().parent
    record = overrides_record(run_dir)
    rank0 = int(os.environ.get("RANK", "0")) == 0
    if record is None:
        if rank0:
            print(
                f"[navexp] resume: {run_dir} keeps no .hydra/overrides.yaml; the config is the command line's"
            )
        return argv
    prog, args = argv[:1], list(argv[1:])
    positions = [i for i, a in enumerate(args) if ("=" in a or a.startswith("~")) and not a.startswith("-")]
    given = {args[i].lstrip("+~").partition("=")[0] for i in positions}
    # Plain YAML, not OmegaConf: a recorded ${...} stays text for Hydra to resolve, as it was first.
    inherited = [
        str(o)
        for o in yaml.safe_load(record.read_text()) or []
        if (key := str(o).lstrip("+~").partition("=")[0]) not in given
        and key != "resume"
        and not key.startswith(IGNORED_ON_RESUME)
    ]
    if inherited and rank0:
        print(
            f"[navexp] resume: the run's overrides {' '.join(inherited)} (from {record}; this "
            f"command line's win)",
            flush=True,
        )
    at = positions[0] if positions else len(args)
    return prog + args[:at] + inherited + args[at:]


def resume_run_dir_argv(argv: list[str]) -> list[str]:
    """A single-run ``resume=<run or checkpoint>``: Hydra's directory is the run's own, and its copy of
    this launch's config goes to ``.hydra/resume_<time>/`` there (the first launch's ``.hydra/`` stays).
    Without this a resume would leave a stray ``outputs/<name>/<time>/`` behind. A checkpoint that
    does not exist fails here, before Hydra makes any directory."""
    resume = override_value(argv, "resume")
    multirun = any(a in ("-m", "--multirun") for a in argv[1:])
    if not resume or resume in ("null", "None") or multirun or int(os.environ.get("RANK", "0")) != 0:
        return argv
    if override_value(argv, "hydra.run.dir") is not None:
        return argv  # the user chose Hydra's directory
    run_dir = resolve_checkpoint(resume).resolve().parent
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S_%f")
    return add_overrides(argv, [f"hydra.run.dir='{run_dir}'", f"hydra.output_subdir=.hydra/resume_{stamp}"])


def cli() -> None:
    """``python -m navexp.train`` and the console script ``navexp-train`` (Hydra's options and shell
    completion included: ``navexp-train --help``, ``navexp-train -sc install=bash``)."""
    sys.argv = app_argv(sys.argv)
    try:
        main()
    except KeyboardInterrupt as e:
        # Ctrl-C or SIGTERM: the run has said what it saved and how to continue (`resume=`); a traceback
        # would bury that line. The exit status is the shell's for the signal (130, or 143 for SIGTERM).
        if os.environ.get("NAVEXP_TRACEBACK") == "1":
            raise
        signum = int(str(e).removeprefix("signal ")) if str(e).startswith("signal ") else signal.SIGINT
        raise SystemExit(128 + signum) from None


if __name__ == "__main__":
    cli()
