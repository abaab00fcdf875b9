"""Samplers from the ``hydra/sweeper/sampler`` group, seeded per trial so that workers keep apart.

Every worker of a study builds the same sampler from the same config. Seeded once, two workers would
draw the same parameters; unseeded, one worker could not replay its study. So the sampler is rebuilt
for each trial with the seed ``derived_seed(sweep.sampler_seed, trial number)``: trial numbers are
unique in a study, so concurrent workers draw distinct parameters and one worker alone draws the same
sequence on every run. optuna keeps a sampler's state that matters (CMA-ES's and NSGA-II's
generations, the grid's visited points) in the storage, so a fresh instance per trial loses nothing.
QMC and the grid are the exceptions: the low-discrepancy sequence and the grid's shuffled order need
one seed for the whole study (the grid keeps workers apart by skipping running points).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import optuna
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler

SINGLE_OBJECTIVE = {"optuna.samplers.CmaEsSampler"}
DISCRETE_ONLY = {"optuna.samplers.GridSampler", "optuna.samplers.BruteForceSampler"}
STUDY_SEED = {"optuna.samplers.QMCSampler", "optuna.samplers.GridSampler"}


def derived_seed(sampler_seed: int, trial_number: int) -> int:
    """The sampler seed for one trial: a hash of (sweep.sampler_seed, trial number), in [0, 2**32)."""
    return int(np.random.SeedSequence([int(sampler_seed), int(trial_number)]).generate_state(1)[0])


def grid_values(name: str, dist: BaseDistribution) -> list:
    """Every value of a discrete distribution; ValueError naming the key for a continuous one."""
    if isinstance(dist, CategoricalDistribution):
        return list(dist.choices)
    if isinstance(dist, IntDistribution) and not dist.log:
        return list(range(dist.low, dist.high + 1, dist.step))
    if isinstance(dist, FloatDistribution) and dist.step is not None:
        n = int(round((dist.high - dist.low) / dist.step))
        return [dist.low + i * dist.step for i in range(n + 1)]
    raise ValueError(
        f"{name}: {dist} is continuous; the grid and brute-force samplers need choice(...), range(...) "
        f"or an integer interval"
    )


class PerTrialSeed(BaseSampler):
    """A sampler rebuilt with a seed derived from each trial's number before the trial samples.

    ``exhausted`` turns true when the grid or brute-force sampler has visited every point (optuna
    would call ``study.stop()``, which only works inside ``study.optimize``).
    """

    def __init__(self, build: Callable[[int], BaseSampler], seed_of: Callable[[int], int]) -> None:
        self._build, self._seed_of = build, seed_of
        self.inner = build(seed_of(0))
        self.exhausted = False

    def before_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        self.inner = self._build(self._seed_of(trial.number))
        self.inner.before_trial(study, trial)

    def infer_relative_search_space(self, study, trial) -> dict[str, BaseDistribution]:
        return self.inner.infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        return self.inner.sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution) -> Any:
        return self.inner.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study, trial, state, values) -> None:
        try:
            self.inner.after_trial(study, trial, state, values)
        except RuntimeError as e:
            if "Study.stop" not in str(e):
                raise
            self.exhausted = True

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()


def build_sampler(
    node: DictConfig | Mapping[str, Any],
    sampler_seed: int,
    distributions: dict[str, BaseDistribution],
    n_objectives: int,
    label: str | None = None,
) -> tuple[PerTrialSeed, int | None]:
    """The study's sampler from a ``hydra/sweeper/sampler`` config (a node or ``StudySettings.sampler``),
    and the number of points of a grid / brute-force space (None for the others). The per-trial seeds
    derive from ``sampler_seed``."""
    spec = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node)
    target = str(spec.pop("_target_"))
    spec.pop("_partial_", None)
    spec.pop("seed", None)  # hydra.sweeper.sampler.seed arrives as sampler_seed (navexp/sweep/settings.py)
    name = label or target.rsplit(".", 1)[-1]  # the hydra/sweeper/sampler option, for messages
    if target in SINGLE_OBJECTIVE and n_objectives > 1:
        raise ValueError(
            f"hydra/sweeper/sampler={name} optimises one objective and sweep.objectives has {n_objectives}; "
            f"for several use tpe, gp, nsgaii, nsgaiii, random, qmc, grid or bruteforce"
        )
    points = None
    if target in DISCRETE_ONLY:
        grid = {k: grid_values(k, d) for k, d in distributions.items()}
        points = math.prod(len(v) for v in grid.values())
        if target == "optuna.samplers.GridSampler":
            spec["search_space"] = grid

    def build(seed: int) -> BaseSampler:
        with warnings.catch_warnings():  # "QMCSampler is experimental": the user chose it
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return instantiate({"_target_": target, **spec, "seed": seed}, _convert_="all")

    base = int(sampler_seed)
    if target in STUDY_SEED:
        return PerTrialSeed(build, lambda _number: base), points
    return PerTrialSeed(build, lambda number: derived_seed(base, number)), points
