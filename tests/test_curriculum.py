"""The success curriculum: transitions with hysteresis, level -> layout settings, new layouts at the
level, state through a checkpoint and resume, the Curriculum/ tags, torchrun agreement, bad config."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from conftest import BASE, TINY
from hydra.errors import ConfigCompositionException
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from navexp import compose_config
from navexp.paths import CONFIG_DIR
from navexp.task.curriculum import SuccessCurriculum, enabled
from navexp.task.env import NavEnv
from navexp.train import run

NAN = float("nan")


def curriculum(*overrides: str) -> SuccessCurriculum:
    return SuccessCurriculum(compose_config(["curriculum=success", *overrides]))


def test_default_is_no_curriculum_and_success_has_its_documented_defaults():
    """`curriculum=none` is the default; `curriculum=success` composes with README's defaults."""
    assert not enabled(compose_config([]))
    cfg = compose_config(["curriculum=success"])
    cur = cfg.curriculum
    assert (cur.levels, cur.promote_above, cur.demote_below, cur.min_episodes) == (4, 0.8, 0.5, None)
    assert SuccessCurriculum(cfg).min_episodes == 1000  # null: the env's rolling window


@pytest.mark.parametrize("variant", sorted(p.stem for p in (CONFIG_DIR / "curriculum").glob("*.yaml")))
@pytest.mark.parametrize("env", ["room", "dense", "families"])
def test_every_variant_composes_with_every_env(variant, env):
    """Each configs/curriculum/ variant composes with each env, and an enabled one validates."""
    cfg = compose_config([f"curriculum={variant}", f"env={env}"])
    assert str(cfg.curriculum.type) == variant
    if enabled(cfg):
        c = SuccessCurriculum(cfg)
        assert c.values_at(c.levels)["cylinder_count"] == list(cfg.env.obstacles.cylinder_count)


def test_transitions_on_a_synthetic_success_sequence():
    """Up above 0.8, down below 0.5, never before 2 iterations and 100 episodes since the last change,
    never on NaN, never past 0 or L; hand-computed level after each iteration."""
    c = curriculum("curriculum.levels=3", "curriculum.min_episodes=100", "curriculum.min_iterations=2")
    # (rolling success rate, episodes finished in the iteration, level after it)
    sequence = [
        (0.90, 60, 0),  # 1 iteration since the start: too early
        (0.90, 60, 1),  # 2 iterations, 120 episodes, 0.9 > 0.8: up
        (0.95, 200, 1),  # 1 iteration since the change
        (0.95, 10, 2),  # 2 iterations, 210 episodes: up
        (0.30, 50, 2),  # 1 iteration
        (0.30, 40, 2),  # 2 iterations but 90 < 100 episodes
        (0.30, 10, 1),  # 100 episodes, 0.3 < 0.5: down
        (0.60, 500, 1),  # 1 iteration
        (0.60, 500, 1),  # between the thresholds: stay (the counters go on)
        (0.81, 1, 2),  # 3 iterations, 1001 episodes, 0.81 > 0.8: up
        (NAN, 100, 2),  # 1 iteration
        (NAN, 100, 2),  # settled, but no rate
        (0.80, 100, 2),  # exactly 0.8 is not above it
        (0.99, 0, 3),  # up to L = 3
        (0.99, 100, 3),
        (0.99, 100, 3),  # at the top: stays
    ]
    levels = []
    for rate, episodes, _ in sequence:
        c.update(rate, episodes)
        levels.append(c.state.level)
    assert levels == [lv for *_, lv in sequence]
    # 5 changes (0->1->2->1->2->3); since the last: 2 iterations, 0 + 100 + 100 episodes.
    assert c.state_dict() == {
        "level": 3,
        "episodes_since_change": 200,
        "iterations_since_change": 2,
        "changes": 5,
    }


def test_no_demotion_below_level_zero():
    """A failing policy at level 0 stays at 0 (and the returned step is 0)."""
    c = curriculum("curriculum.min_episodes=1")
    assert [c.update(0.0, 10) for _ in range(3)] == [0, 0, 0] and c.state.level == 0


def test_level_to_layout_settings_by_hand():
    """Level 0 = easy, L = hard, the midpoint halfway (counts rounded half up, weights normalised
    first); the layout specs and the auto path check follow."""
    c = curriculum(
        "env=families",
        "curriculum.levels=4",
        "curriculum.easy.cylinder_count=[0,1]",
        "curriculum.hard.cylinder_count=[4,8]",
        "curriculum.easy.cylinder_radius_m=[0.1,0.2]",
        "curriculum.hard.cylinder_radius_m=[0.2,0.6]",
        "curriculum.hard.weights.random=1",
        "curriculum.hard.weights.corridor=3",
    )
    v0, v1, v2, v4 = (c.values_at(lv) for lv in (0, 1, 2, 4))
    assert v0["cylinder_count"] == [0, 1] and v4["cylinder_count"] == [4, 8]
    # level 2: [0 + 4 * 0.5, 1 + 7 * 0.5] = [2, 4.5] -> [2, 5]; level 1: [1, 2.75] -> [1, 3]
    assert v2["cylinder_count"] == [2, 5] and v1["cylinder_count"] == [1, 3]
    assert v2["cylinder_radius_m"] == pytest.approx([0.15, 0.4])  # [0.1 + 0.05, 0.2 + 0.2]
    # box_count: success.yaml's easy [0, 1]; hard null = env.obstacles.box_count [1, 3] -> [0.5, 2] -> [1, 2]
    assert v0["box_count"] == [0, 1] and v4["box_count"] == [1, 3] and v2["box_count"] == [1, 2]
    # weights: easy random 1; hard random 1/4, corridor 3/4; level 2: random 0.5 + 0.125, corridor 0.375
    assert v0["weights"]["random"] == 1.0 and v0["weights"]["corridor"] == 0.0
    assert v4["weights"]["random"] == pytest.approx(0.25) and v4["weights"]["corridor"] == pytest.approx(0.75)
    assert v2["weights"]["random"] == pytest.approx(0.625) and v2["weights"]["corridor"] == pytest.approx(
        0.375
    )
    assert v2["weights"]["grid"] == 0.0  # hard left grid null: 0
    spec, maps = c.specs_at(2)
    assert spec.cylinder_count == (2, 5) and spec.cylinder_slots == 14  # slots stay the env's
    assert [f for f, _ in maps.active_families] == ["random", "corridor"]
    assert c.specs_at(0)[1].check_path is False and maps.check_path is True  # auto: on with walls


def test_hard_null_takes_the_env_settings():
    """`hard: {}` (success.yaml) ends at the env's own obstacles and family weights."""
    c = curriculum("env=families")
    env = compose_config(["env=families"]).env
    top = c.values_at(c.levels)
    assert top["cylinder_count"] == list(env.obstacles.cylinder_count)
    assert top["box_half_size_m"] == pytest.approx(list(env.obstacles.box_half_size_m))
    assert top["weights"] == pytest.approx(dict(env.maps.weights))  # they sum to 1 already


def test_scalars_name_level_ranges_and_used_families():
    """Curriculum/ scalars: the level, min/max of each range, weights of families either end uses."""
    s = curriculum("env=families").scalars(0)
    assert s["Curriculum/level"] == 0.0 and s["Curriculum/cylinder_count_max"] == 2.0
    assert s["Curriculum/weight_random"] == 1.0 and s["Curriculum/weight_grid"] == 0.0
    assert "Curriculum/weight_grid" not in curriculum().scalars(0)  # room: random only at both ends


def test_new_layouts_follow_the_level():
    """After a level change newly drawn layouts have the level's obstacle counts; the episodes in
    progress keep their layout until they reset."""
    cfg = compose_config(
        [
            *BASE,
            "env.num_envs=4",
            "curriculum=success",
            "curriculum.levels=2",
            "curriculum.easy.cylinder_count=[0,0]",
            "curriculum.easy.box_count=[0,0]",
            "curriculum.hard.cylinder_count=[6,8]",
            "curriculum.hard.box_count=[3,4]",
        ]
    )
    c = SuccessCurriculum(cfg)
    env = NavEnv(c.experiment_cfg_at(cfg, 0))
    every = torch.ones(200, dtype=torch.bool)

    def counts(lay) -> tuple[tuple[int, int], tuple[int, int]]:
        cyl, box = lay.cyl_active.sum(1), lay.box_active.sum(1)
        return (int(cyl.min()), int(cyl.max())), (int(box.min()), int(box.max()))

    assert counts(env.layout) == ((0, 0), (0, 0))
    assert counts(env.layout_pool.take(every)) == ((0, 0), (0, 0))
    env.set_layout_specs(*c.specs_at(2))
    assert counts(env.layout) == ((0, 0), (0, 0))  # in progress: unchanged
    env.reset()
    cyl, box = counts(env.layout)
    assert 6 <= cyl[0] <= cyl[1] <= 8 and 3 <= box[0] <= box[1] <= 4
    # 200 fresh layouts cover the level's ranges exactly (each end missed with probability < 2^-100)
    assert counts(env.layout_pool.take(every)) == ((6, 8), (3, 4))
    env.set_layout_specs(*c.specs_at(1))  # level 1: [3, 4] -> [3, 4] cylinders, [1.5, 2] -> [2, 2] boxes
    assert counts(env.layout_pool.take(every)) == ((3, 4), (2, 2))


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("curriculum.promote_above=1.5", ["curriculum.promote_above=1.5", "[0, 1]"]),
        ("curriculum.demote_below=-0.1", ["curriculum.demote_below=-0.1", "[0, 1]"]),
        ("curriculum.demote_below=0.9", ["curriculum.demote_below=0.9", "< curriculum.promote_above (0.8)"]),
        ("curriculum.levels=0", ["curriculum.levels=0", ">= 1"]),
        ("curriculum.start_level=5", ["curriculum.start_level=5", "0 <= value <= 4"]),
        ("curriculum.min_episodes=0", ["curriculum.min_episodes=0", ">= 1 or null"]),
        ("curriculum.min_iterations=0", ["curriculum.min_iterations=0", ">= 1"]),
        ("curriculum.type=hard", ["curriculum.type='hard'", "none | success"]),
        ("+curriculum.hard.weights.forest=1", ["curriculum.hard.weights.forest=1.0", "random | corridor"]),
        ("curriculum.easy.weights.random=-1", ["curriculum.easy.weights.random=-1.0", ">= 0"]),
        (
            "curriculum.easy.cylinder_count=[0,9]",
            ["curriculum.easy (level 0)", "obstacles.cylinder_count=[0, 9]", "cylinder_slots (8)"],
        ),
        ("curriculum.hard.weights.grid=1", ["curriculum.hard (level 4)", "obstacles.wall_slots=0"]),
    ],
)
def test_bad_config_fails_naming_the_value(override, expected):
    """Each impossible curriculum fails at construction with the key, the value and what is allowed."""
    with pytest.raises(ValueError) as err:
        curriculum(override)
    for part in expected:
        assert part in str(err.value), str(err.value)


def test_unknown_key_fails_at_compose():
    """A misspelled key (or family) fails when Hydra composes, naming it."""
    for bad in ("curriculum.promote=0.9", "curriculum.easy.weights.forest=1"):
        with pytest.raises(ConfigCompositionException, match=bad.split("=")[0]):
            compose_config(["curriculum=success", bad])


# -- training ----------------------------------------------------------------------------------
# 1 s episodes from >= 2 m away at <= 1.5 m/s never succeed: the rolling rate is 0 < demote_below,
# so with min_episodes=1 the level falls by one after every iteration until 0.
RUN = [
    *TINY,
    "ppo.save_interval=1",
    "eval.enabled=false",
    "size=none",
    "curriculum=success",
    "curriculum.levels=2",
    "curriculum.start_level=2",
    "curriculum.promote_above=1.0",
    "curriculum.min_episodes=1",
]


def level_scalars(run_dir: Path) -> list[tuple[int, float]]:
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    assert "Curriculum/cylinder_count_max" in acc.Tags()["scalars"]
    return [(e.step, e.value) for e in acc.Scalars("Curriculum/level")]


def test_training_logs_checkpoints_and_resumes_the_level(tmp_path, capsys):
    """Curriculum/level is logged per iteration (the level it trained on), changes are printed, the
    state is in every checkpoint, and resume continues at the saved level, not at start_level."""
    run_dir = tmp_path / "run"
    run(compose_config(RUN), run_dir, RUN, quiet=False)
    out = capsys.readouterr().out
    assert "curriculum: level 2 of 2" in out
    assert "curriculum down: level 2 -> 1 of 2 after iteration 1" in out
    assert "curriculum down: level 1 -> 0 of 2 after iteration 2" in out
    assert level_scalars(run_dir) == [(0, 2.0), (1, 1.0)]
    states = {
        p.name: torch.load(p, map_location="cpu", weights_only=True)["infos"]["curriculum"]
        for p in run_dir.glob("model_*.pt")
    }
    assert states["model_0.pt"]["level"] == 1 and states["model_1.pt"]["level"] == 0
    assert states["model_1.pt"]["changes"] == 2 and states["model_1.pt"]["iterations_since_change"] == 0
    assert json.loads((run_dir / "run_info.json").read_text())["curriculum"]["level"] == 0

    resumed = [*RUN, "ppo.max_iterations=3", f"resume={run_dir}"]
    run(compose_config(resumed), tmp_path / "ignored", resumed, quiet=False)
    out = capsys.readouterr().out
    assert "curriculum: level 0 of 2 (resumed)" in out
    steps = dict(level_scalars(run_dir))
    assert steps[2] == 0.0  # the saved level; start_level would log 2
    final = torch.load(run_dir / "model_2.pt", map_location="cpu", weights_only=True)["infos"]["curriculum"]
    assert final == {
        "level": 0,
        "episodes_since_change": final["episodes_since_change"],
        "iterations_since_change": 1,
        "changes": 2,
    }
    assert final["episodes_since_change"] > 0


def test_resume_without_the_curriculum_says_so(tmp_path, capsys):
    """A curriculum checkpoint resumed with curriculum=none trains on the env's layouts and says so."""
    run_dir = tmp_path / "run"
    short = [*RUN, "ppo.max_iterations=1"]
    run(compose_config(short), run_dir, short, quiet=True)
    plain = [*TINY, "eval.enabled=false", "size=none", f"resume={run_dir}"]
    run(compose_config(plain), tmp_path / "ignored", plain, quiet=False)
    assert "trained with a curriculum (level 1); curriculum=none" in capsys.readouterr().out


@pytest.mark.e2e
def test_ranks_agree_under_torchrun(tmp_path):
    """2 CPU ranks: rank 0's decisions reach rank 1, both end at the same state (run_info.json)."""
    from test_distributed import finish, run_dirs, torchrun

    rc, out = finish(torchrun(tmp_path, *RUN))
    assert rc == 0, out[-4000:]
    (run_dir,) = run_dirs(tmp_path)
    info = json.loads((run_dir / "run_info.json").read_text())
    assert info["curriculum_per_rank"] == [info["curriculum"]] * 2 and info["curriculum"]["level"] == 0
    assert out.count("curriculum down") == 2  # printed once per change (rank 0)
    assert math.isfinite(level_scalars(run_dir)[-1][1])
