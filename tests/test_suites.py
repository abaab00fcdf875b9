"""Evaluation suites and metrics through the real env: per-family and per-scenario rates, distinct
cases, SPL and BARN of a scripted run, a suite on a tiny checkpoint (eval.json, TensorBoard, the CLI),
and bad suites."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import TINY
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from navexp import compose_config
from navexp.analysis.rollout import evaluate
from navexp.config.run_config import eval_env_cfg
from navexp.task.env import NavEnv
from navexp.train import run

RATES = ("success_rate", "collision_rate", "timeout_rate", "out_of_bounds_rate")
RUN = [
    *TINY,
    "env.maps.check_path=null",  # the evaluation draws shortest paths (SPL, BARN)
    "eval.num_episodes=4",
    "eval.plot_episodes=0",
    "eval.video_episodes=0",
    "size=none",
]


def standing(env: NavEnv):
    """A policy that never moves."""
    return lambda obs: torch.zeros(env.num_envs, env.num_actions)


def test_per_family_rates_sum_to_one_on_a_mixed_evaluation():
    """env=families, 12 held-out episodes of 1 s on 6 worlds: every family evaluated has its four rates
    summing to 1, its episodes add up to 12, and each family's SPL counts every one of its episodes
    (the evaluation's path check gives every layout a shortest path)."""
    cfg = compose_config(
        [
            "env=families",
            "env.device=cpu",
            "env.num_envs=6",
            "env.episode_length_s=1.0",
            "eval.num_episodes=12",
        ]
    )
    env = NavEnv(eval_env_cfg(cfg))
    metrics, _ = evaluate(standing(env), env, 12)
    by = metrics["by_family"]
    assert len(by) >= 2 and sum(f["num_episodes"] for f in by.values()) == 12
    for name, fm in by.items():
        assert sum(fm[r] for r in RATES) == pytest.approx(1.0), name
        assert fm["spl_num_episodes"] == fm["num_episodes"] and fm["spl"] == 0.0  # it never arrives


def test_a_two_entry_scenario_file_counts_two_distinct_cases(scenario_file):
    """2 entries on 2 worlds, 6 episodes: world w plays entry (w + 2k) mod 2 = w every round, so 3
    episodes per entry name and 2 distinct cases; all time out standing still, and the time-out
    interval is that of 2 of 2, [0.3424, 1], not 6 of 6."""
    path = scenario_file(
        """
        scenarios:
          - name: left
            robot: {x: -3.0, y: 0.0, yaw_deg: 0.0}
            goal: {x: 3.0, y: 0.0}
          - name: right
            robot: {x: 3.0, y: 1.0, yaw_deg: 180.0}
            goal: {x: -3.0, y: 1.0}
        """
    )
    cfg = compose_config(
        ["env.device=cpu", "env.num_envs=2", "env.episode_length_s=1.0", f"env.scenarios={path}"]
    )
    env = NavEnv(eval_env_cfg(cfg))
    m, _ = evaluate(standing(env), env, 6)
    assert m["num_episodes"] == 6 and m["num_distinct_cases"] == 2 and m["ci95_counts"] == "distinct cases"
    assert m["timeout_rate"] == 1.0 and m["ci95"]["timeout_rate"] == pytest.approx([0.3424, 1.0], abs=1e-4)
    assert list(m["by_scenario"]) == ["left", "right"]
    for name in ("left", "right"):
        s = m["by_scenario"][name]
        assert s["num_episodes"] == 3 and s["num_distinct_cases"] == 1 and s["timeout_rate"] == 1.0
        assert s["ci95"]["timeout_rate"] == pytest.approx([0.2066, 1.0], abs=1e-3)  # 1 of 1


def test_driving_straight_to_the_goal_scores_spl_1_and_barn_one_quarter(scenario_file):
    """An empty room, start (-3, 0), goal (3, 0): l = 6 m on the grid. Driving at full speed (1.5 m/s)
    towards the goal succeeds within 0.3 m of it, at most one 0.15 m step inside: 5.7 <= p <= 5.85 m
    < l, so SPL = 1; OT = 6 / 1.5 = 4 s and
    AT (about 4 s) < 4 OT = 16 s, so the BARN score is OT / (4 OT) = 0.25."""
    path = scenario_file(
        """
        scenarios:
          - name: straight
            robot: {x: -3.0, y: 0.0, yaw_deg: 0.0}
            goal: {x: 3.0, y: 0.0}
        """
    )
    cfg = compose_config(["env.device=cpu", "env.num_envs=1", f"env.scenarios={path}"])
    env = NavEnv(eval_env_cfg(cfg))

    def to_goal(obs):  # goal_polar = (dist / 5, sin, cos of the bearing) at columns 72..74
        sin, cos = obs["policy"][:, 73], obs["policy"][:, 74]
        return torch.stack((cos, sin, torch.zeros_like(cos)), dim=-1)

    m, _ = evaluate(to_goal, env, 1)
    assert m["success_rate"] == 1.0
    assert 5.7 - 1e-3 <= m["mean_path_length_m"] <= 5.85 + 1e-3
    assert m["spl"] == 1.0 and m["barn_score"] == 0.25
    assert m["by_scenario"]["straight"]["spl"] == 1.0


@pytest.fixture(scope="module")
def suite_run(tiny_run) -> Path:
    """A tiny trained run whose final evaluation is the default suite (room, dense)."""
    return tiny_run(RUN)


def test_the_final_evaluation_writes_every_suite_entry_to_eval_json_and_tensorboard(suite_run):
    """eval.json: the main entry (room) at the top level, both entries under 'entries' with rates
    summing to 1 and SPL over all 4 episodes; TensorBoard holds Eval/<metric> and Eval/<entry>/<metric>
    with the same values."""
    ev = json.loads((suite_run / "eval.json").read_text())
    assert (
        ev["suite"] == "default"
        and ev["suite_main_entry"] == "room"
        and list(ev["entries"]) == ["room", "dense"]
    )
    assert ev["success_rate"] == ev["entries"]["room"]["success_rate"]
    for name, m in ev["entries"].items():
        assert m["num_episodes"] == 4 and sum(m[r] for r in RATES) == pytest.approx(1.0), name
        assert m["spl_num_episodes"] == 4 and 0.0 <= m["spl"] <= 1.0 and m["by_family"].keys() == {"random"}
    acc = EventAccumulator(str(suite_run), size_guidance={"scalars": 0})
    acc.Reload()
    logged = {t: acc.Scalars(t)[-1].value for t in acc.Tags()["scalars"]}
    assert logged["Eval/success_rate"] == pytest.approx(ev["success_rate"])
    for name in ("room", "dense"):
        for key in (*RATES, "spl", "barn_score", "num_distinct_cases"):
            assert logged[f"Eval/{name}/{key}"] == pytest.approx(ev["entries"][name][key]), (name, key)


def test_evaluate_cli_runs_a_suite_file_and_names_its_output(suite_run, tmp_path):
    """suite=<path> with two families (corridor, cul_de_sac; 2 episodes each): its own file
    eval_model_1_run_<seed>_suite-<stem>.json, each entry holding only its family, rates summing to 1,
    and the run's eval.json untouched."""
    from navexp import evaluate

    suite = tmp_path / "two.yaml"
    weights = "{random: 0, corridor: %s, staggered: 0, cul_de_sac: %s, cluttered: 0, grid: 0}"
    entries = [("corridor", weights % (1, 0)), ("cul_de_sac", weights % (0, 1))]
    suite.write_text(
        "entries:\n"
        + "".join(
            f"  - name: {n}\n    num_episodes: 2\n    overrides:\n      env.maps.weights: {w}\n"
            f"      env.maps.rng: hashed\n      env.obstacles.wall_slots: 4\n"
            for n, w in entries
        )
    )
    own = (suite_run / "eval.json").read_bytes()
    metrics = evaluate.main([f"checkpoint={suite_run}", f"suite={suite}"])
    assert (suite_run / "eval.json").read_bytes() == own
    out = suite_run / f"eval_model_1_run_{metrics['layout_seed']}_suite-two.json"
    assert json.loads(out.read_text()) == metrics and metrics["suite"] == str(suite)
    for name in ("corridor", "cul_de_sac"):
        m = metrics["entries"][name]
        assert list(m["by_family"]) == [name] and m["num_episodes"] == 2
        assert sum(m[r] for r in RATES) == pytest.approx(1.0)
    out.unlink()


UNKNOWN_SUITE = r"suite='nope' is unknown; allowed: default \| dynamic \| families \| floorplans \| ood"


def test_an_unknown_suite_fails_listing_the_shipped_ones(suite_run, tmp_path):
    """suite=nope in evaluate, and eval.suite=nope in training: ValueError naming it and listing
    default | dynamic | families | floorplans | ood, before any episode or run directory."""
    from navexp import evaluate

    with pytest.raises(ValueError, match=UNKNOWN_SUITE):
        evaluate.main([f"checkpoint={suite_run}", "suite=nope"])
    with pytest.raises(ValueError, match=UNKNOWN_SUITE):
        run(compose_config([*RUN, "eval.suite=nope"]), tmp_path / "x", RUN, quiet=True)
    assert not (tmp_path / "x").exists()


def test_a_suite_entry_with_an_unknown_key_or_a_bad_value_fails_naming_the_entry(tmp_path):
    """An override key the config lacks: KeyError naming entry and key; a value validation rejects
    (more cylinders than slots): ValueError naming suite, entry and the key."""
    from navexp.config.suites import check_suite

    cfg = compose_config(["env.device=cpu"])
    typo = tmp_path / "typo.yaml"
    typo.write_text("entries:\n  - name: a\n    overrides: {env.obstacles.cylinder_cont: [1, 2]}\n")
    with pytest.raises(KeyError, match=r"suite entry 'a': override 'env.obstacles.cylinder_cont' is not"):
        check_suite(cfg, str(typo))
    bad = tmp_path / "bad.yaml"
    bad.write_text("entries:\n  - name: b\n    overrides: {env.obstacles.cylinder_count: [2, 99]}\n")
    with pytest.raises(ValueError, match=r"suite .*bad.yaml, entry b: .*cylinder_count"):
        check_suite(cfg, str(bad))


def test_shipped_suites_validate_against_the_default_config():
    """default has room then dense; families has one entry per map family, in FAMILIES order; ood has
    its four held-out geometries (tests/test_trap_geometry.py), floorplans its three held-out floor
    plans (tests/test_rooms.py); dynamic its moving-obstacle entries (tests/test_moving.py); all
    pass every entry's env validation."""
    from navexp.config.suites import check_suite, load_suite, shipped_suites
    from navexp.task.maps import FAMILIES

    cfg = compose_config(["env.device=cpu"])
    assert shipped_suites() == ["default", "dynamic", "families", "floorplans", "ood"]
    for name in shipped_suites():
        check_suite(cfg, name)
    assert [e.name for e in load_suite("default").entries] == ["run_env", "dense"]
    assert [e.name for e in load_suite("families").entries] == list(FAMILIES)
    assert [e.name for e in load_suite("dynamic").entries] == [
        "dynamic",
        "faster",
        "crowded",
        "crossing",
        "doorway",
    ]


def test_the_dynamic_suite_plays_the_random_room_whatever_the_run_trained_on():
    """Every drawn entry of suite=dynamic sets the random room as its only map family, so a run of
    the trap mix (recipe=dynamic) is scored on the same worlds as a run of env=dynamic: composed on
    recipe=dynamic, each entry's env draws only 'random' layouts."""
    from navexp.config.suites import entry_config, load_suite
    from navexp.task.maps import FAMILIES

    cfg = compose_config(["env.device=cpu", "recipe=dynamic"])
    drawn = [e for e in load_suite("dynamic").entries if e.name != "doorway"]
    assert len(drawn) == 4
    for entry in drawn:
        weights = dict(entry_config(cfg, entry).env.maps.weights)
        assert weights == {f: float(f == "random") for f in FAMILIES}, (entry.name, weights)


def test_eval_scalar_tags_per_entry_family_and_scenario():
    """Tags: Eval/<metric> for the main entry; with a suite Eval/<entry>/<metric>, plus
    Eval/<entry>/<family>/<metric> only for an entry mixing two families; without a suite a scenario
    file's entries as Eval/<scenario>/<metric>. What was evaluated (skip) and dicts are left out."""
    from navexp.analysis.suites import eval_scalars

    one = {"success_rate": 0.5, "ci95": {}, "by_family": {"random": {"success_rate": 0.5}}}
    fams = {"random": {"success_rate": 0.5}, "grid": {"success_rate": 0.0}}
    two = {"success_rate": 0.25, "by_family": fams}
    suite = {**one, "layout_seed": 7, "entries": {"room": one, "mix": two}}
    assert eval_scalars(suite, skip=("layout_seed",)) == {
        "Eval/success_rate": 0.5,
        "Eval/room/success_rate": 0.5,
        "Eval/mix/success_rate": 0.25,
        "Eval/mix/random/success_rate": 0.5,
        "Eval/mix/grid/success_rate": 0.0,
    }
    scen = {"success_rate": 1.0, "by_scenario": {"left": {"success_rate": 1.0}}}
    assert eval_scalars(scen) == {"Eval/success_rate": 1.0, "Eval/left/success_rate": 1.0}


THREE = """
scenarios:
  - name: a
    robot: {x: -3.0, y: -2.0, yaw_deg: 0.0}
    goal: {x: 3.0, y: -2.0}
  - name: b
    robot: {x: -3.0, y: 0.0, yaw_deg: 0.0}
    goal: {x: 3.0, y: 0.0}
  - name: c
    robot: {x: -3.0, y: 2.0, yaw_deg: 0.0}
    goal: {x: 3.0, y: 2.0}
"""


def test_fewer_episodes_than_scenario_entries_is_refused_naming_the_unplayed(
    suite_run, scenario_file, tmp_path
):
    """A 3-entry file with eval.num_episodes=2 would never play entry c: evaluate and a training's
    final evaluation refuse it before any episode, naming ['c'] and the minimum 3; 3 episodes play
    each entry once."""
    from navexp import evaluate

    path = scenario_file(THREE)
    with pytest.raises(
        ValueError, match=r"eval.num_episodes=2 is fewer than the 3 entries .*\['c'\] would never"
    ):
        evaluate.main([f"checkpoint={suite_run}", f"env.scenarios={path}", "eval.num_episodes=2"])
    with pytest.raises(ValueError, match=r"entry room: eval.num_episodes=2 is fewer than the 3 entries"):
        run(compose_config([*RUN, f"env.scenarios={path}", "eval.num_episodes=2"]), tmp_path / "x", RUN)
    assert not (tmp_path / "x").exists()
    metrics = evaluate.main(
        [
            f"checkpoint={suite_run}",
            f"env.scenarios={path}",
            "eval.num_episodes=3",
            f"out={tmp_path / 'e.json'}",
        ]
    )
    assert {k: v["num_episodes"] for k, v in metrics["by_scenario"].items()} == {"a": 1, "b": 1, "c": 1}


def test_an_entry_that_draws_its_layouts_plays_them_not_the_runs_scenario_file(
    suite_run, scenario_file, tmp_path
):
    """The default suite on a run given env.scenarios: room (the run's own env) plays the file, dense
    (its own obstacle counts) plays dense random rooms, and a training on the file may end on
    suite=families (every entry its own family). `navexp.evaluate suite=ood env.scenarios=<file>`, where
    every entry draws its own layouts, would play the asked file nowhere: refused, naming the file and
    the entries. An entry that only turns the path check on still plays the file."""
    from navexp import evaluate
    from navexp.config.suites import entry_config, load_suite
    from navexp.config.validation import validate_run_cfg

    path = scenario_file(THREE)
    cfg = compose_config(["env.device=cpu", f"env.scenarios={path}"])
    room, dense = (entry_config(cfg, e) for e in load_suite("default").entries)
    assert room.env.scenarios == path and dense.env.scenarios is None
    assert list(dense.env.obstacles.cylinder_count) == [5, 8]
    validate_run_cfg(compose_config([*RUN, f"env.scenarios={path}", "eval.suite=families"]))
    with pytest.raises(
        ValueError, match=r"env.scenarios=.* is played by no entry of suite ood: each of \['dead_end_xl', "
    ):
        evaluate.main([f"checkpoint={suite_run}", f"env.scenarios={path}", "suite=ood"])
    check = tmp_path / "check.yaml"
    check.write_text(
        "entries:\n  - name: a\n    overrides: {env.maps.check_path: true, env.obstacles.wall_slots: 4}\n"
    )
    (a,) = load_suite(str(check)).entries
    assert entry_config(cfg, a).env.scenarios == path


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        ([], ["room", "dense"]),
        (["recipe=traps"], ["traps", "dense"]),
        (["env=families"], ["families", "dense"]),
        (["env=dense"], ["run_env", "dense"]),
    ],
)
def test_the_run_envs_entry_is_named_after_the_env(overrides, names):
    """The default suite's first entry is the run's own env and carries its name (env.name), so a
    recipe=traps run's evaluation reads `traps`, not `room` as before; when the suite already has an
    entry of that name (`dense`), it stays `run_env`."""
    from navexp.config.suites import load_suite

    cfg = compose_config(overrides)
    assert [e.name for e in load_suite("default", cfg.env.name).entries] == names
