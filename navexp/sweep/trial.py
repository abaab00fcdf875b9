"""Inside a trial: the objective from the evaluation, metrics into the study, early stopping (pruning).

The plugin passes no trial object to the job; the sweeper passes ``sweep.trial_id`` and the storage
instead, so the job loads the study and reports to its own trial. The training run itself knows nothing
of Optuna: the entry point hands it ``trial_hooks(cfg)`` (pruning, metrics into the study, the W&B record).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import optuna
from omegaconf import DictConfig

from navexp.config.validation import PRUNERS
from navexp.experiment.hooks import RunHooks
from navexp.sweep.storage import describe, open_storage


def objective(cfg: DictConfig, metrics: dict) -> float | list[float]:
    """success_rate for one objective; the list of ``sweep.objectives`` values otherwise.

    mean_time_to_goal_s / mean_path_length_m of a policy with no success are taken as the episode
    length / the room's diagonal walked 3 times (the worst values), so the objective stays finite.
    """
    names = list(cfg.sweep.objectives)
    worst = {
        "mean_time_to_goal_s": float(cfg.env.episode_length_s),
        "mean_path_length_m": 3.0 * math.hypot(cfg.env.room.size_x_m, cfg.env.room.size_y_m),
    }
    values = []
    for name in names:
        v = metrics.get(name)
        values.append(float(worst.get(name, float("nan")) if v is None else v))
    return values[0] if len(values) == 1 else values


def trial_record(cfg: DictConfig, trial: optuna.trial.Trial | None = None) -> dict | None:
    """What a trial's W&B run records of its study (None outside a sweep): ``{study, trial_number,
    params: {<override key>: value}, objectives, directions}``, the flat ``config.optuna`` a
    parallel-coordinates panel reads. ``trial``: the trial already loaded (else it is loaded here)."""
    if cfg.sweep.trial_id is None:
        return None
    trial = trial or _trial(cfg)
    frozen = trial.storage.get_trial(int(cfg.sweep.trial_id))
    return {
        "study": str(cfg.sweep.study_name),
        "trial_number": int(frozen.number),
        "params": dict(frozen.params),
        "objectives": list(cfg.sweep.objectives),
        "directions": [d.name.lower() for d in trial.study.directions],
    }


def pruner(pruning: DictConfig) -> optuna.pruners.BasePruner:
    """The ``sweep.pruning.type`` pruner. median / percentile: below the median (percentile) of earlier
    trials at the same iteration; hyperband: successive halving over brackets of iterations; wilcoxon:
    a signed-rank test of this trial's curve against the best trial's at the same iterations."""
    p, kind = pruning, str(pruning.type)
    startup, warmup = int(p.n_startup_trials), int(p.n_warmup_steps)
    if kind == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=startup, n_warmup_steps=warmup)
    if kind == "percentile":
        return optuna.pruners.PercentilePruner(
            float(p.percentile), n_startup_trials=startup, n_warmup_steps=warmup
        )
    if kind == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=max(1, warmup))
    if kind == "wilcoxon":
        return optuna.pruners.WilcoxonPruner(p_threshold=float(p.p_threshold), n_startup_steps=warmup)
    raise ValueError(f"sweep.pruning.type={kind!r} is invalid; allowed: {list(PRUNERS)}")


def _trial(cfg: DictConfig) -> optuna.trial.Trial:
    sw = cfg.sweep
    study = optuna.load_study(
        study_name=str(sw.study_name), storage=open_storage(str(sw.storage)), pruner=pruner(sw.pruning)
    )
    return optuna.trial.Trial(study, int(sw.trial_id))


def pruning_callback(
    cfg: DictConfig, trial: optuna.trial.Trial | None = None
) -> Callable[[int, float], None] | None:
    """A per-iteration callback that reports the rolling success rate and raises TrialPruned when told.

    The study then records the trial's intermediate values and the state PRUNED. None outside a sweep
    or with ``sweep.pruning.enabled=false``.
    """
    if cfg.sweep.trial_id is None or not cfg.sweep.pruning.enabled or len(cfg.sweep.objectives) > 1:
        return None

    trial = trial or _trial(cfg)
    interval = int(cfg.sweep.pruning.interval)

    def report(it: int, success_rate: float) -> None:
        if (it + 1) % interval or not math.isfinite(success_rate):
            return
        trial.report(success_rate, step=it)
        if trial.should_prune():
            raise optuna.TrialPruned(f"pruned at iteration {it} with rolling success {success_rate:.3f}")

    return report


def record_metrics(
    cfg: DictConfig, metrics: dict, run_dir: str, trial: optuna.trial.Trial | None = None
) -> None:
    """Store the evaluation metrics and run directory as user attributes of the trial."""
    if cfg.sweep.trial_id is None:
        return
    trial = trial or _trial(cfg)
    trial.set_user_attr("run_dir", run_dir)
    for key in (
        "success_rate",
        "collision_rate",
        "timeout_rate",
        "out_of_bounds_rate",
        "mean_time_to_goal_s",
        "mean_path_length_m",
        "num_episodes",
    ):
        if metrics.get(key) is not None:
            trial.set_user_attr(key, metrics[key])


def trial_hooks(cfg: DictConfig) -> RunHooks:
    """What a sweep trial adds to its training run: the pruning callback, the metrics stored in its trial,
    and its W&B run marked as a trial (``job_type="trial"``, the study and what was searched as tags,
    ``config.optuna``, the trial's state and objective values in the summary). Outside a sweep: no hooks.
    The training run calls it after validating its config (it loads the study once)."""
    if cfg.sweep.trial_id is None:
        return RunHooks()
    trial = _trial(cfg)
    record = trial_record(cfg, trial)
    prune = pruning_callback(cfg, trial)
    tags = [f"study:{record['study']}", *(f"objective:{o}" for o in record["objectives"])]

    def summary(state: str, metrics: dict | None) -> dict:
        out = {"optuna/state": state}
        if metrics is not None:
            value = objective(cfg, metrics)
            values = value if isinstance(value, list) else [value]
            out.update({f"optuna/{k}": v for k, v in zip(cfg.sweep.objectives, values, strict=True)})
        return out

    return RunHooks(
        iteration_callbacks=[prune] if prune is not None else [],
        on_metrics=lambda metrics, run_dir: record_metrics(cfg, metrics, str(run_dir), trial),
        wandb_config={"optuna": record},
        wandb_tags=[*tags, *(f"searched:{k}" for k in record["params"])],
        job_type="trial",
        ends_normally=lambda error: isinstance(error, optuna.TrialPruned),
        continue_with=continue_study(cfg),
        summary=summary,
    )


def continue_study(cfg: DictConfig) -> str:
    """How to continue a study whose trial was stopped (Ctrl-C, SIGTERM): re-run the sweep, which runs the
    trial again from its start with the same parameters; ``resume=<trial dir>`` would train it outside
    its study, which would never see its result."""
    sw = cfg.sweep
    return (
        f"the same sweep command (study {sw.study_name} in {describe(str(sw.storage))}): trial "
        f"{sw.trial_number} runs again from its start with its parameters (resume=<trial dir> would train "
        f"it outside the study)"
    )
