"""Data-parallel training under torchrun: 2 CPU processes with Gloo, one run directory, one policy."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import TINY

from navexp.learn.distributed import rank_device, tensor_digest, worker_hydra_overrides

ROOT = Path(__file__).parents[1]
RUN = [*TINY, "ppo.save_interval=1", "eval.num_episodes=6", "size=none"]


def torchrun(cwd: Path, *overrides: str, nproc: int = 2) -> subprocess.Popen:
    """Start ``torchrun --standalone --nproc_per_node=nproc -m navexp.train`` in ``cwd`` (own session)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [*cmd, "-m", "navexp.train", *overrides],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=600)
    return proc.returncode, out


def run_dirs(cwd: Path) -> list[Path]:
    return sorted(p for p in (cwd / "outputs" / "navexp").iterdir() if p.is_dir())


def ckpt_digest(path: Path) -> str:
    """The digest train.py gathers from each rank, computed from a checkpoint (actor then critic)."""
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    return tensor_digest([*ckpt["actor_state_dict"].values(), *ckpt["critic_state_dict"].values()])


@pytest.fixture(scope="module")
def two_rank_run(tmp_path_factory) -> tuple[Path, str]:
    """One 2-iteration run on 2 CPU ranks (4 worlds each), started from an empty directory."""
    cwd = tmp_path_factory.mktemp("torchrun")
    rc, out = finish(torchrun(cwd, *RUN))
    assert rc == 0, out[-4000:]
    return cwd, out


@pytest.mark.e2e
def test_two_ranks_write_one_run_directory(two_rank_run):
    """Exit 0; Hydra's default directory exists once; one eval.json, checkpoints 0 and 1, one event file."""
    cwd, out = two_rank_run
    dirs = run_dirs(cwd)
    assert len(dirs) == 1, dirs
    assert sorted(p.name for p in cwd.iterdir()) == ["outputs"]  # rank 1 left nothing in its cwd
    run = dirs[0]
    assert sorted(p.name for p in run.glob("model_*.pt")) == ["model_0.pt", "model_1.pt"]
    assert len(list(run.glob("events.out.tfevents.*"))) == 1
    ev = json.loads((run / "eval.json").read_text())
    assert ev["num_episodes"] == 6 and ev["checkpoint"].endswith("model_1.pt")
    info = json.loads((run / "run_info.json").read_text())
    assert info["world_size"] == 2 and info["dist_backend"] == "gloo"
    assert info["num_envs_total"] == 8  # 2 ranks x env.num_envs=4
    # Progress lines only from rank 0: 2 iterations, 2 lines.
    assert out.count("[navexp] it     0/1") == 1 and out.count("[navexp] it     1/1") == 1


@pytest.mark.e2e
def test_ranks_have_own_seed_layouts_and_thread_share(two_rank_run):
    """Rank r uses seed 42 + r; the first layouts differ; each rank prints and records its threads."""
    cwd, out = two_rank_run
    info = json.loads((run_dirs(cwd)[0] / "run_info.json").read_text())
    ranks = info["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1] and [r["seed"] for r in ranks] == [42, 43]
    assert [r["num_envs"] for r in ranks] == [4, 4] and [r["device"] for r in ranks] == ["cpu", "cpu"]
    assert ranks[0]["first_layout_digest"] != ranks[1]["first_layout_digest"]
    # 2 ranks share this machine's usable cores: cores // 2 each (at least 1); the rollout pool has
    # min(share, 4 worlds) threads.
    share = max(1, len(os.sched_getaffinity(0)) // 2)
    assert [r["torch_threads"] for r in ranks] == [share, share]
    assert [r["sim_threads"] for r in ranks] == [min(share, 4)] * 2
    for r in (0, 1):
        assert f"[navexp] rank {r}/2 (local {r}, gloo): device cpu, seed {42 + r}, 4 worlds of 8, " in out
        assert f"{share} torch thread(s), {min(share, 4)} MuJoCo rollout thread(s)" in out


@pytest.mark.e2e
def test_policy_identical_on_both_ranks_after_updates(two_rank_run):
    """After 2 PPO updates on different data, both ranks hold bitwise the same actor and critic, and it
    is the policy of the final checkpoint (gradients and normalizer statistics were all-reduced)."""
    cwd, _ = two_rank_run
    run = run_dirs(cwd)[0]
    digests = json.loads((run / "run_info.json").read_text())["policy_digest_per_rank"]
    assert len(digests) == 2 and digests[0] == digests[1]
    assert digests[0] == ckpt_digest(run / "model_1.pt")
    assert ckpt_digest(run / "model_0.pt") != digests[0]  # the second update changed the policy


@pytest.mark.e2e
def test_resume_under_torchrun_continues_on_both_ranks(two_rank_run, tmp_path):
    """resume=<run> with ppo.max_iterations=3: both ranks start at iteration 2 from model_1.pt and
    rank 0 writes model_2.pt into the same run directory."""
    src, _ = two_rank_run
    run = tmp_path / "run"
    shutil.copytree(run_dirs(src)[0], run)
    rc, out = finish(torchrun(tmp_path, *RUN, "ppo.max_iterations=3", "eval.enabled=false", f"resume={run}"))
    assert rc == 0, out[-4000:]
    info = json.loads((run / "run_info.json").read_text())
    assert [r["start_iteration"] for r in info["ranks"]] == [2, 2]
    assert info["resumed_from"] == str(run / "model_1.pt")
    for r in (0, 1):
        assert f"[navexp] rank {r}/2" in out and out.count("starts at iteration 2") == 2
    ckpt = torch.load(run / "model_2.pt", map_location="cpu", weights_only=False)
    assert ckpt["iter"] == 2
    assert (
        info["policy_digest_per_rank"][0]
        == info["policy_digest_per_rank"][1]
        == ckpt_digest(run / "model_2.pt")
    )


@pytest.mark.e2e
def test_ctrl_c_stops_both_ranks_with_rank0_checkpoint(tmp_path):
    """SIGINT to the whole process group (Ctrl-C) after iteration 3 is printed: both ranks finish the
    iteration in progress and stop; rank 0 saves it; nothing hangs."""
    proc = torchrun(tmp_path, *RUN, "ppo.max_iterations=200", "ppo.save_interval=100", "hydra.run.dir=run")
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("[navexp] it     2/199"):
            os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=120)
    out = "".join(lines)
    saved = [ln for ln in lines if ln.startswith("[navexp] interrupted: saved")]
    assert len(saved) == 1, out[-4000:]
    assert "[navexp] rank 1: stopped with rank 0" in out
    # The signal is sent once iteration index 2 is printed ("it 2/199"). The ranks agree to stop at the
    # next check after an iteration: right after index 2 when the signal beats that check (the ranks
    # check just after printing), else after index 3 (or 4 on a loaded machine). The completed
    # iteration is the one saved.
    it = int(saved[0].split("model_")[1].split(".pt")[0])
    assert it in (2, 3, 4)
    assert sorted(p.name for p in (tmp_path / "run").glob("model_*.pt")) == ["model_0.pt", f"model_{it}.pt"]


def rank_pid(torchrun_pid: int, rank: int) -> int:
    """The pid of the worker process with ``RANK=<rank>`` started by this torchrun."""
    kids = subprocess.run(["pgrep", "-P", str(torchrun_pid)], capture_output=True, text=True).stdout.split()
    for pid in kids:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        if f"RANK={rank}".encode() in environ:
            return int(pid)
    raise AssertionError(f"no rank {rank} among torchrun's children {kids}")


@pytest.mark.e2e
def test_a_dead_peer_rank_leaves_rank0s_last_finished_iteration_saved(tmp_path):
    """kill -9 of rank 1 after iteration index 3 is printed, with ppo.save_interval=50: rank 0's next
    collective fails, it saves its last finished iteration (kept in memory) and says so; only
    model_0.pt would exist otherwise."""
    proc = torchrun(tmp_path, *RUN, "ppo.max_iterations=200", "ppo.save_interval=50", "hydra.run.dir=run")
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("[navexp] it     3/199"):
            os.kill(rank_pid(proc.pid, 1), signal.SIGKILL)
    proc.wait(timeout=120)
    out = "".join(lines)
    saved = [ln for ln in lines if ln.startswith("[navexp] stopped by") and "saved" in ln]
    assert proc.returncode != 0 and len(saved) == 1, out[-4000:]
    assert "(did a peer rank die?)" in saved[0]
    it = int(saved[0].split("model_")[1].split(".pt")[0])
    assert it >= 3  # index 3 had finished when rank 1 was killed
    assert sorted(p.name for p in (tmp_path / "run").glob("model_*.pt")) == ["model_0.pt", f"model_{it}.pt"]
    ckpt = torch.load(tmp_path / "run" / f"model_{it}.pt", map_location="cpu", weights_only=False)
    assert ckpt["iter"] == it


def test_device_mismatch_fails_before_anything_is_built():
    """WORLD_SIZE > 1: a GPU that is not cuda:<LOCAL_RANK>, or fewer GPUs than ranks, is an error."""
    assert rank_device("cpu", 1, 2, cuda_count=0) == "cpu"
    assert rank_device("auto", 1, 2, cuda_count=0) == "cpu"
    assert rank_device("auto", 1, 2, cuda_count=2) == "cuda:1"
    assert rank_device("cuda", 1, 2, cuda_count=4) == "cuda:1"
    with pytest.raises(ValueError, match=r"env.device='cuda:0' does not match .*LOCAL_RANK=1 of 2"):
        rank_device("cuda:0", 1, 2, cuda_count=2)
    fewer = r"starts 4 processes .* has 2 CUDA device\(s\); use --nproc_per_node<=2"
    with pytest.raises(ValueError, match=fewer):
        rank_device("auto", 0, 4, cuda_count=2)
    with pytest.raises(ValueError, match=r"env.device='tpu' is invalid; allowed: auto \| cpu \| cuda"):
        rank_device("tpu", 0, 2, cuda_count=0)


def test_device_error_from_the_app_under_torchrun(tmp_path, monkeypatch):
    """run() under torchrun variables rejects env.device=cuda:1 on LOCAL_RANK 0 before building an env."""
    from navexp import compose_config
    from navexp.task.env import NavEnv
    from navexp.train import run

    for k, v in {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(k, v)
    built = []
    monkeypatch.setattr(NavEnv, "__init__", lambda self, cfg, **kw: built.append(cfg))
    cfg = compose_config([*RUN, "env.device=cuda:1"])
    with pytest.raises(ValueError, match=r"env.device='cuda:1' does not match this process \(LOCAL_RANK=0"):
        run(cfg, tmp_path / "run", RUN)
    assert built == [] and not (tmp_path / "run").exists()


def test_only_rank0_gets_a_hydra_run_directory(monkeypatch):
    """Ranks other than 0 run Hydra without an output directory of their own."""
    argv = ["train.py", "seed=1"]
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    assert worker_hydra_overrides(argv) == argv
    monkeypatch.setenv("RANK", "1")
    assert worker_hydra_overrides(argv)[:2] == argv
    assert "hydra.output_subdir=null" in worker_hydra_overrides(argv)
    assert "hydra.run.dir=." in worker_hydra_overrides(argv)
    assert "hydra.callbacks={}" in worker_hydra_overrides(argv)


def test_bench_dist_table_compares_against_one_process_with_as_many_worlds():
    """3000 / 1000 steps/s at 256 worlds -> 3.00x; the 512-world row has no 1-process run -> '-'."""
    from navexp.analysis.benchmark import PROGRESS, table

    line = "[navexp] it     2/8 |     4371 steps/s (collect 0.65s, learn 1.32s) | ETA 0:00:08 | reward"
    assert PROGRESS.search(line).groups() == ("2", "4371", "0.65", "1.32")
    row = {"round": 1, "collect_s": 1.0, "learn_s": 1.0, "load_avg_1min_before": 2.0}
    rows = [
        {**row, "nproc": 1, "num_envs_per_rank": 256, "num_envs_total": 256, "steps_per_s": 1000.0},
        {**row, "nproc": 2, "num_envs_per_rank": 128, "num_envs_total": 256, "steps_per_s": 3000.0},
        {**row, "nproc": 2, "num_envs_per_rank": 256, "num_envs_total": 512, "steps_per_s": 4000.0},
    ]
    lines = table(rows).splitlines()
    assert lines[2].endswith("| 1.00x | 2.0 |") and lines[3].endswith("| 3.00x | 2.0 |")
    assert lines[4].endswith("| - | 2.0 |")
