"""Reproducibility: one seed for python/numpy/torch, and a record of what produced a run."""

from __future__ import annotations

import json
import os
import platform
import random
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch

from navexp.learn.checkpoint import write_atomic

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


SEGMENT_KEYS = (
    "started",
    "argv",
    "git_revision",
    "resumed_from",
    "start_iteration",
    "changed",
    "device",
    "world_size",
    "num_envs_total",
)
"""What ``run_info.json`` records per segment (the first launch and each resume: a run trained by two
torchrun processes and resumed by one keeps both worlds counts)."""


def write_run_record(run_dir: Path, started: str | None = None, **fields) -> dict:
    """Write ``run_info.json``: seed, git revision, versions, device, command line, plus ``fields``.

    A run trained in segments (a launch, then resumes) keeps one record: ``created`` and ``argv`` stay
    those of the first launch, and ``segments`` lists every launch (``started``, its command line,
    git revision, the checkpoint it resumed from, its first iteration, and the config keys it changed
    against that checkpoint). ``started`` identifies this launch's segment (rewritten in place while
    the launch runs); None: now.
    """
    path = run_dir / "run_info.json"
    try:
        old = json.loads(path.read_text()) if path.is_file() else {}
    except ValueError:
        old = {}
    started = started or datetime.now(UTC).isoformat()
    revision = git_revision(Path(__file__).resolve().parents[1])
    segment = {"started": started, "argv": sys.argv, "git_revision": revision}
    segment |= {k: fields[k] for k in SEGMENT_KEYS if k in fields}
    segments = old.get("segments") or ([_legacy_segment(old)] if old else [])
    segments = [s for s in segments if s.get("started") != started] + [segment]
    first = segments[0]
    record = {
        "created": first["started"],
        "argv": first["argv"],
        "git_revision": revision,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cuda_available": torch.cuda.is_available(),
        "packages": package_versions(),
        **{k: v for k, v in fields.items() if k not in ("start_iteration", "changed")},
        "segments": segments,
    }
    write_atomic(path, json.dumps(record, indent=2, default=str))
    return record


def _legacy_segment(old: dict) -> dict:
    """The one segment of a record written before segments were recorded."""
    return {"started": old.get("created")} | {k: old.get(k) for k in ("argv", "git_revision", "resumed_from")}


SEGMENT_FOLDERS = ("plots", "play")
"""Folders of a run directory that show its policy (the final evaluation's figures, the default output of
``navexp.play``): a resume moves them to ``segments/<k>/`` with the segment's ``eval.json``."""


def archive_segment(run_dir: Path, superseded: list[Path] | tuple = ()) -> Path | None:
    """Before a resume writes its own: move the previous segment's ``eval.json``, the figures of that
    evaluation (``plots/``) and its later evaluations (``eval_*.json`` of ``navexp.evaluate`` and the
    default ``play/`` of ``navexp.play``: they score its policy, not the resumed run's) and copy its
    ``config.yaml`` to ``segments/<k>/`` (k: that segment's number, from 1), and move the checkpoints in
    ``superseded`` there too (a resume from an earlier iteration: the later checkpoints and averages
    belong to the branch it leaves, which it would otherwise overwrite one by one or leave behind as the
    run's latest). Nothing there is replaced: a name already taken gets ``.<n>`` before its suffix.
    Returns that folder."""
    path = run_dir / "run_info.json"
    try:
        k = len(json.loads(path.read_text()).get("segments") or [None])
    except (OSError, ValueError):
        k = 1
    folder = run_dir / "segments" / str(k)
    moved = False
    for name in ("config.yaml", "eval.json"):
        src = run_dir / name
        if not src.is_file():
            continue
        data = src.read_bytes()
        stem, suffix = name.split(".")
        copies = [folder / name, *folder.glob(f"{stem}.*{suffix}")] if folder.is_dir() else []
        if not any(c.is_file() and c.read_bytes() == data for c in copies):  # a retry: kept already
            folder.mkdir(parents=True, exist_ok=True)
            write_atomic(_free_name(folder / name), data)
            moved = True
    (run_dir / "eval.json").unlink(missing_ok=True)  # a result of the earlier segment, kept above
    folders = [run_dir / d for d in SEGMENT_FOLDERS if (run_dir / d).is_dir()]
    for src in [*sorted(run_dir.glob("eval_*.json")), *folders, *superseded]:
        folder.mkdir(parents=True, exist_ok=True)
        os.replace(src, _free_name(folder / src.name))
        moved = True
    return folder if moved else None


def _free_name(path: Path) -> Path:
    """``path``, or ``<stem>.<n><suffix>`` with the first n it does not exist for."""
    free, n = path, 1
    while free.exists():
        free, n = path.with_name(f"{path.stem}.{n}{path.suffix}"), n + 1
    return free


def flat_changes(before: Any, after: Any, prefix: str = "") -> dict[str, list]:
    """``{"ppo.algorithm.learning_rate": [old, new], ...}``: the leaves that differ between two nested
    dicts."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: dict[str, list] = {}
        for key in sorted(set(before) | set(after), key=str):
            name = f"{prefix}.{key}" if prefix else str(key)
            out |= flat_changes(before.get(key), after.get(key), name)
        return out
    return {} if before == after else {prefix: [before, after]}
