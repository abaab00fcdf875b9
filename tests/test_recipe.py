"""The ``recipe`` group: ``recipe=traps`` is the documented trap-recipe command in one word."""

from __future__ import annotations

import pytest
from hydra.errors import MissingConfigException
from omegaconf import OmegaConf

from navexp import compose_config
from navexp.config.presets import applied_preset
from navexp.config.run_config import load_run_config

TRAP_COMMAND = [
    "env=traps",
    "reward=path",
    "obs=path_critic",
    "env.robot.safety_horizon_s=0.1",
    "ppo.model=rnn",
    "ppo.num_mini_batches=2",
    "ppo.num_learning_epochs=3",
    "ppo.average_checkpoints=4",
]
"""The trap recipe as README.md wrote it before the group existed (and before the ppo sections: the
old names, ``ppo.model``, still compose to the same config)."""


@pytest.mark.parametrize("size", ["cpu", "gpu"])
def test_the_trap_recipe_is_the_documented_command(size):
    """recipe=traps composes to exactly the config of the long command (only ``recipe`` differs),
    on either size preset: 2 mini-batches, not the preset's 4; 40 s episodes; a GRU."""
    by_name = OmegaConf.to_container(compose_config([f"size={size}", "recipe=traps"]))
    by_keys = OmegaConf.to_container(compose_config([f"size={size}", *TRAP_COMMAND]))
    assert (by_name.pop("recipe"), by_keys.pop("recipe")) == ("traps", "none")
    assert by_name == by_keys
    algorithm = by_name["ppo"]["algorithm"]
    assert algorithm["num_mini_batches"] == 2 and algorithm["num_learning_epochs"] == 3
    assert by_name["env"]["episode_length_s"] == 40.0 and by_name["ppo"]["policy"]["model"] == "rnn"
    assert by_name["env"]["maps"]["weights"]["cul_de_sac"] == 0.25


def test_the_dynamic_recipe_is_the_trap_recipe_with_moving_obstacles_and_scan_history():
    """recipe=dynamic (issue 50): the trap recipe's config, plus env=dynamic's moving obstacles (the same
    env.dynamic block) in the trap mix, the 3 earlier scans in the actor's observation and the
    time-to-contact penalty (-0.5, horizon 1 s; off in the trap recipe); nothing else."""
    dynamic = OmegaConf.to_container(compose_config(["size=cpu", "recipe=dynamic"]))
    traps = OmegaConf.to_container(compose_config(["size=cpu", "recipe=traps"]))
    room = OmegaConf.to_container(compose_config(["size=cpu", "env=dynamic"]))
    assert dynamic["env"]["dynamic"] == room["env"]["dynamic"]
    moving = dynamic["env"]["dynamic"]
    assert moving["cylinder_count"] == [2, 3] and moving["box_slots"] == 1
    assert dynamic["obs"]["terms"]["lidar_history"]["enabled"] is True
    assert dynamic["obs"]["terms"]["lidar_history"]["params"]["frames"] == 3
    assert dynamic["env"]["name"] == "dynamic_traps"
    ttc = dynamic["reward"]["terms"]["moving_ttc"]
    assert ttc == {"weight": -0.5, "params": {"horizon_s": 1.0}}, ttc
    assert traps["reward"]["terms"]["moving_ttc"]["weight"] == 0.0
    for cfg in (dynamic, traps):
        cfg.pop("recipe"), cfg["reward"]["terms"].pop("moving_ttc")
        cfg["env"].pop("dynamic"), cfg["env"].pop("name"), cfg["obs"]["terms"].pop("lidar_history")
    assert dynamic == traps


def test_the_command_line_wins_over_the_recipe():
    """recipe=traps env=room ppo.algorithm.num_mini_batches=8: the room's 25 s episodes, 8 mini-batches, the
    recipe's other keys (the GRU, the 0.1 s safety horizon) kept."""
    cfg = compose_config(["size=cpu", "recipe=traps", "env=room", "ppo.algorithm.num_mini_batches=8"])
    assert cfg.env.episode_length_s == 25.0 and cfg.env.maps.weights.cul_de_sac == 0.0
    assert cfg.ppo.algorithm.num_mini_batches == 8
    assert cfg.ppo.policy.model == "rnn" and cfg.env.robot.safety_horizon_s == 0.1


def test_the_size_preset_reports_only_the_keys_it_set():
    """With the recipe on the cpu preset, the preset's 4 mini-batches are not reported as applied
    (the recipe's 2 are); its 256 worlds and 350 iterations are."""
    overrides = ["size=cpu", "recipe=traps"]
    applied = applied_preset("cpu", overrides, compose_config(overrides))
    assert "ppo.algorithm.num_mini_batches" not in applied
    assert applied["env.num_envs"] == 256 and applied["ppo.max_iterations"] == 350
    plain = applied_preset("cpu", ["size=cpu"], compose_config(["size=cpu"]))
    assert plain["ppo.algorithm.num_mini_batches"] == 4


def test_an_unknown_recipe_names_the_options():
    """recipe=trap (a typo): Hydra's error names the value and lists none and traps."""
    with pytest.raises(MissingConfigException) as err:
        compose_config(["recipe=trap"])
    message = str(err.value)
    assert "recipe/trap" in message and "none" in message and "traps" in message


def test_a_recipe_cannot_be_applied_to_a_trained_run():
    """Evaluating a stored run with recipe=traps fails naming the value and the run's own recipe."""
    ckpt = {"infos": {"config": OmegaConf.to_container(compose_config(["size=cpu", "recipe=traps"]))}}
    message = r"recipe=traps cannot apply to a trained run.*this run's recipe: traps"
    with pytest.raises(ValueError, match=message):
        load_run_config(ckpt, ["recipe=traps"])
    assert load_run_config(ckpt, ["env=dense"]).recipe == "traps"
