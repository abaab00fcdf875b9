"""The run's log writer: rsl_rl's ``logger`` entry (TensorBoard, or navexp's W&B writer), how the writer
ends when the run does, and the final evaluation's figures, scalars and hparams."""

from __future__ import annotations

from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from navexp.analysis.eval_record import RECORD_KEYS  # what was evaluated (layout_seed, ...) is not a result
from navexp.analysis.suites import eval_scalars
from navexp.analysis.video import log_gif
from navexp.experiment.hooks import RunHooks
from navexp.learn.ppo_cfg import ppo_hparams
from navexp.learn.wandb_writer import WandbWriter


def logger_entry(
    cfg: DictConfig, run_dir: Path, run_id: str | None, hooks: RunHooks, first_step: int | None = None
) -> str | dict:
    """rsl_rl's logger entry: TensorBoard, or navexp's W&B writer, with what the hooks add (a sweep trial's
    run is marked as one: ``job_type="trial"``, tags, and ``config.optuna``: what was searched). A
    resume's writer hides the run's events from ``first_step`` on (TensorBoard's ``purge_step``): what an
    earlier segment logged after the checkpoint it continues (a run killed past its last save, a branch
    from an earlier checkpoint) leaves the curves, which the resumed segment draws again."""
    lg = cfg.logger
    if lg.type == "tensorboard":
        if first_step is None:
            return "tensorboard"
        return {
            "class_name": "torch.utils.tensorboard:SummaryWriter",
            "flush_secs": 10,
            "purge_step": first_step,
        }
    config = {**OmegaConf.to_container(cfg, resolve=True), **hooks.wandb_config}
    name, group = multirun_labels(str(cfg.experiment_name))
    return {
        "class_name": f"{WandbWriter.__module__}:{WandbWriter.__qualname__}",  # seen by lint-imports
        "project": str(lg.project),
        "mode": str(lg.mode),
        "entity": lg.entity,
        "group": lg.group or group or str(cfg.experiment_name),
        "name": lg.name or name or run_dir.name,
        "tags": [*lg.tags, *hooks.wandb_tags],
        "run_id": run_id,
        "config": config,
        "job_type": hooks.job_type,
        "purge_step": first_step,
    }


def multirun_labels(experiment_name: str) -> tuple[str | None, str | None]:
    """(W&B name, group) of a run of a Hydra multirun (``-m seed=1,2,3``): named by the values of the
    keys the multirun sweeps (``seed=2``; Hydra's own run names are ``0``, ``1``, ...), grouped by the
    multirun (``<experiment_name>_<its sweep directory's name>``). The swept keys are those of the
    multirun's command line, which Hydra records in ``<sweep dir>/multirun.yaml`` before its jobs start.
    (None, None) outside a multirun, or without that file."""
    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return None, None
    hc = HydraConfig.get()
    sweep_dir = Path(str(hc.sweep.dir))
    group = f"{experiment_name}_{sweep_dir.name}"
    try:
        multirun = OmegaConf.load(sweep_dir / "multirun.yaml")
        parser = OverridesParser.create()
        swept = {
            o.get_key_element()
            for o in parser.parse_overrides([str(x) for x in multirun.hydra.overrides.task])
            if o.is_sweep_override()
        }
        mine = parser.parse_overrides([str(x) for x in hc.overrides.task])
    except Exception:  # no multirun.yaml (another launcher), or one Hydra wrote differently
        return None, group
    return ",".join(o.input_line for o in mine if o.get_key_element() in swept) or None, group


def close_writer(writer, error: BaseException, hooks: RunHooks) -> None:
    """A run that ends early: its W&B run records why and is finished as failed, except an end the hooks
    call normal (a pruned trial)."""
    if not hasattr(writer, "finish"):
        return
    pruned = hooks.ends_normally(error)
    state = "pruned" if pruned else "interrupted" if isinstance(error, KeyboardInterrupt) else "fail"
    summary = {"run/state": state, "run/error": f"{type(error).__name__}: {error}"}
    writer.log_summary({**summary, **hooks.summary(state, None)})
    writer.finish(exit_code=0 if pruned else 1)


def finish_writer(writer, metrics: dict, hooks: RunHooks) -> None:
    """A run that completed: its W&B run records the state (and what the hooks add) and is finished."""
    if hasattr(writer, "finish"):
        writer.log_summary({"run/state": "complete", **hooks.summary("complete", metrics)})
        writer.finish()


def hparams(cfg: DictConfig) -> dict:
    """Flat hyperparameters for TensorBoard's hparams view (PPO keys and reward weights)."""
    hp = ppo_hparams(cfg.ppo)
    hp.update({f"reward.{k}": float(v.weight) for k, v in cfg.reward.terms.items()})
    hp.update({"seed": int(cfg.seed), "env.num_envs": int(cfg.env.num_envs)})
    return hp


def log_final(writer, cfg: DictConfig, metrics: dict, it: int, figures: dict, videos: dict) -> None:
    """The final evaluation in the run's log: its figures and GIF, ``Eval/...`` scalars and the hparams
    view (the main entry's metrics)."""
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
    writer.add_hparams(hparams(cfg), main, run_name="hparams")
    if hasattr(writer, "log_summary"):
        writer.log_summary(scalars)
    writer.flush()
