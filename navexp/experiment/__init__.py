"""Running one experiment: the training run (``training``: prepare -> build -> learn -> finish), its
run directory and lock (``rundir``) and the reproducibility record (``repro``).

May import: ``navexp.analysis`` (the final evaluation), ``navexp.config``, ``navexp.learn``,
``navexp.task``, ``navexp.sim``. Never sweep, deploy or the entry points: a sweep trial's objective and
pruning reach a run as hooks handed in by the entry point (``training.RunHooks``).
"""
