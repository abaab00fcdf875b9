"""navexp: LiDAR robot navigation with MuJoCo Warp worlds and rsl_rl PPO."""

from navexp.api import compose_config, make_env

__all__ = ["compose_config", "make_env"]
