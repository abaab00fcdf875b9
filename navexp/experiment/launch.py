"""The train command line before Hydra composes it: ``size=auto`` resolved, a resume's run overrides
and directory, and under torchrun the ranks' Hydra settings."""

from __future__ import annotations

import os
from datetime import datetime

import yaml

from navexp.config.aliases import translate_argv, translate_overrides
from navexp.config.keys import check_overrides
from navexp.config.presets import add_overrides, override_positions, override_value, size_override_argv
from navexp.learn.checkpoint import resolve_checkpoint
from navexp.learn.distributed import worker_hydra_overrides
from navexp.paths import overrides_record


def app_argv(argv: list[str]) -> list[str]:
    """The command line Hydra composes from: ``size=auto`` (the default) resolved to ``size=gpu|cpu``
    first, so the composed config is the run's config (in a sweep, every trial inherits the choice);
    under torchrun only rank 0 gets a Hydra run directory. A key or group option the schemas do not
    know fails here, before Hydra writes anything. Hydra's own commands that compose no run
    (``--hydra-help``, ``-sc``: its shell completion) get the command line as it is."""
    if any(a in HYDRA_ONLY_FLAGS for a in argv[1:]):
        return argv
    try:
        argv = translate_argv(argv)  # old key names (ppo.clip_param) -> today's: navexp/config/aliases.py
        check_overrides([argv[1:][i] for i in override_positions(argv[1:])])
        argv = resume_overrides_argv(argv)  # before size=auto resolves: the run's size is inherited
        argv = size_override_argv(argv)
        argv = resume_run_dir_argv(argv)
    except (ValueError, FileNotFoundError) as e:
        raise SystemExit(f"Error: {e}") from None
    return worker_hydra_overrides(argv)


HYDRA_ONLY_FLAGS = ("--hydra-help", "-sc", "--shell-completion")
"""Hydra flags that compose no run: their ``name=value`` words are Hydra's (``-sc query=bash``), and the
size preset would be an override of a config they do not load."""


IGNORED_ON_RESUME = ("hydra.", "hydra/", "sweep.")
"""Override prefixes a resume does not repeat: Hydra's own, and a sweep trial's study keys (a resumed
trial trains on as a single run; its trial in the study has ended)."""


def resume_overrides_argv(argv: list[str]) -> list[str]:
    """A single-run ``resume=<run or checkpoint>`` continues the run it names: the run's latest task
    overrides (``.hydra/resume_<time>/overrides.yaml``, else ``.hydra/overrides.yaml``) go first, and
    this command line's overrides follow, so a key given here wins (a group choice such as ``env=room``
    replaces the group; the run's other keys stay). Without this, ``resume=<run>`` alone trained on
    the default env and reward and recorded them as changes. A run made without Hydra (the Python API)
    has no record: its resume composes from this command line alone, and says so."""
    resume = override_value(argv, "resume")
    multirun = any(a in ("-m", "--multirun") for a in argv[1:])
    if not resume or resume in ("null", "None") or multirun:
        return argv
    run_dir = resolve_checkpoint(resume).resolve().parent
    record = overrides_record(run_dir)
    rank0 = int(os.environ.get("RANK", "0")) == 0
    if record is None:
        if rank0:
            print(
                f"[navexp] resume: {run_dir} keeps no .hydra/overrides.yaml; the config is the command line's"
            )
        return argv
    prog, args = argv[:1], list(argv[1:])
    positions = [i for i, a in enumerate(args) if ("=" in a or a.startswith("~")) and not a.startswith("-")]
    given = {args[i].lstrip("+~").partition("=")[0] for i in positions}
    # Plain YAML, not OmegaConf: a recorded ${...} stays text for Hydra to resolve, as it was first. A run
    # recorded before the ppo sections has old key names: today's, so this command line's keys match them.
    recorded = translate_overrides([str(o) for o in yaml.safe_load(record.read_text()) or []], announce=False)
    inherited = [
        o
        for o in recorded
        if (key := o.lstrip("+~").partition("=")[0]) not in given
        and key != "resume"
        and not key.startswith(IGNORED_ON_RESUME)
    ]
    if inherited and rank0:
        print(
            f"[navexp] resume: the run's overrides {' '.join(inherited)} (from {record}; this "
            f"command line's win)",
            flush=True,
        )
    at = positions[0] if positions else len(args)
    return prog + args[:at] + inherited + args[at:]


def resume_run_dir_argv(argv: list[str]) -> list[str]:
    """A single-run ``resume=<run or checkpoint>``: Hydra's directory is the run's own, and its copy of
    this launch's config goes to ``.hydra/resume_<time>/`` there (the first launch's ``.hydra/`` stays).
    Without this a resume would leave a stray ``outputs/<name>/<time>/`` behind. A checkpoint that
    does not exist fails here, before Hydra makes any directory."""
    resume = override_value(argv, "resume")
    multirun = any(a in ("-m", "--multirun") for a in argv[1:])
    if not resume or resume in ("null", "None") or multirun or int(os.environ.get("RANK", "0")) != 0:
        return argv
    if override_value(argv, "hydra.run.dir") is not None:
        return argv  # the user chose Hydra's directory
    run_dir = resolve_checkpoint(resume).resolve().parent
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S_%f")
    return add_overrides(argv, [f"hydra.run.dir='{run_dir}'", f"hydra.output_subdir=.hydra/resume_{stamp}"])
