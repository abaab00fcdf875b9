"""navexp's Optuna sweeper as a Hydra plugin: ``python -m navexp.train -m hydra/sweeper=optuna``.

Hydra discovers plugins by importing every module under the ``hydra_plugins`` namespace package:
``config.py`` registers ``hydra/sweeper=optuna`` and the ``hydra/sweeper/sampler`` group, and
``optuna_sweeper.py`` holds the Sweeper class (the study loop is in navexp/sweep/sweeper.py).
"""
