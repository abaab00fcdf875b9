"""Hostile launches (issue 49): a resume with another robot and a run directory that cannot be written
are each refused in one line before anything is built or written."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TINY
from omegaconf import OmegaConf, open_dict

from navexp import compose_config
from navexp.experiment.training import TrainingRun
from navexp.train import run

ROOT = Path(__file__).resolve().parents[1]


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


# -- row 11: a run directory that cannot be written ---------------------------------------------------


def _guard_error(run_dir: Path) -> str:
    """The message Hydra's RunDirGuard callback stops a launch with for ``hydra.run.dir=run_dir``."""
    from navexp.experiment.rundir import RunDirGuard

    cfg = compose_config(list(TINY))
    with open_dict(cfg):
        cfg.hydra = OmegaConf.create({"run": {"dir": str(run_dir)}, "job": {"name": "train"}})
    with pytest.raises(SystemExit) as e:
        RunDirGuard().on_run_start(cfg)
    return str(e.value.code)


def test_an_unwritable_run_dir_is_refused_in_one_line_naming_it(tmp_path):
    """Three directories that cannot be written, each refused by the launch's callback with one
    ``Error:`` line naming the directory and the OS's reason, before Hydra writes anything: under
    /sys (no file may be made there, root included: EPERM), under a regular file (ENOTDIR or EEXIST),
    and, when not root (root ignores permission bits), an existing directory made read-only with chmod
    (EACCES). The read-only filesystem itself is tested end to end below (a read-only bind mount).
    Before: a PermissionError that Hydra turned into a warning, then a ~30-line traceback."""
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    cases = [Path(f"/sys/navexp_test_{os.getpid()}/run"), blocker / "run"]
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        cases.append(locked)
    for run_dir in cases:
        msg = _guard_error(run_dir)
        assert msg.startswith(f"Error: run directory {run_dir} cannot be written: "), msg
        assert msg.endswith("choose a writable directory (hydra.run.dir=...); nothing was written"), msg
        assert "\n" not in msg
    assert blocker.read_text() == "x"


def _unshare_works() -> bool:
    """Whether this machine lets an unprivileged user namespace bind-mount a folder read-only."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.e2e
@pytest.mark.skipif(not _unshare_works(), reason="needs `unshare -rm` (user and mount namespaces)")
def test_a_launch_on_a_read_only_filesystem_prints_one_error_line(tmp_path):
    """``python -m navexp.train hydra.run.dir=<dir>`` where ``<dir>`` is a read-only bind mount (made in a
    user and mount namespace: ``unshare -rm``, ``mount --bind -o ro``), the folder itself and a new one
    inside it: exit 1 and one ``Error:`` line naming the directory and "Read-only file system", no
    traceback (before: a ~30-line traceback ending "Unable to configure handler 'file'")."""
    ro = tmp_path / "ro"
    ro.mkdir()
    for run_dir in (ro, ro / "run"):
        script = (
            f"mount --bind -o ro {ro} {ro} && exec {sys.executable} -m navexp.train "
            f"hydra.run.dir={run_dir} {' '.join(TINY)}"
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run(
            ["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=env, timeout=300
        )
        out = (proc.stdout + proc.stderr).strip()
        assert proc.returncode == 1, out[-2000:]
        last = out.splitlines()[-1]
        assert last.startswith(f"Error: run directory {run_dir} cannot be written: Read-only file system"), (
            out
        )
        assert last.endswith("; choose a writable directory (hydra.run.dir=...); nothing was written"), last
        assert "Traceback" not in out, out[-2000:]
    assert list(ro.iterdir()) == []
