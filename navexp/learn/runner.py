"""rsl_rl's OnPolicyRunner with what a long run needs: atomic checkpoints that carry the observation
layout, a guard against non-finite losses and policies, the last good iteration kept in memory (saved
when training stops early), a one-line progress report, and resume that continues the iteration
count. PPO, the models and the logging stack stay rsl_rl's own.

rsl_rl's extension points carry navexp's parts, so no attribute of an rsl_rl object is replaced:

- the algorithm is ``cfg["algorithm"]["class_name"]``: ``navexp.learn.ppo.NavPPO`` (rsl_rl's PPO with
  the fault check before and the finiteness checks after each update, and ``set_learning_rate``);
- the log writer is ``cfg["logger"]``: TensorBoard or ``navexp.learn.wandb_writer.WandbWriter``;
- the logger is ``navexp.learn.logger.NavLogger`` (rsl_rl's ``Logger`` without the per-step host sync,
  with the progress line and the iteration callbacks). rsl_rl 5.x builds its ``Logger`` inside
  ``OnPolicyRunner.__init__`` and offers no factory or config entry for it, so ``NavRunner.__init__``
  makes the runner's logger once more, right after (nothing has used the first one yet: its writer
  starts in ``learn``);
- ``_configure_multi_gpu`` is overridden (a method rsl_rl's ``__init__`` calls for this purpose) to
  join the process group navexp starts, Gloo on the CPU included.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from rsl_rl.runners import OnPolicyRunner

from navexp.learn.checkpoint import find_checkpoints, save_atomic
from navexp.learn.distributed import setup
from navexp.learn.logger import NavLogger, hush
from navexp.learn.ppo import RejectedUpdate


class NonFiniteLossError(FloatingPointError):
    """PPO produced a NaN/inf loss or a policy with NaN/inf actions, or the env flagged NaN/inf data;
    training stops before a bad checkpoint is written, naming the last good one."""


class NavRunner(OnPolicyRunner):
    """OnPolicyRunner + atomic saves with navexp infos + update guard (NavPPO) + NavLogger."""

    logger: NavLogger

    def __init__(
        self,
        env,
        train_cfg: dict,
        log_dir: str | None,
        device: str,
        infos: dict,
        quiet: bool = False,
        verbose: bool = False,
    ) -> None:
        with hush(not verbose):  # rsl_rl prints the observation sets and both models
            super().__init__(env, train_cfg, log_dir, device)
        self.logger = NavLogger(
            log_dir=log_dir,
            cfg=self.cfg,
            env_cfg=self.env.cfg,
            num_envs=self.env.num_envs,
            is_distributed=self.is_distributed,
            gpu_world_size=self.gpu_world_size,
            gpu_global_rank=self.gpu_global_rank,
            device=self.device,
            env=env,
            quiet=quiet,
            verbose=verbose,
            on_logged=self._keep_good,
            on_iteration=self._finish_iteration,
        )
        self.infos = infos
        self.last_checkpoint: str | None = None
        self._last_logged_it: int | None = None
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

    @property
    def last_times(self) -> tuple[float, float] | None:
        """(collect, learn) seconds of the last iteration."""
        return self.logger.last_times

    # -- multi-process ---------------------------------------------------------------------
    def _configure_multi_gpu(self) -> None:
        """rsl_rl's torchrun setup with Gloo on the CPU as well as NCCL on CUDA.

        rsl_rl 5.x starts an NCCL group and requires ``cuda:<LOCAL_RANK>``; navexp starts the group in
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
        """Use ``lr`` from now on (a resume whose command line changed ``ppo.algorithm.learning_rate``)."""
        self.alg.set_learning_rate(lr)

    # -- guards and reporting ---------------------------------------------------------------
    def learn(self, num_learning_iterations: int, init_at_random_ep_len: bool = False) -> None:
        """rsl_rl's loop; an update NavPPO rejects, a fault the env flagged and a policy that diverged
        inside it (std < 0, NaN parameters in a distribution) stop training with the iteration and the
        last good checkpoint (``NonFiniteLossError``)."""
        try:
            super().learn(num_learning_iterations, init_at_random_ep_len)
        except NonFiniteLossError:
            raise
        except RejectedUpdate as e:
            what = e.describe(self._current_iteration())
            raise NonFiniteLossError(f"{what}; {self._last_good_text()}") from e
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

    def _keep_good(self, it: int) -> None:
        """Iteration ``it`` is logged (its update passed NavPPO's checks): keep its state for an early
        stop (before the progress line, whose collective may fail when a peer rank died)."""
        self._last_logged_it = it
        self._good = (it, copy.deepcopy(self.alg.save()))

    def _finish_iteration(self, it: int, success: float) -> None:
        """After iteration ``it``'s progress line: the iteration callbacks."""
        self.recent_success = success
        for fn in self.iteration_callbacks:
            fn(it, success)

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
