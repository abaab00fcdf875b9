"""Training throughput with 1 and N processes (torchrun), or with K independent trainings at once,
measured side by side in one run.

    python -m navexp.bench_dist [nproc=1,2] [num_envs=256] [iterations=8] [repeats=1] [device=cpu]
                                [out=outputs/bench_dist.json] [-- <more navexp.train overrides>]
    python -m navexp.bench_dist concurrent=1,2,4 [share=on,off] [num_envs=256] [iterations=8] ...
    python -m navexp.bench_dist beside=evaluate [share=on,off] [num_envs=256] [iterations=12] ...

For each process count N this starts ``torchrun --standalone --nproc_per_node=N -m navexp.train``
twice: with ``env.num_envs=num_envs`` per rank (N x the worlds, N x the transitions per iteration)
and with ``num_envs / N`` per rank (the same total); one process runs each of these totals too.
Evaluation is off, checkpoints only at the end.
Each row reports the medians over iterations 2..last of the progress line: total env steps per
second across ranks (transitions of all ranks / rank 0's iteration time) and rank 0's collect and
learn times. ``repeats=R`` runs all shapes R times, interleaved (round 1 of every shape, then
round 2, ...), so a change in the machine's load hits every shape alike. The machine's core count
and the 1-minute load average before each run are recorded with them.

``concurrent=1,2,4`` instead starts K plain ``python -m navexp.train`` runs at once for each K (K
sweep trials under ``n_jobs=K``, or K users on one host), ``num_envs`` worlds each, and reports each
one's median steps/s over iterations 2..last, their sum, and the sum against one training alone.
``share=on`` is navexp's default (each training takes its share of the cores,
navexp/learn/cores.py); ``share=off`` sets ``NAVEXP_SHARE_CORES=0`` so each takes every core.

``beside=evaluate``: one training alone, then beside ``navexp.evaluate`` (dense, 400 episodes, in a loop),
per ``share``: its steps/s in both and their ratio (navexp.analysis.bench_beside; fair: 0.5x on 2 cores)."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path

import torch

from navexp.analysis.bench_beside import beside_rows, beside_table
from navexp.analysis.benchmark import concurrent_table, measure, measure_concurrent, table
from navexp.config.cli import parse_command_line, run_tool


def parse_args(argv: list[str]) -> tuple[dict, list[str]]:
    """``key=value`` options, then everything after ``--`` as training overrides."""
    opts = {
        "nproc": "1,2",
        "concurrent": "",
        "beside": "",
        "share": "on",
        "num_envs": "256",
        "iterations": "8",
    }
    opts |= {"repeats": "1", "device": "cpu", "out": ""}

    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    usage = "python -m navexp.bench_dist " + " ".join(f"[{k}=...]" for k in opts) + " [-- training overrides]"
    return parse_command_line(argv, opts, usage, overrides=False, about=__doc__).options, extra


def main(argv: list[str] | None = None) -> dict:
    opts, extra = parse_args(list(sys.argv[1:] if argv is None else argv))
    envs, its = int(opts["num_envs"]), int(opts["iterations"])
    if opts["concurrent"]:
        return concurrent(opts, envs, its, extra)
    if opts["beside"]:
        return beside(opts, envs, its, extra)
    nprocs = [int(x) for x in opts["nproc"].split(",")]
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
    result = {"command": _command(opts), "machine": _machine(), "extra_overrides": extra, "rows": rows}
    print(table(rows))
    _write(opts["out"], result)
    return result


def _shares(opts: dict) -> list[bool]:
    """``share=on``, ``off`` or ``on,off`` as booleans."""
    shares = []
    for word in opts["share"].split(","):
        if word not in ("on", "off"):
            raise ValueError(f"share={word!r}: expected on, off or on,off")
        shares.append(word == "on")
    return shares


def beside(opts: dict, envs: int, its: int, extra: list[str]) -> dict:
    """A training alone and beside an evaluation loop, for each ``share``, ``repeats`` rounds."""
    if opts["beside"] != "evaluate":
        raise ValueError(f"beside={opts['beside']!r}: expected evaluate")
    rows = beside_rows(_shares(opts), int(opts["repeats"]), envs, its, opts["device"], extra)
    result = {"command": _command(opts), "machine": _machine(), "extra_overrides": extra, "rows": rows}
    print(beside_table(rows))
    _write(opts["out"], result)
    return result


def concurrent(opts: dict, envs: int, its: int, extra: list[str]) -> dict:
    """K trainings at once for each K in ``concurrent``, with and/or without core sharing."""
    ks = [int(x) for x in opts["concurrent"].split(",")]
    shares = _shares(opts)
    rows = []
    for k in range(int(opts["repeats"])):
        for share in shares:
            for n in ks:
                row = measure_concurrent(n, envs, its, opts["device"], share, extra)
                rows.append({"round": k + 1, **row})
                print(f"[bench_dist] {rows[-1]}", flush=True)
    result = {"command": _command(opts), "machine": _machine(), "extra_overrides": extra, "rows": rows}
    print(concurrent_table(rows))
    _write(opts["out"], result)
    return result


def _command(opts: dict) -> str:
    return "python -m navexp.bench_dist " + " ".join(f"{k}={v}" for k, v in opts.items() if v)


def _machine() -> dict:
    return {
        "cpu_count": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "processor": platform.processor() or platform.machine(),
        "torch": torch.__version__,
    }


def _write(out: str, result: dict) -> None:
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(result, indent=2))


def cli() -> None:
    """Console script ``navexp-bench-dist``: bad input ends in one line, exit status 2."""
    run_tool(main)


if __name__ == "__main__":
    cli()
