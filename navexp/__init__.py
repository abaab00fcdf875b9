"""navexp: LiDAR robot navigation with MuJoCo Warp worlds and rsl_rl PPO.

Layers, each importing only the ones below it (``pyproject.toml``'s import-linter contract;
docs/architecture.md): the entry points (``navexp.train``, ``evaluate``, ``play``, ``export``,
``bench``, ``bench_dist``, ``sweep_report``, ``compare``) > ``sweep`` | ``deploy`` > ``experiment`` >
``analysis`` > ``config`` > ``learn`` > ``task`` > ``sim``.

``compose_config`` and ``make_env`` are imported lazily, so light modules such as
``navexp.deploy`` (numpy only) import without Hydra, torch or the simulator.
"""

__all__ = ["compose_config", "make_env"]


def __getattr__(name: str):
    if name in ("compose_config", "make_env"):
        # Deferred: the API needs Hydra and torch, which the numpy-only deploy package must not load.
        from navexp.config import api

        return getattr(api, name)
    raise AttributeError(f"module 'navexp' has no attribute {name!r}")
