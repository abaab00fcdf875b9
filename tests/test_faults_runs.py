"""Faults and data loss of a run's life (issue 22): divergence keeps the last good iteration, a run
directory is claimed before Hydra writes into it, a refused launch or a resume leaves no stray
directory, a resume applies what it changes and keeps every earlier segment's records, and a stop in
the final evaluation says what survived. Under torchrun, rank 0 saves when a peer rank dies
(tests/test_distributed.py)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import NO_MEDIA, TINY
from omegaconf import OmegaConf

from navexp import compose_config
from navexp.experiment.launch import resume_overrides_argv
from navexp.learn.runner import NonFiniteLossError
from navexp.train import run

ROOT = Path(__file__).resolve().parents[1]
RUN = [*TINY, *NO_MEDIA, "eval.enabled=false", "size=none"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "offline"}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ckpt_names(run_dir: Path) -> list[str]:
    return sorted(p.name for p in run_dir.glob("model_*.pt"))


def app(cwd: Path, *overrides: str, **kw) -> subprocess.Popen:
    """``python -m navexp.train <overrides>`` in ``cwd`` (stdout and stderr together)."""
    return subprocess.Popen(
        [sys.executable, "-m", "navexp.train", *overrides],
        cwd=cwd,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kw,
    )


# -- divergence: the last good iteration, never a checkpoint of a broken policy ---------------------
def test_an_update_that_breaks_the_policy_stops_before_any_checkpoint(tmp_path):
    """ppo.algorithm.learning_rate=1e30 (fixed, one epoch, one mini-batch): the first update leaves finite
    weights of about 1e30 whose actions are inf. Stopped at iteration 0 naming the probe, and no
    model_0.pt holding that policy is written."""
    overrides = [
        *RUN,
        "ppo.algorithm.learning_rate=1e30",
        "ppo.algorithm.schedule=fixed",
        "ppo.algorithm.num_learning_epochs=1",
        "ppo.algorithm.num_mini_batches=1",
    ]
    with pytest.raises(
        NonFiniteLossError,
        match=r"the PPO update of iteration 0 left a policy whose actions are NaN/inf on 4 of the 4 "
        r"worlds' current observations \(learning rate 1e\+30\); last good checkpoint: none",
    ):
        run(compose_config(overrides), tmp_path / "run", overrides, quiet=True)
    assert ckpt_names(tmp_path / "run") == []


def test_a_later_divergence_saves_the_last_good_iteration_from_memory(tmp_path, monkeypatch):
    """save_interval=100: only model_0.pt is on disk when the update of iteration 2 scales the actor's
    weights by 1e30. The stop writes model_1.pt (iteration 1, kept in memory) and names it; its
    policy gives finite actions."""
    from rsl_rl.algorithms import PPO

    update, calls = PPO.update, {"n": 0}

    def blow_up_third(self):
        losses = update(self)
        calls["n"] += 1
        if calls["n"] == 3:
            with torch.no_grad():
                for p in self.actor.parameters():
                    p.mul_(1e30)
        return losses

    monkeypatch.setattr(PPO, "update", blow_up_third)
    overrides = [*RUN, "ppo.max_iterations=5", "ppo.save_interval=100"]
    run_dir = tmp_path / "run"
    with pytest.raises(NonFiniteLossError, match=r"iteration 2 .*last good checkpoint: .*model_1\.pt"):
        run(compose_config(overrides), run_dir, overrides, quiet=True)
    assert ckpt_names(run_dir) == ["model_0.pt", "model_1.pt"]
    ckpt = torch.load(run_dir / "model_1.pt", map_location="cpu", weights_only=False)
    assert ckpt["iter"] == 1
    assert all(torch.isfinite(v).all() and v.abs().max() < 1e6 for v in ckpt["actor_state_dict"].values())
    assert ckpt["infos"]["obs_layout"]  # a full checkpoint: resume and evaluate can read it


# -- the run directory: claimed before Hydra writes, nothing left by a refused launch ---------------
def hydra_cfg(run_dir: Path, *overrides: str):
    """The app's config with the ``hydra`` keys the run-directory callback reads."""
    cfg = compose_config([*RUN, *overrides])
    OmegaConf.set_struct(cfg, False)
    return OmegaConf.merge(cfg, {"hydra": {"run": {"dir": str(run_dir)}, "job": {"name": "train"}}})


def test_the_guard_holds_its_claim_until_the_launch_ends(tmp_path):
    """The Hydra callback claims hydra.run.dir before Hydra writes .hydra/ and keeps it: a second launch
    into the same directory is refused at its own start, naming the owner. When the first launch ends
    without writing anything of its own, no directory is left."""
    from navexp.experiment.rundir import RunDirGuard

    run_dir = tmp_path / "run"
    first = RunDirGuard()
    first.on_run_start(hydra_cfg(run_dir))
    assert sorted(p.name for p in run_dir.iterdir()) == [".navexp.lock"]
    with pytest.raises(SystemExit, match=rf"in use by another training \(pid {os.getpid()} on host"):
        RunDirGuard().on_run_start(hydra_cfg(run_dir, "seed=2"))
    first.on_run_end(hydra_cfg(run_dir))
    assert not run_dir.exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["ppo.max_iterations=0"],
            r"^Error: ppo config: ppo.max_iterations=0 is invalid; allowed: an integer >= 1$",
        ),
        (  # an old name (ppo.clip_param) is checked under its new one
            ["ppo.clip_param=1.5"],
            r"^Error: ppo config: ppo.algorithm.clip_param=1.5 is invalid; allowed: 0 < value <= 1$",
        ),
        (  # a curriculum end the env refuses: one line too, not a traceback from inside the training
            ["curriculum=success", "curriculum.easy.cylinder_count=[0,20]"],
            r"^Error: curriculum config: curriculum.easy \(level 0\) gives an invalid env config: "
            r"obstacles.cylinder_count=\[0, 20\] is invalid; allowed: max <= obstacles.cylinder_slots \(8\)$",
        ),
        (
            ["curriculum=success", "curriculum.promote_above=1.5"],
            r"^Error: curriculum config: curriculum.promote_above=1.5",
        ),
        (  # a typo in the W&B mode: before, a traceback after config.yaml and train.log were written
            ["logger=wandb", "logger.mode=onlin"],
            r"^Error: logger config: logger.mode='onlin' is invalid; allowed: offline \| online \| disabled$",
        ),
        (
            ["logger.type=foo"],
            r"^Error: logger config: logger.type='foo' is invalid; allowed: tensorboard \| wandb$",
        ),
    ],
)
def test_the_guard_refuses_a_bad_config_before_any_directory(tmp_path, overrides, message):
    """Refused by the callback in one line naming the key, the value and what is allowed, before the run
    dir exists."""
    from navexp.experiment.rundir import RunDirGuard

    with pytest.raises(SystemExit, match=message):
        RunDirGuard().on_run_start(hydra_cfg(tmp_path / "run", *overrides))
    assert not (tmp_path / "run").exists()


@pytest.mark.e2e
def test_a_second_launch_on_one_run_dir_never_touches_the_first_ones_files(tmp_path):
    """Two `python -m navexp.train hydra.run.dir=run` launches, the second (seed=2) while the first
    (seed=1) trains: the second is refused naming the owner, and the first's .hydra/ still records
    seed=1, byte for byte."""
    first = app(tmp_path, *RUN, "seed=1", "ppo.max_iterations=400", "hydra.run.dir=run")
    try:
        for line in first.stdout:
            if line.startswith("[navexp] it"):
                break
        hydra_files = {p.name: sha(p) for p in (tmp_path / "run" / ".hydra").iterdir()}
        second = app(tmp_path, *RUN, "seed=2", "hydra.run.dir=run")
        out, _ = second.communicate(timeout=300)
        assert second.returncode != 0 and f"in use by another training (pid {first.pid}" in out, out[-2000:]
        assert {p.name: sha(p) for p in (tmp_path / "run" / ".hydra").iterdir()} == hydra_files
        assert "seed=1" in (tmp_path / "run" / ".hydra" / "overrides.yaml").read_text()
    finally:
        first.kill()
        first.wait()


@pytest.mark.e2e
def test_refused_launches_and_resumes_leave_no_stray_run_dir(tmp_path):
    """A launch with a bad value and one with a missing checkpoint create no outputs/ folder; a resume
    trains in its run's directory, puts Hydra's copy of its config under .hydra/resume_<time>/, keeps
    the first launch's .hydra/ and creates no outputs/ folder either. Given only ``resume=run
    ppo.max_iterations=3``, it continues the run's own config (4 worlds, 1 s episodes, ...): the
    only change it records is ppo.max_iterations."""
    for bad, message in [
        ("ppo.max_iterations=0", "ppo.max_iterations=0 is invalid; allowed: an integer >= 1"),
        ("resume=nowhere/model_3.pt", "checkpoint: nowhere/model_3.pt does not exist"),
    ]:
        out, _ = app(tmp_path, *RUN, bad).communicate(timeout=300)
        assert message in out, out[-2000:]
        assert not (tmp_path / "outputs").exists()
    proc = app(tmp_path, *RUN, "hydra.run.dir=run")
    assert proc.wait(timeout=300) == 0, proc.stdout.read()[-2000:]
    first_hydra = {p.name: sha(p) for p in (tmp_path / "run" / ".hydra").iterdir() if p.is_file()}
    proc = app(tmp_path, "resume=run", "ppo.max_iterations=3")
    out = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0, out[-2000:]
    assert "[navexp] resume: the run's overrides env.device=cpu env.num_envs=4" in out, out[-2000:]
    info = json.loads((tmp_path / "run" / "run_info.json").read_text())
    assert info["segments"][1]["changed"] == {"ppo.max_iterations": [2, 3]}
    assert not (tmp_path / "outputs").exists()
    hydra_dir = tmp_path / "run" / ".hydra"
    assert {p.name: sha(p) for p in hydra_dir.iterdir() if p.is_file()} == first_hydra
    (resume_copy,) = hydra_dir.glob("resume_*")
    assert "ppo.max_iterations=3" in (resume_copy / "overrides.yaml").read_text()
    assert ckpt_names(tmp_path / "run") == ["model_0.pt", "model_1.pt", "model_2.pt"]


# -- a resume applies what it changes and keeps every earlier segment's records ---------------------
def test_a_resume_applies_a_changed_learning_rate_and_keeps_the_first_segments_records(tmp_path):
    """Train 2 iterations (adaptive rate from 3e-4, with a 4-episode evaluation), then resume with
    ppo.algorithm.learning_rate=0.0123 ppo.algorithm.schedule=fixed for one more: the optimizer trains
    at 0.0123 (the checkpoint's adapted rate is replaced, said on stdout), config.yaml says 0.0123 / fixed,
    run_info.json keeps the first launch's created/argv and lists both segments with the changed
    keys (not env.device: auto resolves to the run's cpu) and each one's device and worlds, and the
    first segment's config.yaml and eval.json are kept under segments/1/ unchanged."""
    run_dir = tmp_path / "run"
    first = [*TINY, *NO_MEDIA, "eval.num_episodes=4", "size=none"]
    run(compose_config(first), run_dir, first, quiet=True)
    info0 = json.loads((run_dir / "run_info.json").read_text())
    config0, eval0 = sha(run_dir / "config.yaml"), sha(run_dir / "eval.json")

    second = [
        *first,
        "ppo.algorithm.learning_rate=0.0123",
        "ppo.algorithm.schedule=fixed",
        "ppo.max_iterations=3",
    ]
    second += [f"resume={run_dir}", "env.device=auto" if not torch.cuda.is_available() else "env.device=cpu"]
    run(compose_config(second), run_dir, second, quiet=True)

    ckpt = torch.load(run_dir / "model_2.pt", map_location="cpu", weights_only=False)
    assert [g["lr"] for g in ckpt["optimizer_state_dict"]["param_groups"]] == [0.0123]
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert (
        cfg["ppo"]["algorithm"]["learning_rate"] == 0.0123 and cfg["ppo"]["algorithm"]["schedule"] == "fixed"
    )
    info = json.loads((run_dir / "run_info.json").read_text())
    assert info["created"] == info0["created"] and info["argv"] == info0["argv"]
    assert [s["start_iteration"] for s in info["segments"]] == [0, 2]
    assert info["segments"][0]["started"] == info0["created"]
    changed = info["segments"][1]["changed"]
    assert changed["ppo.algorithm.learning_rate"] == [0.0003, 0.0123]
    assert changed["ppo.algorithm.schedule"] == ["adaptive", "fixed"]
    assert changed["ppo.max_iterations"] == [2, 3]
    assert "env.device" not in changed  # cpu, then auto resolving to cpu: the same device
    assert [(s["device"], s["world_size"], s["num_envs_total"]) for s in info["segments"]] == [
        ("cpu", 1, 4)
    ] * 2
    assert info["segments"][1]["resumed_from"] == str(run_dir / "model_1.pt")
    assert sha(run_dir / "segments" / "1" / "config.yaml") == config0
    assert sha(run_dir / "segments" / "1" / "eval.json") == eval0
    assert json.loads((run_dir / "eval.json").read_text())["checkpoint"].endswith("model_2.pt")


# -- a stop during the final evaluation ----------------------------------------------------------
@pytest.mark.e2e
def test_sigterm_during_the_final_evaluation_says_what_survived(tmp_path):
    """SIGTERM once the final evaluation has started: a message naming the saved checkpoint and how to
    evaluate it, no traceback, exit status 143 (128 + SIGTERM); no eval.json; the final checkpoint is
    there."""
    proc = app(tmp_path, *TINY, *NO_MEDIA, "eval.num_episodes=100000", "size=none", "hydra.run.dir=run")
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("[navexp] final evaluation"):
            proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    out = "".join(lines)
    run_dir = tmp_path / "run"
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in out, out[-2000:]  # its message only
    assert (
        f"[navexp] interrupted during the final evaluation: training finished and is saved in "
        f"{run_dir / 'model_1.pt'}; eval.json was not written" in out
    ), out[-2000:]
    assert ckpt_names(run_dir) == ["model_0.pt", "model_1.pt"] and not (run_dir / "eval.json").exists()


def test_a_sigterm_that_a_library_turns_into_its_own_error_is_still_the_interruption(
    tmp_path, monkeypatch, capsys
):
    """A SIGTERM whose KeyboardInterrupt a library replaces with its own error (omegaconf's cleanup
    after an interrupted merge raised AttributeError, seen as 'suite ...: NoneType object has no
    attribute _invalidate_flags_cache') still ends as the interruption, naming the saved checkpoint."""
    from navexp.experiment.training import TrainingRun

    def finish_mangled(*args, **kwargs):
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler raises KeyboardInterrupt right here
        except KeyboardInterrupt:
            raise AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'") from None
        raise AssertionError("the SIGTERM handler did not run")

    monkeypatch.setattr(TrainingRun, "finish", finish_mangled)
    overrides = [*TINY, *NO_MEDIA, "size=none"]
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt, match="signal 15"):
        run(compose_config(overrides), tmp_path / "run", overrides, quiet=True)
    saved = tmp_path / "run" / "model_1.pt"
    assert f"interrupted during the final evaluation: training finished and is saved in {saved}" in (
        capsys.readouterr().out
    )
    assert saved.is_file() and signal.getsignal(signal.SIGTERM) is before  # the handler is put back


def test_the_guard_leaves_other_torchrun_ranks_alone(tmp_path, monkeypatch):
    """Under torchrun only rank 0 owns the run directory: on RANK=1 the callback neither validates,
    locks nor removes anything (its hydra.run.dir is '.', which may hold anything)."""
    from navexp.experiment.rundir import LOCK_NAME, RunDirGuard

    (tmp_path / "config.yaml").write_text("a run's file\n")
    monkeypatch.setenv("RANK", "1")
    guard = RunDirGuard()
    cfg = hydra_cfg(tmp_path, "ppo.max_iterations=0")  # invalid, and a directory holding a run
    guard.on_run_start(cfg)
    assert not (tmp_path / LOCK_NAME).exists()
    guard.on_run_end(cfg)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]


def test_write_atomic_leaves_no_temporary_file_when_interrupted(tmp_path, monkeypatch):
    """Ctrl-C during the fsync of a write: the KeyboardInterrupt goes on, the previous file is
    unchanged and no hidden temporary file is left in the directory."""
    from navexp.learn import checkpoint

    target = tmp_path / "eval.json"
    target.write_text('{"old": 1}')

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.write_atomic(target, '{"new": 2}')
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.json"]
    assert target.read_text() == '{"old": 1}'


def test_a_resume_repeats_the_runs_latest_overrides_and_the_command_line_wins(tmp_path):
    """``resume=<run>`` alone used to compose the default env and reward: now the run's latest
    overrides (a resume segment's record over the first launch's, if that resume trained: it is in
    run_info.json's segments) go first and this command line's follow, a key given here (or deleted
    with ~) replacing the run's; hydra.*, sweep.* and resume keys are not repeated, and a recorded
    ${...} stays text."""
    run_dir = tmp_path / "run"
    stamp = "resume_2026-01-01_00-00-00_000000"
    (run_dir / ".hydra" / stamp).mkdir(parents=True)
    (run_dir / ".hydra" / "resume_2026-01-02_00-00-00_000000").mkdir()  # refused: no segment
    (run_dir / "model_3.pt").write_bytes(b"")
    (run_dir / ".hydra" / "overrides.yaml").write_text("- env=room\n- seed=7\n")
    latest = ["env=traps", "reward=path", "seed=1", "size=cpu", "ppo.max_iterations=350", "resume=old"]
    latest += ["sweep.trial_id=3", "experiment_name=run_${seed}", "ppo.algorithm.gamma=0.98"]
    (run_dir / ".hydra" / stamp / "overrides.yaml").write_text(yaml.dump(latest))
    refused = run_dir / ".hydra" / "resume_2026-01-02_00-00-00_000000" / "overrides.yaml"
    refused.write_text(yaml.dump(["env=empty"]))
    segment = {"argv": ["train.py", f"hydra.output_subdir=.hydra/{stamp}"]}
    (run_dir / "run_info.json").write_text(json.dumps({"segments": [{"argv": ["train.py"]}, segment]}))
    argv = ["train.py", f"resume={run_dir}", "ppo.max_iterations=700", "~ppo.algorithm.gamma"]
    got = resume_overrides_argv(argv)
    inherited = ["env=traps", "reward=path", "seed=1", "size=cpu", "experiment_name=run_${seed}"]
    assert got == ["train.py", *inherited, *argv[1:]]
    assert compose_config(inherited).env.episode_length_s == 40.0  # env=traps: 40 s episodes
    (run_dir / ".hydra" / stamp / "overrides.yaml").unlink()
    assert resume_overrides_argv(argv) == ["train.py", "env=room", "seed=7", *argv[1:]]


def test_a_resume_with_nothing_left_to_train_logs_its_evaluation(tmp_path):
    """The way back from an interrupted final evaluation: a run trained to ppo.max_iterations without
    its evaluation, resumed with nothing left to train, writes eval.json and logs the evaluation to
    TensorBoard too (before, no writer was started: eval.json only)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir = tmp_path / "run"
    run(compose_config(RUN), run_dir, RUN, quiet=True)
    again = [*RUN, "eval.enabled=true", "eval.num_episodes=2", f"resume={run_dir}"]
    run(compose_config(again), run_dir, again, quiet=True)
    success = json.loads((run_dir / "eval.json").read_text())["success_rate"]
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    assert [e.value for e in events.Scalars("Eval/success_rate")] == [pytest.approx(success)]


@pytest.mark.e2e
def test_map_settings_no_layout_satisfies_end_the_app_in_one_line(tmp_path):
    """A grid-only mix at fill 0.9-1.0 with the free-path check has no static bound; its first draw finds
    no layout with a path. The app ends with one `Error:` line naming maps.grid.fill (exit 1), no
    traceback, and no run directory left."""
    grid_only = "env.maps.weights={random:0,corridor:0,staggered:0,cul_de_sac:0,cluttered:0,grid:1}"
    bad = ["env=families", grid_only, "env.maps.grid.fill=[0.9,1.0]", "env.maps.check_path=true"]
    proc = app(tmp_path, *RUN, *bad, "hydra.run.dir=run")
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1 and "Traceback" not in out, out[-2000:]
    assert "Error: env config: layout sampling (map family 'grid')" in out and "lower maps.grid.fill" in out
    assert not (tmp_path / "run").exists()


def test_a_resume_matches_a_runs_old_key_names_with_this_command_lines_new_ones(tmp_path, capsys):
    """A run recorded before the ppo sections (``ppo.learning_rate=0.001``) resumed with
    ``ppo.algorithm.learning_rate=0.002``: the record's key is today's name, so this command line's
    replaces it (one override, not both), and the record is translated without the old-name notice."""
    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / "model_3.pt").write_bytes(b"")
    (run_dir / ".hydra" / "overrides.yaml").write_text(
        "- seed=7\n- ppo.learning_rate=0.001\n- ppo.model=rnn\n"
    )
    argv = ["train.py", f"resume={run_dir}", "ppo.algorithm.learning_rate=0.002"]
    got = resume_overrides_argv(argv)
    assert got == ["train.py", "seed=7", "ppo.policy.model=rnn", *argv[1:]]
    assert "is now" not in capsys.readouterr().err
