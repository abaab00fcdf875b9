"""Evaluation of a checkpoint: N held-out episodes (``navexp.rollout``) and where their result goes.

``python -m navexp.evaluate checkpoint=<run dir or .pt> [suite=<name>] [eval.num_episodes=...] [env=...]
[out=...]`` scores a checkpoint, on the run's env or on every entry of a suite (``navexp.suites``).
Without ``out=`` it writes ``eval_<model>_<env>_<layout seed>[_suite-<name>][_<overrides hash>].json``
next to the checkpoint, never the run's own ``eval.json``, and refuses to replace a file that holds a
different evaluation. Every result records the checkpoint, the overrides, the scenario file, the layout
seed and the suite. The output location is checked before any episode runs, and the metrics are
printed before they are written.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

from omegaconf import DictConfig

USAGE = (
    "python -m navexp.evaluate checkpoint=<run dir or model_<it>.pt> [suite=<name>] [out=path.json] "
    "[config overrides]"
)


def evaluation_record(
    cfg: DictConfig, checkpoint: str | None, overrides: list[str], suite: str | None = None
) -> dict:
    """What an evaluation ran on: the checkpoint, the overrides, the scenario file, the layout seed and
    the suite (None: the run's env alone)."""
    from navexp.api import resolve_scenario_path

    scen = cfg.env.get("scenarios")
    return {
        "checkpoint": checkpoint,
        "overrides": list(overrides),
        "scenario_file": str(resolve_scenario_path(str(scen)).resolve()) if scen else None,
        "layout_seed": int(cfg.seed) + int(cfg.eval.layout_seed_offset),
        "suite": suite,
    }


RECORD_KEYS = ("checkpoint", "overrides", "scenario_file", "layout_seed", "suite")


def default_output(ckpt_path: str, cfg: DictConfig, overrides: list[str], suite: str | None = None) -> Path:
    """``eval_<model>_<env>_<layout seed>[_suite-<name>][_<hash of the other overrides>].json`` next to
    the checkpoint."""
    env = next((o.split("=", 1)[1] for o in overrides if o.startswith("env=")), "run")
    if cfg.env.get("scenarios"):
        env += "-" + Path(str(cfg.env.scenarios)).stem
    rest = sorted(o for o in overrides if not o.startswith("env="))
    tag = "_" + hashlib.sha1("\n".join(rest).encode()).hexdigest()[:8] if rest else ""
    seed = int(cfg.seed) + int(cfg.eval.layout_seed_offset)
    if suite:
        tag = f"_suite-{Path(suite).stem}{tag}"
    safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in env)
    ckpt = Path(ckpt_path)
    return ckpt.parent / f"eval_{ckpt.stem}_{safe}_{seed}{tag}.json"


def check_output(out: Path, record: dict, explicit: bool) -> None:
    """Before any episode runs: the output's folder is writable, and a default-named file that holds a
    different evaluation is never replaced (an ``out=`` the user gave is theirs to overwrite)."""
    if not explicit and out.is_file():
        try:
            old = json.loads(out.read_text())
        except (OSError, ValueError):
            old = {}
        if any(old.get(k) != record[k] for k in RECORD_KEYS):
            raise FileExistsError(
                f"{out} already holds another evaluation (checkpoint {old.get('checkpoint')}, overrides "
                f"{old.get('overrides')}); nothing was run. Pass out=<path> to write elsewhere."
            )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out.parent, prefix=".write_probe_")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OSError(e.errno, f"out={out}: cannot write there ({e.strerror or e}); nothing was run") from e


def main(argv: list[str] | None = None) -> dict:
    """CLI: ``checkpoint=<path>`` [``out=<path>``] plus Hydra overrides; prints and writes the metrics."""
    from navexp.checkpoint import load_checkpoint, write_atomic
    from navexp.cli import parse_command_line
    from navexp.rollout import EvalRun, load_run_config
    from navexp.suites import check_suite, evaluate_suite

    args = parse_command_line(
        list(sys.argv[1:] if argv is None else argv),
        {"checkpoint": None, "out": None, "suite": None},
        USAGE,
        required=("checkpoint",),
    )
    overrides = args.overrides
    ckpt = load_checkpoint(args.options["checkpoint"])
    cfg = load_run_config(ckpt, overrides)
    suite = args.options.get("suite")
    if suite:
        check_suite(cfg, suite)  # an unknown suite or entry key fails here, before anything runs
    record = evaluation_record(cfg, ckpt["_path"], overrides, suite)
    explicit = "out" in args.options
    out = Path(args.options["out"]) if explicit else default_output(ckpt["_path"], cfg, overrides, suite)
    check_output(out, record, explicit=explicit)

    def build(entry_cfg: DictConfig):
        ev = EvalRun.build(ckpt, entry_cfg)  # checks the observation layout against every entry's env
        return ev.actor, ev.env

    metrics, _, _ = evaluate_suite(cfg, suite, build)
    metrics.update(record)
    text = json.dumps(metrics, indent=2)
    print(text, flush=True)  # first: a failing write below must not cost the results
    write_atomic(out, text)
    print(f"[navexp] wrote {out}")
    return metrics


if __name__ == "__main__":
    main()
