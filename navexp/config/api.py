"""The small public API: compose the app's config and build the env from notebooks and tests."""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from navexp.config.aliases import translate_overrides
from navexp.config.presets import resolve_size_overrides
from navexp.config.schemas import register_configs
from navexp.paths import CONFIG_DIR
from navexp.task.env import NavEnv


def compose_config(overrides: list[str] | None = None, config_name: str = "config") -> DictConfig:
    """Compose the same config ``python -m navexp.train`` uses, with Hydra-style overrides.

    ``size=auto`` is resolved to ``size=gpu|cpu`` as the app does; without a ``size=`` no preset
    applies (``size=none``), unlike the app, whose default is ``auto``. Old key names
    (``ppo.clip_param``) are translated first (``navexp.config.aliases``).
    """
    register_configs()
    overrides = resolve_size_overrides(translate_overrides(list(overrides or [])))
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name=config_name, overrides=overrides)


def make_env(cfg: DictConfig):
    """Build the NavEnv of a composed config."""
    return NavEnv(cfg)
