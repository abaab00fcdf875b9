"""One training run, in four stages: prepare (validate, resolve a resume, claim the run directory) ->
build (the env at the curriculum's level, rsl_rl's runner, the run record) -> learn (the remaining PPO
iterations; Ctrl-C or SIGTERM saves the last finished one) -> finish (the run's policy, its held-out
evaluation, eval.json and the final logs).

``TrainingRun(cfg, run_dir).run()`` returns the final evaluation's metrics. Under torchrun (WORLD_SIZE
> 1) it runs on every rank: each trains on its own device and worlds, rank 0 writes the run directory
and evaluates; the other ranks return a NaN success rate. What a caller adds (a sweep trial's pruning,
its metrics in the study, its W&B record) comes in as ``RunHooks``.
"""

from __future__ import annotations

import contextlib
import json
import signal
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from navexp.analysis.eval_record import evaluation_record
from navexp.config.presets import applied_preset
from navexp.config.validation import validate_run_cfg
from navexp.experiment import ranks
from navexp.experiment.final_eval import evaluate_and_plot, run_policy
from navexp.experiment.hooks import RunHooks
from navexp.experiment.repro import seed_everything, write_run_record
from navexp.experiment.resume import archive_earlier_segment, config_changes, load_resume
from navexp.experiment.rundir import claim_run_dir, releases_run_dirs
from navexp.experiment.writers import close_writer, finish_writer, log_final, logger_entry
from navexp.learn import distributed
from navexp.learn.checkpoint import check_resume, write_atomic
from navexp.learn.cores import HostShare, usable_cores
from navexp.learn.curriculum_hook import CurriculumHook
from navexp.learn.distributed import DistContext
from navexp.learn.rl_cfg import build_train_cfg
from navexp.learn.runner import NavRunner
from navexp.sim import resolve_device
from navexp.task.curriculum import SuccessCurriculum, make_curriculum, restore_curriculum
from navexp.task.env import NavEnv


def raise_keyboard_interrupt(signum, frame):
    """A signal handler that stops the run as Ctrl-C does (the save on stop, then exit 128 + signal)."""
    raise KeyboardInterrupt(f"signal {signum}")


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


class TrainingRun:
    """One training run: ``run()`` = prepare -> build -> learn -> finish, each stage a method."""

    def __init__(
        self,
        cfg: DictConfig,
        run_dir: Path,
        overrides: list[str] | None = None,
        quiet: bool = False,
        hooks: RunHooks | Callable[[DictConfig], RunHooks] | None = None,
    ) -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        """Hydra's directory for this launch (a resume trains in its run's own directory instead)."""
        self.overrides = list(overrides or [])
        """The command line's task overrides (recorded with the evaluation)."""
        self.quiet = quiet
        self.hooks = hooks if isinstance(hooks, RunHooks) else RunHooks()
        self._make_hooks = hooks if callable(hooks) and not isinstance(hooks, RunHooks) else None
        """Hooks made from the config once it is validated (a sweep trial's load its study)."""
        self.ctx = DistContext()
        self.start: Start | None = None
        self.env: NavEnv | None = None
        self.runner: NavRunner | None = None
        self.record: dict = {}
        """The run's entries of run_info.json (``write_run_record`` adds the command line, versions, git)."""

    @releases_run_dirs
    def run(self) -> dict:
        """Train, evaluate and return the final evaluation's metrics (rank 0; other ranks: NaN success)."""
        ctx = distributed.setup(str(self.cfg.env.device))  # checks the device before anything is allocated
        try:
            with HostShare() as host:  # trainings on one host share its cores (navexp/learn/cores.py)
                host.cap = ctx.threads  # a torchrun rank never takes more than its rank share
                threads = min(host.apply(quiet=True), ctx.threads or usable_cores())
                self.ctx = replace(ctx, threads=threads)
                self.quiet = self.quiet or not ctx.is_main
                self.prepare()
                self.build()
                self.runner.iteration_callbacks.insert(0, host.on_iteration)
                return self._learn_and_finish()
        finally:
            if ctx.enabled:
                distributed.shutdown()

    def _learn_and_finish(self) -> dict:
        try:
            self.learn()
            ranks.check_ranks_agree(self.runner, self.start.curriculum, self.record, self.ctx)
            if not self.ctx.is_main:
                return {"success_rate": float("nan")}
            return self._finish_unless_stopped()
        except BaseException as e:
            close_writer(self.runner.logger.writer, e, self.hooks)
            raise

    # -- prepare ------------------------------------------------------------------------------------
    def prepare(self) -> Start:
        """Validate the config (once, here), resolve a resume, agree on the run dir across ranks, claim it."""
        cfg, ctx = self.cfg, self.ctx
        # The env (CUDA without CUDA too), batch sizes, iterations, suite, path-forming names:
        validate_run_cfg(cfg)
        device = resolve_device(str(cfg.env.device)) if not ctx.enabled else ctx.device
        if ctx.enabled:
            with open_dict(cfg):
                cfg.env.device = device  # cuda:<LOCAL_RANK> or cpu
        size = str(cfg.size)
        # A bad curriculum config fails here, before anything is written.
        applied = applied_preset(size, self.overrides, cfg)
        start = Start(self.run_dir, device, size, applied, make_curriculum(cfg, NavEnv.OUTCOME_WINDOW))
        if ctx.is_main:
            print(
                f"[navexp] device {device}; size preset '{size}' set {start.applied or 'nothing'} "
                f"(override any of these on the command line, or size=none to keep the composed values)"
            )
        if cfg.resume:
            start.ckpt, start.run_dir, start.wandb_id = load_resume(cfg)
        if ctx.enabled:  # one run directory and one checkpoint for all ranks, chosen by rank 0
            start.run_dir = ranks.agree_on_run_dir(start.run_dir, start.ckpt, cfg.resume, ctx)
        if start.curriculum is not None or start.ckpt is not None:
            restore_curriculum(start.curriculum, start.ckpt, self.quiet)
        if ctx.is_main:  # one owner, checked at once; released when run() ends
            claim_run_dir(start.run_dir, fresh=start.ckpt is None)
        if self._make_hooks is not None:
            self.hooks = self._make_hooks(cfg)
        self.start = start
        return start

    # -- build --------------------------------------------------------------------------------------
    def build(self) -> NavRunner:
        """The env (at the curriculum's level), the runner (resumed), the run record and the callbacks."""
        cfg, start, ctx = self.cfg, self.start, self.ctx
        rank_seed = int(cfg.seed) + ctx.rank  # ranks draw their own layouts and noise
        self.env = self._build_env(rank_seed)
        train_cfg = build_train_cfg(cfg)
        if start.ckpt is not None:
            # Layout, groups, model shapes: before any write.
            check_resume(start.ckpt, cfg, self.env, train_cfg)
        if cfg.logger.type == "wandb" and start.wandb_id is None:
            # Chosen now and recorded in run_info.json below, so a run stopped before its end still
            # resumes into the same W&B run (the writer itself only starts inside rsl_rl's learn()).
            start.wandb_id = uuid.uuid4().hex[:8]
        # The resumed segment's first iteration (its writer hides what an earlier segment logged from there).
        first_step = None if start.ckpt is None else int(start.ckpt["iter"]) + 1
        train_cfg["logger"] = logger_entry(cfg, start.run_dir, start.wandb_id, self.hooks, first_step)
        if start.ckpt is not None:
            start.changed = config_changes(start.ckpt, cfg, start.device)
        if ctx.is_main:
            start.run_dir.mkdir(parents=True, exist_ok=True)
            if start.ckpt is not None:  # the earlier segment's config.yaml and eval.json: kept, not replaced
                archive_earlier_segment(start.run_dir, start.ckpt)
            write_atomic(start.run_dir / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
        self.record = self._run_record()
        if ctx.is_main:
            write_run_record(start.run_dir, start.started, **self.record)
        self.runner = NavRunner(
            self.env,
            train_cfg,
            str(start.run_dir),
            start.device,
            self._infos(train_cfg),
            quiet=self.quiet,
            verbose=bool(self.cfg.get("verbose", False)),
        )
        if start.ckpt is not None:
            self._resume_runner()
        if ctx.enabled:
            mine = ranks.rank_record(ctx, self.env, self.runner, rank_seed)
            self.record["ranks"] = distributed.gather(mine, ctx)
            if ctx.is_main:
                write_run_record(start.run_dir, start.started, **self.record)
        self.runner.iteration_callbacks.extend(self.hooks.iteration_callbacks)
        if start.curriculum is not None:  # before the stop check: an interrupt saves the iteration's state
            group = ctx if ctx.enabled else None
            hook = CurriculumHook(start.curriculum, self.env, self.runner, group, quiet=self.quiet)
            self.runner.iteration_callbacks.append(hook)
        return self.runner

    def _build_env(self, rank_seed: int) -> NavEnv:
        """The training env of this rank, seeded with its own seed, at the curriculum's level."""
        cfg, cur = self.cfg, self.start.curriculum
        seed_everything(rank_seed)
        # The MuJoCo rollout pool takes this rank's share of the cores.
        with distributed.cpu_count_limited(self.ctx.threads):
            env_cfg = cfg if cur is None else cur.experiment_cfg_at(cfg, cur.state.level)
            if int(env_cfg.seed) != rank_seed:  # a copy with this rank's seed (its own layouts and noise)
                env_cfg = env_cfg.copy()
                with open_dict(env_cfg):
                    env_cfg.seed = rank_seed
            env = NavEnv(env_cfg, validated=cur is None)
        if self.ctx.is_main:
            print(
                f"[navexp] simulator backend: {env.backend} (env.sim.backend={cfg.env.sim.backend}; "
                f"auto = warp on CUDA, classic mujoco on the CPU)"
            )
        return env

    def _resume_runner(self) -> None:
        """Restore the checkpoint's training state; a learning rate changed on the command line wins."""
        start, runner = self.start, self.runner
        runner.load_for_resume(start.ckpt)
        key = "ppo.algorithm.learning_rate"
        if key in start.changed:  # the optimizer state would restore the saved rate
            old_lr, new_lr = start.changed[key]
            runner.set_learning_rate(float(new_lr))
            if self.ctx.is_main:
                print(
                    f"[navexp] resume: {key}={new_lr} from this launch's config replaces the checkpoint's "
                    f"(configured {old_lr}; its optimizer held {runner.resumed_learning_rate:g})"
                )

    def _infos(self, train_cfg: dict) -> dict:
        """What every checkpoint carries besides the weights (resume, evaluate and export read it)."""
        om, cfg = self.env.obs_manager, self.cfg
        return {
            "obs_layout": om.layout(),
            "group_widths": om.group_widths,
            "history_length": om.history_length,
            "obs_groups": train_cfg["obs_groups"],
            "model": {"kind": str(cfg.ppo.policy.model), "recurrent": str(cfg.ppo.policy.model) == "rnn"},
            "robot": self.env.robot.action_meta(),
            "config": OmegaConf.to_container(cfg, resolve=True),
        }

    def _run_record(self) -> dict:
        """The run's entries of run_info.json."""
        cfg, start, ctx = self.cfg, self.start, self.ctx
        return {
            "seed": int(cfg.seed),
            "device": start.device,
            "sim_backend": self.env.backend,
            "size_preset": start.size,
            "size_applied": start.applied,
            "wandb_run_id": start.wandb_id,
            "resumed_from": start.ckpt["_path"] if start.ckpt is not None else None,
            "start_iteration": int(start.ckpt["iter"]) + 1 if start.ckpt is not None else 0,
            "changed": start.changed,
            "world_size": ctx.world_size,
            "dist_backend": ctx.backend,
            "num_envs_total": self.env.num_envs * ctx.world_size,
        }

    # -- learn --------------------------------------------------------------------------------------
    def learn(self) -> None:
        """The remaining PPO iterations; Ctrl-C or SIGTERM saves the last finished iteration (rank 0)."""
        cfg, runner, ctx = self.cfg, self.runner, self.ctx
        remaining = int(cfg.ppo.max_iterations) - runner.current_learning_iteration
        stop = distributed.StopRequest(ctx)  # under torchrun: all ranks stop together after an iteration
        if ctx.enabled:
            runner.iteration_callbacks.append(stop.check)
        if cfg.ppo.get("max_minutes") is not None:
            runner.iteration_callbacks.append(distributed.TimeBudget(cfg.ppo.max_minutes, ctx))
        old = signal.signal(signal.SIGTERM, raise_keyboard_interrupt)
        try:
            with stop if ctx.enabled else contextlib.nullcontext():
                if remaining > 0:
                    random_len = bool(cfg.ppo.init_at_random_ep_len) and self.start.ckpt is None
                    runner.learn(remaining, init_at_random_ep_len=random_len)
                else:  # nothing left to train (a resume after an interrupted final evaluation): the writer
                    runner.logger.init_logging_writer()  # that learn() would start logs the evaluation
        except distributed.TimeBudgetReached as e:
            if ctx.is_main:
                print(f"[navexp] {e}: saved {runner.save_last_good()}", flush=True)
        except KeyboardInterrupt:
            if ctx.is_main:
                self._save_on_stop("interrupted")
            else:
                print(f"[navexp] rank {ctx.rank}: stopped with rank 0", flush=True)
            raise
        except Exception as e:
            # Under torchrun a peer that dies (kill -9, out of memory) breaks the next collective here, and
            # torchrun then stops this rank: rank 0 saves its last finished iteration first.
            if ctx.enabled and ctx.is_main and not isinstance(e, FloatingPointError):
                why = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                self._save_on_stop(f"stopped by {why} (did a peer rank die?)")
            raise
        finally:
            signal.signal(signal.SIGTERM, old)

    def _save_on_stop(self, why: str) -> None:
        """Save the last finished iteration (kept in memory by the runner) and say how to continue."""
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the save short
        runner, run_dir = self.runner, self.start.run_dir
        how = self.hooks.continue_with or f"resume={run_dir}"
        try:
            before = runner.last_checkpoint
            path = runner.save_last_good()
        except Exception as e:
            print(f"[navexp] {why}: could not save the last finished iteration: {e}", flush=True)
            return
        if path is None:
            print(f"[navexp] {why}: no iteration finished, nothing to save", flush=True)
        elif path == before:
            print(f"[navexp] {why}: no iteration finished since {path}; continue with {how}")
        else:
            print(f"[navexp] {why}: saved {path}; continue with {how}", flush=True)

    # -- finish -------------------------------------------------------------------------------------
    def _finish_unless_stopped(self) -> dict:
        """``finish`` with SIGTERM turned into an interrupt that says what was saved and how to go on."""
        signalled: list[int] = []

        def on_sigterm(signum, frame):
            signalled.append(signum)
            raise_keyboard_interrupt(signum, frame)

        old = signal.signal(signal.SIGTERM, on_sigterm)
        try:
            return self.finish()
        except BaseException as e:
            # A KeyboardInterrupt raised inside a library can come out as that library's own error
            # (omegaconf's cleanup after an interrupted merge: AttributeError): a SIGTERM that arrived is
            # the reason whatever the exception says.
            if not (isinstance(e, KeyboardInterrupt) or signalled):
                raise
            run_dir = self.start.run_dir
            print(
                f"[navexp] interrupted during the final evaluation: training finished and is saved in "
                f"{self.runner.last_checkpoint}; eval.json was not written. Evaluate it with "
                f"`python -m navexp.evaluate checkpoint={run_dir}` (resume={run_dir} trains "
                f"on to ppo.max_iterations if not reached, then runs the final evaluation)",
                flush=True,
            )
            if isinstance(e, KeyboardInterrupt):
                raise
            raise KeyboardInterrupt(f"signal {signalled[0]}") from e
        finally:
            signal.signal(signal.SIGTERM, old)

    def finish(self) -> dict:
        """Rank 0: the final run record, the held-out evaluation (eval.json, logs, the hooks' metrics)."""
        cfg, runner, start, run_dir = self.cfg, self.runner, self.start, self.start.run_dir
        writer = runner.logger.writer
        self.record["wandb_run_id"] = getattr(writer, "run_id", None) or start.wandb_id
        if start.curriculum is not None:
            self.record["curriculum"] = start.curriculum.state_dict()
        write_run_record(run_dir, start.started, **self.record)
        metrics = {"success_rate": float("nan")}
        policy, policy_path = run_policy(cfg, runner, run_dir, start.device)
        if cfg.eval.enabled:
            episodes = cfg.eval.num_episodes
            print(f"[navexp] final evaluation ({episodes} episodes) of {policy_path}", flush=True)
            metrics, figures, videos = evaluate_and_plot(policy, cfg, run_dir)
            metrics.update(evaluation_record(cfg, policy_path, self.overrides, cfg.eval.get("suite")))
            print(
                f"[navexp] eval over {metrics['num_episodes']} held-out episodes: "
                f"success {metrics['success_rate']:.1%}, collision {metrics['collision_rate']:.1%}, "
                f"timeout {metrics['timeout_rate']:.1%} -> {run_dir}/eval.json"
            )
            write_atomic(run_dir / "eval.json", json.dumps(metrics, indent=2))
            log_final(writer, cfg, metrics, runner.current_learning_iteration, figures, videos)
            if self.hooks.on_metrics is not None:
                self.hooks.on_metrics(metrics, run_dir)
        finish_writer(writer, metrics, self.hooks)
        return metrics
