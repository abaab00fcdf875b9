"""rsl_rl's OnPolicyRunner with what a long run needs: atomic checkpoints that carry the observation
layout, a guard against non-finite losses and policies, the last good iteration kept in memory (saved
when training stops early), a one-line progress report, and resume that continues the iteration
count. PPO, the models and the logging stack stay rsl_rl's own.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import io
import math
import os
import statistics
import time
from pathlib import Path

import torch
from rsl_rl.runners import OnPolicyRunner

from navexp.learn.checkpoint import find_checkpoints, save_atomic
from navexp.learn.distributed import setup
from navexp.task.episode_stats import DeviceRing


class NonFiniteLossError(FloatingPointError):
    """PPO produced a NaN/inf loss or a policy with NaN/inf actions, or the env flagged NaN/inf data;
    training stops before a bad checkpoint is written, naming the last good one."""


class NavRunner(OnPolicyRunner):
    """OnPolicyRunner + atomic saves with navexp infos + finite-loss guard + progress line."""

    def __init__(
        self, env, train_cfg: dict, log_dir: str | None, device: str, infos: dict, quiet: bool = False
    ) -> None:
        super().__init__(env, train_cfg, log_dir, device)
        self.infos = infos
        self.quiet = quiet
        self.last_checkpoint: str | None = None
        self.total_iterations = 0
        self._last_logged_it: int | None = None
        self._t_start = time.time()
        self.iteration_callbacks: list = []
        """Called as fn(iteration, rolling success rate) after each iteration (the rate averaged over
        ranks under torchrun, so every rank sees the same value); may raise to stop."""
        self.recent_success = float("nan")
        """The rolling success rate after the last iteration (averaged over ranks)."""
        self.resumed_learning_rate: float | None = None
        """The learning rate a resumed checkpoint's optimizer held (None: not resumed)."""
        self._good: tuple[int, dict] | None = None
        """(iteration, a copy of ``alg.save()``) after the last finished iteration whose update was
        finite and whose policy gave finite actions on the probe batch: what an early stop saves."""
        # rsl_rl records the git state of its own install by default; record this project's instead.
        self.logger.git_status_repos = [str(Path(__file__).resolve().parents[1])]
        self._guard_update()
        self._wrap_logger()
        # Finished episodes' returns and lengths for Train/mean_reward and Train/mean_episode_length,
        # collected on the device (rsl_rl's logger selects them by index, a host sync per step).
        self._returns = DeviceRing(self.logger.rewbuffer.maxlen, self.device)
        self._lengths = DeviceRing(self.logger.lenbuffer.maxlen, self.device)
        self.logger.process_env_step = self._process_env_step

    # -- multi-process ---------------------------------------------------------------------
    def _configure_multi_gpu(self) -> None:
        """rsl_rl's torchrun setup with Gloo on the CPU as well as NCCL on CUDA.

        rsl_rl 5.5.1 starts an NCCL group and requires ``cuda:<LOCAL_RANK>``; navexp starts the group in
        ``navexp.learn.distributed.setup`` (which checks the device first) and the runner joins it.
        """
        if int(os.getenv("WORLD_SIZE", "1")) <= 1:
            super()._configure_multi_gpu()
            return
        ctx = setup(self.device)  # joins the group train.py started, or starts it for direct use
        if ctx.device != self.device:
            raise ValueError(f"NavRunner device {self.device!r} is not this rank's device {ctx.device!r}")
        self.is_distributed = True
        self.gpu_world_size, self.gpu_global_rank = ctx.world_size, ctx.rank
        self.gpu_local_rank = ctx.local_rank
        self.cfg["multi_gpu"] = {
            "global_rank": ctx.rank,
            "local_rank": ctx.local_rank,
            "world_size": ctx.world_size,
        }

    def _mean_over_ranks(self, value: float) -> float:
        """Mean of a per-rank value over the ranks that have one (NaN on a rank counts as none)."""
        if not self.is_distributed:
            return value
        finite = math.isfinite(value)
        t = torch.tensor([value if finite else 0.0, float(finite)], device=self.device, dtype=torch.float64)
        torch.distributed.all_reduce(t)
        return float(t[0] / t[1]) if t[1] > 0 else float("nan")

    # -- checkpoints ------------------------------------------------------------------------
    def save(self, path: str, infos: dict | None = None) -> None:
        """Write the rsl_rl checkpoint atomically, with the observation layout and config in ``infos``."""
        saved = self.alg.save()
        saved["iter"] = self.current_learning_iteration
        saved["infos"] = {**self.infos, **(infos or {})}
        save_atomic(saved, path)
        self.last_checkpoint = path
        self.logger.save_model(path, self.current_learning_iteration)

    def _may_write(self) -> bool:
        """Only rank 0 writes checkpoints (and any process outside torchrun)."""
        return not self.is_distributed or self.gpu_global_rank == 0

    def save_last_good(self) -> str | None:
        """Write the last good finished iteration (kept in memory) as ``model_<it>.pt`` unless it is
        already the last checkpoint; return its path (the last checkpoint when no iteration finished
        here, None when there is none)."""
        if self._good is None or not self._may_write():
            return self.last_checkpoint
        it, state = self._good
        path = os.path.join(str(self.logger.log_dir), f"model_{it}.pt")
        if path != self.last_checkpoint:
            save_atomic({**state, "iter": it, "infos": self.infos}, path)
            self.last_checkpoint = path
        return path

    def _keep_good(self, it: int) -> None:
        """After iteration ``it`` finished (update checked): remember its state for an early stop."""
        saved = self.alg.save()
        self._good = (it, copy.deepcopy(saved))

    def _last_good_text(self) -> str:
        path = self.save_last_good()
        if path is None:
            return "last good checkpoint: none (no iteration finished with a finite policy)"
        return f"last good checkpoint: {path}"

    def load_for_resume(self, ckpt: dict) -> None:
        """Restore weights, normalizers, optimizer, adaptive learning rate; go on after its iteration."""
        self.alg.load(ckpt, None, strict=True)
        self.current_learning_iteration = int(ckpt["iter"]) + 1
        self.last_checkpoint = ckpt.get("_path")
        self.resumed_learning_rate = float(self.alg.learning_rate)

    def set_learning_rate(self, lr: float) -> None:
        """Use ``lr`` from now on (a resume whose command line changed ``ppo.learning_rate``)."""
        self.alg.learning_rate = lr
        for group in self.alg.optimizer.param_groups:
            group["lr"] = lr

    # -- guards and reporting ---------------------------------------------------------------
    def learn(self, num_learning_iterations: int, init_at_random_ep_len: bool = False) -> None:
        """rsl_rl's loop; a policy that diverged inside it (std < 0, NaN parameters in a
        distribution) stops like a non-finite loss: with the iteration and the last good checkpoint."""
        try:
            super().learn(num_learning_iterations, init_at_random_ep_len)
        except NonFiniteLossError:
            raise
        except FloatingPointError as e:  # the env's NaN/inf flags (actions, state, observations, rewards)
            raise NonFiniteLossError(
                f"training stopped at iteration {self._current_iteration()}: {str(e).splitlines()[0][:600]}; "
                f"{self._last_good_text()}"
            ) from e
        except (RuntimeError, ValueError) as e:
            if not is_divergence(e):
                raise
            raise NonFiniteLossError(
                f"training diverged at iteration {self._current_iteration()}: {type(e).__name__}: "
                f"{str(e).splitlines()[0][:300]}; {self._last_good_text()}"
            ) from e

    def _current_iteration(self) -> int:
        """The iteration in progress (rsl_rl sets current_learning_iteration only after an update)."""
        return self.current_learning_iteration if self._last_logged_it is None else self._last_logged_it + 1

    def _guard_update(self) -> None:
        update = self.alg.update

        def guarded_update() -> dict:
            # The env keeps NaN/inf and overflow flags on the device: raise them before PPO uses data.
            self.env.check_faults()
            losses = update()
            bad = {k: v for k, v in losses.items() if not math.isfinite(float(v))}
            params_ok = all(torch.isfinite(p).all() for p in self.alg.actor.parameters())
            probed = self._probe_actions() if not bad and params_ok else 0
            # Under torchrun every rank decides alike (a rank that moved on would save a policy
            # another rank rejected): the flags are summed over the ranks.
            flags = [float(bool(bad)), float(not params_ok), float(probed)]
            if self.is_distributed:
                t = torch.tensor(flags, device=self.device, dtype=torch.float64)
                torch.distributed.all_reduce(t)
                flags = t.tolist()
            where = "" if not self.is_distributed else " (on some rank)"
            if flags[0] or flags[1]:
                raise NonFiniteLossError(
                    f"non-finite PPO loss at iteration {self._current_iteration()}{where}: "
                    f"{bad or ('actor parameters' if not params_ok else 'another rank')}; "
                    f"{self._last_good_text()}"
                )
            if flags[2]:
                n = int(flags[2])
                worlds = self.env.num_envs * (self.gpu_world_size if self.is_distributed else 1)
                raise NonFiniteLossError(
                    f"the PPO update of iteration {self._current_iteration()} left a policy whose actions "
                    f"are NaN/inf on {n} of the {worlds} worlds' current observations "
                    f"(learning rate {self.alg.learning_rate:g}); {self._last_good_text()}"
                )
            return losses

        self.alg.update = guarded_update

    def _probe_actions(self) -> int:
        """How many worlds' current observations the updated policy maps to a NaN/inf action (its
        deterministic output; a recurrent policy's hidden state is put back); 0: the policy is good."""
        actor = getattr(self.alg, "_raw_actor", self.alg.actor)
        hidden = actor.get_hidden_state() if actor.is_recurrent else None  # rollout mode rebinds it
        try:
            with torch.inference_mode():
                actions = actor(self.env.get_observations().to(self.device))
        finally:
            if actor.is_recurrent:
                actor.reset(hidden_state=hidden)
        return int((~torch.isfinite(actions)).flatten(1).any(dim=1).sum())

    def _process_env_step(self, rewards, dones, extras, intrinsic_rewards=None) -> None:
        """rsl_rl's per-step episode bookkeeping, without waiting for the device (navexp configures
        no RND, so there are no intrinsic rewards to book)."""
        lg = self.logger
        if lg.writer is None:
            return
        lg.cur_reward_sum += rewards
        lg.cur_episode_length += 1
        done = dones > 0
        self._returns.push(lg.cur_reward_sum, done)
        self._lengths.push(lg.cur_episode_length, done)
        lg.cur_reward_sum.masked_fill_(done, 0.0)
        lg.cur_episode_length.masked_fill_(done, 0.0)

    def _fill_logger_buffers(self) -> None:
        """Hand the iteration's episode statistics to rsl_rl's logger in the form it reads them."""
        lg = self.logger
        for ring, buf in ((self._returns, lg.rewbuffer), (self._lengths, lg.lenbuffer)):
            buf.clear()
            buf.extend(ring.values().tolist())
        episode_log = self.env.pop_episode_log()
        lg.ep_extras = [episode_log] if episode_log else []

    def _wrap_logger(self) -> None:
        log = self.logger.log

        def log_with_progress(**kwargs) -> None:
            self._fill_logger_buffers()
            # rsl_rl's multi-line block goes to a buffer; its TensorBoard/W&B writes are unchanged.
            with contextlib.redirect_stdout(io.StringIO()):
                log(**kwargs)
            self._last_logged_it = kwargs["it"]
            self._keep_good(kwargs["it"])  # its update passed the guards: what an early stop saves
            self._progress(**kwargs)
            for fn in self.iteration_callbacks:
                fn(kwargs["it"], self.recent_success)

        self.logger.log = log_with_progress

    def _progress(
        self, it: int, start_it: int, total_it: int, collect_time: float, learn_time: float, **_
    ) -> None:
        lg = self.logger
        self.last_times = (collect_time, learn_time)
        steps = self.cfg["num_steps_per_env"] * self.env.num_envs * self.gpu_world_size  # all ranks
        done = it + 1 - start_it
        elapsed = time.time() - self._t_start
        eta = elapsed / max(done, 1) * (total_it - it - 1)
        reward = statistics.mean(lg.rewbuffer) if lg.rewbuffer else float("nan")
        succ = self._mean_over_ranks(self.env.recent_success_rate())  # a collective: every rank calls it
        self.recent_success = succ
        if lg.writer is not None:
            lg.writer.add_scalar("Perf/collect_steps_per_s", steps / max(collect_time, 1e-9), it)
            lg.writer.add_scalar("Metrics/success_rate_recent", succ, it)
        if not self.quiet:
            print(
                f"[navexp] it {it + 1:>5}/{total_it} | {steps / (collect_time + learn_time):8.0f} steps/s "
                f"(collect {collect_time:.2f}s, learn {learn_time:.2f}s) | ETA "
                f"{datetime.timedelta(seconds=int(eta))} | reward {reward:7.2f} | success {succ:5.1%}",
                flush=True,
            )

    def checkpoint_path(self) -> str:
        return os.path.join(str(self.logger.log_dir), f"model_{self.current_learning_iteration}.pt")


DIVERGENCE_PATTERNS = (
    "std >= 0",  # torch.normal: "normal expects all elements of std >= 0.0"
    "to satisfy the constraint",  # torch.distributions argument validation (NaN loc/scale)
    "found invalid values",  # the same validation's message for NaN inputs
)
"""Errors raised inside rsl_rl/torch when the policy's parameters or outputs are no longer finite."""


def is_divergence(e: BaseException) -> bool:
    """Whether an error from the learning loop means the policy diverged (not a bug or a config error)."""
    msg = str(e)
    return any(p in msg for p in DIVERGENCE_PATTERNS)


def latest_checkpoint_in(run_dir: Path) -> Path | None:
    found = find_checkpoints(run_dir)
    return found[-1] if found else None
