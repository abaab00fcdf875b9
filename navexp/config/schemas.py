"""Typed schemas for every config group, registered in Hydra's ConfigStore as ``base_<group>`` (``env``
and ``robot``: ``navexp.task.env_cfg``; ``ppo``: ``navexp.learn.ppo_schema``, shaped like rsl_rl's runner
dict).

Every YAML variant in ``configs/<group>/`` starts with ``defaults: [base_<group>, _self_]``, so a
misspelled key fails at compose time. Cross-field checks that a schema cannot express live in
``navexp.task.validation.validate_env_cfg`` and run before any simulation is built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from navexp.config.keys import groups_help
from navexp.learn.ppo_schema import PpoCfg
from navexp.task.env_cfg import EnvCfg, RobotCfg
from navexp.task.maps.families import FAMILIES
from navexp.task.obs.terms import OBS_TERMS
from navexp.task.rewards.terms import REWARD_TERMS


@dataclass
class RewardTermCfg:
    weight: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class ObsTermCfg:
    enabled: bool = True
    params: dict[str, Any] = field(default_factory=dict)


def _default_obs_terms() -> dict[str, ObsTermCfg]:
    return {
        name: ObsTermCfg(
            enabled=OBS_TERMS.get(name).meta["enabled"], params=OBS_TERMS.get(name).default_params()
        )
        for name in OBS_TERMS.names()
    }


def _default_reward_terms() -> dict[str, RewardTermCfg]:
    return {
        name: RewardTermCfg(0.0, REWARD_TERMS.get(name).default_params()) for name in REWARD_TERMS.names()
    }


@dataclass
class ObsCfg:
    terms: dict[str, ObsTermCfg] = field(default_factory=_default_obs_terms)
    """Every registered term with its default enabled flag and params (so each is addressable from the
    command line). The group a term joins follows from its registered provenance, never from YAML."""
    privileged_enabled: bool = False
    """Critic reads [policy, privileged]; the actor always reads policy only."""
    history_length: int = 1
    """Frames stacked per group (1 = current frame only)."""


@dataclass
class RewardCfg:
    terms: dict[str, RewardTermCfg] = field(default_factory=_default_reward_terms)
    """Every registered term, weight 0 unless a variant sets it (a weight of 0 skips the term)."""


@dataclass
class LoggerCfg:
    type: str = "tensorboard"
    """tensorboard | wandb (wandb also writes TensorBoard events)."""
    project: str = "navexp"
    entity: str | None = None
    group: str | None = None
    """W&B group; defaults to the sweep or experiment name."""
    name: str | None = None
    tags: list[str] = field(default_factory=list)
    mode: str = "offline"
    """W&B mode: offline (default, sync later with `wandb sync`) | online | disabled."""


@dataclass
class EvalCfg:
    num_episodes: int = 200
    num_envs: int = 0
    """Worlds used for evaluation; 0 = min(num_episodes, env.num_envs)."""
    layout_seed_offset: int = 1_000_003
    """Held-out layouts: training never uses this offset."""
    enabled: bool = True
    plot_episodes: int = 16
    """Episodes of the final evaluation drawn (run_dir/plots/, TensorBoard and W&B); 0 = none."""
    video_episodes: int = 2
    """Episodes of the final evaluation animated into run_dir/plots/eval.gif, logged to TensorBoard
    (Images tab) and W&B (``Eval/video``); 0 = none."""
    video_fps: float = 10.0
    video_max_frames: int = 200
    """At most this many frames in the final evaluation's GIF (longer episodes show every n-th step)."""
    suite: str | None = "default"
    """Suite of the final evaluation (configs/suites/<name>.yaml or a path; navexp/config/suites.py):
    its first entry gives eval.json's top-level metrics, every entry its own under ``entries``. None:
    the run's env only."""


@dataclass
class PruningCfg:
    enabled: bool = False
    """Report the rolling training success rate to the study and stop hopeless trials early."""
    type: str = "median"
    """median | percentile | hyperband | wilcoxon (optuna's pruners; docs/sweeps.md)."""
    interval: int = 5
    """Iterations between reports."""
    n_startup_trials: int = 3
    """median / percentile: no pruning until this many trials have finished."""
    n_warmup_steps: int = 10
    """No pruning before this iteration within a trial (hyperband: its minimum resource; wilcoxon: its
    n_startup_steps)."""
    percentile: float = 25.0
    """percentile: prune below this percentile of earlier trials at the same iteration."""
    p_threshold: float = 0.1
    """wilcoxon: prune when the signed-rank test says worse than the best trial at this p-value."""


@dataclass
class SweepCfg:
    """Optuna study settings, read by navexp's sweeper when ``hydra/sweeper=optuna`` (docs/sweeps.md)."""

    space: str = "default"
    """Search space: sweeps/<space>.yaml."""
    study_name: str | None = None
    """Default: <experiment_name>_<space>. Re-running with the same name continues the study."""
    storage: str | None = None
    """Optuna storage URL; default sqlite:///outputs/studies/<study_name>.db."""
    n_trials: int | None = None
    """Finished trials the study should reach (a re-run only adds the missing ones); default 50 on a GPU,
    10 on a CPU. ``hydra.sweeper.n_trials`` is the same setting (docs/sweeps.md: which wins)."""
    n_jobs: int = 1
    """Trials launched per batch (run in parallel with hydra/launcher=joblib)."""
    sampler_seed: int = 0
    max_failure_rate: float = 0.5
    """Abort when failed / finished trials exceeds this (checked after each batch, from 3 finished trials)."""
    objectives: list[str] = field(default_factory=lambda: ["success_rate"])
    """success_rate (maximize); two or more -> multi-objective, e.g. [success_rate, mean_time_to_goal_s]."""
    heartbeat_interval_s: int = 30
    """Running trials beat this often; a worker that finds a trial silent for 2 intervals marks it FAIL
    (``fail_reason`` "worker stopped: ...") and runs its parameters again."""
    devices: Any = "auto"
    """Devices the trials of a parallel batch rotate over (round-robin): auto (every GPU when env.device
    is CUDA; the CPU stays the CPU), none (keep env.device), or a list such as [0,1] / [cuda:0,cuda:2]."""
    trial_overrides_cpu: list[str] = field(
        default_factory=lambda: [
            "env.num_envs=128",
            "ppo.max_iterations=40",
            "ppo.save_interval=20",
            "eval.num_episodes=100",
        ]
    )
    """Applied to every trial on a CPU (about 30 s each on 2 cores) unless the command line sets the key."""
    trial_overrides_gpu: list[str] = field(default_factory=lambda: ["ppo.max_iterations=300"])
    pruning: PruningCfg = field(default_factory=PruningCfg)
    trial_id: int | None = None
    """Set by the sweeper for each trial (storage id); not for users."""
    trial_number: int | None = None
    """Set by the sweeper for each trial; not for users."""


def _unset_family_weights() -> dict[str, float | None]:
    return dict.fromkeys(FAMILIES)


@dataclass
class CurriculumStageCfg:
    """One end of the curriculum (``easy`` at level 0, ``hard`` at the top level). A key left null
    takes the env's own value (``env.obstacles.<key>``, ``env.maps.weights``)."""

    cylinder_count: list[int] | None = None
    """[min, max] cylinders of the random family (obstacles.cylinder_count)."""
    box_count: list[int] | None = None
    """[min, max] boxes of the random family (obstacles.box_count)."""
    cylinder_radius_m: list[float] | None = None
    """[min, max] cylinder radius (obstacles.cylinder_radius_m)."""
    box_half_size_m: list[float] | None = None
    """[min, max] box half-extent (obstacles.box_half_size_m)."""
    weights: dict[str, float | None] = field(default_factory=_unset_family_weights)
    """Map family weights (maps.weights; every family listed, null = not set). All null: the env's
    weights; otherwise a family left null gets 0. Normalised before interpolating."""


@dataclass
class CurriculumCfg:
    """The ``curriculum`` group: layout difficulty that follows the rolling success rate
    (navexp/task/curriculum.py). ``none`` (default) trains on the env's layouts throughout."""

    type: str = "none"
    """none | success."""
    levels: int = 4
    """L: difficulty levels 0..L; level l interpolates easy -> hard at l / L (counts rounded)."""
    start_level: int = 0
    """Level of a fresh training (0 <= start_level <= levels); resume continues at the saved level."""
    promote_above: float = 0.8
    """One level up when the rolling success rate is above this (in [0, 1])."""
    demote_below: float = 0.5
    """One level down when the rolling success rate is below this (in [0, 1], < promote_above)."""
    min_episodes: int | None = None
    """Finished training episodes (rank 0's worlds) between two changes, and in the rolling window
    before the first decision. None: the rolling window (1000), so no episode counts towards two
    decisions."""
    min_iterations: int = 1
    """PPO iterations between two changes."""
    easy: CurriculumStageCfg = field(default_factory=CurriculumStageCfg)
    hard: CurriculumStageCfg = field(default_factory=CurriculumStageCfg)


@dataclass
class ExperimentCfg:
    env: EnvCfg = field(default_factory=EnvCfg)
    obs: ObsCfg = field(default_factory=ObsCfg)
    reward: RewardCfg = field(default_factory=RewardCfg)
    ppo: PpoCfg = field(default_factory=PpoCfg)
    logger: LoggerCfg = field(default_factory=LoggerCfg)
    eval: EvalCfg = field(default_factory=EvalCfg)
    sweep: SweepCfg = field(default_factory=SweepCfg)
    curriculum: CurriculumCfg = field(default_factory=CurriculumCfg)
    seed: int = 42
    experiment_name: str = "navexp"
    resume: str | None = None
    """Run directory or checkpoint to continue from."""
    recipe: str = "none"
    """The training recipe the config was composed with (set by the ``recipe`` group, composed last:
    ``traps`` sets env, obs, reward and ppo choices; none). A key on the command line wins over it."""
    verbose: bool = False
    """Show what a run's console leaves out by default: rsl_rl's printout of the observation sets and
    the models, its git-diff line, and third-party warnings (FutureWarning, DeprecationWarning)."""
    size: str = "none"
    """The size preset the config was composed with (set by the ``size`` group: gpu | cpu | tiny | none).
    ``python -m navexp.train`` turns ``size=auto`` (its default) into gpu or cpu before composing."""


def _path_name(key: str, value: Any) -> str:
    """``${navexp_path_name:experiment_name,${experiment_name}}``: the value, once it is a safe name.

    Hydra creates the run directory before the app runs, so a name like ``../../x`` must fail while
    the directory path is resolved (a plain value cannot refuse itself).
    """
    check_path_name(key, value)
    return str(value)


_STORED: dict[str, str] = {}
"""The registries' fingerprint the schemas in Hydra's ConfigStore were stored with."""


def _registries_fingerprint() -> str:
    """What the schemas read from the term registries: every observation and reward term with its
    default params (a term registered after the last store, a user's own, changes it; the map families
    are fixed once ``navexp.task.maps.families`` is imported)."""
    return repr((_default_obs_terms(), _default_reward_terms()))


def register_configs() -> None:
    """Store the schemas as ``base_<group>`` and the top-level schema as ``base_config``.

    Storing turns each dataclass into a config (0.6 s for all of them), so it happens again only when
    the registries changed since (or the ConfigStore was emptied); Hydra hands out copies of what is
    stored, so a composed config never changes the stored schema.
    """
    OmegaConf.register_new_resolver("navexp_path_name", _path_name, replace=True)
    # --help's groups (config.yaml, hydra.help.template): Hydra's own list shows base_* and data folders.
    OmegaConf.register_new_resolver("navexp_config_groups", groups_help, replace=True)
    cs = ConfigStore.instance()
    fingerprint = _registries_fingerprint()
    if "base_config.yaml" in cs.repo and _STORED.get("fingerprint") == fingerprint:
        return
    cs.store(name="base_config", node=ExperimentCfg)
    cs.store(group="env", name="base_env", node=EnvCfg)
    cs.store(group="robot", name="base_robot", node=RobotCfg, package="env.robot")
    cs.store(group="obs", name="base_obs", node=ObsCfg)
    cs.store(group="reward", name="base_reward", node=RewardCfg)
    cs.store(group="ppo", name="base_ppo", node=PpoCfg)
    cs.store(group="logger", name="base_logger", node=LoggerCfg)
    cs.store(group="curriculum", name="base_curriculum", node=CurriculumCfg)
    _STORED["fingerprint"] = fingerprint


_SAFE_NAME = re.compile(r"[A-Za-z0-9_.=+,@-]+")


def check_path_name(key: str, value: Any) -> None:
    """Refuse a value that becomes a directory or file name but could escape it (separators, ``..``)."""
    text = str(value)
    if text in ("", ".", "..") or not _SAFE_NAME.fullmatch(text) or ".." in Path(text).parts:
        raise ValueError(
            f"{key}={text!r} is invalid: it forms a directory or file name, so it must stay inside "
            f"its parent (no path separators, no '..'); allowed: a non-empty name of letters, digits "
            f"and _ . = + , @ - (not '.' or '..')"
        )
