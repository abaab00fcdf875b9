"""Checkpoints: find them, load them safely, check they fit the env, write them atomically.

A checkpoint is rsl_rl's dict (``actor_state_dict``, ``critic_state_dict``, ``optimizer_state_dict``,
``iter``) plus ``infos`` written by navexp: ``obs_layout`` (term order and widths per group),
``group_widths``, ``obs_groups`` (actor/critic sets), ``history_length`` and the resolved ``config``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import torch

REQUIRED_KEYS = ("actor_state_dict", "critic_state_dict", "optimizer_state_dict", "iter")
_MODEL_RE = re.compile(r"model_(\d+)\.pt$")


def save_atomic(obj: Any, path: str | Path) -> None:
    """torch.save to a temporary file, then rename: a kill mid-save never leaves a corrupt file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def find_checkpoints(run_dir: Path) -> list[Path]:
    """``model_<it>.pt`` files of a run directory (or its ``checkpoints`` folder), by iteration."""
    files = [p for d in (run_dir, run_dir / "checkpoints") if d.is_dir() for p in d.glob("model_*.pt")]
    return sorted(
        (p for p in files if _MODEL_RE.search(p.name)), key=lambda p: int(_MODEL_RE.search(p.name)[1])
    )


def resolve_checkpoint(path: str | Path) -> Path:
    """A ``.pt`` file as given, or the latest ``model_<it>.pt`` of a run directory."""
    p = Path(path).expanduser()
    if p.is_file():
        return p
    if p.is_dir():
        found = find_checkpoints(p)
        if not found:
            raise FileNotFoundError(f"checkpoint: run directory {p} holds no model_<it>.pt")
        return found[-1]
    raise FileNotFoundError(f"checkpoint: {p} does not exist (give a model_<it>.pt file or a run directory)")


def load_checkpoint(path: str | Path) -> dict:
    """Load a checkpoint on the CPU; a truncated or foreign file raises ValueError saying so."""
    p = resolve_checkpoint(path)
    try:
        ckpt = torch.load(p, map_location="cpu", weights_only=False)
    except Exception as e:  # torch raises several types for truncated/foreign files
        raise ValueError(f"checkpoint {p} is not a loadable torch file ({type(e).__name__}: {e})") from e
    if not isinstance(ckpt, dict) or any(k not in ckpt for k in REQUIRED_KEYS):
        have = sorted(ckpt) if isinstance(ckpt, dict) else type(ckpt).__name__
        raise ValueError(
            f"checkpoint {p} is not an rsl_rl/navexp checkpoint: needs keys {list(REQUIRED_KEYS)}, has {have}"
        )
    ckpt["_path"] = str(p)
    return ckpt


def checkpoint_obs_layout(ckpt: dict) -> dict | None:
    return (ckpt.get("infos") or {}).get("obs_layout")


def check_compatible(ckpt: dict, obs_layout: dict, group_widths: dict[str, int], history_length: int) -> None:
    """Raise ValueError naming both layouts when the checkpoint's observations differ from the env's."""
    theirs = checkpoint_obs_layout(ckpt)
    their_hist = (ckpt.get("infos") or {}).get("history_length", 1)
    ours = {g: [list(t) for t in terms] for g, terms in obs_layout.items()}
    if theirs is not None:
        theirs = {g: [list(t) for t in terms] for g, terms in theirs.items()}
        if theirs.get("policy") != ours.get("policy") or their_hist != history_length:
            raise ValueError(
                f"checkpoint {ckpt['_path']} was trained on observation layout "
                f"{theirs} (history {their_hist}); "
                f"this config produces {ours} (history {history_length}). Use the same obs config."
            )
    width = ckpt["actor_state_dict"]["mlp.0.weight"].shape[1]
    if width != group_widths["policy"]:
        raise ValueError(
            f"checkpoint {ckpt['_path']} has an actor input of {width} columns; "
            f"this config's policy group is "
            f"{group_widths['policy']} wide ({ours['policy']}). Use the same obs config."
        )
