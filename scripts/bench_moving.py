"""What moving obstacles cost: the full NavEnv.step with 4 moving obstacles against the static room, side
by side in one process, per simulator backend.

    python scripts/bench_moving.py [num_envs=256] [steps=50] [repeats=3] [backends=mujoco,warp]
                                   [compile_motion=false]

Both envs are the default room (2-5 cylinders, 1-3 boxes); the moving one adds ``env=dynamic`` with
exactly 3 moving cylinders and 1 moving box in play (one of each motion model's share drawn by weight).
Each repeat times ``steps`` steps of the static env, then of the moving one (random actions, auto-reset
on), after a warm-up, so drifts in the machine's load hit both alike; the ratio is the median's.
``compile_motion=true`` compiles the moving env's motion step (``env.dynamic.compile_motion``) and
prints the seconds its first step took to compile.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from navexp import compose_config, make_env

MOVING = ["env=dynamic", "env.dynamic.cylinder_count=[3,3]", "env.dynamic.box_count=[1,1]"]


def step_time(env, steps: int, gen: torch.Generator) -> float:
    """Seconds per NavEnv.step over ``steps`` steps of random actions."""
    actions = [torch.rand(env.num_envs, env.num_actions, generator=gen) * 2 - 1 for _ in range(steps)]
    env.sim.synchronize()
    t0 = time.perf_counter()
    for a in actions:
        env.step(a)
    env.sim.synchronize()
    return (time.perf_counter() - t0) / steps


def main(argv: list[str]) -> dict:
    """Parse ``key=value`` arguments, measure, print one line per backend and return the figures."""
    opts = {
        "num_envs": "256",
        "steps": "50",
        "repeats": "3",
        "backends": "mujoco,warp",
        "compile_motion": "false",
    }
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or key not in opts:
            raise SystemExit(
                f"Error: argument {arg!r} is invalid; allowed: {', '.join(f'{k}=' for k in opts)}"
            )
        opts[key] = value
    n, steps, repeats = int(opts["num_envs"]), int(opts["steps"]), int(opts["repeats"])
    if opts["compile_motion"] not in ("true", "false"):
        raise SystemExit(
            f"Error: compile_motion={opts['compile_motion']!r} is invalid; allowed: true | false"
        )
    moving = [*MOVING, f"env.dynamic.compile_motion={opts['compile_motion']}"]
    result = {}
    for backend in opts["backends"].split(","):
        base = ["env.device=cpu", f"env.sim.backend={backend}", f"env.num_envs={n}", "env.check_every=1000"]
        envs = {"static": make_env(compose_config(base)), "moving": make_env(compose_config(base + moving))}
        gen = torch.Generator().manual_seed(0)
        times: dict[str, list[float]] = {"static": [], "moving": []}
        for env in envs.values():
            step_time(env, 5, gen)  # warm-up: kernels loaded, pools drawn
        for _ in range(repeats):
            for name, env in envs.items():
                times[name].append(step_time(env, steps, gen))
        med = {k: statistics.median(v) for k, v in times.items()}
        in_play = int((envs["moving"].layout.mov_mode > 0).sum(1).min())
        result[backend] = {
            **{f"{k}_ms": 1e3 * v for k, v in med.items()},
            "ratio": med["moving"] / med["static"],
        }
        compile_s = envs["moving"].motion.compile_s
        if compile_s is not None:
            result[backend]["compile_s"] = compile_s
            print(f"{backend}: the motion step compiled in {compile_s:.1f} s (its first step)")
        print(
            f"{backend}: {n} worlds, static {1e3 * med['static']:.2f} ms/step, {in_play}+ moving "
            f"{1e3 * med['moving']:.2f} ms/step, ratio {med['moving'] / med['static']:.2f}x "
            f"(median of {repeats} x {steps} steps)"
        )
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
