"""The curriculum inside a training run: the iteration callback that logs ``Curriculum/*``, decides
on rank 0 and broadcasts the state under torchrun (the state machine is ``navexp.task.curriculum``)."""

from __future__ import annotations

from navexp.learn.distributed import broadcast
from navexp.task.curriculum import SuccessCurriculum


class CurriculumHook:
    """The curriculum in a training run, called after each PPO iteration (NavRunner.iteration_callbacks).

    Rank 0 counts the iteration's finished episodes (one device read, between iterations) and decides
    with the success rate the runner averaged over ranks; its state is broadcast, so all ranks agree.
    On a change every rank refills its env's layout pool at the new level and rank 0 prints it. Every
    iteration logs ``Curriculum/*`` for the level the iteration trained on, and the state goes into
    the runner's checkpoint infos (``infos["curriculum"]``).
    """

    def __init__(self, curriculum: SuccessCurriculum, env, runner, ctx=None, quiet: bool = False) -> None:
        self.curriculum, self.env, self.runner, self.ctx, self.quiet = curriculum, env, runner, ctx, quiet
        self._episodes_seen = env.finished_episodes()
        runner.infos["curriculum"] = curriculum.state_dict()

    def __call__(self, it: int, success_rate: float) -> None:
        """Log this iteration's level, decide, apply a change (a collective under torchrun)."""
        cur, ctx = self.curriculum, self.ctx
        before = cur.state.level
        writer = self.runner.logger.writer
        if writer is not None:
            for tag, value in cur.scalars(before).items():
                writer.add_scalar(tag, value, it)
        total = self.env.finished_episodes()
        new, self._episodes_seen = total - self._episodes_seen, total
        # The rolling window must hold min_episodes (or all 1000) episodes of this env before a
        # decision: after a resume the env's window starts empty.
        if total < min(cur.min_episodes, self.env.OUTCOME_WINDOW):
            success_rate = float("nan")
        if ctx is None or ctx.is_main:
            cur.update(success_rate, new)
        if ctx is not None and ctx.enabled:
            cur.load_state_dict(broadcast(cur.state_dict(), ctx))  # rank 0's decision everywhere
        self.runner.infos["curriculum"] = cur.state_dict()
        after = cur.state.level
        if after == before:
            return
        self.env.set_layout_specs(*cur.specs_at(after))
        if not self.quiet:
            word = "up" if after > before else "down"
            bound = cur.promote_above if after > before else cur.demote_below
            print(
                f"[navexp] curriculum {word}: level {before} -> {after} of {cur.levels} after iteration "
                f"{it + 1} (success {success_rate:.1%} {'>' if after > before else '<'} {bound:.0%}); "
                f"{cur.describe(after)}",
                flush=True,
            )
