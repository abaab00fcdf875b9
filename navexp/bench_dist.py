"""Training throughput with 1 and N processes (torchrun), measured side by side in one run.

    python -m navexp.bench_dist [nproc=1,2] [num_envs=256] [iterations=8] [repeats=1] [device=cpu]
                                [out=outputs/bench_dist.json] [-- <more navexp.train overrides>]

For each process count N this starts ``torchrun --standalone --nproc_per_node=N -m navexp.train``
twice: with ``env.num_envs=num_envs`` per rank (N x the worlds, N x the transitions per iteration)
and with ``num_envs / N`` per rank (the same total); one process runs each of these totals too.
Evaluation is off, checkpoints only at the end.
Each row reports the medians over iterations 2..last of the progress line: total env steps per
second across ranks (transitions of all ranks / rank 0's iteration time) and rank 0's collect and
learn times. ``repeats=R`` runs all shapes R times, interleaved (round 1 of every shape, then
round 2, ...), so a change in the machine's load hits every shape alike. The machine's core count
and the 1-minute load average before each run are recorded with them.
"""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from navexp.experiment.cli import parse_command_line, run_tool

PROGRESS = re.compile(r"\[navexp\] it\s+(\d+)/\d+ \|\s+(\d+) steps/s \(collect ([\d.]+)s, learn ([\d.]+)s\)")


def parse_args(argv: list[str]) -> tuple[dict, list[str]]:
    """``key=value`` options, then everything after ``--`` as training overrides."""
    opts = {"nproc": "1,2", "num_envs": "256", "iterations": "8", "repeats": "1", "device": "cpu", "out": ""}

    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    usage = "python -m navexp.bench_dist " + " ".join(f"[{k}=...]" for k in opts) + " [-- training overrides]"
    return parse_command_line(argv, opts, usage, overrides=False, about=__doc__).options, extra


def measure(nproc: int, per_rank_envs: int, iterations: int, device: str, extra: list[str]) -> dict:
    """One torchrun training run; medians of its progress lines after the first iteration."""
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={nproc}",
            "-m",
            "navexp.train",
            "size=cpu",
            f"env.device={device}",
            f"env.num_envs={per_rank_envs}",
            f"ppo.max_iterations={iterations}",
            f"ppo.save_interval={iterations + 1}",
            "eval.enabled=false",
            f"hydra.run.dir={tmp}/run",
            *extra,
        ]
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        )
    rows = [m.groups() for m in PROGRESS.finditer(proc.stdout)]
    steady = [(float(s), float(c), float(lr)) for it, s, c, lr in rows if int(it) > 1] or [
        (float(s), float(c), float(lr)) for _, s, c, lr in rows
    ]
    return {
        "nproc": nproc,
        "num_envs_per_rank": per_rank_envs,
        "num_envs_total": per_rank_envs * nproc,
        "iterations": len(rows),
        "steps_per_s": statistics.median(r[0] for r in steady),
        "collect_s": statistics.median(r[1] for r in steady),
        "learn_s": statistics.median(r[2] for r in steady),
        "wall_s": round(wall, 1),
        "load_avg_1min_before": load,
    }


def table(rows: list[dict]) -> str:
    """Markdown rows; ``vs 1 process``: against the 1-process run of the same round and world total."""
    cols = "round | processes | worlds per rank | worlds in all | total steps/s | collect s | learn s"
    lines = [f"| {cols} | vs 1 process | load |", "|---" * 9 + "|"]
    base = {(r["round"], r["num_envs_total"]): r["steps_per_s"] for r in rows if r["nproc"] == 1}
    for r in rows:
        ref = base.get((r["round"], r["num_envs_total"]))
        ratio = f"{r['steps_per_s'] / ref:.2f}x" if ref else "-"
        lines.append(
            f"| {r['round']} | {r['nproc']} | {r['num_envs_per_rank']} | {r['num_envs_total']} | "
            f"{r['steps_per_s']:.0f} | {r['collect_s']:.2f} | {r['learn_s']:.2f} | {ratio} | "
            f"{r['load_avg_1min_before']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    opts, extra = parse_args(list(sys.argv[1:] if argv is None else argv))
    nprocs = [int(x) for x in opts["nproc"].split(",")]
    envs, its = int(opts["num_envs"]), int(opts["iterations"])
    # Per N: envs per rank (N x the worlds) and envs / N per rank (the same worlds); 1 process runs
    # every total that occurs, so each row has a 1-process reference with as many worlds.
    shapes = {(n, e) for n in nprocs for e in (envs, max(1, envs // n))}
    shapes |= {(1, n * e) for n, e in shapes}
    shapes = sorted(shapes, key=lambda s: (s[1] * s[0], s[0]))
    rows = []
    for k in range(int(opts["repeats"])):
        for n, e in shapes:
            rows.append({"round": k + 1, **measure(n, e, its, opts["device"], extra)})
            print(f"[bench_dist] {rows[-1]}", flush=True)
    result = {
        "command": "python -m navexp.bench_dist " + " ".join(f"{k}={v}" for k, v in opts.items() if v),
        "machine": {
            "cpu_count": os.cpu_count(),
            "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "processor": platform.processor() or platform.machine(),
            "torch": torch.__version__,
        },
        "extra_overrides": extra,
        "rows": rows,
    }
    print(table(rows))
    if opts["out"]:
        Path(opts["out"]).parent.mkdir(parents=True, exist_ok=True)
        Path(opts["out"]).write_text(json.dumps(result, indent=2))
    return result


def cli() -> None:
    """Console script ``navexp-bench-dist``: bad input ends in one line, exit status 2."""
    run_tool(main)


if __name__ == "__main__":
    cli()
