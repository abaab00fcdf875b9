"""Evaluation of a checkpoint: N held-out episodes (``navexp.analysis.rollout``) and where their result goes.

``python -m navexp.evaluate checkpoint=<run dir or .pt> [suite=<name>] [eval.num_episodes=...] [env=...]
[out=...]`` scores a checkpoint, on the run's env or on every entry of a suite (``navexp.analysis.suites``).
A run directory means the run's policy: its ``model_<it>_avg<N>.pt`` when it averaged its last checkpoints
(``ppo.average_checkpoints``), otherwise its latest ``model_<it>.pt``.
Without ``out=`` it writes ``eval_<model>_<env>_<layout seed>[_suite-<name>][_<overrides hash>].json``
next to the checkpoint, never the run's own ``eval.json``, and refuses to replace a file that holds a
different evaluation. Every result records the checkpoint, the overrides, the scenario file, the layout
seed and the suite. The output location is checked before any episode runs; a progress line every few
seconds while episodes run, then a short summary on the console (every metric is in the file).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from omegaconf import DictConfig

from navexp.analysis.eval_record import check_output, default_output, evaluation_record
from navexp.analysis.rollout import EvalRun
from navexp.analysis.suites import evaluate_suite, summary
from navexp.config.cli import parse_command_line, run_tool
from navexp.config.run_config import load_run_config
from navexp.config.suites import check_evaluation, check_scenarios_played
from navexp.experiment.console import third_party_warnings
from navexp.learn.checkpoint import load_policy, write_atomic

USAGE = (
    "python -m navexp.evaluate checkpoint=<run dir or model_<it>.pt> [suite=<name>] [out=path.json] "
    "[config overrides]"
)


def main(argv: list[str] | None = None) -> dict:
    """CLI: ``checkpoint=<path>`` [``out=<path>``] plus Hydra overrides; prints and writes the metrics."""
    args = parse_command_line(
        list(sys.argv[1:] if argv is None else argv),
        {"checkpoint": None, "out": None, "suite": None},
        USAGE,
        required=("checkpoint",),
        about=__doc__,
    )
    overrides = args.overrides
    ckpt = load_policy(args.options["checkpoint"])
    cfg = load_run_config(ckpt, overrides)
    suite = args.options.get("suite")
    check_evaluation(cfg, suite)  # an unknown suite or entry key, unplayable scenario entries: before any run
    if (
        suite
        and any(o.split("=", 1)[0].lstrip("+~") == "env.scenarios" for o in overrides)
        and cfg.env.scenarios
    ):
        check_scenarios_played(cfg, suite)  # the file asked for here would be played nowhere
    record = evaluation_record(cfg, ckpt["_path"], overrides, suite)
    explicit = "out" in args.options
    out = Path(args.options["out"]) if explicit else default_output(ckpt["_path"], cfg, overrides, suite)
    check_output(out, record, explicit=explicit)

    def build(entry_cfg: DictConfig):
        ev = EvalRun.build(ckpt, entry_cfg)  # checks the observation layout against every entry's env
        return ev.actor, ev.env

    with third_party_warnings(bool(cfg.get("verbose", False))):
        metrics, _, _ = evaluate_suite(cfg, suite, build, progress=True)
    metrics.update(record)
    text = json.dumps(metrics, indent=2)
    print(summary(metrics), flush=True)
    try:
        write_atomic(out, text)
    except OSError:
        print(text, flush=True)  # the whole record on the console: a failed write must not cost it
        raise
    print(f"[navexp] wrote {out} (every metric, per family and per entry)")
    return metrics


def cli() -> None:
    """Console script ``navexp-evaluate``: bad input ends in one line, exit status 2; Ctrl-C ends it
    without a traceback (nothing is written before the last episode)."""
    run_tool(main)


if __name__ == "__main__":
    cli()
