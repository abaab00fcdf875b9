"""The config of ``hydra/sweeper=optuna`` and its ``hydra/sweeper/sampler`` group.

The keys are those of hydra-optuna-sweeper 1.3.0 (``sampler``, ``direction``, ``storage``,
``study_name``, ``n_trials``, ``n_jobs``, ``max_failure_rate``, ``search_space``, ``params``,
``custom_search_space``), so sweep configs written for that plugin keep working; tests/test_sweeper_plugin.py
pins them. They are a compatibility layer over navexp's ``sweep.*`` names: the study loop translates them
once into its settings (navexp/sweep/settings.py, which also says which wins when both names are set); a
key left null takes ``sweep.<key>``. Nothing here imports optuna: Hydra imports this module on every
start, sweeping or not. (No ``from __future__ import annotations``: Hydra executes plugin modules outside
``sys.modules``, where dataclasses cannot resolve string annotations.)
"""

import importlib.util
import logging
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

log = logging.getLogger(__name__)


@dataclass
class SamplerConfig:
    _target_: str = MISSING
    seed: int | None = None
    """null: seeded per trial from (sweep.sampler_seed, trial number), see navexp/sweep/samplers.py."""


@dataclass
class TPESamplerConfig(SamplerConfig):
    """The default: multivariate TPE with the constant liar (running trials count as bad results, so
    parallel workers keep apart); with several objectives it is optuna's multi-objective TPE."""

    _target_: str = "optuna.samplers.TPESampler"
    n_startup_trials: int = 10
    n_ei_candidates: int = 24
    multivariate: bool = True
    group: bool = False
    constant_liar: bool = True


@dataclass
class RandomSamplerConfig(SamplerConfig):
    _target_: str = "optuna.samplers.RandomSampler"


@dataclass
class CmaEsSamplerConfig(SamplerConfig):
    """Single objective; continuous and integer parameters (categoricals fall back to random)."""

    _target_: str = "optuna.samplers.CmaEsSampler"
    x0: dict[str, Any] | None = None
    sigma0: float | None = None
    n_startup_trials: int = 1
    restart_strategy: str | None = None
    popsize: int | None = None
    inc_popsize: int = -1
    use_separable_cma: bool = False
    with_margin: bool = False
    lr_adapt: bool = False
    consider_pruned_trials: bool = False


@dataclass
class GPSamplerConfig(SamplerConfig):
    """Gaussian-process Bayesian optimisation: the strongest choice for a few continuous parameters
    (reward weights, desired_kl, clip_param) on a small trial budget."""

    _target_: str = "optuna.samplers.GPSampler"
    n_startup_trials: int = 10
    deterministic_objective: bool = False


@dataclass
class NSGAIISamplerConfig(SamplerConfig):
    _target_: str = "optuna.samplers.NSGAIISampler"
    population_size: int = 50
    mutation_prob: float | None = None
    crossover_prob: float = 0.9
    swapping_prob: float = 0.5


@dataclass
class NSGAIIISamplerConfig(SamplerConfig):
    """NSGA-III: for three or more objectives."""

    _target_: str = "optuna.samplers.NSGAIIISampler"
    population_size: int = 50
    mutation_prob: float | None = None
    crossover_prob: float = 0.9
    swapping_prob: float = 0.5
    dividing_parameter: int = 3


@dataclass
class QMCSamplerConfig(SamplerConfig):
    """Quasi-Monte Carlo (Sobol / Halton): an even cover of the space. One seed for the whole study
    (``seed`` or sweep.sampler_seed), never per trial, so the sequence stays one sequence."""

    _target_: str = "optuna.samplers.QMCSampler"
    qmc_type: str = "sobol"
    scramble: bool = False
    warn_asynchronous_seeding: bool = False


@dataclass
class GridSamplerConfig(SamplerConfig):
    """Every combination of ``choice(...)``/``range(...)`` values once; n_trials is capped at the
    grid size."""

    _target_: str = "optuna.samplers.GridSampler"
    _partial_: bool = True  # the search space comes from hydra.sweeper.params / sweep.space


@dataclass
class BruteForceSamplerConfig(SamplerConfig):
    """Every combination of a discrete space once (choice, range, or an interval of integers)."""

    _target_: str = "optuna.samplers.BruteForceSampler"
    avoid_premature_stop: bool = False


SAMPLERS: dict[str, type[SamplerConfig]] = {
    "tpe": TPESamplerConfig,
    "random": RandomSamplerConfig,
    "cmaes": CmaEsSamplerConfig,
    "gp": GPSamplerConfig,
    "nsgaii": NSGAIISamplerConfig,
    "nsgaiii": NSGAIIISamplerConfig,
    "qmc": QMCSamplerConfig,
    "grid": GridSamplerConfig,
    "bruteforce": BruteForceSamplerConfig,
}


@dataclass
class NavOptunaSweeperConf:
    _target_: str = "hydra_plugins.navexp_sweeper.optuna_sweeper.NavOptunaSweeper"
    _recursive_: bool = False  # the sampler stays a config: it is built once per trial with its seed
    defaults: list[Any] = field(default_factory=lambda: [{"sampler": "tpe"}])

    sampler: SamplerConfig = MISSING
    """hydra/sweeper/sampler=tpe|random|cmaes|gp|nsgaii|nsgaiii|qmc|grid|bruteforce."""
    direction: Any = None
    """minimize | maximize | a list; null: the directions of sweep.objectives (which fix them)."""
    storage: Any = None
    """null: sweep.storage."""
    study_name: str | None = None
    """null: sweep.study_name."""
    n_trials: int | None = None
    """null: sweep.n_trials."""
    n_jobs: int | None = None
    """null: sweep.n_jobs."""
    max_failure_rate: float | None = None
    """null: sweep.max_failure_rate."""
    search_space: dict[str, Any] | None = None
    """Deprecated in hydra-optuna-sweeper (use params): {key: {type: int|float|categorical, low, high,
    log, step, choices}}."""
    params: dict[str, str] | None = None
    """{config key: sweep expression}, added to sweep.space (from an experiment YAML; on the command
    line write ``<key>=<expression>`` instead)."""
    custom_search_space: str | None = None
    """Dotted path of a function ``f(cfg, trial)`` that calls ``trial.suggest_*`` for more parameters."""


def register() -> None:
    cs = ConfigStore.instance()
    cs.store(group="hydra/sweeper", name="optuna", node=NavOptunaSweeperConf, provider="navexp")
    for name, node in SAMPLERS.items():
        cs.store(group="hydra/sweeper/sampler", name=name, node=node, provider="navexp")


register()
if importlib.util.find_spec("hydra_plugins.hydra_optuna_sweeper") is not None:
    log.warning(
        "hydra-optuna-sweeper is installed beside navexp's own Optuna sweeper; both register "
        "hydra/sweeper=optuna. Remove it: pip uninstall hydra-optuna-sweeper"
    )
