"""Every command of the README and docs/ that names a run or a sweep (``checkpoint=outputs/navexp/<run>``,
``resume=outputs/navexp/<run>``, ``outputs/multirun/<experiment>/<time>``, ``<sweep dir>``) runs to
the end as a user types it, with the placeholder filled by a real run: one tiny training and one
tiny Optuna sweep, made here from an empty folder the way the README makes them. tests/test_docs.py
checks that every command composes; this runs the ones it could only check. Optional arguments
(``[out=DIR]``) are left out: the command as typed first.

Slow tier (``python -m pytest -m slow``): about twenty tool runs."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_docs import DOCS, _name, _text

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PLACEHOLDER = re.compile(r"<(run|experiment>/<time|sweep dir)>")


def placeholder_commands() -> list[tuple[str, str]]:
    """(page, command line) of each ``python -m navexp.<tool>`` line of the user's pages that names a
    run or a sweep, each once, without its optional ``[...]`` arguments and its comment."""
    found: dict[str, str] = {}
    for doc in DOCS:
        for line in _text(doc).splitlines():
            for m in re.finditer(r"python -m navexp\.\w+[^`#\n]*", line):
                command = re.sub(r"\s\[[^\]]*\]", "", m.group(0)).strip()
                if PLACEHOLDER.search(command):
                    found.setdefault(command, _name(doc))
    return [(page, command) for command, page in found.items()]


COMMANDS = placeholder_commands()


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "offline"}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """An empty folder holding outputs/navexp/tiny (a finished `size=tiny` run, evaluated on 32
    episodes: the scenario file maze_small has 32 cases, and an evaluation refuses to leave cases
    unplayed) and one Optuna sweep of two tiny trials under outputs/multirun/<experiment>/<time>."""
    home = tmp_path_factory.mktemp("user")
    tiny = ["size=tiny", "eval.num_episodes=32", "hydra.run.dir=outputs/navexp/tiny"]
    proc = run(["-m", "navexp.train", *tiny], home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run(["-m", "navexp.train", "-m", "hydra/sweeper=optuna", "size=tiny", "sweep.n_trials=2"], home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return home


def filled(command: str, home: Path) -> list[str]:
    """The command's arguments with each placeholder replaced by the run or sweep made in ``home``."""
    sweeps = sorted((home / "outputs" / "multirun").glob("*/*"))
    assert len(sweeps) == 1, sweeps
    sweep = sweeps[0].relative_to(home).as_posix()
    text = command.replace("outputs/multirun/<experiment>/<time>", sweep).replace("<sweep dir>", sweep)
    text = text.replace("outputs/navexp/<run>", "outputs/navexp/tiny").replace("<run>", "outputs/navexp/tiny")
    assert "<" not in text, text
    return shlex.split(text)[1:]  # after "python"


def test_the_pages_show_commands_with_each_kind_of_placeholder():
    """The list below is not empty by accident: the README's resume, evaluate, play, export and
    sweep_report lines are among them."""
    tools = {c.split()[2] for _, c in COMMANDS}  # "python -m navexp.<tool> ..."
    assert {"navexp.train", "navexp.evaluate", "navexp.play", "navexp.export", "navexp.sweep_report"} <= tools
    assert any("resume=" in c for _, c in COMMANDS) and any("<sweep dir>" in c for _, c in COMMANDS)


@pytest.mark.parametrize(("page", "command"), COMMANDS, ids=[c for _, c in COMMANDS])
def test_a_documented_command_on_a_real_run_runs_to_the_end(page, command, home):
    """The command, placeholder filled, exits 0 without a traceback; a tool that writes a file says
    where (each tool's summary names its output)."""
    proc = run(filled(command, home), home)
    assert proc.returncode == 0, f"{page}: {command}\n{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
