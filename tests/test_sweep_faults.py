"""The sweeper under hostile input (issue 49, rows 3-8): each bad input is refused before any trial in one
line naming the key or file and what is allowed, and a study keeps one identity, one space and one setup.

Studies run through Hydra's real multirun machinery in this process with the analytic task of
tests/test_sweeper_plugin.py (a trial takes milliseconds); values reach the sweeper the way Hydra composes
them (ListConfig, strings of the override grammar).
"""

from __future__ import annotations

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
