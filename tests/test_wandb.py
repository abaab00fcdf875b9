"""What W&B keeps of a run, read back from the offline run file record by record (wandb's protobuf
records): every iteration in the history at step = iteration, summaries, a resumed run continuing the
history, and sweep trials marked as such (job type, tags, config.optuna, state)."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

pytest.importorskip("wandb", reason="wandb is a dependency; this install lacks it (e.g. a packed GPU host)")
import wandb_records as wr  # noqa: E402
from conftest import NO_MEDIA, TINY
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from navexp import compose_config  # noqa: E402
from navexp.train import run  # noqa: E402

RUN = [*TINY, "ppo.save_interval=1", *NO_MEDIA, "size=none", "logger=wandb", "eval.num_episodes=2"]


def scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def run_files(run_dir: Path) -> list[Path]:
    """The run's offline W&B files, oldest first (one per training segment)."""
    return sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))


@pytest.fixture(scope="module")
def resumed(tmp_path_factory) -> Path:
    """4 iterations with logger=wandb, then resumed to 6."""
    run_dir = tmp_path_factory.mktemp("wandb") / "run"
    first = [*RUN, "ppo.max_iterations=4"]
    run(compose_config(first), run_dir, first, quiet=True)
    again = [*RUN, "ppo.max_iterations=6", f"resume={run_dir}"]
    run(compose_config(again), run_dir.parent / "unused", again, quiet=True)
    return run_dir


def test_every_iteration_is_in_the_history_at_step_iteration(resumed):
    """Every per-iteration scalar TensorBoard got over the first 4 iterations (Loss/, Policy/, Perf/,
    Train/, Episode_*/, Metrics/) has 4 W&B history rows at steps 0, 1, 2, 3 with TensorBoard's
    values; rsl_rl's wall-clock series sit in those rows with their own x-axis Perf/wall_time_s."""
    tb = scalars(resumed)
    first = run_files(resumed)[0]
    rows = wr.history(first)
    assert [r["_step"] for r in rows] == [0, 1, 2, 3]
    per_iteration = [t for t, v in tb.items() if [s for s, _ in v][:4] == [0, 1, 2, 3]]
    assert {"Loss/value", "Perf/collect_steps_per_s", "Metrics/success_rate"} <= set(per_iteration)
    assert len(per_iteration) >= 20
    for tag in per_iteration:
        for step, value in tb[tag][:4]:
            assert rows[step][tag] == pytest.approx(value, rel=1e-5, abs=1e-6), (tag, step)
    # The wall-clock series from the first segment's own event file: read with the resume's, its steps
    # (seconds) from 4 on fall to TensorBoard's restart purge at the resume's step 4.
    first_segment = scalars(
        min(resumed.glob("events.out.tfevents.*"), key=lambda p: int(p.name.split(".")[3]))
    )
    for tag in ("Train/mean_reward/time", "Train/mean_episode_length/time"):
        assert all(tag in r for r in rows)
        seconds = [r["Perf/wall_time_s"] for r in rows]
        assert seconds == sorted(seconds) and seconds == [s for s, _ in first_segment[tag]]


def test_the_summary_holds_last_values_success_as_max_and_last_and_the_evaluation(resumed):
    """Summary of the first segment: Loss/value = its last TensorBoard value; Metrics/success_rate =
    {max, last} over the iterations; the final evaluation's Eval/success_rate; state complete."""
    tb = scalars(resumed)
    summary = wr.summary(run_files(resumed)[0])
    assert summary["Loss/value"] == pytest.approx(tb["Loss/value"][3][1], rel=1e-5)
    success = [v for _, v in tb["Metrics/success_rate"][:4]]
    assert summary["Metrics/success_rate"] == pytest.approx({"max": max(success), "last": success[-1]})
    ev = json.loads((resumed / "eval.json").read_text())
    assert summary["Eval/success_rate"] == pytest.approx(ev["success_rate"])
    assert summary["run/state"] == "complete"
    assert wr.run_record(run_files(resumed)[0]).job_type == "train"


def test_a_resumed_run_continues_the_same_history(resumed):
    """The resume writes W&B run <same id> with steps 4 and 5 only: no step dropped or written twice."""
    first, second = run_files(resumed)
    assert wr.run_record(first).run_id == wr.run_record(second).run_id
    assert [r["_step"] for r in wr.history(second)] == [4, 5]
    assert [s for s, _ in scalars(resumed)["Loss/value"]] == [0, 1, 2, 3, 4, 5]


def _trial_overrides(tmp_path: Path, trial: optuna.trial.Trial, storage: str) -> list[str]:
    """What the sweeper adds to a trial's command line (navexp.sweep.sweeper._trial_extras)."""
    return [
        *RUN,
        f"ppo.algorithm.clip_param={trial.params['ppo.algorithm.clip_param']}",
        f"sweep.trial_id={trial._trial_id}",
        f"sweep.trial_number={trial.number}",
        "sweep.study_name=unit",
        f"sweep.storage='{storage}'",
        "logger.group=unit",
        f"logger.name=trial_{trial.number}",
    ]


def test_a_trial_run_says_what_was_searched_and_how_it_ended(tmp_path):
    """A sweep trial's W&B run: job_type trial, group = the study, tags naming the study, objective
    and searched keys, config.optuna = {study, trial_number, params, objectives, directions}; its
    summary the state complete and the objective's value (= eval.json's success rate)."""
    storage = f"sqlite:///{tmp_path}/study.db"
    study = optuna.create_study(study_name="unit", storage=storage, direction="maximize")
    trial = study.ask()
    trial.suggest_float("ppo.algorithm.clip_param", 0.1, 0.3)
    overrides = _trial_overrides(tmp_path, trial, storage)
    run(compose_config(overrides), tmp_path / "trial_0", overrides, quiet=True)
    (file,) = run_files(tmp_path / "trial_0")
    rec = wr.run_record(file)
    assert rec.job_type == "trial" and rec.run_group == "unit"
    assert {"study:unit", "objective:success_rate", "searched:ppo.algorithm.clip_param"} <= set(rec.tags)
    config = {item.key: json.loads(item.value_json) for item in rec.config.update}
    assert config["optuna"] == {
        "study": "unit",
        "trial_number": 0,
        "params": {"ppo.algorithm.clip_param": trial.params["ppo.algorithm.clip_param"]},
        "objectives": ["success_rate"],
        "directions": ["maximize"],
    }
    summary = wr.summary(file)
    ev = json.loads((tmp_path / "trial_0" / "eval.json").read_text())
    assert summary["optuna/state"] == "complete" and summary["optuna/success_rate"] == ev["success_rate"]
    assert wr.exit_code(file) == 0


def test_a_failed_trial_run_is_finished_as_failed(tmp_path, monkeypatch):
    """A trial whose training raises: its W&B run ends with exit code 1 and optuna/state fail, naming
    the error."""
    from navexp.task.env import NavEnv

    def broken(self, *a, **k):
        raise RuntimeError("the simulator fell over")

    monkeypatch.setattr(NavEnv, "step", broken)
    storage = f"sqlite:///{tmp_path}/study.db"
    trial = optuna.create_study(study_name="unit", storage=storage, direction="maximize").ask()
    trial.suggest_float("ppo.algorithm.clip_param", 0.1, 0.3)
    overrides = _trial_overrides(tmp_path, trial, storage)
    with pytest.raises(RuntimeError, match="fell over"):
        run(compose_config(overrides), tmp_path / "trial_0", overrides, quiet=True)
    (file,) = run_files(tmp_path / "trial_0")
    summary = wr.summary(file)
    assert summary["optuna/state"] == "fail" and "the simulator fell over" in summary["run/error"]
    assert wr.exit_code(file) == 1
    # The W&B id is recorded before training starts, so resume= of this run continues this W&B run.
    info = json.loads((tmp_path / "trial_0" / "run_info.json").read_text())
    assert info["wandb_run_id"] == wr.run_record(file).run_id


def test_the_study_run_tables_every_trial_with_its_state(tmp_path):
    """`sweep_report --wandb` on a study of 3 trials (2 complete, 1 failed) writes one W&B run:
    job_type study, group = the study, a trials table of 3 rows (number, state, ppo.algorithm.clip_param,
    success_rate, run_dir) with the failed one as 'fail', and the best trial in the summary."""
    from navexp import sweep_report

    storage = f"sqlite:///{tmp_path}/study.db"
    study = optuna.create_study(study_name="unit", storage=storage, direction="maximize")
    for clip, value in ((0.1, 0.5), (0.2, 0.8), (0.3, None)):
        study.enqueue_trial({"ppo.algorithm.clip_param": clip})
        trial = study.ask()
        trial.suggest_float("ppo.algorithm.clip_param", 0.1, 0.3)
        if value is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, value)
    out = sweep_report.main([str(tmp_path / "study.db"), f"out={tmp_path / 'rep'}", "wandb=offline"])
    (file,) = sorted(out.glob("wandb/offline-run-*/run-*.wandb"))
    rec = wr.run_record(file)
    assert rec.job_type == "study" and rec.run_group == "unit"
    (table,) = sorted(file.parent.glob("files/media/table/trials_*.table.json"))
    data = json.loads(table.read_text())
    assert data["columns"] == ["number", "state", "ppo.algorithm.clip_param", "success_rate", "run_dir"]
    assert [row[:2] for row in data["data"]] == [[0, "complete"], [1, "complete"], [2, "fail"]]
    assert [row[2:4] for row in data["data"]] == [[0.1, 0.5], [0.2, 0.8], [0.3, None]]
    summary = wr.summary(file)
    assert summary["best/trial"] == 1 and summary["best/value"] == 0.8
    assert summary["trial_states"]["FAIL"] == 1
