"""How tight are the held-out layouts, and does a policy fail on the tight ones?

Without a checkpoint: for each map family alone, the share of held-out layouts whose goal is reachable
along a path that keeps at least r metres between the robot's centre and every obstacle, for a ladder
of r (the robot's radius is 0.2 m: r = 0.2 is the free-path check itself).

With ``checkpoint=<run>``: the run's policy plays ``layouts`` held-out episodes of each family alone
(its stored config, as ``navexp.evaluate`` does), and its success and collision rates are split by each
episode's bottleneck: the widest r of the ladder its layout still passes; then how fast the robot
was moving one control step before each collision, and in which direction.

    python scripts/path_clearance.py [layouts=200] [env=traps] [more config overrides ...]
    python scripts/path_clearance.py checkpoint=outputs/navexp/<run> [layouts=200] [families=grid,random]

A family whose layouts mostly keep r >= 0.4 m (0.2 m beside the robot's edge) but whose success rate
is far lower fails for the policy's sake, not the geometry's (BENCHMARKS.md, issue 23).
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from navexp import compose_config
from navexp.analysis.rollout import EvalRun, run_episodes
from navexp.config.run_config import eval_env_cfg, load_run_config
from navexp.learn.checkpoint import load_checkpoint
from navexp.task.maps import MapSpec
from navexp.task.maps.families import FAMILIES
from navexp.task.maps.grid_path import shortest_paths
from navexp.task.maps.pool import LayoutPool
from navexp.task.maps.random_family import LayoutSpec
from navexp.task.state import COLLISION, SUCCESS

CLEARANCES_M = (0.20, 0.25, 0.30, 0.35, 0.40, 0.50)
"""Centre-to-obstacle clearances of the ladder (m)."""
CELL_M = 0.05
"""Grid cell of the path search (m)."""


def only(family: str) -> str:
    """The ``env.maps.weights`` override that draws ``family`` alone."""
    return "env.maps.weights={" + ", ".join(f"{f}: {1.0 if f == family else 0.0}" for f in FAMILIES) + "}"


def passable(layout, half_x: float, half_y: float) -> np.ndarray:
    """[N, len(CLEARANCES_M)] bool: the goal is reachable keeping at least r from every obstacle."""
    rows = [torch.isfinite(shortest_paths(layout, half_x, half_y, r, CELL_M)) for r in CLEARANCES_M]
    return torch.stack(rows, dim=1).cpu().numpy()


def bottleneck(ok: np.ndarray) -> np.ndarray:
    """[N] index into CLEARANCES_M of the widest clearance each layout passes (-1: none)."""
    widest = np.where(ok, np.arange(ok.shape[1]), -1)
    return widest.max(axis=1)


def shares(overrides: list[str], layouts: int) -> None:
    print("family      " + " | ".join(f"r >= {r:.2f} m" for r in CLEARANCES_M))
    for family in FAMILIES:
        cfg = eval_env_cfg(compose_config([*overrides, only(family)]))
        spec, maps = LayoutSpec.from_env_cfg(cfg.env), MapSpec.from_env_cfg(cfg.env)
        generator = torch.Generator().manual_seed(int(cfg.seed) + int(cfg.env.layout_seed_offset))
        pool = LayoutPool(spec, layouts, generator, "cpu", maps=maps)
        ok = passable(pool.take(torch.ones(layouts, dtype=torch.bool)), spec.half_x, spec.half_y)
        print(f"{family:11s} " + " | ".join(f"{100 * s:11.1f} %" for s in ok.mean(axis=0)), flush=True)


def outcomes(checkpoint: str, families: list[str], overrides: list[str], layouts: int) -> None:
    ckpt = load_checkpoint(checkpoint)
    print("family      bottleneck r   episodes  success  collision")
    for family in families:
        cfg = load_run_config(ckpt, [*overrides, only(family), f"eval.num_episodes={layouts}"])
        ev = EvalRun.build(ckpt, cfg)
        rounds: list[np.ndarray] = []

        def record(env, rounds=rounds) -> None:  # each round's layouts, before its episodes run
            rounds.append(passable(env.layout, env.half_x, env.half_y))

        speed = ImpactSpeed(ev.env)
        table = run_episodes(ev.actor, ev.env, layouts, on_round=record, on_step=speed)
        widest = bottleneck(np.concatenate(rounds)[: len(table.reason)])  # the last round: its first worlds
        won, hit = table.reason == SUCCESS, table.reason == COLLISION
        for k in sorted(set(widest.tolist()), reverse=True):
            m = widest == k
            upper = "+" if k == len(CLEARANCES_M) - 1 else f"-{CLEARANCES_M[k + 1]:.2f}"
            label = "none" if k < 0 else f"{CLEARANCES_M[k]:.2f}{upper}"
            rates = f"{100 * won[m].mean():7.1f} % {100 * hit[m].mean():8.1f} %"
            print(f"{family:11s} {label:12s} {int(m.sum()):9d} {rates}", flush=True)
        print(f"{family:11s} {'all':12s} {len(widest):9d} {100 * won.mean():7.1f} %", flush=True)
        print(f"{family:11s} {speed.summary()}", flush=True)


class ImpactSpeed:
    """``on_step`` hook: the robot's speed one control step before each collision (the speed it chose
    to drive with the last scan it saw), and how much of it pointed sideways or backwards. It sees every
    world of every round: when ``layouts`` is not a multiple of the worlds, the last round's surplus
    worlds (not in the success table) count here too."""

    def __init__(self, env) -> None:
        self.prev = torch.zeros(env.num_envs, 2, device=env.device)
        self.speeds: list[float] = []
        self.forward: list[float] = []

    def __call__(self, env, active: torch.Tensor) -> None:
        hit = active & env.held & (env.state.reason == COLLISION)
        v = self.prev[hit]
        self.speeds += v.norm(dim=-1).tolist()
        self.forward += (v[:, 0] / v.norm(dim=-1).clamp_min(1e-6)).tolist()
        self.prev = env.state.vel_body.clone()

    def summary(self) -> str:
        if not self.speeds:
            return "no collisions"
        speed, fwd = np.asarray(self.speeds), np.asarray(self.forward)
        return (
            f"{len(speed)} collisions: speed one step before, median {np.median(speed):.2f} m/s "
            f"(max {speed.max():.2f}); {100 * (fwd < 0.5).mean():.0f} % of them moving more than 60 deg "
            "off the robot's heading (sideways or backwards)"
        )


def main(argv: list[str]) -> None:
    layouts, checkpoint, families = 200, None, list(FAMILIES)
    overrides: list[str] = []
    for arg in argv:
        key, _, value = arg.partition("=")
        if key == "layouts":
            layouts = int(value)
        elif key == "checkpoint":
            checkpoint = value
        elif key == "families":
            families = value.split(",")
            unknown = sorted(set(families) - set(FAMILIES))
            if unknown:
                raise SystemExit(f"families={value}: unknown {unknown}; allowed: {list(FAMILIES)}")
        else:
            overrides.append(arg)
    if checkpoint is None:
        shares(["env=traps", "env.device=cpu", *overrides], layouts)
    else:
        outcomes(checkpoint, families, ["env.device=cpu", *overrides], layouts)


if __name__ == "__main__":
    main(sys.argv[1:])
