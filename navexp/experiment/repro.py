"""Reproducibility: one seed for python/numpy/torch, and a record of what produced a run."""

from __future__ import annotations

import json
import platform
import random
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import numpy as np
import torch

PACKAGES = (
    "navexp",
    "torch",
    "warp-lang",
    "mujoco",
    "mujoco-warp",
    "rsl-rl-lib",
    "hydra-core",
    "omegaconf",
    "optuna",
    "tensorboard",
    "wandb",
    "numpy",
)


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (the env seeds its own layout generator from the same seed)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def git_revision(path: Path) -> str | None:
    """The commit of the repository holding ``path``, with ``-dirty`` when there are local changes."""
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True, timeout=5
        )
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=path, capture_output=True, text=True, timeout=5
        )
        return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def package_versions() -> dict[str, str | None]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def write_run_record(run_dir: Path, **fields) -> dict:
    """Write ``run_info.json``: seed, git revision, versions, device, command line, plus ``fields``."""
    record = {
        "created": datetime.now(UTC).isoformat(),
        "argv": sys.argv,
        "git_revision": git_revision(Path(__file__).resolve().parents[1]),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cuda_available": torch.cuda.is_available(),
        "packages": package_versions(),
        **fields,
    }
    (run_dir / "run_info.json").write_text(json.dumps(record, indent=2, default=str))
    return record
