"""Fill Warp's kernel cache ahead of a job: ``python -m navexp.bench warmup``.

A first build and step of the ``warp`` backend compiles MuJoCo Warp's kernels for the device (cold:
tens of seconds on a CPU, minutes on a GPU; navexp.sim.kernel_cache). A job started after the warm-up
loads them from the cache instead. Each robot is built once: its actuators may launch kernels the
other's do not.
"""

from __future__ import annotations

import time

import torch

from navexp.config.api import compose_config, make_env
from navexp.sim import kernel_cache

ROBOTS = ("holonomic", "diffdrive")
"""The robot variants (config group ``robot``) a warm-up builds by default."""


def warm_one(device: str, num_envs: int, robot: str) -> dict:
    """Build the warp backend's env for ``robot`` on ``device`` and take one step; what it compiled."""
    before = kernel_cache.cached_files()
    warm = kernel_cache.is_warm(device)
    t = time.perf_counter()
    env = make_env(
        compose_config(
            [f"env.num_envs={num_envs}", f"env.device={device}", "env.sim.backend=warp", f"robot={robot}"]
        )
    )
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    env.step(torch.zeros(num_envs, env.num_actions, device=env.device))
    env.sim.synchronize()
    first_step_s = time.perf_counter() - t
    compiled = kernel_cache.modules_of(kernel_cache.cached_files() - before)
    return {
        "robot": robot,
        "device": str(env.device),
        "num_envs": num_envs,
        "cache_was_warm": warm,
        "build_s": build_s,
        "first_step_s": first_step_s,
        "modules_compiled": len(compiled),
        "compiled": compiled,
    }


def warm_up(device: str, num_envs: int, robots: list[str]) -> dict:
    """Warm the kernel cache for each robot in turn; the cache folder and each robot's figures."""
    unknown = [r for r in robots if r not in ROBOTS]
    if unknown:
        raise ValueError(f"robots={','.join(robots)}: unknown {unknown}; valid: {', '.join(ROBOTS)}")
    if num_envs < 1:
        raise ValueError(f"num_envs={num_envs}: must be an integer >= 1")
    rows = [warm_one(device, num_envs, r) for r in robots]
    return {
        "cache_dir": str(kernel_cache.cache_dir()),
        "modules_in_cache": len(kernel_cache.modules_of(kernel_cache.cached_files())),
        "robots": rows,
    }


def warmup_lines(result: dict) -> list[str]:
    """One line per robot and a total: cold or warm, modules compiled, seconds."""
    lines = []
    for r in result["robots"]:
        state = "warm" if r["cache_was_warm"] else "cold"
        lines.append(
            f"[bench] warmup {r['device']} robot={r['robot']}: cache was {state}, "
            f"{r['modules_compiled']} kernel modules compiled, build {r['build_s']:.1f} s + first step "
            f"{r['first_step_s']:.1f} s"
        )
    lines.append(f"[bench] {result['modules_in_cache']} kernel modules cached in {result['cache_dir']}")
    return lines
