"""Hyperparameter sweeps: navexp's Optuna study loop behind Hydra's sweeper plugin (``sweeper``),
search spaces (``space``), many workers on one storage (``parallel``), the trial's objective and
pruning (``trial``) and the study report (``report``).

May import: ``navexp.experiment``, ``navexp.analysis``, ``navexp.config``, ``navexp.learn``, ``navexp.task``,
``navexp.sim``. Never deploy or the entry points.
"""
