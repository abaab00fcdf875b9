"""navexp's logger for rsl_rl's runner: rsl_rl's ``Logger`` with device-side episode bookkeeping, a
one-line progress report and iteration callbacks.

rsl_rl's ``Logger.process_env_step`` selects the finished episodes by index every step (``nonzero()``
and ``.cpu()``: a host sync per control step); here their returns and lengths go into rings on the
device and reach the host once per iteration, in ``log``. ``log`` then hands them to rsl_rl's own
``log`` in the buffers it reads (``rewbuffer``, ``lenbuffer``, ``ep_extras``), so rsl_rl writes its
``Loss/``, ``Policy/``, ``Perf/``, ``Train/`` tags and the env's ``Episode_Reward/...`` means as
always; its multi-line console block is replaced by one line. The writer comes from ``cfg["logger"]``
as in rsl_rl (TensorBoard, or ``navexp.learn.wandb_writer``).
"""

from __future__ import annotations

import contextlib
import datetime
import io
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from rsl_rl.utils.logger import Logger

from navexp.task.episode_stats import DeviceRing

NAVEXP_PACKAGE = str(Path(__file__).resolve().parents[1])
"""Whose git state a run records (rsl_rl's default is its own install's)."""


def hush(on: bool) -> contextlib.AbstractContextManager:
    """stdout dropped inside the block when ``on`` (rsl_rl's model printout and its git-diff line, which
    ``verbose=true`` shows); a no-op otherwise."""
    return contextlib.redirect_stdout(io.StringIO()) if on else contextlib.nullcontext()


class NavLogger(Logger):
    """rsl_rl's Logger, sync-free per step, with navexp's progress line and per-iteration callback."""

    def __init__(
        self,
        *,
        env: Any,
        quiet: bool = False,
        verbose: bool = False,
        on_logged: Callable[[int], None] | None = None,
        on_iteration: Callable[[int, float], None] | None = None,
        **logger_kwargs: Any,
    ) -> None:
        """``logger_kwargs``: rsl_rl's ``Logger`` arguments. ``on_logged(it)`` runs as soon as rsl_rl has
        logged iteration ``it`` (its update passed NavPPO's checks: what an early stop saves), before the
        progress line and its collective; ``on_iteration(it, success)`` runs on every rank after it,
        with the rolling success rate averaged over the ranks."""
        super().__init__(**logger_kwargs)
        self.git_status_repos = [NAVEXP_PACKAGE]
        self.env = env
        self.quiet = quiet
        self.verbose = verbose
        self.on_logged = on_logged
        self.on_iteration = on_iteration
        self.is_distributed = bool(logger_kwargs["is_distributed"])
        # Finished episodes' returns and lengths for Train/mean_reward and Train/mean_episode_length.
        self.returns = DeviceRing(self.rewbuffer.maxlen, self.device)
        self.lengths = DeviceRing(self.lenbuffer.maxlen, self.device)
        self.last_times: tuple[float, float] | None = None
        """(collect, learn) seconds of the last iteration."""
        self._t_start = time.time()

    def _store_code_state(self) -> list[str]:
        """rsl_rl's git state of the code in the run directory, its console line only when verbose."""
        with hush(not self.verbose):
            return super()._store_code_state()

    def process_env_step(
        self,
        rewards: torch.Tensor,
        dones: torch.Tensor,
        extras: dict,
        intrinsic_rewards: torch.Tensor | None = None,
    ) -> None:
        """rsl_rl's per-step episode bookkeeping without waiting for the device (navexp configures no
        RND, so there are no intrinsic rewards to book; the env's episode sums arrive in ``log``)."""
        if self.writer is None:
            return
        self.cur_reward_sum += rewards
        self.cur_episode_length += 1
        done = dones > 0
        self.returns.push(self.cur_reward_sum, done)
        self.lengths.push(self.cur_episode_length, done)
        self.cur_reward_sum.masked_fill_(done, 0.0)
        self.cur_episode_length.masked_fill_(done, 0.0)

    def log(
        self, it: int, start_it: int, total_it: int, collect_time: float, learn_time: float, **kw
    ) -> None:
        """rsl_rl's scalars for iteration ``it``, then navexp's, the progress line and ``on_iteration``."""
        self._hand_over_episodes()
        with contextlib.redirect_stdout(io.StringIO()):  # rsl_rl's multi-line block; its writes stay
            super().log(
                it=it,
                start_it=start_it,
                total_it=total_it,
                collect_time=collect_time,
                learn_time=learn_time,
                **kw,
            )
        if self.on_logged is not None:
            self.on_logged(it)
        success = self._progress(it, start_it, total_it, collect_time, learn_time)
        if self.on_iteration is not None:
            self.on_iteration(it, success)

    def _hand_over_episodes(self) -> None:
        """The iteration's episode statistics into the buffers rsl_rl's ``log`` reads (one host read)."""
        for ring, buf in ((self.returns, self.rewbuffer), (self.lengths, self.lenbuffer)):
            buf.clear()
            buf.extend(ring.values().tolist())
        episode_log = self.env.pop_episode_log()
        self.ep_extras.clear()
        if episode_log:
            self.ep_extras.append(episode_log)

    def _progress(
        self, it: int, start_it: int, total_it: int, collect_time: float, learn_time: float
    ) -> float:
        """``Perf/collect_steps_per_s``, ``Metrics/success_rate_recent`` and the progress line; returns
        the rolling success rate (a collective under torchrun: every rank calls it)."""
        self.last_times = (collect_time, learn_time)
        steps = self.cfg["num_steps_per_env"] * self.num_envs * self.gpu_world_size  # all ranks
        done = it + 1 - start_it
        elapsed = time.time() - self._t_start
        eta = elapsed / max(done, 1) * (total_it - it - 1)
        reward = statistics.mean(self.rewbuffer) if self.rewbuffer else float("nan")
        success = self._mean_over_ranks(self.env.recent_success_rate())
        if self.writer is not None:
            self.writer.add_scalar("Perf/collect_steps_per_s", steps / max(collect_time, 1e-9), it)
            self.writer.add_scalar("Metrics/success_rate_recent", success, it)
        if not self.quiet:
            print(
                # The iteration's index and the last one's, 0-based like model_<it>.pt and the TensorBoard
                # and W&B steps: "it 349/349" is the run's last iteration, saved as model_349.pt.
                f"[navexp] it {it:>5}/{total_it - 1} | {steps / (collect_time + learn_time):8.0f} steps/s "
                f"(collect {collect_time:.2f}s, learn {learn_time:.2f}s) | ETA "
                f"{datetime.timedelta(seconds=int(eta))} | reward {reward:7.2f} | success {success:5.1%}",
                flush=True,
            )
        return success

    def _mean_over_ranks(self, value: float) -> float:
        """Mean of a per-rank value over the ranks that have one (NaN on a rank counts as none)."""
        if not self.is_distributed:
            return value
        finite = math.isfinite(value)
        t = torch.tensor([value if finite else 0.0, float(finite)], device=self.device, dtype=torch.float64)
        torch.distributed.all_reduce(t)
        return float(t[0] / t[1]) if t[1] > 0 else float("nan")
