"""Named search spaces (``sweeps/<name>.yaml``) and the check that every key exists in the config."""

from __future__ import annotations

import difflib
from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf

from navexp.paths import SWEEPS_DIR

_NOT_FOUND = object()


def available_spaces() -> list[str]:
    return sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml"))


def load_space(name: str) -> dict[str, str]:
    """The search space ``sweeps/<name>.yaml`` (or a YAML path) as {config key: sweep expression}."""
    path = Path(name)
    if not path.is_file():
        path = SWEEPS_DIR / f"{name}.yaml"
    if not path.is_file():
        raise FileNotFoundError(
            f"sweep.space={name!r}: no such search space; available: {available_spaces()}"
        )
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict) or not data:
        raise ValueError(
            f"search space {path} must be a non-empty mapping of config keys to sweep expressions"
        )
    return {str(k): str(v) for k, v in data.items()}


def _leaf_keys(cfg: DictConfig) -> list[str]:
    flat = OmegaConf.to_container(cfg, resolve=False)
    out = []

    def walk(node, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}.{k}" if prefix else str(k))
        else:
            out.append(prefix)

    walk(flat, "")
    return out


def check_keys(keys: list[str], cfg: DictConfig, where: str) -> None:
    """Raise KeyError for keys that are not in the composed config, with the closest existing keys."""
    task = OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"]) if "hydra" in cfg else cfg
    missing = [k for k in keys if OmegaConf.select(task, k, default=_NOT_FOUND) is _NOT_FOUND]
    if missing:
        leaves = _leaf_keys(task)
        hints = {k: difflib.get_close_matches(k, leaves, n=3, cutoff=0.6) for k in missing}
        raise KeyError(
            f"{where}: {len(missing)} key(s) not in the config: {hints} (key: closest existing keys)"
        )
