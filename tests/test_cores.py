"""Trainings side by side share the host's cores (navexp/learn/cores.py): the registry counts live
trainings, a killed one drops out, a training takes its share of torch threads and of MuJoCo pool
workers, an evaluation follows its share while it runs and yields to a training beside it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import NO_MEDIA, TINY

from navexp import compose_config, make_env
from navexp.learn import cores
from navexp.learn.cores import HostShare
from navexp.sim import mujoco_backend
from navexp.sim.mujoco_backend import MujocoSim

HOLD = (
    "import sys, time; from navexp.learn.cores import HostShare\n"
    "with HostShare(sys.argv[1], role=sys.argv[2]):\n"
    "    print('registered', flush=True); time.sleep(600)\n"
)


def holder(directory: Path, role: str = "training") -> subprocess.Popen:
    """A process registered in ``directory`` (as a training, or as the tool ``role``) until killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(directory), role], stdout=subprocess.PIPE, text=True
    )
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
        seen.update(cpu_count=os.cpu_count(), role=(cores_dir / str(os.getpid())).read_text())
        raise _Seen

    monkeypatch.setattr(module, spied, spy)
    monkeypatch.setenv("NAVEXP_YIELD_NICE", "0")  # in-process: the test runner's priority stays as it is
    run_dir = tiny_run(TINY)
    other = holder(cores_dir)
    before = torch.get_num_threads()
    try:
        args = [a.format(tmp=tmp_path) for a in argv]
        with pytest.raises(_Seen):
            module.main(args if tool == "navexp.bench" else [f"checkpoint={run_dir}", *args])
        role = tool.split(".")[1]  # the registry file names the process's role: evaluate, play, bench
        assert seen == {"processes": 2, "threads": 1, "cpu_count": 1, "role": role}
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


def _pool_env(*overrides: str):
    """4 classic-MuJoCo worlds of the default room, seed 3, noise-free LiDAR."""
    cfg = ["env.device=cpu", "env.sim.backend=mujoco", "env.num_envs=4", "seed=3"]
    return make_env(compose_config([*cfg, "env.lidar.range_noise_std_m=0", *overrides]))


def test_the_mujoco_pool_follows_the_process_share(monkeypatch):
    """A sim built while the process's share is 2 runs 2 pool workers; when the share drops to 1 its
    next step runs on the calling thread alone (two OS threads fewer in the process: the old pool's
    workers are joined; a pool of 1 would only hand over each rollout), and the worlds move exactly as
    in a sim that ran 1 thread throughout. ``env.sim.nthread=2`` (configured) keeps
    2 (before: a pool kept the size it was built with, so a training that gave a core to an evaluation
    kept a worker on it)."""
    monkeypatch.setattr(mujoco_backend, "_POOL_THREADS", None)
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # no torch worker threads come or go meanwhile
    try:
        mujoco_backend.set_pool_threads(2)
        follows, fixed = _pool_env(), _pool_env("env.sim.nthread=2")
        mujoco_backend.set_pool_threads(1)
        single = _pool_env()
        assert (follows.sim.nthread, fixed.sim.nthread, single.sim.nthread) == (2, 2, 1)
        actions = torch.tensor([[0.5, 0.2, 0.1], [-0.3, 0.4, 0.0], [0.2, -0.5, 0.3], [0.3, 0.3, -0.4]])
        tasks = len(os.listdir("/proc/self/task"))
        follows.sim._follow_share()  # what the next step does first
        assert len(os.listdir("/proc/self/task")) == tasks - 2  # 2 workers joined, the caller steps
        assert follows.sim.nthread == 1 and len(follows.sim._thread_data) == len(follows.sim._sense_data) == 1
        for _ in range(5):
            for env in (follows, fixed, single):
                env.step(actions)
        assert fixed.sim.nthread == 2
        assert torch.equal(follows.state.pos_xy, single.state.pos_xy)
        assert torch.equal(follows.state.scan_clean, single.state.scan_clean)
        assert (follows.state.pos_xy - _pool_env().state.pos_xy).norm(dim=-1).min() > 0  # they moved
    finally:
        torch.set_num_threads(before)


def test_a_training_gives_up_a_pool_worker_when_another_process_starts(tmp_path, monkeypatch):
    """A tiny training alone on a 2-core budget (4 worlds) takes 2 torch threads and 2 pool workers; a
    process registers after its first iteration: the check after the second iteration gives it 1 torch
    thread, and the third iteration's steps run 1 pool worker (before: the pool kept 2)."""
    monkeypatch.setenv("NAVEXP_CORES_DIR", str(tmp_path / "cores"))
    monkeypatch.setattr(cores, "usable_cores", lambda: 2)
    from navexp.train import run

    overrides = [*TINY, *NO_MEDIA, "eval.enabled=false", "env.sim.backend=mujoco", "ppo.max_iterations=3"]
    threads, pools, others = [], [], []
    original_iteration, original_step = HostShare.on_iteration, MujocoSim.step

    def on_iteration(self, it, success):
        original_iteration(self, it, success)
        threads.append(torch.get_num_threads())
        if it == 0:
            others.append(holder(tmp_path / "cores"))

    def step(self):
        original_step(self)
        pools.append(self.nthread)

    monkeypatch.setattr(HostShare, "on_iteration", on_iteration)
    monkeypatch.setattr(MujocoSim, "step", step)
    before = torch.get_num_threads()
    try:
        run(compose_config(overrides), tmp_path / "run", overrides, quiet=True)
    finally:
        for p in others:
            p.kill()
            p.wait()
        torch.set_num_threads(before)
    assert threads == [2, 1, 1]
    per_iteration = len(pools) // 3  # 16 steps each
    assert pools[:per_iteration] == [2] * per_iteration and pools[-per_iteration:] == [1] * per_iteration


def test_an_evaluation_follows_its_share_while_it_runs(tiny_run, tmp_path, monkeypatch):
    """``navexp.evaluate`` started alone on a 2-core budget steps with 2 torch threads and 2 pool workers;
    a training registers after its second step, and from its third step on it runs 1 and 1 (re-checked
    while episodes run, here after every step: RECHECK_S=0). Before: an evaluation kept the share it
    took at its start, 2 busy threads beside a training's 1 on 2 cores."""
    import navexp.evaluate

    monkeypatch.setenv("NAVEXP_CORES_DIR", str(tmp_path / "cores"))
    monkeypatch.setenv("NAVEXP_YIELD_NICE", "0")  # in-process: the test runner's priority stays as it is
    monkeypatch.setattr(cores, "usable_cores", lambda: 2)
    monkeypatch.setattr(cores, "RECHECK_S", 0.0)
    run_dir = tiny_run(TINY)
    seen, others = [], []
    original = MujocoSim.step

    def step(self):
        original(self)
        seen.append((torch.get_num_threads(), self.nthread))
        if len(seen) == 2:
            others.append(holder(tmp_path / "cores"))

    monkeypatch.setattr(MujocoSim, "step", step)
    before = torch.get_num_threads()
    try:
        navexp.evaluate.main([f"checkpoint={run_dir}", f"out={tmp_path}/e.json", "eval.num_episodes=4"])
    finally:
        for p in others:
            p.kill()
            p.wait()
        torch.set_num_threads(before)
    assert seen[:2] == [(2, 2), (2, 2)] and len(seen) > 3
    assert set(seen[2:]) == {(1, 1)}


NICE_PROBE = """
import json, os, sys, threading
from pathlib import Path
from navexp.learn.cores import shares_cores
threading.Thread(target=threading.Event().wait, daemon=True).start()  # a thread started before


@shares_cores
def main():
    tasks = [int(t) for t in os.listdir("/proc/self/task")]
    role = (Path(os.environ["NAVEXP_CORES_DIR"]) / str(os.getpid())).read_text()
    print(json.dumps({"nice": sorted({os.getpriority(os.PRIO_PROCESS, t) for t in tasks}), "role": role}))


main()
"""


def test_an_evaluation_yields_to_a_training_and_not_when_alone(tmp_path, monkeypatch):
    """A tool's process (role: its file's name) beside a registered training raises the niceness of every
    one of its threads, the one started before included, by 10 (NAVEXP_YIELD_NICE's default; at most
    19): from n to min(19, n + 10), n being this test's niceness; alone, or with NAVEXP_YIELD_NICE=0, it
    keeps n. A bad NAVEXP_YIELD_NICE is refused naming the value and the range."""
    base = os.getpriority(os.PRIO_PROCESS, 0)
    if base >= 19:
        pytest.skip("this test runs at niceness 19: no lower priority to take")
    script = tmp_path / "nice_probe.py"
    script.write_text(NICE_PROBE)
    env = {**os.environ, "NAVEXP_CORES_DIR": str(tmp_path / "cores"), "NAVEXP_SHARE_CORES": "1"}
    env.pop("NAVEXP_YIELD_NICE", None)

    def probe(**extra) -> dict:
        out = subprocess.run(
            [sys.executable, str(script)], env={**env, **extra}, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    assert probe() == {"nice": [base], "role": "nice_probe"}
    training = holder(tmp_path / "cores")
    try:
        assert probe() == {"nice": [min(19, base + 10)], "role": "nice_probe"}
        assert probe(NAVEXP_YIELD_NICE="0")["nice"] == [base]
        assert probe(NAVEXP_YIELD_NICE="3")["nice"] == [min(19, base + 3)]
    finally:
        training.kill()
        training.wait()
    evaluation = holder(tmp_path / "cores", role="evaluate")  # a tool beside a tool: neither yields
    try:
        assert probe() == {"nice": [base], "role": "nice_probe"}
    finally:
        evaluation.kill()
        evaluation.wait()
    for bad in ("abc", "20", "-1"):
        monkeypatch.setenv("NAVEXP_YIELD_NICE", bad)
        with pytest.raises(
            ValueError, match=rf"NAVEXP_YIELD_NICE='{bad}': expected an integer from 0 .* to 19"
        ):
            HostShare(tmp_path / "cores", role="evaluate")


def test_a_registration_file_is_seen_only_locked_and_with_its_role(tmp_path):
    """A registration is published as `<pid>.tmp`, locked and written, then renamed: a file being
    published is not counted (nor removed as a dead process's), and a published one names its role at
    once. Before, the file was created empty and locked after: a scan in between took its lock and
    removed it, and an empty file read as a training."""
    tmp = tmp_path / "12345.tmp"
    tmp.write_text("")  # a registration half-way through publishing
    with HostShare(tmp_path, role="evaluate") as me:
        assert me.others() == [] and tmp.exists()
        assert (tmp_path / str(os.getpid())).read_text() == "evaluate"
        assert not (tmp_path / f"{os.getpid()}.tmp").exists()
    tool = holder(tmp_path, role="play")
    try:
        with HostShare(tmp_path, role="evaluate") as me:
            assert me.others() == ["play"] and me.training_pids == []
    finally:
        tool.kill()
        tool.wait()
