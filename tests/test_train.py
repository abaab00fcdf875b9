"""The training entry point: logging, checkpoints, resume, interrupt, evaluation and W&B offline."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import TINY
from rsl_rl.models import MLPModel
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from navexp import compose_config
from navexp.train import run

RUN = [*TINY, "ppo.save_interval=1", "eval.num_episodes=6", "size=none"]


def train(tmp_path: Path, *extra: str, name: str = "run") -> tuple[float, Path]:
    overrides = [*RUN, *extra]
    cfg = compose_config(overrides)
    run_dir = tmp_path / name
    return run(cfg, run_dir, overrides, quiet=True), run_dir


@pytest.fixture
def trained(tiny_run, tmp_path) -> Path:
    """A copy of the tiny run of ``RUN`` (trained once per session), which the test may write into."""
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_run(RUN), run_dir)
    return run_dir


def scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


@pytest.mark.e2e
def test_two_iterations_through_the_real_app(tmp_path):
    """`python -m navexp.train` writes events with the documented tags, loadable checkpoints and eval.json."""
    run_dir = tmp_path / "app_run"
    cmd = [sys.executable, "-m", "navexp.train", *RUN, f"hydra.run.dir={run_dir}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=Path(__file__).parents[1])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[navexp] it     1/1" in proc.stdout
    tags = scalars(run_dir)
    for tag in [
        "Loss/value",
        "Loss/surrogate",
        "Loss/entropy",
        "Loss/learning_rate",
        "Policy/mean_std",
        "Perf/total_fps",
        "Perf/collection_time",
        "Perf/learning_time",
        "Train/mean_reward",
        "Episode_Reward/goal",
        "Episode_Reward/collision",
        "Episode_Reward/progress",
        "Episode_Termination/success",
        "Episode_Termination/collision",
        "Episode_Termination/time_out",
        "Metrics/success_rate",
        "Eval/success_rate",
    ]:
        assert tag in tags, f"{tag} missing from {sorted(tags)}"
    assert [s for s, _ in tags["Loss/value"]] == [0, 1]
    # rsl_rl's own model takes the checkpoint with the shapes of design.md.
    ckpt = torch.load(run_dir / "model_1.pt", map_location="cpu", weights_only=False)
    sd = ckpt["actor_state_dict"]
    assert sd["obs_normalizer._mean"].shape == (1, 78) and sd["obs_normalizer._std"].shape == (1, 78)
    assert sd["mlp.0.weight"].shape == (256, 78) and sd["mlp.4.weight"].shape == (3, 256)
    assert sd["distribution.std_param"].shape == (3,)
    from tensordict import TensorDict

    obs = TensorDict({"policy": torch.zeros(1, 78)}, batch_size=[1])
    actor = MLPModel(
        obs,
        {"actor": ["policy"]},
        "actor",
        3,
        hidden_dims=[256, 256],
        obs_normalization=True,
        distribution_cfg={"class_name": "GaussianDistribution", "init_std": 1.0},
    )
    actor.load_state_dict(sd)
    assert ckpt["infos"]["obs_layout"]["policy"][0] == ["lidar", 72] or ckpt["infos"]["obs_layout"]["policy"][
        0
    ] == ("lidar", 72)
    ev = json.loads((run_dir / "eval.json").read_text())
    rates = ["success_rate", "collision_rate", "timeout_rate", "out_of_bounds_rate", "moving_collision_rate"]
    assert ev["num_episodes"] == 6 and abs(sum(ev[r] for r in rates) - 1.0) < 1e-9
    assert set(ev["ci95"]) == set(rates) and ev["checkpoint"].endswith("model_1.pt")
    info = json.loads((run_dir / "run_info.json").read_text())
    assert info["seed"] == 42 and info["device"] == "cpu" and info["packages"]["rsl-rl-lib"] == "5.5.1"
    assert info["sim_backend"] == "mujoco"  # auto on a CPU
    assert (run_dir / "config.yaml").is_file() and (run_dir / ".hydra" / "config.yaml").is_file()


def test_resume_continues_the_iteration_count_and_state(tmp_path, trained):
    """Resume from model_1 continues at iteration 2 with the saved weights and adaptive learning rate."""
    from navexp.learn.runner import NavRunner

    run_dir = trained
    saved = torch.load(run_dir / "model_1.pt", map_location="cpu", weights_only=False)
    seen = {}
    original = NavRunner.load_for_resume

    def spy(self, ckpt):
        original(self, ckpt)
        seen["lr"] = self.alg.learning_rate
        seen["w"] = self.alg.actor.mlp[0].weight.detach().clone()
        seen["norm"] = self.alg.actor.obs_normalizer._mean.clone()
        seen["it"] = self.current_learning_iteration

    NavRunner.load_for_resume = spy
    try:
        cfg = compose_config([*RUN, "ppo.max_iterations=4", f"resume={run_dir}"])
        run(cfg, tmp_path / "unused", [*RUN, "ppo.max_iterations=4"], quiet=True)
    finally:
        NavRunner.load_for_resume = original
    assert seen["it"] == 2
    assert torch.equal(seen["w"], saved["actor_state_dict"]["mlp.0.weight"])
    assert torch.equal(seen["norm"], saved["actor_state_dict"]["obs_normalizer._mean"])
    assert seen["lr"] == saved["optimizer_state_dict"]["param_groups"][0]["lr"]
    final = torch.load(run_dir / "model_3.pt", map_location="cpu", weights_only=False)
    assert final["iter"] == 3
    steps = sorted({s for s, _ in scalars(run_dir)["Loss/value"]})
    assert steps == [0, 1, 2, 3]  # the curves continue in the same run directory


def test_interrupt_writes_a_loadable_checkpoint(tmp_path, monkeypatch):
    """Ctrl-C during the 3rd rollout: a checkpoint of the last finished iteration is written and loads."""
    from navexp.learn.checkpoint import load_checkpoint
    from navexp.task.env import NavEnv

    calls = {"n": 0}
    step = NavEnv.step

    def interrupting_step(self, actions):
        calls["n"] += 1
        if calls["n"] == 16 + 16 + 5:  # two full 16-step rollouts, then 5 steps into the third
            raise KeyboardInterrupt
        return step(self, actions)

    monkeypatch.setattr(NavEnv, "step", interrupting_step)
    with pytest.raises(KeyboardInterrupt):
        train(tmp_path, "ppo.max_iterations=10", "ppo.save_interval=100")
    ckpt = load_checkpoint(tmp_path / "run" / "model_1.pt")
    assert ckpt["iter"] == 1 and not list((tmp_path / "run").glob("*.tmp"))


def test_bad_resume_fails_clearly_and_touches_nothing(tmp_path, trained):
    """Missing, truncated and incompatible checkpoints raise with the reason; the run dir is unchanged."""
    run_dir = trained
    before = sorted(os.listdir(run_dir))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        run(compose_config([*RUN, f"resume={tmp_path}/nope.pt"]), tmp_path / "x", RUN)
    bad = run_dir / "model_9.pt"
    bad.write_bytes((run_dir / "model_1.pt").read_bytes()[:1000])
    with pytest.raises(ValueError, match="not a loadable torch file"):
        run(compose_config([*RUN, f"resume={bad}"]), tmp_path / "x", RUN)
    bad.unlink()
    with pytest.raises(ValueError, match=r"(?s)trained on observation layout.*this config produces"):
        run(
            compose_config([*RUN, "obs.terms.action_prev.enabled=true", f"resume={run_dir}"]),
            tmp_path / "x",
            RUN,
        )
    assert sorted(os.listdir(run_dir)) == before and not (tmp_path / "x").exists()


def test_non_finite_loss_stops_with_iteration_and_last_checkpoint(tmp_path, monkeypatch):
    from rsl_rl.algorithms import PPO

    from navexp.learn.runner import NonFiniteLossError

    update = PPO.update
    calls = {"n": 0}

    def nan_on_second(self):
        calls["n"] += 1
        losses = update(self)
        if calls["n"] == 2:
            losses["value"] = float("nan")
        return losses

    monkeypatch.setattr(PPO, "update", nan_on_second)
    with pytest.raises(
        NonFiniteLossError, match=r"iteration 1: \{'value': nan\}; last good checkpoint: .*model_0.pt"
    ):
        train(tmp_path, "ppo.max_iterations=3")


def test_wandb_offline_run_has_config_and_metrics(tmp_path):
    """logger=wandb writes <run>/wandb/offline-run-*/ with the resolved config and the eval summary."""
    _, run_dir = train(tmp_path, "logger=wandb", "logger.group=unit", "logger.tags=[test]")
    runs = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    # wandb 0.31 keeps offline runs in one protobuf record file (synced later by `wandb sync`); its
    # records hold keys and string values as plain bytes, so check them there.
    records = next(runs[0].glob("run-*.wandb")).read_bytes()
    for key in [
        b"desired_kl",
        b"num_steps_per_env",
        b"Loss/value",
        b"Metrics/success_rate",
        b"Eval/success_rate",
        b"Eval/video",
        b"unit",
        b"test",
    ]:
        assert key in records, key
    info = json.loads((run_dir / "run_info.json").read_text())
    assert info["wandb_run_id"] and info["wandb_run_id"] in runs[0].name
    assert "Loss/value" in scalars(run_dir)  # TensorBoard events are written alongside
    # The final evaluation's GIF (eval.video_episodes=2) is a W&B video file of the run.
    (video,) = runs[0].glob("files/media/videos/Eval/video_*.gif")
    assert video.read_bytes() == (run_dir / "plots" / "eval.gif").read_bytes()


def test_wandb_failure_degrades_to_tensorboard(tmp_path, monkeypatch):
    import wandb

    def broken(*a, **k):
        raise RuntimeError("no network")

    monkeypatch.setattr(wandb, "init", broken)
    with pytest.warns(UserWarning, match="W&B init failed"):
        _, run_dir = train(tmp_path, "logger=wandb")
    assert "Loss/value" in scalars(run_dir) and (run_dir / "eval.json").is_file()


def test_evaluate_cli_scores_a_checkpoint(tmp_path, trained):
    """`python -m navexp.evaluate checkpoint=<run dir>` counts exactly the asked
    episodes and writes eval.json."""
    from navexp import evaluate

    run_dir = trained
    metrics = evaluate.main([f"checkpoint={run_dir}", "eval.num_episodes=7", f"out={tmp_path / 'e.json'}"])
    assert metrics["num_episodes"] == 7 and metrics["checkpoint"].endswith("model_1.pt")
    written = json.loads((tmp_path / "e.json").read_text())
    assert written["num_episodes"] == 7
    junk = tmp_path / "junk.pt"
    junk.write_text("not a checkpoint")
    with pytest.raises(ValueError, match="not a loadable torch file"):
        evaluate.main([f"checkpoint={junk}"])


def test_wilson_interval_hand_computed():
    """8 of 10: p = 0.8, z = 1.96 -> [0.4902, 0.9433] (Wilson score interval)."""
    from navexp.analysis.nav_metrics import wilson_interval

    lo, hi = wilson_interval(8, 10)
    assert abs(lo - 0.4902) < 1e-4 and abs(hi - 0.9433) < 1e-4


def test_a_time_budget_stops_after_the_iteration_that_reaches_it_then_evaluates(tmp_path):
    """ppo.max_minutes=1e-6 with ppo.max_iterations=50 and save_interval=100: the budget is spent by
    the end of iteration 0, so training stops there, model_0.pt holds iteration 0, and the final
    evaluation still runs (eval.json over its 6 episodes)."""
    _, run_dir = train(tmp_path, "ppo.max_iterations=50", "ppo.save_interval=100", "ppo.max_minutes=1e-6")
    assert sorted(p.name for p in run_dir.glob("model_*.pt")) == ["model_0.pt"]
    assert torch.load(run_dir / "model_0.pt", map_location="cpu", weights_only=False)["iter"] == 0
    assert json.loads((run_dir / "eval.json").read_text())["num_episodes"] == 6


def test_a_time_budget_of_zero_is_refused_naming_the_key(tmp_path):
    with pytest.raises(ValueError, match=r"ppo.max_minutes=0.0 is invalid; allowed: minutes > 0, or null"):
        train(tmp_path, "ppo.max_minutes=0")


def test_evaluate_shows_progress_and_a_short_summary(tmp_path, trained, capsys, monkeypatch):
    """While episodes run, `[navexp] evaluation: k/7 episodes` lines (here one per step: the interval
    set to 0); at the end a summary of at most 3 lines, not the 70-line JSON printed before; the file
    holds every metric."""
    from navexp import evaluate
    from navexp.analysis import rollout

    monkeypatch.setattr(rollout, "PROGRESS_EVERY_S", 0.0)
    evaluate.main([f"checkpoint={trained}", "eval.num_episodes=7", f"out={tmp_path / 'e.json'}"])
    lines = capsys.readouterr().out.splitlines()
    progress = [ln for ln in lines if ln.startswith("[navexp] evaluation: ") and ln.endswith("/7 episodes")]
    counts = [int(ln.split(": ")[1].split("/")[0]) for ln in progress]
    assert counts and counts == sorted(counts) and counts[-1] <= 7
    rest = [ln for ln in lines if ln not in progress]
    assert rest[0].startswith("[navexp] evaluation: 7 episodes on ") and len(rest) <= 4, lines
    (summary,) = [ln for ln in rest if ln.startswith("[navexp] 7 episodes: success ")]
    assert "95 % interval" in summary and "collision" in summary and "{" not in "".join(lines)
    written = json.loads((tmp_path / "e.json").read_text())
    assert written["num_episodes"] == 7 and "by_family" in written and "ci95" in written
