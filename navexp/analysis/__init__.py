"""Reading policies and runs: rollouts and evaluation (``rollout``), navigation metrics (success,
SPL, BARN score, intervals), evaluation suites, trajectory plots, videos, and the host-sync audit.

May import: ``navexp.experiment``, ``navexp.learn``, ``navexp.task``, ``navexp.sim``. Never sweep,
deploy or the entry points.
"""
