"""The sweeper under hostile input (issue 49, rows 3-8): each bad input is refused before any trial in one
line naming the key or file and what is allowed, and a study keeps one identity, one space and one setup.

Studies run through Hydra's real multirun machinery in this process with the analytic task of
tests/test_sweeper_plugin.py (a trial takes milliseconds); values reach the sweeper the way Hydra composes
them (ListConfig, strings of the override grammar).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from optuna.trial import TrialState
from test_sweeper_plugin import run_sweep, score, sweep_error


# -- row 3: a list direction, as Hydra composes it ------------------------------------------------------
def test_a_list_direction_that_agrees_with_the_objectives_runs(tmp_path, monkeypatch):
    """hydra.sweeper.direction=[maximize,minimize] (a ListConfig) with two objectives, and [maximize] with
    one, run their trials (before the settings object, a ListConfig failed an isinstance(list) check)."""

    def two(cfg):
        return [score(cfg), 0.1]

    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    study = run_sweep(
        tmp_path / "a",
        monkeypatch,
        "sweep.n_trials=1",
        "sweep.objectives=[success_rate,collision_rate]",
        "hydra.sweeper.direction=[maximize,minimize]",
        task=two,
    )
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    assert [t.state for t in study.trials] == [TrialState.COMPLETE]
    study = run_sweep(tmp_path / "b", monkeypatch, "sweep.n_trials=1", "hydra.sweeper.direction=[maximize]")
    assert [t.state for t in study.trials] == [TrialState.COMPLETE]


def test_a_direction_list_of_the_wrong_length_is_one_line(tmp_path, monkeypatch, capsys):
    err = sweep_error(tmp_path, monkeypatch, capsys, "hydra.sweeper.direction=[maximize,minimize]")
    assert (
        "Error: hydra.sweeper.direction=['maximize', 'minimize'] disagrees with "
        "sweep.objectives=['success_rate'], whose directions are ['maximize']" in err
    )
    assert "Traceback" not in err


# -- row 6: a key both fixed and searched -----------------------------------------------------------
def test_a_key_both_fixed_and_searched_on_the_command_line_is_refused(tmp_path, monkeypatch, capsys):
    """Before: the fixed value won and the search was silently dropped."""
    err = sweep_error(
        tmp_path,
        monkeypatch,
        capsys,
        "ppo.algorithm.num_mini_batches=1",
        "ppo.algorithm.num_mini_batches=choice(1,4)",
    )
    assert (
        "Error: ppo.algorithm.num_mini_batches is given twice on the command line: "
        "ppo.algorithm.num_mini_batches=1 and ppo.algorithm.num_mini_batches=choice(1,4); give it once"
    ) in err
    assert "Traceback" not in err


def test_a_command_line_value_fixes_a_key_of_the_space_and_a_search_replaces_one(tmp_path, monkeypatch):
    """The documented way stays: ppo_trust_region searches clip_param and desired_kl; the command line
    fixes desired_kl (0.01 in every trial) and replaces clip_param's interval by choice(0.15,0.25)."""
    seen = []

    def task(cfg):
        seen.append(float(cfg.ppo.algorithm.desired_kl))
        return score(cfg)

    study = run_sweep(
        tmp_path,
        monkeypatch,
        "sweep.n_trials=2",
        "ppo.algorithm.desired_kl=0.01",
        "ppo.algorithm.clip_param=choice(0.15,0.25)",
        task=task,
    )
    assert seen == [0.01, 0.01]
    assert {t.params["ppo.algorithm.clip_param"] for t in study.trials} <= {0.15, 0.25}
    assert all(set(t.params) == {"ppo.algorithm.clip_param"} for t in study.trials)


# -- row 7: tracebacks for user error, each one line ---------------------------------------------------
@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "ppo.algorithm.clip_param=interval(0.3,0.1)",
            "Error: ppo.algorithm.clip_param=interval(0.3,0.1): the lower bound 0.3 is above the upper "
            "bound 0.1; give the lower first",
        ),
        (
            "ppo.algorithm.clip_param=range(0.3,0.1,0.05)",
            "Error: ppo.algorithm.clip_param=range(0.3,0.1,0.05): the lower bound 0.3 is above the upper "
            "bound 0.1; give the lower first",
        ),
        (
            "ppo.algorithm.desired_kl=tag(log,interval(0,0.05))",
            "Error: ppo.algorithm.desired_kl=tag(log,interval(0,0.05)): a log scale (tag(log, ...)) needs a "
            "lower bound above 0, got 0",
        ),
        (
            "ppo.algorithm.clip_paramm=interval(0.1,0.3)",
            "Error: search space 'ppo_trust_region' and command line: 1 key(s) not in the config: "
            "{'ppo.algorithm.clip_paramm': ['ppo.algorithm.clip_param'",
        ),
    ],
)
def test_a_bad_search_expression_is_refused_in_one_line(tmp_path, monkeypatch, capsys, expression, message):
    """Before: optuna's ValueError (or a KeyError) with a traceback, naming no key."""
    err = sweep_error(tmp_path, monkeypatch, capsys, expression)
    assert message in err and "Traceback" not in err


def test_a_storage_that_cannot_be_created_is_one_line(tmp_path, monkeypatch, capsys):
    """A journal file or sqlite database under a file (or on a read-only path): one line naming the URL and
    why (before: FileExistsError / NotADirectoryError / PermissionError tracebacks, OSError not caught)."""
    from navexp.sweep.storage import open_storage

    (tmp_path / "afile").write_text("x")
    for url in (f"journal:{tmp_path}/afile/s.log", f"sqlite:///{tmp_path}/afile/sub/s.db"):
        with pytest.raises(ValueError, match=rf"sweep.storage='{url}': cannot create {tmp_path}/afile"):
            open_storage(url)
    err = sweep_error(tmp_path, monkeypatch, capsys, f"sweep.storage=journal:{tmp_path}/afile/s.log")
    assert f"Error: sweep.storage='journal:{tmp_path}/afile/s.log': cannot create" in err
    assert "Traceback" not in err


def test_sweep_report_of_a_corrupt_study_json_names_the_file(tmp_path, monkeypatch, capsys):
    """A truncated study.json: `error: <file> is not a study file the sweeper wrote (not JSON: ...)`, exit
    2 (before: "error: Expecting value: line 2", naming no file); one without a storage: names the key."""
    from navexp import sweep_report

    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir()
    (sweep_dir / "study.json").write_text('{\n  "study_name": ')
    monkeypatch.setattr("sys.argv", ["navexp.sweep_report", str(sweep_dir)])
    with pytest.raises(SystemExit) as end:
        sweep_report.cli()
    assert end.value.code == 2
    err = capsys.readouterr().err
    study_json = sweep_dir / "study.json"
    assert err.startswith(f"error: {study_json} is not a study file the sweeper wrote (not JSON:")
    assert err.count("\n") == 1
    (sweep_dir / "study.json").write_text('{"study_name": "s"}')
    with pytest.raises(ValueError, match=r"study.json is not a study file the sweeper wrote \(no storage\)"):
        sweep_report.main([str(sweep_dir)])


# -- row 4: one study, one identity --------------------------------------------------------------------
def test_two_spellings_of_one_sqlite_file_share_the_admission_lock_and_the_report(tmp_path, monkeypatch):
    """sqlite:///q.db, sqlite:///q.db?timeout=30 and the absolute path are one study file: a worker with
    the query waits while a plain one holds the admission lock (before: the lock file kept `?timeout=30`
    in its name, so both ran at once and n_trials could be overshot), and all three report to one folder."""
    import threading

    from navexp.sweep.parallel import admission_lock
    from navexp.sweep.report import report_dir

    monkeypatch.chdir(tmp_path)
    plain, query, absolute = "sqlite:///q.db", "sqlite:///q.db?timeout=30", f"sqlite:///{tmp_path}/q.db"
    order = []

    def other_worker():
        with admission_lock(query, "s", tmp_path):
            order.append("query worker admitted")

    with admission_lock(plain, "s", tmp_path):
        worker = threading.Thread(target=other_worker)
        worker.start()
        worker.join(1.0)  # it must still be waiting for the lock
        order.append("plain worker done")
    worker.join(10)
    assert order == ["plain worker done", "query worker admitted"]
    assert [p.name for p in tmp_path.glob("*.admit.lock")] == ["q.db.s.admit.lock"]
    fallback = tmp_path / "fallback"
    assert {report_dir(u, "s", fallback) for u in (plain, query, absolute)} == {tmp_path / "q.db-s"}


# -- row 5: the search space is part of a study's setup ------------------------------------------------
def test_a_sweep_of_another_space_is_refused_by_the_study_naming_both_spaces(tmp_path, monkeypatch, capsys):
    """A study of 1 trial over ppo_trust_region, then the same study with sweep.space=reward_weights:
    refused before any trial naming both spaces and their keys (before: its trials, PPO keys at their
    defaults, were ranked with the searched ones). The same space again adds a trial."""
    run_sweep(tmp_path, monkeypatch, "sweep.n_trials=1")
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    with pytest.raises(SystemExit):
        run_sweep(tmp_path, monkeypatch, "sweep.n_trials=2", "sweep.space=reward_weights")
    err = capsys.readouterr().err
    assert (
        "Error: study unit holds trials of another setup (search space: its trials ran with ppo_trust_region "
        "['ppo.algorithm.clip_param', 'ppo.algorithm.desired_kl'], this sweep gives reward_weights "
        "['reward.terms.collision.weight'," in err
    )
    assert len(list((tmp_path / "sweep").glob("trial_*"))) == 1
    assert len(run_sweep(tmp_path, monkeypatch, "sweep.n_trials=2").trials) == 2


def test_a_setup_recorded_before_spaces_were_part_of_it_is_checked_by_its_trials_parameters(tmp_path):
    """A study whose recorded setup has no search space (and its keys' old ppo names) continues with a
    sweep of the keys its trials searched, and refuses another space naming the keys its trials show."""
    import optuna

    from navexp.sweep.storage import open_storage
    from navexp.sweep.sweeper import SETUP_ATTR, SPACE_KEY, StudySetupError, check_study_setup

    study = optuna.create_study(study_name="old", storage=open_storage(f"sqlite:///{tmp_path}/s.db"))
    study.set_user_attr(SETUP_ATTR, {"ppo.learning_rate": "0.0003", "sweep.objectives": "['success_rate']"})
    trial = study.ask()
    trial.suggest_float("ppo.algorithm.clip_param", 0.1, 0.3)
    study.tell(trial, 0.5)
    mine = {
        "ppo.algorithm.learning_rate": "0.0003",
        "sweep.objectives": "['success_rate']",
        SPACE_KEY: "ppo_trust_region ['ppo.algorithm.clip_param']",
    }
    check_study_setup(study, mine, {}, {"ppo.algorithm.clip_param"}, set())
    assert study.user_attrs[SETUP_ATTR] == mine  # recorded in today's terms from now on
    study.set_user_attr(SETUP_ATTR, {"sweep.objectives": "['success_rate']"})
    other = {"sweep.objectives": "['success_rate']", SPACE_KEY: "reward_weights ['reward.terms.goal.weight']"}
    with pytest.raises(StudySetupError) as err:
        check_study_setup(study, other, {}, {"reward.terms.goal.weight"}, set())
    assert (
        "search space: its trials ran with (not recorded) ['ppo.algorithm.clip_param'], this sweep gives "
        "reward_weights ['reward.terms.goal.weight']" in str(err.value)
    )


# -- from the review of issue 46: the ppo names from before the rename ---------------------------------
def test_a_study_whose_trials_hold_old_ppo_names_is_refused_naming_the_new_ones(
    tmp_path, monkeypatch, capsys
):
    """Trials searched `ppo.clip_param` before the rename: optuna cannot rename a stored parameter, so a
    sweep into the study is refused in one line naming the old and the new name (before: the sweep ran
    and ranked trials of `ppo.algorithm.clip_param` with them as if they searched something else)."""
    import optuna

    from navexp.sweep.storage import open_storage

    study = optuna.create_study(
        study_name="unit", storage=open_storage(f"sqlite:///{tmp_path}/study.db"), direction="maximize"
    )
    trial = study.ask()
    trial.suggest_float("ppo.clip_param", 0.1, 0.3)
    study.tell(trial, 0.5)
    err = sweep_error(tmp_path, monkeypatch, capsys, "sweep.n_trials=2")
    assert (
        "Error: study unit holds trials whose parameters have the names from before the ppo rename: "
        "ppo.clip_param (now ppo.algorithm.clip_param); it cannot be continued under today's names: start "
        "another study: sweep.study_name=<new name>" in err
    )


def test_old_ppo_names_in_the_trial_size_are_read_as_todays(tmp_path):
    """sweep.trial_overrides_cpu written before the rename (ppo.num_mini_batches=2): each trial gets
    ppo.algorithm.num_mini_batches=2 (before: the old key reached the trial's composition and failed it)."""
    from test_sweeper_plugin import settings_of

    settings = settings_of(tmp_path, "sweep.trial_overrides_cpu=['ppo.num_mini_batches=2','env.num_envs=16']")
    assert settings.trial_overrides == ("ppo.algorithm.num_mini_batches=2", "env.num_envs=16")


# -- issue 48: what a sweep shows ----------------------------------------------------------------------
def test_a_sweep_prints_a_line_per_finished_trial_with_the_best_so_far(tmp_path, monkeypatch, capsys):
    """Three trials, the second crashing: `trial k/3 done: success_rate = v (best so far v*, trial j)` with
    k the finished trials, v the trial's objective (1 - |clip_param - 0.2|, read from the task) and v* the
    best so far (on a tie, optuna's best is the earlier trial); the crash prints `failed` with its reason."""
    values = []

    def task(cfg):
        if int(cfg.sweep.trial_number) == 1:
            raise RuntimeError("boom")
        values.append(score(cfg))
        return values[-1]

    run_sweep(tmp_path, monkeypatch, "sweep.n_trials=3", "hydra.sweeper.max_failure_rate=1.0", task=task)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("trial ")]
    assert len(lines) == 3 and len(values) == 2
    assert (
        lines[0] == f"trial 1/3 done: success_rate = {values[0]:.4g} (best so far {values[0]:.4g}, trial 0)"
    )
    assert lines[1] == (
        f"trial 2/3 failed (trial 1: RuntimeError: boom) (best so far {values[0]:.4g}, trial 0)"
    )
    best, at = (values[0], 0) if values[0] >= values[1] else (values[1], 2)
    assert lines[2] == f"trial 3/3 done: success_rate = {values[1]:.4g} (best so far {best:.4g}, trial {at})"


def test_sweep_figures_name_the_objective_keep_trial_ticks_whole_and_lay_the_slice_out_as_a_grid(
    tmp_path, monkeypatch
):
    """A 3-trial study of the 8-key default space: the study carries its metric names (optuna-dashboard
    shows them); the history's y axis and legend read success_rate (before: "Objective Value") and its
    trial axis ticks 0, 1, 2 (before: 0.0, 0.25, ...); the slice plot is 3 panels a row, 3 rows, at
    100 dpi 1380 x 1040 px (before: one 2560 x 500 row), its colour bar right of every panel."""
    import matplotlib.pyplot as plt
    from PIL import Image

    from navexp.sweep.report import _history, _slice_grid

    study = run_sweep(tmp_path, monkeypatch, "sweep.n_trials=3", "sweep.space=default")
    assert study.metric_names == ["success_rate"]
    ax = _history(study, None, "success_rate").axes[0]
    # optuna's plots set the ggplot style for the whole process; the report keeps it to its figures
    # (before: every later figure of the process had a grey #e5e5e5 background, trajectory GIFs too)
    assert plt.rcParams["axes.facecolor"] == "white" and ax.get_facecolor()[:3] != (1.0, 1.0, 1.0)
    assert ax.get_ylabel() == "success_rate"
    assert [t.get_text() for t in ax.get_legend().get_texts()][0] == "success_rate"
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks == [0, 1, 2]
    fig = _slice_grid(study, None, "success_rate")
    panels = [a for a in fig.axes if a.get_label() != "<colorbar>"]
    assert len(panels) == 8
    assert {(a.get_subplotspec().rowspan.start, a.get_subplotspec().colspan.start) for a in panels} == {
        (r, c) for r in range(3) for c in range(3)
    } - {(2, 2)}
    fig.canvas.draw()
    bar = next(a for a in fig.axes if a.get_label() == "<colorbar>")
    assert bar.get_position().x0 > max(a.get_position().x1 for a in panels)
    png = Image.open(tmp_path / "sweep" / "report" / "param_vs_success.png")  # the sweep's report
    assert png.size == (1380, 1040)


def test_with_a_sweep_dir_the_study_report_and_wandb_run_land_under_it(tmp_path, monkeypatch, capsys):
    """`-m hydra/sweeper=optuna hydra.sweep.dir=D logger=wandb` without sweep.storage: the study is
    D/<study>.db, the report and the study's W&B run D/report/ (before: all in ./outputs/studies/);
    `sweep_report D` rewrites D/report/ (as the docs said; before, it wrote next to the database),
    `out=DIR` puts it elsewhere and the old `--out DIR` still works, with a note."""
    import hydra
    from hydra.core.global_hydra import GlobalHydra

    from navexp import sweep_report
    from navexp.paths import CONFIG_DIR

    @hydra.main(config_path=str(CONFIG_DIR), config_name="config", version_base="1.3")
    def app(cfg):
        return score(cfg)

    sweep_dir = tmp_path / "D"
    argv = ["navexp.train", "-m", "hydra/sweeper=optuna", "sweep.space=ppo_trust_region", "sweep.n_trials=2"]
    argv += ["logger=wandb"]  # offline: the study's W&B run is written when the sweep ends
    argv += [f"hydra.sweep.dir={sweep_dir}", "hydra/job_logging=disabled", "hydra/hydra_logging=disabled"]
    monkeypatch.setattr("sys.argv", argv)
    monkeypatch.chdir(tmp_path)
    GlobalHydra.instance().clear()
    app()
    assert (sweep_dir / "navexp_ppo_trust_region.db").is_file()
    assert (sweep_dir / "report" / "report.md").is_file() and not (tmp_path / "outputs").exists()
    assert list((sweep_dir / "report" / "wandb").glob("offline-run-*"))  # the study's W&B run
    (sweep_dir / "report" / "report.md").unlink()
    assert sweep_report.main([str(sweep_dir)]) == sweep_dir / "report"
    assert (sweep_dir / "report" / "report.md").is_file()
    assert sweep_report.main([str(sweep_dir), f"out={tmp_path / 'r2'}"]) == tmp_path / "r2"
    capsys.readouterr()
    assert sweep_report.main([str(sweep_dir), "--out", str(tmp_path / "r3")]) == tmp_path / "r3"
    assert "[navexp] --out is now out=... (the old form keeps working)" in capsys.readouterr().err


def test_wandb_runs_of_a_multirun_are_named_by_what_differs_and_grouped_by_the_multirun(
    tmp_path, monkeypatch
):
    """`-m seed=1,2 env.num_envs=8 logger=wandb` through Hydra's basic sweeper: the W&B entry of each run
    is named `seed=1`, `seed=2` (the swept key, not the constant env.num_envs) and grouped
    `navexp_<sweep dir name>` (before: named `0`, `1` in group `navexp`); logger.name/group still win."""
    import hydra
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    from navexp.experiment.hooks import RunHooks
    from navexp.experiment.writers import logger_entry
    from navexp.paths import CONFIG_DIR

    entries = []

    @hydra.main(config_path=str(CONFIG_DIR), config_name="config", version_base="1.3")
    def app(cfg):
        run_dir = Path(HydraConfig.get().runtime.output_dir)
        entries.append(logger_entry(cfg, run_dir, None, RunHooks()))

    def multirun(*overrides):
        monkeypatch.setattr("sys.argv", ["navexp.train", "-m", "logger=wandb", *overrides])
        GlobalHydra.instance().clear()
        app()

    monkeypatch.chdir(tmp_path)
    base = [f"hydra.sweep.dir={tmp_path}/multi", "hydra/job_logging=disabled", "hydra/hydra_logging=disabled"]
    multirun("seed=1,2", "env.num_envs=8", *base)
    assert [(e["name"], e["group"]) for e in entries] == [
        ("seed=1", "navexp_multi"),
        ("seed=2", "navexp_multi"),
    ]
    entries.clear()
    multirun("seed=1,2", "logger.name=mine", "logger.group=g", *base)
    assert [(e["name"], e["group"]) for e in entries] == [("mine", "g"), ("mine", "g")]


# -- row 8: a stopped worker's trial: its lock, and how to continue -------------------------------------
def test_a_killed_workers_trial_lock_is_cleared_by_its_recorded_pid_and_host(tmp_path):
    """A RUNNING trial whose worker was killed (kill -9: no heartbeat, `trial_0/.navexp.lock` of a pid that
    is gone on this host): failing it as stale removes the lock (before: it stayed); a lock recorded by
    another host is left, as its pid cannot be checked from here. A sweep records each trial's directory."""
    import json
    import socket
    import subprocess
    import time

    import optuna

    from navexp.sweep.parallel import HEARTBEAT, fail_stale_trials
    from navexp.sweep.storage import open_storage, trial_id

    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid is gone
    storage = open_storage(f"sqlite:///{tmp_path}/s.db")
    study = optuna.create_study(study_name="s", storage=storage, direction="maximize")
    for n, host in enumerate((socket.gethostname(), "elsewhere")):
        trial = study.ask()
        trial.suggest_float("x", 0, 1)
        (tmp_path / f"trial_{n}").mkdir()
        (tmp_path / f"trial_{n}" / ".navexp.lock").write_text(json.dumps({"pid": dead.pid, "host": host}))
        trial.set_user_attr("trial_dir", str(tmp_path / f"trial_{n}"))
        storage.set_trial_system_attr(trial_id(trial), HEARTBEAT, time.time() - 100)  # silent for 100 s
    assert [n for n, _ in fail_stale_trials(study, storage, 60)] == [0, 1]
    assert not (tmp_path / "trial_0" / ".navexp.lock").exists()
    assert (tmp_path / "trial_1" / ".navexp.lock").exists()


def test_an_interrupted_sweep_queues_its_trial_again_and_says_how_to_continue(tmp_path, monkeypatch, capsys):
    """Ctrl-C (or SIGTERM, which a trial's training turns into the same interrupt) during trial 0: the
    trial is failed as stopped, not counted, its parameters queued, and the message says to re-run the
    sweep command (before: it stayed RUNNING until its heartbeat went stale, and the trial's message advised
    resume=<trial dir>, which trains it outside the study). The same command then reruns its parameters."""
    from navexp.sweep.parallel import WORKER_STOPPED

    def interrupted(cfg):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(tmp_path, monkeypatch, "sweep.n_trials=1", task=interrupted)
    out = capsys.readouterr().out
    assert (
        "[navexp] sweep interrupted: trial(s) [0] stopped, their parameters queued to run again; continue "
        "the study unit with the same sweep command (sweep.study_name=unit sweep.storage=sqlite:///" in out
    )
    study = run_sweep(tmp_path, monkeypatch, "sweep.n_trials=1")
    first, rerun = study.trials
    assert first.state == TrialState.FAIL and WORKER_STOPPED in first.system_attrs
    assert rerun.state == TrialState.COMPLETE and rerun.params == first.params
    assert first.user_attrs["trial_dir"] == str(tmp_path / "sweep" / "trial_0")


def test_a_stopped_trial_says_to_rerun_the_sweep_not_to_resume_its_directory(monkeypatch, capsys):
    """The training's stop message (checkpoint saved on Ctrl-C/SIGTERM) takes its way on from the hooks: a
    trial's names the sweep command and the study (before: `continue with resume=<trial dir>`)."""
    import signal
    from types import SimpleNamespace

    from navexp import compose_config
    from navexp.experiment.hooks import RunHooks
    from navexp.experiment.training import TrainingRun
    from navexp.sweep.trial import continue_study

    cfg = compose_config(["sweep.study_name=unit", "sweep.storage=sqlite:///s.db", "sweep.trial_number=3"])
    how = continue_study(cfg)
    assert how == (
        "the same sweep command (study unit in sqlite:///s.db): trial 3 runs again from its start with its "
        "parameters (resume=<trial dir> would train it outside the study)"
    )
    run = TrainingRun.__new__(TrainingRun)
    run.hooks = RunHooks(continue_with=how)
    run.runner = SimpleNamespace(last_checkpoint=None, save_last_good=lambda: Path("/runs/t/model_3.pt"))
    run.start = SimpleNamespace(run_dir=Path("/runs/t"))
    old = signal.getsignal(signal.SIGTERM)
    try:
        run._save_on_stop("interrupted")
    finally:
        signal.signal(signal.SIGTERM, old)
    assert capsys.readouterr().out == f"[navexp] interrupted: saved /runs/t/model_3.pt; continue with {how}\n"
