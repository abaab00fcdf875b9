"""The navigation task, on top of ``navexp.sim``: the rsl_rl ``VecEnv`` (``env``), its typed state,
observation and reward term registries, terminations, map families (the random one included) and
scenario files, robots, the curriculum, device-side fault flags and episode statistics.

May import: ``navexp.sim`` (and third-party numerics: torch, numpy, omegaconf). Never the learner,
the experiment layer (Hydra schemas of the app, run dirs, loggers), analysis, sweeps or deploy.
A step's config arrives as a composed config; the env schemas live here (``env_cfg``).
"""
