"""Hydra plugin entry: navexp's Optuna sweeper (the class must live in the hydra_plugins package).

Selected automatically by ``python -m navexp.train -m hydra/sweeper=optuna`` through the
``hydra.sweeper._target_`` resolver in configs/config.yaml; the logic is in navexp/sweep/sweeper.py.
"""

from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper


class NavOptunaSweeper(OptunaSweeper):
    """The Optuna sweeper plugin's front end with navexp's study loop behind it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        from navexp.sweep.sweeper import NavOptunaSweeperImpl

        old = self.sweeper
        self.sweeper = NavOptunaSweeperImpl(
            old.sampler,
            old.direction,
            old.storage,
            old.study_name,
            old.n_trials,
            old.n_jobs,
            old.max_failure_rate,
            old.search_space,
            None,
            old.params,
        )
