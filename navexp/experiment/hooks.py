"""What a caller adds to a training run without the run knowing who calls: a sweep trial hands in its
pruning callback, where its metrics go and what its W&B run records (``navexp.sweep.trial.trial_hooks``),
so the training run imports nothing of the sweep package or Optuna."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


def _no_summary(state: str, metrics: dict | None) -> dict:
    return {}


def _never(error: BaseException) -> bool:
    return False


@dataclass
class RunHooks:
    """A run's hooks; the defaults (a plain training) do nothing."""

    iteration_callbacks: list[Callable[[int, float], None]] = field(default_factory=list)
    """Called as ``fn(iteration, rolling success rate)`` after each iteration (after the run's own
    callbacks, before the curriculum); may raise to stop the run (a pruned trial)."""
    on_metrics: Callable[[dict, Path], None] | None = None
    """Called with the final evaluation's metrics and the run directory (a trial stores them in its study)."""
    wandb_config: dict = field(default_factory=dict)
    """Entries added to the W&B run's config (a trial's ``optuna`` record: what was searched)."""
    wandb_tags: list[str] = field(default_factory=list)
    """Tags added to the W&B run."""
    job_type: str = "train"
    """The W&B run's job type (``trial`` for a sweep trial)."""
    ends_normally: Callable[[BaseException], bool] = _never
    """Whether an exception that stops the run is a normal end (a pruned trial): its W&B run is
    finished as ``pruned``, not failed."""
    continue_with: str | None = None
    """How to continue the run after Ctrl-C or SIGTERM, said in the message that names the saved
    checkpoint; None: ``resume=<run dir>`` (a sweep trial: re-run the sweep, which runs it again)."""
    summary: Callable[[str, dict | None], dict] = _no_summary
    """Extra W&B summary entries when the run ends: ``summary(state, metrics)`` with state ``complete``
    (metrics: the final evaluation's), ``pruned``, ``interrupted`` or ``fail`` (metrics None)."""
