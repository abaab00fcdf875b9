"""Running one experiment: the training run (``training``: prepare -> build -> learn -> finish), its
hooks (``hooks``: what a caller such as a sweep trial adds), the train command line before Hydra
composes it (``launch``), a resume (``resume``), torchrun ranks (``ranks``), the log writer's entry and
end (``writers``), the run's policy and final evaluation (``final_eval``), its run directory and lock
(``rundir``) and the reproducibility record (``repro``).

May import: ``navexp.analysis`` (the final evaluation), ``navexp.config``, ``navexp.learn``,
``navexp.task``, ``navexp.sim``. Never sweep, deploy or the entry points: a sweep trial's objective and
pruning reach a run as hooks handed in by the entry point (``hooks.RunHooks``).
"""
