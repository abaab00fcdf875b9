"""Warp's kernel cache as navexp sees it: whether MuJoCo Warp's kernels are compiled for this machine.

Warp compiles each kernel module the first time it is launched on a device and keeps the binary in its
kernel cache (``WARP_CACHE_PATH``, else ``~/.cache/warp``, one folder per Warp version). A process
that finds them there loads them in a fraction of a second; one that does not compiles them, which
takes minutes on a GPU. Which modules a scene needs is known only when they launch, so navexp leaves a
marker file in the cache after a first step has compiled them (``mark_warm``); without it the cache is
cold for this device and mujoco_warp version, and ``cold_notice`` says so before anything compiles.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import mujoco_warp
import warp as wp

COLD_COMPILE_S = {"cpu": 35, "cuda": 90}
"""About how long the cold compile takes (build + first step at 64 worlds), seconds, by device type.
CPU: measured on the 2-core machine (47 s before the warp step lost its constraint solver, about a
quarter less CPU time after; BENCHMARKS.md, "Cold compile and the PPO iteration"). CUDA: an estimate
until a GPU measures it: 224 s on an H200 when every one of mujoco_warp's 51 modules compiled before
the capture, against the 18 compiled now."""


def cache_dir() -> Path:
    """Warp's kernel cache folder of this process (Warp's version included)."""
    wp.init()
    return Path(wp.config.kernel_cache_dir)


def _marker(device: str) -> Path:
    """The marker file for ``device`` ('cpu', 'cuda:0', ...): one per device kind and mujoco_warp version
    (a GPU's name, so a cache shared by two GPU models is cold for the second one)."""
    kind = "cpu"
    if device.startswith("cuda"):
        kind = "cuda-" + re.sub(r"[^A-Za-z0-9]+", "_", wp.get_device(device).name)
    return cache_dir() / f"navexp-warm-{kind}-mjwarp{mujoco_warp.__version__}.json"


def is_warm(device: str) -> bool:
    """Whether a navexp process has compiled MuJoCo Warp's kernels into this cache for ``device``."""
    return _marker(device).is_file()


def cold_notice(device: str) -> str | None:
    """The line to print before building the simulator when the cache is cold for ``device``, else None."""
    if is_warm(device):
        return None
    about = COLD_COMPILE_S["cuda" if device.startswith("cuda") else "cpu"]
    return (
        f"[navexp] compiling MuJoCo Warp kernels for this machine, once: about {about} s; "
        f"cached in {cache_dir()}"
    )


def mark_warm(device: str, seconds: float) -> None:
    """Record that the kernels for ``device`` are in the cache (after a first step compiled them)."""
    marker = _marker(device)
    if marker.is_file():
        return
    record = {"device": device, "compile_s": round(seconds, 1), "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    try:
        marker.write_text(json.dumps(record))
    except OSError:  # a read-only cache still works; the next process just prints the line again
        pass


def cached_files() -> set[str]:
    """The files of compiled kernel modules in the cache, as ``<module folder>/<file>``: Warp keeps
    one ``wp_<module>_<hash>`` folder per module and one binary per device kind in it."""
    folder = cache_dir()
    return {
        f"{d.name}/{f.name}"
        for d in folder.iterdir()
        if d.is_dir() and d.name.startswith("wp_")
        for f in d.iterdir()
    }


def modules_of(files: set[str]) -> list[str]:
    """The module folders that ``files`` (from ``cached_files``) belong to."""
    return sorted({f.split("/", 1)[0] for f in files})
