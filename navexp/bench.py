"""Throughput benchmark, navexp against classic MuJoCo measured side by side in one run.

    python -m navexp.bench [device=auto] [backends=auto] [num_envs=64,256,1024] [steps=30] [ppo=1024x32]
                           [baseline=true] [slots=none] [out=outputs/bench.json]

``backends=auto`` measures both simulator backends on a CPU (warp, mujoco) and warp on CUDA.

Per world count: env steps per second for (a) physics only (decimation substeps and their contacts;
warp also brings kinematics and contacts to the final pose here, mujoco does that in its sensing
rollout), (b) physics + LiDAR (the whole simulator step), (c) the full NavEnv.step (actions,
physics, LiDAR, terminations, rewards, observations, resets); the same (a) and (b) for a baseline
a user would otherwise write (the same MJCF in classic MuJoCo, one MjData per world stepped in a
Python loop, mj_multiRay LiDAR);
ratios navexp/baseline; the first step's time (kernel compile or cache load) apart from the steady
state; peak host (and device) memory. Then one PPO iteration (collect and learn) at the given shape.

``slots=0,16,32`` adds the cost of obstacle slots: per backend and world count, the simulator step
(physics + LiDAR) with that many extra wall slots, all standing in the room (short walls along its
sides, where rays and the broadphase meet them), and the full NavEnv.step with them parked (random
layouts use no walls); the cost per extra slot is the slope against the first entry, in microseconds
per world and control step.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from navexp.analysis.benchmark import bench_ppo, bench_slots, bench_worlds, format_table, machine
from navexp.config.cli import parse_command_line, run_tool
from navexp.learn.cores import shares_cores
from navexp.sim import resolve_device


def parse_args(argv: list[str]) -> dict:
    """The bench's ``name=value`` options (defaults filled in); an unknown or empty one is an error."""
    opts = {
        "device": "auto",
        "backends": "auto",
        "num_envs": "64,256,1024",
        "steps": "30",
        "ppo": "1024x32",
        "baseline": "true",
        "slots": "none",
        "out": "outputs/bench.json",
    }
    usage = "python -m navexp.bench " + " ".join(f"[{k}={v}]" for k, v in opts.items())
    return parse_command_line(argv, opts, usage, overrides=False, about=__doc__).options


@shares_cores  # torch threads and the MuJoCo pool: this process's share of the cores
def main(argv: list[str] | None = None) -> dict:
    opts = parse_args(list(sys.argv[1:] if argv is None else argv))
    device = resolve_device(opts["device"])
    worlds = [int(x) for x in opts["num_envs"].split(",")]
    baseline = opts["baseline"].lower() in ("1", "true", "yes")
    result = {
        "command": "python -m navexp.bench " + " ".join(f"{k}={v}" for k, v in opts.items()),
        "machine": machine(device),
        "steps": int(opts["steps"]),
        "worlds": [],
    }
    backends = (
        opts["backends"].split(",")
        if opts["backends"] != "auto"
        else (["warp"] if device.startswith("cuda") else ["warp", "mujoco"])
    )
    for backend in backends:
        for n in worlds:
            # The classic baseline is measured once per world count, next to the first backend's row.
            result["worlds"].append(bench_worlds(n, device, int(opts["steps"]), baseline, backend))
            print(f"[bench] {backend}: {n} worlds done", flush=True)
    result["slots"] = []
    if opts["slots"] != "none":
        slots = [int(x) for x in opts["slots"].split(",")]
        for backend in backends:
            for n in worlds:
                result["slots"] += bench_slots(n, device, int(opts["steps"]), backend, slots)
                print(f"[bench] {backend}: {n} worlds, slots {slots} done", flush=True)
    result["ppo"] = []
    if opts["ppo"] != "none":
        n, t = (int(x) for x in opts["ppo"].lower().split("x"))
        result["ppo"] = [bench_ppo(n, t, device, backend) for backend in backends]
    result["table"] = format_table(result)
    out = Path(opts["out"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(result["table"])
    print(f"[bench] wrote {out}")
    return result


def cli() -> None:
    """Console script ``navexp-bench``: bad input ends in one line, exit status 2."""
    run_tool(main)


if __name__ == "__main__":
    cli()
