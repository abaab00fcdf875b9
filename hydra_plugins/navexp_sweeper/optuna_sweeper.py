"""The Sweeper class Hydra instantiates for ``hydra/sweeper=optuna`` (config: ``config.py``)."""

from __future__ import annotations

from typing import Any

from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class NavOptunaSweeper(Sweeper):
    """Hydra's public Sweeper interface in front of navexp's study loop (navexp/sweep/sweeper.py)."""

    def __init__(self, **plugin: Any) -> None:
        """``plugin``: this plugin's config (``hydra.sweeper``'s keys, config.py), as Hydra instantiates it;
        the study loop translates it with ``sweep.*`` into its one settings object
        (navexp/sweep/settings.py)."""
        # Deferred: Hydra imports every plugin module on every start, and the study loop imports
        # optuna and torch, which a plain training must not pay for.
        from navexp.sweep.sweeper import StudySweeper

        self.sweeper = StudySweeper(**plugin)

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.sweeper.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> Any:
        return self.sweeper.sweep(arguments)
