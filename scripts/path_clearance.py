"""How tight are the held-out layouts? For each map family alone, the share of held-out layouts whose
goal is reachable along a path that keeps at least r metres between the robot's centre and every
obstacle, for a ladder of r (the robot's radius is 0.2 m: r = 0.2 is the free-path check itself).

    python scripts/path_clearance.py [layouts=200] [env=traps] [more config overrides ...]

A family whose layouts mostly keep r >= 0.4 m (0.2 m beside the robot's edge) but whose success rate
is far lower fails for the policy's sake, not the geometry's (BENCHMARKS.md, issue 23).
"""

from __future__ import annotations

import sys

import torch

from navexp import compose_config
from navexp.experiment.run_config import eval_env_cfg
from navexp.task.maps import MapSpec
from navexp.task.maps.families import FAMILIES
from navexp.task.maps.grid_path import shortest_paths
from navexp.task.maps.pool import LayoutPool
from navexp.task.maps.random_family import LayoutSpec

CLEARANCES_M = (0.20, 0.25, 0.30, 0.35, 0.40, 0.50)
"""Centre-to-obstacle clearances of the ladder (m)."""
CELL_M = 0.05
"""Grid cell of the path search (m)."""


def main(argv: list[str]) -> None:
    layouts = 200
    overrides = ["env=traps", "env.device=cpu"]
    for arg in argv:
        if arg.startswith("layouts="):
            layouts = int(arg.split("=", 1)[1])
        else:
            overrides.append(arg)
    print("family      " + " | ".join(f"r >= {r:.2f} m" for r in CLEARANCES_M))
    for family in FAMILIES:
        weights = "{" + ", ".join(f"{f}: {1.0 if f == family else 0.0}" for f in FAMILIES) + "}"
        cfg = eval_env_cfg(compose_config([*overrides, f"env.maps.weights={weights}"]))
        spec, maps = LayoutSpec.from_env_cfg(cfg.env), MapSpec.from_env_cfg(cfg.env)
        generator = torch.Generator().manual_seed(int(cfg.seed) + int(cfg.env.layout_seed_offset))
        pool = LayoutPool(spec, layouts, generator, "cpu", maps=maps)
        lay = pool.take(torch.ones(layouts, dtype=torch.bool))
        shares = [
            torch.isfinite(shortest_paths(lay, spec.half_x, spec.half_y, r, CELL_M)).float().mean().item()
            for r in CLEARANCES_M
        ]
        print(f"{family:11s} " + " | ".join(f"{100 * s:11.1f} %" for s in shares), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
