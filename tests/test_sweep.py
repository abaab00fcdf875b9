"""Optuna studies through Hydra's real sweeper machinery (subprocesses of `python -m navexp.train -m`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import torch
import yaml
from conftest import TINY
from optuna.trial import TrialState

pytestmark = pytest.mark.e2e  # every test here starts `python -m navexp.train -m` processes

ROOT = Path(__file__).parents[1]
RUN = [*TINY, "eval.num_episodes=4"]


def sweep(tmp_path: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run a study whose storage, sweep dirs and report all live under tmp_path."""
    cmd = [
        sys.executable,
        "-m",
        "navexp.train",
        "-m",
        *RUN,
        f"hydra.sweep.dir={tmp_path}/sweep",
        f"sweep.storage=sqlite:///{tmp_path}/study.db",
        "sweep.study_name=unit",
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    if check:
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc


def write_space(tmp_path: Path, text: str) -> Path:
    """A one-off search-space file (config key: sweep expression per line)."""
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return path


def load(tmp_path: Path) -> optuna.Study:
    return optuna.load_study(study_name="unit", storage=f"sqlite:///{tmp_path}/study.db")


def test_default_study_runs_reports_and_continues(tmp_path):
    """3 trials of the default space: stored with all 8 parameters and values; re-runs continue the study."""
    sweep(tmp_path, "hydra/sweeper=optuna", "sweep.n_trials=3")
    study = load(tmp_path)
    trials = study.trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    assert set(trials[0].params) == {
        "reward.terms.goal.weight",
        "reward.terms.progress.weight",
        "reward.terms.collision.weight",
        "reward.terms.near_obstacle.weight",
        "reward.terms.time.weight",
        "reward.terms.timeout.weight",
        "ppo.algorithm.desired_kl",
        "ppo.algorithm.clip_param",
    }
    assert all(0.002 <= t.params["ppo.algorithm.desired_kl"] <= 0.05 for t in trials)
    for t in trials:  # each trial is a full run with its own directory and evaluation
        ev = json.loads((Path(t.user_attrs["run_dir"]) / "eval.json").read_text())
        assert ev["success_rate"] == t.value == t.user_attrs["success_rate"]
    report = tmp_path / "sweep" / "report"  # the sweep's report: <hydra.sweep.dir>/report
    assert (report / "report.md").is_file() and (report / "optimization_history.png").stat().st_size > 1000
    assert (report / "param_vs_success.png").is_file()
    assert json.loads((report / "summary.json").read_text())["trial_states"]["COMPLETE"] == 3
    sweep(tmp_path, "hydra/sweeper=optuna", "sweep.n_trials=3")  # nothing missing: no new trial
    assert len(load(tmp_path).trials) == 3
    sweep(tmp_path, "hydra/sweeper=optuna", "sweep.n_trials=4")
    assert [t.state for t in load(tmp_path).trials] == [TrialState.COMPLETE] * 4


def test_nan_objective_and_crashing_trials_keep_the_study_alive(tmp_path):
    """Grid over eval on/off x beams 72/0: eval off returns NaN, 0 beams crashes; both FAIL, study ends."""
    space = write_space(tmp_path, "eval.enabled: choice(true, false)\nenv.lidar.num_beams: choice(72, 0)\n")
    sweep(
        tmp_path,
        "hydra/sweeper=optuna",
        "hydra/sweeper/sampler=grid",
        f"sweep.space={space}",
        "sweep.n_trials=4",
        "sweep.max_failure_rate=1.0",
    )
    trials = load(tmp_path).trials
    assert len(trials) == 4 and not [t for t in trials if t.state == TrialState.RUNNING]
    by_params = {(t.params["eval.enabled"], t.params["env.lidar.num_beams"]): t for t in trials}
    assert by_params[(True, 72)].state == TrialState.COMPLETE
    assert by_params[(False, 72)].state == TrialState.FAIL
    assert "non-finite objective" in by_params[(False, 72)].user_attrs["fail_reason"]
    assert "lidar.num_beams=0 is invalid" in by_params[(True, 0)].user_attrs["fail_reason"]


def test_failure_rate_above_the_limit_aborts_with_no_trial_left_running(tmp_path):
    space = write_space(tmp_path, "env.lidar.num_beams: choice(0, -1, -2)\n")
    proc = sweep(tmp_path, "hydra/sweeper=optuna", f"sweep.space={space}", "sweep.n_trials=5", check=False)
    assert proc.returncode != 0 and "more than max_failure_rate=0.5 (sweep.max_failure_rate" in proc.stderr
    states = [t.state for t in load(tmp_path).trials]
    assert states == [TrialState.FAIL] * 3
    report = tmp_path / "sweep" / "report" / "report.md"  # the report the message points to
    assert str(report) in proc.stderr and "Trials: FAIL 3." in report.read_text()
    assert "lidar.num_beams=" in (report.parent / "trials.md").read_text()  # each trial's fail_reason


def test_misspelled_search_space_key_fails_before_any_trial(tmp_path):
    space = write_space(tmp_path, "reward.terms.colision.weight: interval(-20.0, -1.0)\n")
    proc = sweep(tmp_path, "hydra/sweeper=optuna", f"sweep.space={space}", check=False)
    assert proc.returncode != 0
    assert "reward.terms.colision.weight" in proc.stderr and "reward.terms.collision.weight" in proc.stderr
    assert "Launching" not in proc.stdout + proc.stderr
    assert not (tmp_path / "study.db").exists() or not load(tmp_path).trials


def test_stale_running_trial_is_marked_failed_and_completed_ones_kept(tmp_path):
    """A trial left RUNNING by a killed sweeper (no heartbeat for 2 intervals) becomes FAIL with a reason
    on the re-run and does not count: 1 more trial reaches sweep.n_trials=2 (it had no params to rerun)."""
    import time

    from navexp.sweep.parallel import beat
    from navexp.sweep.storage import open_storage, trial_id

    storage = open_storage(f"sqlite:///{tmp_path}/study.db")
    study = optuna.create_study(study_name="unit", storage=storage, direction="maximize")
    done = study.ask()
    study.tell(done, 0.5)
    killed = study.ask()
    beat(storage, trial_id(killed))
    time.sleep(3)
    space = write_space(tmp_path, "ppo.algorithm.clip_param: interval(0.1, 0.3)\n")
    sweep(
        tmp_path,
        "hydra/sweeper=optuna",
        f"sweep.space={space}",
        "sweep.n_trials=2",
        "sweep.heartbeat_interval_s=1",
    )
    trials = load(tmp_path).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE]
    assert trials[0].value == 0.5
    assert trials[1].user_attrs["fail_reason"].startswith("worker stopped: no heartbeat since ")


def test_multi_objective_and_pruning_reports(tmp_path):
    """Two objectives (multi-objective TPE) give a Pareto front; pruning reports (Wilcoxon pruner)
    record the trials' intermediate values."""
    space = write_space(tmp_path, "ppo.algorithm.clip_param: interval(0.1, 0.3)\n")
    sweep(
        tmp_path,
        "hydra/sweeper=optuna",
        f"sweep.space={space}",
        "sweep.n_trials=2",
        "sweep.objectives=[success_rate,mean_time_to_goal_s]",
    )
    study = load(tmp_path)
    assert len(study.directions) == 2 and all(len(t.values) == 2 for t in study.trials)
    assert all(t.values[1] == 1.0 for t in study.trials if t.values[0] == 0.0)  # no success: worst time = 1 s
    summary = json.loads((tmp_path / "sweep" / "report" / "summary.json").read_text())  # the sweep's report
    assert summary["pareto_front"]
    tmp2 = tmp_path / "pruning"
    tmp2.mkdir()
    sweep(
        tmp2,
        "hydra/sweeper=optuna",
        f"sweep.space={space}",
        "sweep.n_trials=2",
        "sweep.pruning.enabled=true",
        "sweep.pruning.type=wilcoxon",
        "sweep.pruning.interval=1",
        "sweep.pruning.n_warmup_steps=0",
        "ppo.max_iterations=3",
    )
    trials = load(tmp2).trials
    assert all(sorted(t.intermediate_values) == [0, 1, 2] for t in trials if t.state == TrialState.COMPLETE)


def test_gp_sampler_on_a_journal_file_with_the_plugins_n_trials(tmp_path):
    """`hydra/sweeper/sampler=gp` with `hydra.sweeper.n_trials=3` (the plugin's key; sweep.n_trials says
    10) on `sweep.storage=journal:<file>`: 3 COMPLETE trials of real trainings, report in the sweep dir."""
    from navexp.sweep.storage import open_storage

    proc = sweep(
        tmp_path,
        "hydra/sweeper=optuna",
        "hydra/sweeper/sampler=gp",
        "hydra.sweeper.n_trials=3",
        "sweep.space=ppo_trust_region",
        f"sweep.storage=journal:{tmp_path}/study.log",
    )
    assert "sampler GPSampler" in proc.stdout + proc.stderr
    study = optuna.load_study(study_name="unit", storage=open_storage(f"journal:{tmp_path}/study.log"))
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 3
    assert len({t.params["ppo.algorithm.clip_param"] for t in study.trials}) == 3
    assert (
        json.loads((tmp_path / "sweep" / "report" / "summary.json").read_text())["trial_states"]["COMPLETE"]
        == 3
    )


def test_basic_sweeper_still_runs_seeds(tmp_path):
    """`-m seed=1,2` uses Hydra's basic sweeper: two full runs, no study."""
    proc = sweep(tmp_path, "seed=1,2")
    runs = sorted((tmp_path / "sweep").glob("*/eval.json"))
    assert len(runs) == 2 and not (tmp_path / "study.db").exists()
    assert "Launching 2 jobs locally" in proc.stdout + proc.stderr


def test_joblib_launcher_runs_trials_in_parallel(tmp_path):
    space = write_space(tmp_path, "ppo.algorithm.clip_param: interval(0.1, 0.3)\n")
    proc = sweep(
        tmp_path,
        "hydra/sweeper=optuna",
        "hydra/launcher=joblib",
        f"sweep.space={space}",
        "sweep.n_trials=2",
        "sweep.n_jobs=2",
    )
    assert "Joblib" in proc.stdout + proc.stderr
    assert [t.state for t in load(tmp_path).trials] == [TrialState.COMPLETE] * 2
    # Sizes (here without CUDA): the app resolved size=auto to cpu once for the study;
    # sweep.trial_overrides_cpu (save interval 20) win over the preset (50), and the command line
    # (4 worlds) over both (128, 256).
    trial_dirs = sorted((tmp_path / "sweep").glob("trial_*"))
    assert len(trial_dirs) == 2
    for trial_dir in trial_dirs if not torch.cuda.is_available() else []:
        cfg = yaml.safe_load((trial_dir / "config.yaml").read_text())
        assert (cfg["size"], cfg["ppo"]["save_interval"], cfg["env"]["num_envs"]) == ("cpu", 20, 4), trial_dir


def test_sweep_report_cli(tmp_path):
    from navexp import sweep_report

    space = write_space(tmp_path, "ppo.algorithm.clip_param: interval(0.1, 0.3)\n")
    sweep(tmp_path, "hydra/sweeper=optuna", f"sweep.space={space}", "sweep.n_trials=2")
    out = sweep_report.main([str(tmp_path / "study.db"), f"out={tmp_path / 'rep'}"])
    text = (out / "report.md").read_text()
    assert "# Study `unit`" in text and "| 1 | COMPLETE |" in text
    with pytest.raises(FileNotFoundError, match="give a sweep directory"):
        sweep_report.main([str(tmp_path / "nothing_here")])
    # A mistyped storage URL: refused, and no empty study file is left behind by the report.
    with pytest.raises(FileNotFoundError, match=f"no such study file {tmp_path / 'studdy.db'}"):
        sweep_report.main([f"sqlite:///{tmp_path / 'studdy.db'}"])
    assert not (tmp_path / "studdy.db").exists()
    (tmp_path / "garbage.db").write_text("not a database")
    with pytest.raises(ConnectionError, match=r"garbage.db.* cannot be opened: file is not a database"):
        sweep_report.main([str(tmp_path / "garbage.db")])
