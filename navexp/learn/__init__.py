"""Learning on the task: rsl_rl's runner with navexp's checkpoints and progress (``runner``), the
policy/value models and their registry (``models``), the PPO config for rsl_rl (``rl_cfg``),
torchrun process groups (``distributed``) and checkpoint files (``checkpoint``).

May import: ``navexp.task`` and ``navexp.sim`` (and rsl_rl, torch). Never config, analysis, experiment,
sweep or deploy.
"""
