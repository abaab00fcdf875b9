"""navexp: LiDAR robot navigation with MuJoCo Warp worlds and rsl_rl PPO.

``compose_config`` and ``make_env`` are imported lazily, so light modules such as
``navexp.deploy`` (numpy only) import without Hydra, torch or the simulator.
"""

__all__ = ["compose_config", "make_env"]


def __getattr__(name: str):
    if name in __all__:
        from navexp import api

        return getattr(api, name)
    raise AttributeError(f"module 'navexp' has no attribute {name!r}")
