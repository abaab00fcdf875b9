"""The run's policy as the average of its last checkpoints (``ppo.average_checkpoints``): the weights are
the mean of the files averaged, the final evaluation and evaluate/export/play read the average, resume
keeps to the training state."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from conftest import NO_MEDIA, TINY
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from navexp import compose_config
from navexp.learn.checkpoint import (
    average_checkpoints,
    find_checkpoints,
    load_checkpoint,
    resolve_checkpoint,
    resolve_policy,
    save_atomic,
    write_averaged_policy,
)
from navexp.train import run

RUN = [*TINY, *NO_MEDIA, "ppo.save_interval=1", "ppo.max_iterations=3", "eval.num_episodes=4", "size=none"]


def _fake(path: Path, it: int, weight: float, count: int, width: int = 2) -> Path:
    """A checkpoint with one weight tensor filled with ``weight`` and an integer normalizer count."""
    tensors = {"mlp.0.weight": torch.full((width, 3), weight), "obs_normalizer.count": torch.tensor(count)}
    save_atomic(
        {
            "actor_state_dict": dict(tensors),
            "critic_state_dict": {"mlp.0.weight": torch.full((1, 3), 10 * weight)},
            "optimizer_state_dict": {"param_groups": [{"lr": 1e-3}]},
            "iter": it,
            "infos": {"model": {"kind": "mlp"}},
        },
        path / f"model_{it}.pt",
    )
    return path / f"model_{it}.pt"


def test_the_average_is_the_mean_of_every_float_tensor(tmp_path):
    """Weights 1, 2 and 6 average to 3 (the critic's 10, 20, 60 to 30); the count, the iteration and the
    infos come from the last file; no optimizer state; the iterations averaged are recorded."""
    paths = [_fake(tmp_path, 10, 1.0, 100), _fake(tmp_path, 20, 2.0, 200), _fake(tmp_path, 30, 6.0, 300)]
    avg = average_checkpoints(paths)
    assert torch.equal(avg["actor_state_dict"]["mlp.0.weight"], torch.full((2, 3), 3.0))
    assert torch.equal(avg["critic_state_dict"]["mlp.0.weight"], torch.full((1, 3), 30.0))
    assert avg["actor_state_dict"]["obs_normalizer.count"].item() == 300
    assert avg["iter"] == 30 and avg["optimizer_state_dict"] == {}
    assert avg["infos"] == {"model": {"kind": "mlp"}, "averaged_from": [10, 20, 30]}


def test_checkpoints_of_another_shape_are_refused_naming_the_tensor(tmp_path):
    a = _fake(tmp_path, 10, 1.0, 1, width=2)
    b = _fake(tmp_path, 20, 1.0, 1, width=4)
    with pytest.raises(
        ValueError, match=r"actor_state_dict\.mlp\.0\.weight has shape \(2, 3\) against \(4, 3\)"
    ):
        average_checkpoints([a, b])


def test_a_run_directory_means_its_average_only_at_its_latest_iteration(tmp_path):
    """evaluate/export/play of a run dir read model_20_avg2.pt; once a resume saved model_30.pt the stale
    average is passed over; resume (resolve_checkpoint) and the checkpoint list never see an average."""
    _fake(tmp_path, 10, 1.0, 1)
    _fake(tmp_path, 20, 3.0, 1)
    save_atomic(average_checkpoints(find_checkpoints(tmp_path)), tmp_path / "model_20_avg2.pt")
    assert resolve_policy(tmp_path).name == "model_20_avg2.pt"
    assert resolve_checkpoint(tmp_path).name == "model_20.pt"
    assert [p.name for p in find_checkpoints(tmp_path)] == ["model_10.pt", "model_20.pt"]
    assert resolve_policy(tmp_path / "model_20.pt").name == "model_20.pt"  # a file is taken as given
    _fake(tmp_path, 30, 5.0, 1)
    assert resolve_policy(tmp_path).name == "model_30.pt"


def test_the_average_ends_at_the_runs_last_checkpoint(tmp_path):
    """A run resumed from model_20.pt in a directory that still holds model_30.pt (left by the first
    launch) averages its own last two, model_10 and model_20: weights 1 and 3 give 2."""
    for it, w in ((10, 1.0), (20, 3.0), (30, 50.0)):
        _fake(tmp_path, it, w, 1)
    path = write_averaged_policy(tmp_path, 2, last=tmp_path / "model_20.pt")
    assert path == tmp_path / "model_20_avg2.pt"
    avg = load_checkpoint(path)
    assert avg["infos"]["averaged_from"] == [10, 20]
    assert torch.equal(avg["actor_state_dict"]["mlp.0.weight"], torch.full((2, 3), 2.0))
    assert (
        write_averaged_policy(tmp_path, 2, last=tmp_path / "model_10.pt") is None
    )  # one: nothing to average


def test_a_run_averages_its_last_checkpoints_and_evaluates_the_average(tmp_path, monkeypatch):
    """A 3-iteration run saving every iteration with ppo.average_checkpoints=2: model_2_avg2.pt holds the
    mean of model_1.pt and model_2.pt, the final evaluation ran that policy and eval.json names it,
    `navexp.evaluate` and `navexp.export` of the run dir read it, and resume refuses it, naming model_2.pt."""
    import navexp.experiment.training as training
    from navexp import evaluate
    from navexp.deploy import export

    seen = {}
    original = training.evaluate_and_plot

    def spy(policy, cfg, run_dir):
        seen["state"] = {k: v.detach().cpu().clone() for k, v in policy.state_dict().items()}
        return original(policy, cfg, run_dir)

    monkeypatch.setattr(training, "evaluate_and_plot", spy)
    overrides = [*RUN, "ppo.average_checkpoints=2"]
    run_dir = tmp_path / "run"
    run(compose_config(overrides), run_dir, overrides, quiet=True)

    one, two = (load_checkpoint(run_dir / f"model_{i}.pt") for i in (1, 2))
    avg = load_checkpoint(run_dir / "model_2_avg2.pt")
    assert avg["infos"]["averaged_from"] == [1, 2]
    for name, t in avg["actor_state_dict"].items():
        if torch.is_floating_point(t):
            assert torch.allclose(t, (one["actor_state_dict"][name] + two["actor_state_dict"][name]) / 2)
            assert torch.equal(seen["state"][name], t), name  # the final evaluation ran the average
    assert not torch.equal(avg["actor_state_dict"]["mlp.0.weight"], two["actor_state_dict"]["mlp.0.weight"])
    assert json.loads((run_dir / "eval.json").read_text())["checkpoint"].endswith("model_2_avg2.pt")

    metrics = evaluate.main([f"checkpoint={run_dir}", "eval.num_episodes=2", f"out={tmp_path / 'e.json'}"])
    assert metrics["checkpoint"].endswith("model_2_avg2.pt")
    files = export.main([f"checkpoint={run_dir}", f"out={tmp_path / 'export'}"])
    assert json.loads(files["meta"].read_text())["checkpoint"].endswith("model_2_avg2.pt")

    before = sorted(os.listdir(run_dir))
    with pytest.raises(ValueError, match=r"average of the checkpoints of iterations \[1, 2\].*model_2\.pt"):
        run(compose_config([*overrides, f"resume={run_dir / 'model_2_avg2.pt'}"]), tmp_path / "x", overrides)
    assert sorted(os.listdir(run_dir)) == before


def test_average_checkpoints_below_one_is_refused_naming_the_key(tmp_path):
    overrides = [*RUN, "ppo.average_checkpoints=0"]
    with pytest.raises(ValueError, match=r"ppo\.average_checkpoints=0 is invalid; allowed: an integer >= 1"):
        run(compose_config(overrides), tmp_path / "run", overrides, quiet=True)
    assert not (tmp_path / "run").exists()


def test_a_resume_from_an_earlier_checkpoint_moves_the_later_ones_aside(tmp_path, capsys):
    """A run of iterations 0-2 (model_2_avg2.pt its policy) resumed from model_0.pt to 2 iterations: the
    branch it leaves (model_1.pt, model_2.pt, model_2_avg2.pt, an evaluation of its policy) moves byte
    for byte to segments/1/, so the new model_1.pt overwrites nothing and the run directory's policy is
    the new branch's model_1_avg2.pt (the average of model_0 and the new model_1). TensorBoard's reader
    shows each iteration once, the branch's: steps 0 and 1, not the left branch's 1 and 2 beside it."""
    overrides = [*RUN, "ppo.average_checkpoints=2", "eval.enabled=false"]
    run_dir = tmp_path / "run"
    run(compose_config(overrides), run_dir, overrides, quiet=True)
    (run_dir / "eval_model_2_avg2_run_0_suite-ood.json").write_text("{}")  # as navexp.evaluate leaves it
    old = {name: (run_dir / name).read_bytes() for name in ("model_1.pt", "model_2.pt", "model_2_avg2.pt")}
    old["eval_model_2_avg2_run_0_suite-ood.json"] = b"{}"

    again = [*overrides, "ppo.max_iterations=2"]
    run(compose_config([*again, f"resume={run_dir / 'model_0.pt'}"]), run_dir, again, quiet=True)
    assert (
        "later checkpoints ['model_1.pt', 'model_2.pt', 'model_2_avg2.pt'] moved to"
        in capsys.readouterr().out
    )
    assert {name: (run_dir / "segments" / "1" / name).read_bytes() for name in old} == old
    assert sorted(p.name for p in run_dir.glob("model_*.pt")) == [
        "model_0.pt",
        "model_1.pt",
        "model_1_avg2.pt",
    ]
    assert not list(run_dir.glob("eval_*.json"))  # the left branch's evaluations went with it
    assert (run_dir / "model_1.pt").read_bytes() != old["model_1.pt"]  # trained again from model_0
    assert resolve_policy(run_dir).name == "model_1_avg2.pt"
    assert load_checkpoint(run_dir / "model_1_avg2.pt")["infos"]["averaged_from"] == [0, 1]
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    assert [e.step for e in events.Scalars("Loss/learning_rate")] == [0, 1]


def test_a_policy_that_is_not_the_asked_average_says_so(tmp_path, capsys):
    """ppo.average_checkpoints=4 on a run that saved one checkpoint: the training says its policy is
    model_0.pt, and `navexp.evaluate` of the run directory says it scores model_0.pt, not an average."""
    from navexp import evaluate

    overrides = [*RUN, "ppo.max_iterations=1", "ppo.average_checkpoints=4", "eval.enabled=false"]
    run_dir = tmp_path / "run"
    run(compose_config(overrides), run_dir, overrides, quiet=True)
    assert (
        "ppo.average_checkpoints=4: the run saved fewer than two checkpoints, so its policy is"
        in capsys.readouterr().out
    )
    metrics = evaluate.main([f"checkpoint={run_dir}", "eval.num_episodes=2", f"out={tmp_path / 'e.json'}"])
    assert metrics["checkpoint"].endswith("model_0.pt")
    err = capsys.readouterr().err
    assert "asked for the average of its last 4 checkpoints" in err and "using model_0.pt" in err


def test_the_app_refuses_an_averaged_or_mismatched_resume_in_one_line(tmp_path):
    """The Hydra callback checks the resume source before Hydra writes anything: an averaged policy, and
    a run trained with recipe=traps (a GRU) resumed with recipe=none (an MLP), and a ppo.max_iterations
    below the checkpoint's trained iterations each end in one `Error: ...` line naming the file, and the
    mismatch names both recipes."""
    from navexp.experiment.rundir import RunDirGuard

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for it, w in ((1, 1.0), (2, 3.0)):
        _fake(run_dir, it, w, 1)
    save_atomic(average_checkpoints(find_checkpoints(run_dir)), run_dir / "model_2_avg2.pt")

    def guard(*overrides: str):
        cfg = compose_config([*RUN, *overrides])
        OmegaConf.set_struct(cfg, False)
        cfg = OmegaConf.merge(cfg, {"hydra": {"run": {"dir": str(run_dir)}, "job": {"name": "train"}}})
        RunDirGuard().on_run_start(cfg)

    before = sorted(os.listdir(run_dir))
    with pytest.raises(SystemExit, match=r"^Error: checkpoint .*model_2_avg2\.pt is the average of"):
        guard(f"resume={run_dir / 'model_2_avg2.pt'}")
    ckpt = load_checkpoint(run_dir / "model_2.pt")
    ckpt["infos"].update(model={"kind": "rnn"}, config={"recipe": "traps"})
    ckpt.pop("_path")
    save_atomic(ckpt, run_dir / "model_2.pt")
    with pytest.raises(
        SystemExit,
        match=r"^Error: .*holds a ppo.policy.model='rnn' policy.*recipe=traps; this launch composes "
        r"recipe=none\)",
    ):
        guard(f"resume={run_dir / 'model_2.pt'}", "recipe=none")
    # A budget below what the checkpoint trained (iterations 0-2: 3): the run would record
    # ppo.max_iterations=2 for a policy of 3 iterations.
    with pytest.raises(
        SystemExit,
        match=r"^Error: ppo.max_iterations=2 is below the 3 iterations checkpoint .*model_2\.pt has trained; "
        r"allowed: ppo.max_iterations >= 3 \(3: nothing more to train, only the final evaluation\)",
    ):
        guard(f"resume={run_dir / 'model_2.pt'}", "ppo.max_iterations=2")
    assert sorted(os.listdir(run_dir)) == before


def test_archiving_a_segment_twice_into_one_folder_replaces_nothing(tmp_path):
    """Without run_info.json every resume archives into segments/1/: a second segment's eval.json, a
    differing config.yaml, an evaluation of the same name, the evaluation's figures (plots/) and a play
    (play/) are kept beside the first's (.1), and an identical config.yaml (a retried launch) is not
    copied twice."""
    from navexp.experiment.repro import archive_segment

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for k in (1, 2):
        (run_dir / "config.yaml").write_text(f"seed: {k}\n")
        (run_dir / "eval.json").write_text(f'{{"k": {k}}}')
        (run_dir / "eval_model_9_run_0_suite-ood.json").write_text(f'{{"k": {k}}}')
        (run_dir / "plots").mkdir()
        (run_dir / "plots" / f"failed_{k}_time_out.png").write_text(f"figure {k}")
        (run_dir / "play").mkdir()
        (run_dir / "play" / "metrics.json").write_text(f'{{"k": {k}}}')
        assert archive_segment(run_dir) == run_dir / "segments" / "1"
    segment = run_dir / "segments" / "1"
    assert [p.name for p in (segment / "plots").iterdir()] == ["failed_1_time_out.png"]
    assert [p.name for p in (segment / "plots.1").iterdir()] == ["failed_2_time_out.png"]
    assert (segment / "play.1" / "metrics.json").read_text() == '{"k": 2}'
    assert not (run_dir / "plots").exists() and not (run_dir / "play").exists()
    kept = {p.name: p.read_text() for p in segment.iterdir() if p.is_file()}
    assert kept == {
        "config.yaml": "seed: 1\n",
        "config.1.yaml": "seed: 2\n",
        "eval.json": '{"k": 1}',
        "eval.1.json": '{"k": 2}',
        "eval_model_9_run_0_suite-ood.json": '{"k": 1}',
        "eval_model_9_run_0_suite-ood.1.json": '{"k": 2}',
    }
    assert not (run_dir / "eval.json").exists() and not list(run_dir.glob("eval_*.json"))
    assert archive_segment(run_dir) is None  # config.yaml "seed: 2" is kept already: nothing to do
