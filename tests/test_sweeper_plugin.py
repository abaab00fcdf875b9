"""navexp's Optuna sweeper plugin on optuna 4+: its config schema, every sampler, the settings it shares
with ``sweep.*``, per-trial seeding, storages and optuna-dashboard.

Studies here run through Hydra's real multirun machinery and navexp's config, in this process, with a
task function that scores the sampled config analytically instead of training (a trial takes
milliseconds); tests/test_sweep.py and tests/test_sweep_workers.py run real trainings (e2e).
"""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import hydra
import optuna
import pytest
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from optuna.trial import TrialState

from navexp.paths import CONFIG_DIR
from navexp.sweep.samplers import PerTrialSeed, build_sampler, derived_seed
from navexp.sweep.storage import open_storage, trial_id

SAMPLERS = ["tpe", "random", "cmaes", "gp", "nsgaii", "nsgaiii", "qmc", "grid", "bruteforce"]


def score(cfg) -> float:
    """A success rate the sweeper can climb: 1 at clip_param 0.2, lower away from it."""
    return 1.0 - abs(float(cfg.ppo.algorithm.clip_param) - 0.2)


def run_sweep(tmp_path: Path, monkeypatch, *overrides: str, task=score) -> optuna.Study:
    """``python -m navexp.train -m hydra/sweeper=optuna <overrides>`` with ``task`` as the job."""
    calls = []

    @hydra.main(config_path=str(CONFIG_DIR), config_name="config", version_base="1.3")
    def app(cfg):
        calls.append(cfg.sweep.trial_number)
        return task(cfg)

    args = [
        "hydra/sweeper=optuna",
        "sweep.space=ppo_trust_region",
        "ppo.algorithm.learning_rate=0.0003",
        f"hydra.sweep.dir={tmp_path}/sweep",
        f"sweep.storage=sqlite:///{tmp_path}/study.db",
        "sweep.study_name=unit",
        "hydra/job_logging=disabled",
        "hydra/hydra_logging=disabled",
        *overrides,
    ]
    monkeypatch.setattr(sys, "argv", ["navexp.train", "-m", *args])
    monkeypatch.chdir(tmp_path)
    GlobalHydra.instance().clear()
    app()
    storage = next((a.split("=", 1)[1] for a in overrides if a.startswith("sweep.storage=")), None)
    return optuna.load_study(
        study_name="unit", storage=open_storage(storage or f"sqlite:///{tmp_path}/study.db")
    )


# -- the schema ------------------------------------------------------------------------------------
def test_the_sweeper_config_keeps_hydra_optuna_sweepers_keys_and_offers_nine_samplers():
    """hydra/sweeper=optuna has hydra-optuna-sweeper 1.3.0's keys (users' sweep configs keep working)
    and the sampler group lists tpe ... bruteforce, each building the optuna sampler it names."""
    from hydra.core.plugins import Plugins
    from omegaconf import OmegaConf

    Plugins.instance()  # Hydra imports the plugin modules, which register their configs
    cs = ConfigStore.instance()
    node = OmegaConf.create(cs.load("hydra/sweeper/optuna.yaml").node)
    assert set(node.keys()) == {
        "_target_",
        "_recursive_",
        "defaults",
        "sampler",
        "direction",
        "storage",
        "study_name",
        "n_trials",
        "n_jobs",
        "max_failure_rate",
        "search_space",
        "params",
        "custom_search_space",
    }
    assert node._target_ == "hydra_plugins.navexp_sweeper.optuna_sweeper.NavOptunaSweeper"
    assert list(node.defaults) == [{"sampler": "tpe"}]
    options = sorted(n.removesuffix(".yaml") for n in cs.list("hydra/sweeper/sampler"))
    assert options == sorted(SAMPLERS)
    from optuna.distributions import CategoricalDistribution

    space = {"ppo.algorithm.clip_param": CategoricalDistribution([0.1, 0.2])}
    names = {}
    for name in SAMPLERS:
        cfg = OmegaConf.create(cs.load(f"hydra/sweeper/sampler/{name}.yaml").node)
        names[name] = type(build_sampler(cfg, 0, space, 1)[0].inner).__name__
    assert names == {
        "tpe": "TPESampler",
        "random": "RandomSampler",
        "cmaes": "CmaEsSampler",
        "gp": "GPSampler",
        "nsgaii": "NSGAIISampler",
        "nsgaiii": "NSGAIIISampler",
        "qmc": "QMCSampler",
        "grid": "GridSampler",
        "bruteforce": "BruteForceSampler",
    }
    tpe = build_sampler(OmegaConf.create(cs.load("hydra/sweeper/sampler/tpe.yaml").node), 0, space, 1)[0]
    assert tpe.inner._multivariate and tpe.inner._constant_liar  # parallel workers keep apart


# -- every sampler -----------------------------------------------------------------------------------
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_every_sampler_runs_a_two_trial_study(tmp_path, monkeypatch, sampler):
    """2 trials through Hydra's multirun with each sampler: both COMPLETE with the analytic objective
    of their own sampled clip_param, inside the space; grid and brute force visit distinct points."""
    space = "ppo.algorithm.clip_param=choice(0.1,0.15,0.2,0.25)" if sampler in ("grid", "bruteforce") else ""
    study = run_sweep(
        tmp_path,
        monkeypatch,
        f"hydra/sweeper/sampler={sampler}",
        "sweep.n_trials=2",
        *([space, "ppo.algorithm.desired_kl=0.01"] if space else []),
    )
    trials = study.trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2
    for t in trials:
        clip = t.params["ppo.algorithm.clip_param"]
        assert 0.1 <= clip <= 0.3 and t.value == pytest.approx(1.0 - abs(clip - 0.2))
    if space:
        assert len({t.params["ppo.algorithm.clip_param"] for t in trials}) == 2
        assert (
            trials[0].user_attrs["ppo.algorithm.desired_kl"] == "0.01"
        )  # fixed keys are recorded, as before
    info = json.loads((tmp_path / "sweep" / "study.json").read_text())
    assert info["sampler"].lower().startswith(sampler.replace("bruteforce", "bruteforce")[:3])


def test_grid_study_stops_when_the_grid_is_exhausted(tmp_path, monkeypatch):
    """A 3-point grid with n_trials=10: exactly 3 trials, every point once."""
    study = run_sweep(
        tmp_path,
        monkeypatch,
        "hydra/sweeper/sampler=grid",
        "sweep.n_trials=10",
        "ppo.algorithm.clip_param=choice(0.1,0.2,0.3)",
        "ppo.algorithm.desired_kl=0.01",
    )
    assert sorted(t.params["ppo.algorithm.clip_param"] for t in study.trials) == [0.1, 0.2, 0.3]


def sweep_error(tmp_path: Path, monkeypatch, capsys, *overrides: str) -> str:
    """The message Hydra prints when the sweep fails (it exits 1), with no trial started."""
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    with pytest.raises(SystemExit):
        run_sweep(tmp_path, monkeypatch, *overrides)
    assert not list((tmp_path / "sweep").glob("trial_*"))
    return capsys.readouterr().err


def test_a_continuous_key_is_refused_by_the_grid_sampler_naming_it(tmp_path, monkeypatch, capsys):
    err = sweep_error(tmp_path, monkeypatch, capsys, "hydra/sweeper/sampler=grid", "sweep.n_trials=2")
    assert "ppo.algorithm.desired_kl: FloatDistribution" in err
    assert "is continuous; the grid and brute-force samplers need choice(...), range(...)" in err


def test_nsgaii_runs_a_multi_objective_study(tmp_path, monkeypatch):
    """sweep.objectives=[success_rate,collision_rate] with NSGA-II: 4 trials with 2 values each,
    directions maximize/minimize, and a Pareto front (best_trials) among them."""

    def two(cfg):
        clip, kl = float(cfg.ppo.algorithm.clip_param), float(cfg.ppo.algorithm.desired_kl)
        return [1.0 - abs(clip - 0.2), abs(math.log(kl / 0.01))]

    study = run_sweep(
        tmp_path,
        monkeypatch,
        "hydra/sweeper/sampler=nsgaii",
        "sweep.n_trials=4",
        "sweep.objectives=[success_rate,collision_rate]",
        task=two,
    )
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    assert [len(t.values) for t in study.trials] == [2] * 4
    assert 1 <= len(study.best_trials) <= 4


def test_cmaes_with_two_objectives_is_refused_naming_the_samplers_that_can(tmp_path, monkeypatch, capsys):
    err = sweep_error(
        tmp_path,
        monkeypatch,
        capsys,
        "hydra/sweeper/sampler=cmaes",
        "sweep.objectives=[success_rate,collision_rate]",
    )
    assert (
        "hydra/sweeper/sampler=cmaes optimises one objective and sweep.objectives has 2; for several use"
        in err
    )


# -- one setting, two names ----------------------------------------------------------------------------
def test_hydra_sweeper_n_trials_is_obeyed(tmp_path, monkeypatch):
    """hydra.sweeper.n_trials=2 (the plugin's key) runs 2 trials, not sweep.n_trials' 10, and the
    trials' own configs record n_trials 2."""
    seen = []

    def task(cfg):
        seen.append(int(cfg.sweep.n_trials))
        return score(cfg)

    study = run_sweep(tmp_path, monkeypatch, "hydra.sweeper.n_trials=2", task=task)
    assert len(study.trials) == 2 and seen == [2, 2]


def settings_of(tmp_path: Path, *overrides: str, experiment: str | None = None):
    """The StudySettings of ``python -m navexp.train -m hydra/sweeper=optuna <overrides>`` on a CPU, as
    the sweeper builds them: the config composed by Hydra (``experiment``: the text of a user's
    experiment YAML, ``+exp=old`` from tmp_path/exp/), the plugin instantiated by Hydra from
    ``hydra.sweeper`` (so its values are DictConfig / ListConfig nodes), and the two translated."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from navexp.config.schemas import register_configs
    from navexp.sweep.settings import study_settings

    args = ["hydra/sweeper=optuna", f"hydra.sweep.dir={tmp_path}/sweep"]
    if experiment is not None:
        (tmp_path / "exp").mkdir()
        (tmp_path / "exp" / "old.yaml").write_text("# @package _global_\n" + experiment)
        args += [f"hydra.searchpath=[file://{tmp_path}]", "+exp=old"]
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[*args, *overrides], return_hydra_config=True)
    plugin = instantiate(cfg.hydra.sweeper).sweeper.plugin  # what Hydra passes to the sweeper
    return study_settings(plugin, cfg, "cpu", 0)


CPU_SIZE = ("env.num_envs=128", "ppo.max_iterations=40", "ppo.save_interval=20", "eval.num_episodes=100")


def test_settings_from_navexps_names_alone(tmp_path):
    """sweep.* alone: every setting as given, the rest at its default (10 trials on a CPU, TPE's
    options, the CPU trial size); the report goes next to the journal file (<file>-<study>)."""
    from navexp.sweep.settings import StudySettings

    settings = settings_of(
        tmp_path,
        "sweep.space=ppo_trust_region",
        "sweep.study_name=s",
        f"sweep.storage=journal:{tmp_path}/s.log",
        "sweep.n_jobs=2",
        "sweep.max_failure_rate=0.25",
        "sweep.sampler_seed=7",
        "sweep.objectives=[success_rate,mean_time_to_goal_s]",
        "sweep.devices=none",
    )
    assert settings == StudySettings(
        study_name="s",
        storage=f"journal:{tmp_path}/s.log",
        report_dir=tmp_path / "sweep" / "report",  # the sweep's report: <hydra.sweep.dir>/report
        n_trials=10,  # sweep.n_trials null: 10 on a CPU
        n_jobs=2,
        max_failure_rate=0.25,
        sampler_seed=7,
        objectives=("success_rate", "mean_time_to_goal_s"),
        directions=("maximize", "minimize"),
        sampler={
            "_target_": "optuna.samplers.TPESampler",
            "n_startup_trials": 10,
            "n_ei_candidates": 24,
            "multivariate": True,
            "group": False,
            "constant_liar": True,
        },
        sampler_label="tpe",
        space="ppo_trust_region",
        params={},
        search_space=None,
        custom_search_space=None,
        heartbeat_s=30,
        devices=(),
        trial_overrides=CPU_SIZE,
        sweep_dir=tmp_path / "sweep",
    )


def test_settings_from_the_plugins_names_alone(tmp_path):
    """hydra-optuna-sweeper's keys alone, on the command line and in an experiment YAML written for that
    plugin (direction, params, search_space, custom_search_space): each lands on its one setting; the
    sampler's seed becomes sampler_seed and leaves the sampler's options; the default-layout storage
    <dir>/<study>.db reports to <dir>/<study>/."""
    settings = settings_of(
        tmp_path,
        "hydra/sweeper/sampler=gp",
        "hydra.sweeper.n_trials=4",
        "hydra.sweeper.n_jobs=3",
        "hydra.sweeper.study_name=old",
        f"hydra.sweeper.storage=sqlite:///{tmp_path}/old.db",
        "hydra.sweeper.max_failure_rate=0.1",
        "hydra.sweeper.sampler.seed=5",
        experiment="""
hydra:
  sweeper:
    direction: [maximize]
    params:
      ppo.clip_param: interval(0.12,0.28)
    search_space:
      ppo.desired_kl: {type: float, low: 0.002, high: 0.05, log: true}
    custom_search_space: test_sweeper_plugin.epochs_space
""",
    )
    names = ("study_name", "storage", "report_dir", "n_trials", "n_jobs", "max_failure_rate", "sampler_seed")
    assert {k: getattr(settings, k) for k in names} == {
        "study_name": "old",
        "storage": f"sqlite:///{tmp_path}/old.db",
        "report_dir": tmp_path / "sweep" / "report",
        "n_trials": 4,
        "n_jobs": 3,
        "max_failure_rate": 0.1,
        "sampler_seed": 5,
    }
    assert settings.sampler == {
        "_target_": "optuna.samplers.GPSampler",
        "n_startup_trials": 10,
        "deterministic_objective": False,
    }
    assert settings.directions == ("maximize",) and settings.sampler_label == "gp"
    assert settings.params == {"ppo.clip_param": "interval(0.12,0.28)"}
    assert settings.search_space == {
        "ppo.desired_kl": {"type": "float", "low": 0.002, "high": 0.05, "log": True}
    }
    assert settings.custom_search_space == "test_sweeper_plugin.epochs_space"


@pytest.mark.parametrize(
    ("overrides", "experiment", "n_trials", "n_jobs"),
    [
        (["sweep.n_trials=5", "hydra.sweeper.n_trials=5"], None, 5, 1),  # both names, one value
        (["sweep.n_trials=3"], "hydra: {sweeper: {n_trials: 20}}", 3, 1),  # command line over a file
        (["hydra.sweeper.n_trials=2"], "sweep: {n_trials: 30}", 2, 1),  # ... whichever name it uses
        ([], "hydra: {sweeper: {n_jobs: 4}}", 10, 4),  # sweep.n_jobs at its default 1: not given
        (["hydra.sweeper.n_jobs=null", "sweep.n_jobs=2"], None, 10, 2),  # null: sweep.n_jobs
    ],
)
def test_settings_given_under_both_names(tmp_path, overrides, experiment, n_trials, n_jobs):
    """Both names of one setting: the command line wins over a config file, whichever name either uses;
    a sweep key at its default, or a hydra.sweeper key left null, is no value given."""
    settings = settings_of(tmp_path, *overrides, experiment=experiment)
    assert (settings.n_trials, settings.n_jobs) == (n_trials, n_jobs)


def test_both_names_given_at_one_level_with_two_values_are_refused(tmp_path, monkeypatch, capsys):
    """Two values of one setting on the command line, or both in config files, have no order that says
    which was meant: refused in one line naming both keys and values, before any trial."""
    from navexp.sweep.settings import SweepSettingsError

    with pytest.raises(SweepSettingsError) as err:
        settings_of(tmp_path, "sweep.n_trials=5", "hydra.sweeper.n_trials=2")
    assert str(err.value) == (
        "Error: hydra.sweeper.n_trials=2 and sweep.n_trials=5 are one setting, both given on the command "
        "line; give one of them (sweep.n_trials is navexp's name)"
    )
    with pytest.raises(SweepSettingsError) as err:
        settings_of(tmp_path, experiment="hydra: {sweeper: {sampler: {seed: 3}}}\nsweep: {sampler_seed: 4}")
    assert "hydra.sweeper.sampler.seed=3 and sweep.sampler_seed=4 are one setting, both given in config " in (
        str(err.value)
    )
    err = sweep_error(tmp_path, monkeypatch, capsys, "sweep.n_jobs=2", "hydra.sweeper.n_jobs=3")
    assert "Error: hydra.sweeper.n_jobs=3 and sweep.n_jobs=2 are one setting, both given on the" in err
    assert "Traceback" not in err  # one line: Hydra prints a CompactHydraException as its message


def test_invalid_settings_are_refused_naming_their_keys(tmp_path):
    from navexp.sweep.settings import SweepSettingsError

    with pytest.raises(SweepSettingsError) as err:
        settings_of(tmp_path, "hydra.sweeper.n_jobs=0", "sweep.max_failure_rate=1.5")
    assert str(err.value) == (
        "Error: sweep.n_jobs=0 (or hydra.sweeper.n_jobs) must be >= 1; "
        "sweep.max_failure_rate=1.5 (or hydra.sweeper.max_failure_rate) must be in [0, 1]"
    )


def test_the_sweeper_runs_on_its_settings_object(tmp_path, monkeypatch):
    """The one path: Hydra passes the plugin's config (DictConfig nodes) to StudySweeper, which builds
    its StudySettings once; the study loop and the trials' configs follow that object. Here the object
    is swapped for one of 1 trial and sampler seed 9: the config's 3 trials never reach the loop."""
    from dataclasses import replace

    from omegaconf import DictConfig

    import navexp.sweep.sweeper as sweeper_mod

    real, calls, seen = sweeper_mod.study_settings, [], []

    def spy(plugin, config, env_device, gpu_count):
        calls.append(plugin)
        return replace(real(plugin, config, env_device, gpu_count), n_trials=1, sampler_seed=9)

    def task(cfg):
        sw = cfg.sweep
        seen.append((int(sw.n_trials), float(sw.max_failure_rate), int(sw.sampler_seed)))
        return score(cfg)

    monkeypatch.setattr(sweeper_mod, "study_settings", spy)
    study = run_sweep(
        tmp_path, monkeypatch, "hydra.sweeper.n_trials=3", "hydra.sweeper.max_failure_rate=0.25", task=task
    )
    assert len(calls) == 1 and calls[0]["n_trials"] == 3 and isinstance(calls[0]["sampler"], DictConfig)
    assert len(study.trials) == 1 and seen == [(1, 0.25, 9)]  # the trial's config records what ran
    assert json.loads((tmp_path / "sweep" / "study.json").read_text())["n_trials"] == 1


def test_a_direction_against_the_objectives_is_refused(tmp_path, monkeypatch):
    from navexp.sweep.settings import directions

    assert directions(["success_rate"], "maximize") == ["maximize"]
    assert directions(["success_rate", "mean_time_to_goal_s"], None) == ["maximize", "minimize"]
    with pytest.raises(ValueError, match=r"hydra.sweeper.direction=\['minimize'\] disagrees with"):
        directions(["success_rate"], "minimize")


def test_custom_search_space_adds_parameters(tmp_path, monkeypatch):
    """hydra.sweeper.custom_search_space names f(cfg, trial): its trial.suggest_* become overrides."""
    seen = []

    def task(cfg):
        seen.append(int(cfg.ppo.algorithm.num_learning_epochs))
        return score(cfg)

    study = run_sweep(
        tmp_path,
        monkeypatch,
        "sweep.n_trials=2",
        "hydra.sweeper.custom_search_space=test_sweeper_plugin.epochs_space",
        task=task,
    )
    assert [t.params["ppo.algorithm.num_learning_epochs"] for t in study.trials] == seen
    assert all(2 <= e <= 6 for e in seen)


def epochs_space(cfg, trial) -> None:
    trial.suggest_int("ppo.algorithm.num_learning_epochs", 2, 6)


# -- per-trial seeds -----------------------------------------------------------------------------------
def tpe(seed: int = 0) -> PerTrialSeed:
    from omegaconf import OmegaConf

    node = OmegaConf.create({"_target_": "optuna.samplers.TPESampler", "n_startup_trials": 2})
    from optuna.distributions import FloatDistribution

    return build_sampler(node, seed, {"x": FloatDistribution(0.1, 0.3)}, 1)[0]


def test_trials_are_seeded_by_number_reproducible_alone_and_distinct_across_workers(tmp_path):
    """TPE (whose random state optuna 4 keeps lazily) rebuilt per trial, 6 trials each:
    - two studies with the same sampler_seed, one worker each, draw the same values;
    - two workers (own sampler, same seed) alternating on one study draw 6 distinct values, the same
      as one worker alone: trial numbers, not workers, pick the seeds."""
    from optuna.distributions import FloatDistribution

    dist = {"x": FloatDistribution(0.1, 0.3)}
    storage = open_storage(f"sqlite:///{tmp_path}/s.db")

    def study(name: str) -> optuna.Study:
        return optuna.create_study(study_name=name, storage=storage, sampler=tpe(), load_if_exists=True)

    def run(studies: list[optuna.Study], n: int) -> list[float]:
        values = []
        for i in range(n):
            trial = studies[i % len(studies)].ask(fixed_distributions=dist)
            x = trial.params["x"]
            studies[0].tell(trial, -((x - 0.2) ** 2))
            values.append(x)
        return values

    alone = run([study("a")], 6)
    assert alone == run([study("b")], 6)
    shared = run([study("c"), study("c")], 6)
    assert len(set(shared)) == 6 and shared == alone
    assert derived_seed(0, 5) == derived_seed(0, 5) != derived_seed(1, 5)


# -- storages and the adapter ------------------------------------------------------------------------------
def test_trial_id_adapter_names_the_storage_id(tmp_path):
    """navexp.sweep.storage.trial_id reads optuna's private Trial._trial_id: the id the storage
    knows the trial by (if optuna moves it, this fails)."""
    for url in (f"sqlite:///{tmp_path}/s.db", f"journal:{tmp_path}/s.log"):
        storage = open_storage(url)
        study = optuna.create_study(study_name="s", storage=storage)
        study.ask()
        trial = study.ask()
        trial.suggest_float("x", 0, 1)
        frozen = storage.get_trial(trial_id(trial))
        assert frozen.number == 1 and frozen.params == trial.params
        assert trial_id(study.trials[1]) == trial_id(trial)


def test_storage_urls_name_their_problem(tmp_path):
    """An unreachable PostgreSQL names the URL (no SQLAlchemy traceback, no password); an unknown scheme
    lists the allowed ones; a file that is not a database says so. Without the PostgreSQL extra the
    error names the URL and the missing driver's install command instead."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    url = f"postgresql://navexp:secret@127.0.0.1:{port}/navexp"
    shown = rf"sweep.storage='postgresql://navexp@127.0.0.1:{port}/navexp'"
    if importlib.util.find_spec("psycopg") is None:
        with pytest.raises(ImportError, match=shown + r" needs a database driver .*\.\[postgres\]"):
            open_storage(url)
    else:
        with pytest.raises(ConnectionError, match=shown):
            open_storage(url)
    with pytest.raises(ValueError, match=r"allowed: sqlite:///<file>.db, postgresql://.*, journal:<file>"):
        open_storage("redis://localhost/0")
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database " * 100)
    with pytest.raises(
        ConnectionError, match=r"sweep.storage='sqlite:///.*bad.db' cannot be opened: file is not a"
    ):
        open_storage(f"sqlite:///{bad}")


def test_sweep_report_reads_a_journal_study(tmp_path, capsys):
    from navexp import sweep_report

    storage = open_storage(f"journal:{tmp_path}/s.log")
    study = optuna.create_study(study_name="j", storage=storage, direction="maximize")
    for v in (0.2, 0.6):
        t = study.ask()
        t.suggest_float("ppo.algorithm.clip_param", 0.1, 0.3)
        study.tell(t, v)
    out = sweep_report.main([str(tmp_path / "s.log")])
    assert out == tmp_path / "s.log-j"  # next to the journal file: <file name>-<study name>
    assert "study j: COMPLETE 2" in capsys.readouterr().out
    assert json.loads((out / "summary.json").read_text())["best_value"] == 0.6


def test_reports_of_one_study_name_in_two_files_of_a_folder_stay_apart(tmp_path):
    """The default storage (outputs/studies/<study>.db) reports to <study>/; any other file to
    <file name>-<study>/, so two files holding a study of the same name keep two report folders (a
    journal beside the default .db included)."""
    from navexp.sweep.report import report_dir

    fb = tmp_path / "fallback"
    assert (
        report_dir(f"sqlite:///{tmp_path}/navexp_default.db", "navexp_default", fb)
        == tmp_path / "navexp_default"
    )
    assert report_dir(f"journal:{tmp_path}/navexp_default.log", "navexp_default", fb) == (
        tmp_path / "navexp_default.log-navexp_default"
    )
    assert (
        report_dir(f"sqlite:///{tmp_path}/sw1.db", "navexp_default", fb) == tmp_path / "sw1.db-navexp_default"
    )
    assert report_dir("postgresql://u@db:5432/navexp", "j", fb) == fb


def test_a_sweep_of_another_setup_is_refused_by_the_study(tmp_path, monkeypatch, capsys):
    """A study of 2 trials (fixed ppo.algorithm.learning_rate=0.0003, the machine's trial size), then the
    same study with recipe=traps and seed=3, or with two objectives: refused in one line naming the keys
    and values, no trial added. The study's own overrides with another logger group (neutral to the
    objective) and sweep.n_trials=3 add the third trial."""
    import torch

    from navexp import compose_config
    from navexp.sweep.sweeper import SETUP_ATTR, SPACE_KEY

    study = run_sweep(tmp_path, monkeypatch, "sweep.n_trials=2")
    sw = compose_config([]).sweep
    size = sw.trial_overrides_gpu if torch.cuda.is_available() else sw.trial_overrides_cpu
    assert study.user_attrs[SETUP_ATTR] == {
        "ppo.algorithm.learning_rate": "0.0003",
        **dict(o.split("=", 1) for o in size),
        "sweep.objectives": "['success_rate']",
        SPACE_KEY: "ppo_trust_region ['ppo.algorithm.clip_param', 'ppo.algorithm.desired_kl']",
    }
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    with pytest.raises(SystemExit):
        run_sweep(tmp_path, monkeypatch, "sweep.n_trials=4", "recipe=traps", "seed=3")
    assert (
        "Error: study unit holds trials of another setup (recipe: its trials ran with (not given), this "
        "sweep gives traps; seed: its trials ran with (not given), this sweep gives 3)"
        in capsys.readouterr().err
    )
    with pytest.raises(SystemExit):
        run_sweep(
            tmp_path, monkeypatch, "sweep.n_trials=4", "sweep.objectives=[success_rate,mean_time_to_goal_s]"
        )
    assert (
        "Error: study unit optimizes ['maximize'], this sweep's sweep.objectives=" in capsys.readouterr().err
    )
    assert len(list((tmp_path / "sweep").glob("trial_*"))) == 2
    study = run_sweep(tmp_path, monkeypatch, "sweep.n_trials=3", "logger.group=more")
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 3


def test_the_setup_a_study_is_checked_against(tmp_path):
    """Neutral overrides (logging, names, the device, the study's own sweep.* keys) are no part of a setup.
    A study whose trials all failed takes a new setup (a first sweep stopped early may be corrected); one
    with a trial that ran refuses another, naming a key this sweep searches as searched; of two workers
    starting together the one whose check comes after the other's first trial is refused; objectives of
    the same directions and the trial size are part of the setup. A study from
    before setups were recorded is checked against its navexp trials (those with a run_dir), and one
    whose trials already mix setups is refused outright."""
    from navexp.sweep.sweeper import SETUP_ATTR, StudySetupError, check_study_setup, fixed_setup

    keys = {"logger", "experiment_name", "recipe", "env", "sweep", "seed"}
    given = {"logger": "wandb", "logger.group": "g", "experiment_name": "x", "env.device": "cuda:1"}
    assert fixed_setup(
        {**given, "sweep.n_trials": "5", "recipe": "traps", "run_dir": "/r", "seed": "3"}, keys
    ) == {
        "recipe": "traps",
        "seed": "3",
    }
    storage = open_storage(f"sqlite:///{tmp_path}/s.db")
    study = optuna.create_study(study_name="failed_first", storage=storage)
    study.set_user_attr(SETUP_ATTR, {"recipe": "traps"})
    study.tell(study.ask(), state=TrialState.FAIL)
    check_study_setup(study, {"recipe": "none"}, {"recipe": "none"}, set(), keys)  # nothing ran: corrected
    assert optuna.load_study(study_name="failed_first", storage=storage).user_attrs[SETUP_ATTR] == {
        "recipe": "none"
    }
    study.tell(study.ask(), 0.5)
    with pytest.raises(
        StudySetupError, match=r"\(recipe: its trials ran with none, this sweep searches it\)"
    ):
        check_study_setup(study, {}, {}, {"recipe"}, keys)

    # Two workers of different setups starting together: A records its setup, B (nothing ran yet) takes
    # the study over and starts a trial; A's check before its first batch then refuses A.
    race = optuna.create_study(study_name="race", storage=storage)
    check_study_setup(race, {"recipe": "traps"}, {"recipe": "traps"}, set(), keys)
    check_study_setup(race, {"recipe": "none"}, {"recipe": "none"}, set(), keys)
    race.ask()
    with pytest.raises(StudySetupError, match=r"recipe: its trials ran with none, this sweep gives traps"):
        check_study_setup(race, {"recipe": "traps"}, {"recipe": "traps"}, set(), keys)
    # Objectives of the same directions, and a trial-size key, named as what they are.
    two = optuna.create_study(study_name="two", storage=storage)
    check_study_setup(
        two, {"sweep.objectives": "['success_rate', 'timeout_rate']", "env.num_envs": "128"}, {}, set(), keys
    )
    two.tell(two.ask(), 0.5)
    other = {"sweep.objectives": "['success_rate', 'collision_rate']", "env.num_envs": "256"}
    with pytest.raises(StudySetupError) as err:
        check_study_setup(two, other, {}, set(), keys, {"env.num_envs"})
    assert (
        "env.num_envs: its trials ran with 128, this sweep gives 256 (its trial size, "
        "sweep.trial_overrides_cpu/_gpu); sweep.objectives: its trials ran with ['success_rate', "
        "'timeout_rate'], this sweep gives ['success_rate', 'collision_rate']" in str(err.value)
    )

    def older(name: str, *setups: dict):
        study = optuna.create_study(study_name=name, storage=storage)
        study.tell(study.ask(), 0.4)  # by hand: no attributes, no run_dir
        for attrs in setups:
            trial = study.ask()
            for key, value in {
                "run_dir": "/runs/0",
                "success_rate": 0.5,
                "sweep.n_trials": "2",
                **attrs,
            }.items():
                trial.set_user_attr(key, value)
            study.tell(trial, 0.5)
        return study

    by_hand = older("by_hand")  # a trial that ran, but of no navexp sweep: this sweep's setup is taken
    check_study_setup(by_hand, {"recipe": "traps"}, {"recipe": "traps"}, set(), keys)
    assert optuna.load_study(study_name="by_hand", storage=storage).user_attrs[SETUP_ATTR] == {
        "recipe": "traps"
    }
    study = older("older", {"recipe": "traps"})
    with pytest.raises(
        StudySetupError, match=r"recipe: its trials ran with traps, this sweep gives \(not given\)\)"
    ):
        check_study_setup(study, {"env.num_envs": "128"}, {}, set(), keys)
    assert SETUP_ATTR not in optuna.load_study(study_name="older", storage=storage).user_attrs
    check_study_setup(study, {"recipe": "traps", "env.num_envs": "128"}, {"recipe": "traps"}, set(), keys)
    assert (
        optuna.load_study(study_name="older", storage=storage).user_attrs[SETUP_ATTR]["env.num_envs"] == "128"
    )
    mixed = older("mixed", {"recipe": "traps"}, {})
    with pytest.raises(
        StudySetupError, match=r"already holds trials of 2 setups \(their fixed overrides differ in"
    ):
        check_study_setup(mixed, {"recipe": "traps"}, {"recipe": "traps"}, set(), keys)


def test_a_sweep_says_when_its_space_switches_a_term_on_or_its_average_reaches_iteration_zero():
    """recipe=traps with the default space (built around reward=bcppo): its progress weight is 0 in
    reward=path, so the space switches the term on; the CPU trial size (40 iterations, saved every 20)
    saves 0, 20, 39, so the recipe's average of 4 includes iteration 0. The default config: neither."""
    from omegaconf import OmegaConf

    from navexp import compose_config
    from navexp.sweep.space import load_space
    from navexp.sweep.sweeper import setup_warnings

    searched = list(load_space("default"))
    trial_size = [
        "env.num_envs=128",
        "ppo.max_iterations=40",
        "ppo.save_interval=20",
        "eval.num_episodes=100",
    ]
    recipe = compose_config(["size=cpu", "recipe=traps"])
    OmegaConf.set_struct(recipe, False)
    recipe = OmegaConf.merge(recipe, {"hydra": {"runtime": {"choices": {"reward": "path"}}}})  # as in a sweep
    warnings = setup_warnings(recipe, searched, trial_size, set())
    assert warnings == [
        "the search space searches reward.terms.progress.weight, a term the composed reward (reward=path) "
        "has off (weight 0): its trials switch the term on",
        "each trial saves iterations [0, 20, 39] (ppo.max_iterations=40, ppo.save_interval=20), so its "
        "policy, the average of its last 4 checkpoints (ppo.average_checkpoints), includes iteration 0; a "
        "smaller ppo.average_checkpoints or more iterations (sweep.trial_overrides_cpu / _gpu) keep the "
        "average on trained checkpoints",
    ]
    longer = setup_warnings(recipe, [], trial_size, {"ppo.max_iterations"})  # the command line's 350 win
    assert longer == []
    assert setup_warnings(compose_config(["size=cpu"]), searched, trial_size, set()) == []


# -- optuna-dashboard ------------------------------------------------------------------------------------
def test_optuna_dashboard_serves_a_finished_study(tmp_path):
    """`optuna-dashboard sqlite:///<db> --host 127.0.0.1 --port P` (docs/sweeps.md): its HTTP API lists
    the study, and the study's trials with their values and parameters."""
    exe = shutil.which("optuna-dashboard")
    if exe is None:
        pytest.skip('optuna-dashboard is not installed (pip install -e ".[dashboard]")')
    url = f"sqlite:///{tmp_path}/s.db"
    study = optuna.create_study(study_name="dash", storage=open_storage(url), direction="maximize")
    for v in (0.25, 0.75):
        t = study.ask()
        t.suggest_float("ppo.algorithm.clip_param", 0.1, 0.3)
        study.tell(t, v)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [exe, url, "--host", "127.0.0.1", "--port", str(port), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}/api"
        deadline = time.monotonic() + 60
        while True:
            try:
                studies = json.load(urllib.request.urlopen(f"{base}/studies", timeout=5))
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read().decode()[-2000:]
                assert time.monotonic() < deadline, "optuna-dashboard did not answer within 60 s"
                time.sleep(0.5)
        summary = next(s for s in studies["study_summaries"] if s["study_name"] == "dash")
        detail = json.load(
            urllib.request.urlopen(f"{base}/studies/{summary['study_id']}?after=0", timeout=10)
        )
        trials = detail["trials"]
        assert [t["values"] for t in trials] == [[0.25], [0.75]]
        assert [t["state"] for t in trials] == ["Complete", "Complete"]
        assert {p["name"] for p in trials[0]["params"]} == {"ppo.algorithm.clip_param"}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_each_pruning_type_builds_its_optuna_pruner_and_a_typo_is_refused():
    from omegaconf import OmegaConf

    from navexp import compose_config
    from navexp.config.validation import validate_run_cfg
    from navexp.sweep.trial import pruner

    base = compose_config([]).sweep.pruning
    kinds = {}
    for kind in ("median", "percentile", "hyperband", "wilcoxon"):
        kinds[kind] = type(pruner(OmegaConf.merge(base, {"type": kind}))).__name__
    assert kinds == {
        "median": "MedianPruner",
        "percentile": "PercentilePruner",
        "hyperband": "HyperbandPruner",
        "wilcoxon": "WilcoxonPruner",
    }
    with pytest.raises(ValueError, match=r"sweep.pruning.type='wilcox' is invalid; allowed: \['median', "):
        validate_run_cfg(compose_config(["sweep.pruning.type=wilcox"]))


def test_sqlite_table_race_is_retried_not_reported_as_unopenable(tmp_path, monkeypatch):
    """Two workers creating one SQLite study race on its tables; the loser sees SQLite's
    'table alembic_version already exists' (an OperationalError), retries and opens the storage."""
    import sqlite3

    from sqlalchemy.exc import OperationalError

    import navexp.sweep.storage as storage_mod

    calls = []
    real = storage_mod.RDBStorage

    def racing(url):
        calls.append(url)
        if len(calls) == 1:
            raise OperationalError(
                "CREATE TABLE", {}, sqlite3.OperationalError("table alembic_version already exists")
            )
        return real(url)

    monkeypatch.setattr(storage_mod, "RDBStorage", racing)
    monkeypatch.setattr(storage_mod.time, "sleep", lambda s: None)
    storage = storage_mod.open_storage(f"sqlite:///{tmp_path}/study.db")
    assert len(calls) == 2 and storage_mod.study_names(storage) == []
