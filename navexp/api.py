"""The small public API: compose the app's config and build the env from notebooks and tests."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from navexp.config import register_configs

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
SCENARIO_DIR = CONFIG_DIR / "scenarios"
"""Shipped scenario files, selected by name: ``env.scenarios=corridor``."""


def resolve_scenario_path(name_or_path: str) -> Path:
    """A path as given, or a shipped scenario name (``corridor`` -> configs/scenarios/corridor.yaml)."""
    p = Path(name_or_path).expanduser()
    if p.is_file():
        return p
    shipped = SCENARIO_DIR / f"{name_or_path}.yaml"
    if shipped.is_file():
        return shipped
    names = sorted(f.stem for f in SCENARIO_DIR.glob("*.yaml"))
    raise FileNotFoundError(f"env.scenarios={name_or_path!r}: no such file; shipped scenarios: {names}")


def compose_config(overrides: list[str] | None = None, config_name: str = "config") -> DictConfig:
    """Compose the same config ``python -m navexp.train`` uses, with Hydra-style overrides.

    ``size=auto`` is resolved to ``size=gpu|cpu`` as the app does; without a ``size=`` no preset
    applies (``size=none``), unlike the app, whose default is ``auto``.
    """
    from navexp.presets import resolve_size_overrides

    register_configs()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name=config_name, overrides=resolve_size_overrides(list(overrides or [])))


def make_env(cfg: DictConfig):
    """Build the NavEnv of a composed config."""
    from navexp.env import NavEnv  # imported here: composing a config needs no simulator

    return NavEnv(cfg)
