"""Reading policies and runs: rollouts and evaluation (``rollout``), navigation metrics (success,
SPL, BARN score, intervals), evaluation suites, trajectory plots, videos, and the host-sync audit.

May import: ``navexp.config``, ``navexp.learn``, ``navexp.task``, ``navexp.sim``. Never the experiment
layer (training runs), sweep, deploy or the entry points.
"""
