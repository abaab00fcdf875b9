"""Hostile launches (issue 49): a resume with another robot is refused in one line before anything is
built or written."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from conftest import TINY

from navexp import compose_config
from navexp.experiment.training import TrainingRun
from navexp.train import run


def _hashes(run_dir: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run_dir.iterdir() if p.is_file()}


# -- row 10: resume with another robot ---------------------------------------------------------------


def test_a_resume_with_another_robot_is_refused_before_any_env_is_built(tiny_run, monkeypatch):
    """``resume=<holonomic run> robot=diffdrive``: one ValueError naming the checkpoint and both robots,
    raised before the env is built (a spy on ``TrainingRun._build_env`` must not run) and with every file
    of the run unchanged (before: the env was built, then the same message came from check_resume)."""
    run_dir = tiny_run(TINY)
    before = _hashes(run_dir)

    def spy(*args, **kwargs):
        raise AssertionError("the env was built before the robot was checked")

    monkeypatch.setattr(TrainingRun, "_build_env", spy)
    overrides = [*TINY, f"resume={run_dir}", "robot=diffdrive"]
    with pytest.raises(ValueError) as e:
        run(compose_config(overrides), run_dir, overrides, quiet=True)
    assert str(e.value) == (
        f"checkpoint {run_dir / 'model_1.pt'} was trained with robot 'holonomic'; this config uses "
        "'diffdrive'; select robot=holonomic"
    )
    assert _hashes(run_dir) == before
