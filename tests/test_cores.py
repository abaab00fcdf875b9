"""Trainings side by side share the host's cores (navexp/learn/cores.py): the registry counts live
trainings, a killed one drops out, and a training takes its share of torch threads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import NO_MEDIA, TINY

from navexp import compose_config
from navexp.learn import cores
from navexp.learn.cores import HostShare

HOLD = (
    "import sys, time; from navexp.learn.cores import HostShare\n"
    "with HostShare(sys.argv[1]):\n"
    "    print('registered', flush=True); time.sleep(600)\n"
)


def holder(directory: Path) -> subprocess.Popen:
    """A process registered as a training in ``directory`` until killed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(directory)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "registered"
    return proc


def test_the_registry_counts_live_trainings_and_drops_a_killed_one(tmp_path, monkeypatch):
    """This process + 2 holders = 3 trainings; kill -9 one: 2, and its file is gone. Share with 4
    usable cores: 4 // 3 = 1, then 4 // 2 = 2; never below 1."""
    monkeypatch.setattr(cores, "usable_cores", lambda: 4)
    procs = [holder(tmp_path), holder(tmp_path)]
    try:
        with HostShare(tmp_path) as me:
            assert me.trainings() == 3 and me.share() == 1
            os.kill(procs[0].pid, signal.SIGKILL)
            procs[0].wait()
            assert me.trainings() == 2 and me.share() == 2
            assert sorted(p.name for p in tmp_path.iterdir()) == sorted([str(os.getpid()), str(procs[1].pid)])
        assert not (tmp_path / str(os.getpid())).exists()  # unregistered at the end
        monkeypatch.setattr(cores, "usable_cores", lambda: 1)
        with HostShare(tmp_path) as me:
            assert me.share() == 1  # 1 core, 2 trainings: still one thread
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_a_training_beside_another_takes_half_the_cores(tmp_path, monkeypatch):
    """A tiny in-process training with one other registered training on a 2-core budget runs with 1
    torch thread; alone it takes both (the share is re-checked after every iteration)."""
    monkeypatch.setenv("NAVEXP_CORES_DIR", str(tmp_path / "cores"))
    monkeypatch.setattr(cores, "usable_cores", lambda: 2)
    from navexp.train import run

    overrides = [*TINY, *NO_MEDIA, "eval.enabled=false"]
    seen = []
    original = HostShare.on_iteration

    def spy(self, it, success):
        original(self, it, success)
        seen.append(torch.get_num_threads())

    monkeypatch.setattr(HostShare, "on_iteration", spy)
    before = torch.get_num_threads()
    other = holder(tmp_path / "cores")
    try:
        run(compose_config(overrides), tmp_path / "beside", overrides, quiet=True)
        assert seen == [1, 1]
    finally:
        other.kill()
        other.wait()
    seen.clear()
    time.sleep(0.1)
    run(compose_config(overrides), tmp_path / "alone", overrides, quiet=True)
    assert seen == [2, 2]
    torch.set_num_threads(before)


def test_sharing_off_keeps_the_start_threads_and_a_cap_is_kept(tmp_path, monkeypatch):
    """NAVEXP_SHARE_CORES=0: the per-iteration check changes nothing (a torchrun rank keeps its rank
    share); with sharing on, a cap of 1 (a rank's share) wins over a share of 4."""
    monkeypatch.setattr(cores, "usable_cores", lambda: 4)
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("NAVEXP_SHARE_CORES", "0")
        with HostShare(tmp_path / "off") as host:
            torch.set_num_threads(1)  # as a torchrun rank sets its share
            host.on_iteration(0, 0.0)
            assert torch.get_num_threads() == 1 and not (tmp_path / "off").exists()
        monkeypatch.setenv("NAVEXP_SHARE_CORES", "1")
        with HostShare(tmp_path / "on") as host:
            host.cap = 1
            assert host.apply(quiet=True) == 1 and torch.get_num_threads() == 1
            host.cap = None
            assert host.apply(quiet=True) == 4
    finally:
        torch.set_num_threads(before)


class _Seen(Exception):
    """Raised by a spy once it has recorded what the tool runs with (no episode needs to run)."""


@pytest.mark.parametrize(
    "tool, spied, argv",
    [
        ("navexp.evaluate", "evaluate_suite", ["out={tmp}/e.json"]),
        ("navexp.play", "evaluate", ["out={tmp}/play"]),
        ("navexp.bench", "resolve_device", ["num_envs=4", "steps=2", "backends=mujoco", "slots=none"]),
    ],
)
def test_evaluate_play_and_bench_take_part_in_the_core_sharing(
    tiny_run, tmp_path, monkeypatch, tool, spied, argv
):
    """With one other registered process on a 2-core budget, ``navexp.evaluate``, ``navexp.play`` and
    ``navexp.bench`` register too while they run (2 live processes), take 2 // 2 = 1 torch thread and size
    the MuJoCo rollout pool from os.cpu_count() = 1; at their end only the other one is left (before:
    they never registered and took every core beside a training)."""
    import importlib

    module = importlib.import_module(tool)
    cores_dir = tmp_path / "cores"
    monkeypatch.setenv("NAVEXP_CORES_DIR", str(cores_dir))
    monkeypatch.setattr(cores, "usable_cores", lambda: 2)
    seen = {}

    def spy(*args, **kwargs):
        seen.update(processes=HostShare(cores_dir).trainings(), threads=torch.get_num_threads())
        seen["cpu_count"] = os.cpu_count()
        raise _Seen

    monkeypatch.setattr(module, spied, spy)
    run_dir = tiny_run(TINY)
    other = holder(cores_dir)
    before = torch.get_num_threads()
    try:
        args = [a.format(tmp=tmp_path) for a in argv]
        with pytest.raises(_Seen):
            module.main(args if tool == "navexp.bench" else [f"checkpoint={run_dir}", *args])
        assert seen == {"processes": 2, "threads": 1, "cpu_count": 1}
        assert sorted(p.name for p in cores_dir.iterdir()) == [str(other.pid)]
    finally:
        other.kill()
        other.wait()
        torch.set_num_threads(before)


def test_nested_registrations_of_one_process_count_once(tmp_path):
    """A training's registration inside an evaluation's (or trials one after another in one sweeper
    process) share one file: one live process while nested, the file kept until the outer one ends
    (before: the inner one's flock on the process's own file failed with BlockingIOError)."""
    with HostShare(tmp_path) as outer:
        with HostShare(tmp_path) as inner:
            assert inner.trainings() == 1 and outer.trainings() == 1
            assert [p.name for p in tmp_path.iterdir()] == [str(os.getpid())]
        assert (tmp_path / str(os.getpid())).exists()
    assert list(tmp_path.iterdir()) == []


def test_bench_dist_beside_reports_the_training_against_its_solo_speed():
    """``beside=evaluate`` rows: 6536 steps/s alone, 3268 beside the evaluation -> 0.50x (the fair share
    on 2 cores), 1549 without sharing -> 0.24x; ``beside=`` anything else is refused naming the value."""
    from navexp import bench_dist
    from navexp.analysis.bench_beside import beside_table

    rows = [
        {"round": 1, "share": True, "steps_per_s_alone": 6536, "steps_per_s_beside_evaluation": 3268},
        {"round": 1, "share": False, "steps_per_s_alone": 6536, "steps_per_s_beside_evaluation": 1549},
    ]
    for r in rows:
        r.update(ratio=r["steps_per_s_beside_evaluation"] / r["steps_per_s_alone"], learn_s_alone=0.8)
        r.update(learn_s_beside=1.6, evaluations_finished=2)
    lines = beside_table(rows).splitlines()
    assert lines[2] == "| 1 | yes | 6536 | 3268 | **0.50x** | 0.80 | 1.60 | 2 |"
    assert lines[3] == "| 1 | no | 6536 | 1549 | **0.24x** | 0.80 | 1.60 | 2 |"
    with pytest.raises(ValueError, match=r"beside='train': expected evaluate"):
        bench_dist.main(["beside=train"])
