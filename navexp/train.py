"""``python -m navexp.train``: config -> env -> rsl_rl runner -> logging -> evaluation -> success rate.

The Hydra app only calls ``run``, which hands the training run (``navexp.experiment.training``) the
hooks of a sweep trial and returns the objective: the held-out evaluation success rate (or the values
of ``sweep.objectives``). Everything of a run lands in its run directory: resolved config,
run_info.json, TensorBoard events, checkpoints, W&B files and eval.json.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import CompactHydraException
from hydra.types import RunMode
from omegaconf import DictConfig

from navexp.config.completion import answer_query, is_query
from navexp.config.schemas import register_configs
from navexp.experiment.console import console_to_log, third_party_warnings
from navexp.experiment.launch import app_argv
from navexp.experiment.training import TrainingRun
from navexp.paths import CONFIG_DIR
from navexp.sweep.trial import objective, trial_hooks
from navexp.task.maps.pool import LayoutSamplingError

register_configs()


def run(
    cfg: DictConfig, run_dir: Path, overrides: list[str] | None = None, quiet: bool = False
) -> float | list[float]:
    """Train, evaluate and return the objective: the evaluation success rate (or the values of
    ``sweep.objectives`` when a study asks for several; NaN on torchrun ranks other than 0)."""
    metrics = TrainingRun(cfg, Path(run_dir), overrides, quiet, hooks=trial_hooks).run()
    return objective(cfg, metrics)


@hydra.main(config_path=str(CONFIG_DIR), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | list[float]:
    hc = HydraConfig.get()
    if hc.mode == RunMode.MULTIRUN and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ValueError(
            f"sweeps (-m) under torchrun (WORLD_SIZE={os.environ['WORLD_SIZE']}) are not supported; "
            f"run a sweep with `python -m navexp.train -m ...` or train one run with torchrun"
        )
    try:
        with console_to_log(Path(hc.runtime.output_dir)), third_party_warnings(bool(cfg.verbose)):
            return run(cfg, Path(hc.runtime.output_dir), list(hc.overrides.task))
    except LayoutSamplingError as e:  # map settings no layout satisfies: found on the first draw
        if hc.mode == RunMode.MULTIRUN:
            raise  # the sweeper records the trial as failed and goes on
        # Hydra prints a compact error as its message alone, after its callbacks removed the unused
        # run directory (a SystemExit would skip them).
        raise CompactHydraException(f"Error: {e}") from None


def cli() -> None:
    """``python -m navexp.train`` and the console script ``navexp-train`` (Hydra's options and shell
    completion included: ``navexp-train --help``, ``navexp-train -sc install=bash``)."""
    sys.argv = app_argv(sys.argv)
    if is_query(sys.argv[1:]):  # TAB in a shell: Hydra's completion as the app offers it
        answer_query(main)
        return
    try:
        main()
    except KeyboardInterrupt as e:
        # Ctrl-C or SIGTERM: the run has said what it saved and how to continue (`resume=`); a traceback
        # would bury that line. The exit status is the shell's for the signal (130, or 143 for SIGTERM).
        if os.environ.get("NAVEXP_TRACEBACK") == "1":
            raise
        signum = int(str(e).removeprefix("signal ")) if str(e).startswith("signal ") else signal.SIGINT
        raise SystemExit(128 + signum) from None


if __name__ == "__main__":
    cli()
