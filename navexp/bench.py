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

    python -m navexp.bench warmup [device=auto] [num_envs=64] [robots=holonomic,diffdrive] [out=none]

fills Warp's kernel cache ahead of a job (build and one step per robot): what compiled, cold or warm.

    python -m navexp.bench ppo [device=auto] [backend=auto] [shapes=256x32,4096x32] [models=mlp]
                               [iterations=3] [out=outputs/bench_ppo.json]

times PPO iterations with rsl_rl's runner per shape (worlds x steps per world: the CPU and GPU
presets' by default) and model, mini-batches and epochs as configured: the median collect and learn
time after one warm-up iteration. ``backend=auto``: warp on CUDA, mujoco on a CPU.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from navexp.analysis import benchmark as bm
from navexp.analysis.warmup import ROBOTS, warm_up, warmup_lines
from navexp.config.cli import parse_command_line, run_tool
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


def _options(mode: str, argv: list[str], opts: dict) -> dict:
    usage = f"python -m navexp.bench {mode} " + " ".join(f"[{k}={v}]" for k, v in opts.items())
    return parse_command_line(argv, opts, usage, overrides=False, about=__doc__).options


def _write(result: dict, out: str) -> None:
    if out != "none":
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(result, indent=2))
        print(f"[bench] wrote {out}")


def warmup(argv: list[str]) -> dict:
    """``warmup``: fill Warp's kernel cache for the device (navexp.analysis.warmup)."""
    opts = {"device": "auto", "num_envs": "64", "robots": ",".join(ROBOTS), "out": "none"}
    opts = _options("warmup", argv, opts)
    result = warm_up(resolve_device(opts["device"]), int(opts["num_envs"]), opts["robots"].split(","))
    print("\n".join(warmup_lines(result)), flush=True)
    _write(result, opts["out"])
    return result


def ppo(argv: list[str]) -> dict:
    """``ppo``: collect and learn time of PPO iterations per shape and model."""
    opts = {"device": "auto", "backend": "auto", "shapes": "256x32,4096x32", "models": "mlp"}
    opts = _options("ppo", argv, {**opts, "iterations": "3", "out": "outputs/bench_ppo.json"})
    device = resolve_device(opts["device"])
    rows = bm.bench_ppo_shapes(
        device, opts["backend"], opts["shapes"], opts["models"], int(opts["iterations"])
    )
    result = {"command": "python -m navexp.bench ppo " + " ".join(f"{k}={v}" for k, v in opts.items())}
    result.update(machine=bm.machine(device), ppo=rows, table=bm.ppo_table(rows))
    print(result["table"])
    _write(result, opts["out"])
    return result


MODES = {"warmup": warmup, "ppo": ppo}


def main(argv: list[str] | None = None) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in MODES:
        return MODES[argv[0]](argv[1:])
    opts = parse_args(argv)
    device = resolve_device(opts["device"])
    worlds = [int(x) for x in opts["num_envs"].split(",")]
    baseline = opts["baseline"].lower() in ("1", "true", "yes")
    result = {
        "command": "python -m navexp.bench " + " ".join(f"{k}={v}" for k, v in opts.items()),
        "machine": bm.machine(device),
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
            result["worlds"].append(bm.bench_worlds(n, device, int(opts["steps"]), baseline, backend))
            print(f"[bench] {backend}: {n} worlds done", flush=True)
    result["slots"] = []
    if opts["slots"] != "none":
        slots = [int(x) for x in opts["slots"].split(",")]
        for backend in backends:
            for n in worlds:
                result["slots"] += bm.bench_slots(n, device, int(opts["steps"]), backend, slots)
                print(f"[bench] {backend}: {n} worlds, slots {slots} done", flush=True)
    result["ppo"] = []
    if opts["ppo"] != "none":
        n, t = (int(x) for x in opts["ppo"].lower().split("x"))
        result["ppo"] = [bm.bench_ppo(n, t, device, backend) for backend in backends]
    result["table"] = bm.format_table(result)
    print(result["table"])
    _write(result, opts["out"])
    return result


def cli() -> None:
    """Console script ``navexp-bench``: bad input ends in one line, exit status 2."""
    run_tool(main)


if __name__ == "__main__":
    cli()
