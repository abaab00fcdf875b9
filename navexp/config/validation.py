"""Checks of a run's config that its schemas cannot express, once per run, before anything is built.

``validate_run_cfg`` is the one place: it runs the env checks (``navexp.task.validation``), then
what ``python -m navexp.train`` adds on top: the curriculum (its keys, and a valid env config at both
of its ends), the ``ppo`` group (``navexp.learn.ppo_cfg.check_ppo_cfg``: every range and choice of its
keys, the batch sizes, the model), the evaluation suite and video, and the values that form paths
(``experiment_name``, ``sweep.study_name``).
"""

from __future__ import annotations

from typing import Any

from navexp.config.schemas import check_path_name
from navexp.config.suites import check_evaluation
from navexp.extras import require
from navexp.learn.ppo_cfg import check_ppo_cfg
from navexp.task.checks import check_all_finite
from navexp.task.curriculum import make_curriculum
from navexp.task.validation import validate_env_cfg

__all__ = ["check_path_name", "validate_env_cfg", "validate_run_cfg"]


def validate_run_cfg(cfg: Any) -> None:
    """Raise ValueError for a training config that would fail (or mislead) only after it starts.

    Runs after the size preset is applied, before the env, the runner or any file is created.
    """
    validate_env_cfg(cfg.env)
    for group in ("obs", "reward"):  # term params and weights: inf would surface as a NaN reward later
        check_all_finite(cfg[group], group)
    # The curriculum: its keys, and an env config at its easy and hard ends that validate_env_cfg accepts.
    make_curriculum(cfg)
    check_ppo_cfg(cfg)  # every ppo key's range and choice, the batch sizes, the model kinds' keys
    _check_eval_video(cfg.eval)
    if cfg.eval.enabled:  # an unknown suite, a bad entry, a scenario file not fully played: before training
        check_evaluation(cfg, cfg.eval.get("suite") and str(cfg.eval.suite))
    check_path_name("experiment_name", cfg.experiment_name)
    if cfg.sweep.study_name is not None:
        check_path_name("sweep.study_name", cfg.sweep.study_name)
    _check_logger(cfg.logger)
    pruning = cfg.sweep.pruning
    if pruning.type not in PRUNERS:
        raise ValueError(
            f"sweep config: sweep.pruning.type={pruning.type!r} is invalid; allowed: {list(PRUNERS)}"
        )


PRUNERS = ("median", "percentile", "hyperband", "wilcoxon")
"""``sweep.pruning.type`` values (navexp/sweep/trial.py builds them; this module imports no optuna)."""


LOGGERS = {"type": ("tensorboard", "wandb"), "mode": ("offline", "online", "disabled")}
"""``logger.type`` and ``logger.mode`` values (the W&B writer checks its mode again, for the Python API)."""


def _check_logger(lg: Any) -> None:
    """A misspelled logger setting fails here, before Hydra's callback leaves a run directory behind."""
    for key, allowed in LOGGERS.items():
        if lg.get(key) is not None and lg[key] not in allowed:
            raise ValueError(
                f"logger config: logger.{key}={lg[key]!r} is invalid; allowed: {' | '.join(allowed)}"
            )
    if lg.get("type") == "wandb":
        require("wandb", "wandb", "logger=wandb")


def _check_eval_video(ev: Any) -> None:
    """The final evaluation's GIF settings (else the failure would come after the whole training)."""
    for key, ok, allowed in (
        ("video_episodes", ev.video_episodes >= 0, "an integer >= 0 (0 = no video)"),
        ("video_fps", ev.video_fps > 0, "a number > 0"),
        ("video_max_frames", ev.video_max_frames >= 1, "an integer >= 1"),
    ):
        if not ok:
            raise ValueError(f"eval config: eval.{key}={ev[key]!r} is invalid; allowed: {allowed}")
