"""The app layer: one command-line parser, the sweeper class per hydra/sweeper choice, one rollout module."""

from __future__ import annotations

import re

import pytest
from omegaconf import OmegaConf

from navexp.config.cli import override_keys, parse_command_line

PLAY = {"checkpoint": None, "episodes": "16", "out": None}


def test_own_options_and_hydra_overrides_are_split_in_order():
    """Own options by name (defaults filled in), every config override kept in command-line order."""
    args = parse_command_line(
        [
            "env=dense",
            "checkpoint=runs/a",
            "eval.num_episodes=5",
            "+env.robot.params.k=1",
            "~obs.history_length",
            "size=cpu",
        ],
        PLAY,
        "usage",
        required=("checkpoint",),
    )
    assert args.options == {"checkpoint": "runs/a", "episodes": "16"}
    assert args.overrides == [
        "env=dense",
        "eval.num_episodes=5",
        "+env.robot.params.k=1",
        "~obs.history_length",
        "size=cpu",
    ]
    assert override_keys(args.overrides) == {
        "env",
        "eval.num_episodes",
        "env.robot.params.k",
        "obs.history_length",
        "size",
    }


def test_unknown_option_lists_the_valid_ones():
    """episode=5 (a typo of episodes=) is neither an option nor a config key: the error lists the options."""
    with pytest.raises(
        ValueError, match=r"unknown option 'episode=5'; options: checkpoint=, episodes=, out="
    ):
        parse_command_line(["checkpoint=a", "episode=5"], PLAY, "usage")


def test_tools_without_overrides_refuse_config_keys_and_empty_values():
    """overrides=False (export, bench): env=dense is an unknown option; out= without a value is an error;
    a missing required option names itself and the usage."""
    with pytest.raises(
        ValueError, match=r"unknown option 'env=dense'; options: checkpoint=, episodes=, out=;"
    ):
        parse_command_line(["checkpoint=a", "env=dense"], PLAY, "usage", overrides=False)
    with pytest.raises(ValueError, match=r"option 'out=' has no value; usage: U"):
        parse_command_line(["checkpoint=a", "out="], PLAY, "U")
    with pytest.raises(ValueError, match=r"missing checkpoint=; usage: U"):
        parse_command_line(["episodes=3"], PLAY, "U", required=("checkpoint",))


def test_cli_entry_points_use_the_parser():
    """evaluate, play, export and bench reject a misspelled option naming their own options."""
    from navexp import bench, evaluate, export, play

    with pytest.raises(ValueError, match=r"unknown option 'ckpt=x'; options: checkpoint=, out="):
        evaluate.main(["ckpt=x"])
    with pytest.raises(ValueError, match=r"unknown option 'episode=3'.*episodes=.*beam_every="):
        play.main(["checkpoint=x", "episode=3"])
    with pytest.raises(ValueError, match=r"unknown option 'env=dense'; options: checkpoint=, out="):
        export.main(["checkpoint=x", "env=dense"])
    with pytest.raises(
        ValueError, match=r"unknown option 'worlds=8'; options: device=, backends=, num_envs="
    ):
        bench.parse_args(["worlds=8"])
    assert bench.parse_args(["num_envs=8"])["num_envs"] == "8"


def _sweeper_class(choice: str) -> type:
    """The class Hydra instantiates for ``hydra/sweeper=<choice>`` with navexp's config."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import get_class

    from navexp.config.schemas import register_configs
    from navexp.paths import CONFIG_DIR

    register_configs()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"hydra/sweeper={choice}"], return_hydra_config=True)
    return get_class(cfg.hydra.sweeper._target_)


def test_sweepers_are_hydras_basic_and_navexps_optuna_plugin():
    """basic -> Hydra's own (what `-m seed=1,2` runs); optuna -> navexp's plugin, a Sweeper on Hydra's
    public API (no other Optuna plugin in between)."""
    from hydra.plugins.sweeper import Sweeper

    basic = _sweeper_class("basic")
    assert issubclass(basic, Sweeper) and basic.__name__ == "BasicSweeper"
    optuna_sweeper = _sweeper_class("optuna")
    # By name: Hydra's plugin discovery may import the plugin modules a second time (new class objects).
    assert [f"{c.__module__}.{c.__qualname__}" for c in optuna_sweeper.__mro__][:2] == [
        "hydra_plugins.navexp_sweeper.optuna_sweeper.NavOptunaSweeper",
        "hydra.plugins.sweeper.Sweeper",
    ]


def test_evaluate_records_every_episode_once_with_its_trajectory():
    """A standing robot (zero actions) in an empty room with 1 s episodes: 5 episodes on 2 worlds (3
    rounds, the last counts 1 world) all time out after 10 control steps, so each recorded path has
    10 + 1 states and the time-out rate is 5 / 5 = 1 with Wilson interval [0.566, 1]."""
    import torch

    from navexp import compose_config
    from navexp.analysis.rollout import evaluate
    from navexp.config.run_config import eval_env_cfg
    from navexp.task.env import NavEnv

    cfg = compose_config(
        ["env=empty", "env.device=cpu", "env.num_envs=2", "env.episode_length_s=1.0", "eval.num_episodes=5"]
    )
    env = NavEnv(eval_env_cfg(cfg))
    metrics, episodes = evaluate(lambda obs: torch.zeros(env.num_envs, env.num_actions), env, 5, record=True)
    assert metrics["num_episodes"] == 5 and metrics["timeout_rate"] == 1.0 and metrics["success_rate"] == 0.0
    low, high = metrics["ci95"]["timeout_rate"]
    assert abs(low - 0.5655) < 1e-3 and high == 1.0  # Wilson: centre 0.783, half 0.217 for 5 of 5
    assert metrics["mean_time_to_goal_s"] is None
    assert len(episodes) == 5 and all(len(e.pos) == 11 and e.reason_name == "time_out" for e in episodes)
    assert all(abs(e.pos[-1] - e.pos[0]).max() < 1e-3 for e in episodes)  # it stood still
    assert evaluate(lambda obs: torch.zeros(env.num_envs, env.num_actions), env, 3)[1] == []


def test_a_run_stored_before_newer_keys_still_loads_with_their_defaults():
    """A run config saved before env.sim.nthread, the LiDAR realism keys and env.robot.name existed:
    those keys read their defaults (None, 0.0, holonomic), the run's own values stay (12 worlds,
    noise 0.03 m), and an override still wins."""
    from navexp import compose_config
    from navexp.config.run_config import load_run_config

    stored = OmegaConf.to_container(
        compose_config(["env.num_envs=12", "env.lidar.range_noise_std_m=0.03"]), resolve=False
    )
    del (
        stored["env"]["sim"]["nthread"],
        stored["env"]["lidar"]["dropout_prob"],
        stored["env"]["robot"]["name"],
    )
    cfg = load_run_config(
        {"_path": "old/model_5.pt", "infos": {"config": stored}}, ["env.lidar.jitter_deg=1"]
    )
    assert cfg.env.sim.nthread is None and cfg.env.lidar.dropout_prob == 0.0
    assert cfg.env.robot.name == "holonomic"
    assert cfg.env.num_envs == 12 and cfg.env.lidar.range_noise_std_m == 0.03
    assert cfg.env.lidar.jitter_deg == 1.0


def test_another_env_on_a_stored_run_keeps_its_robot_and_lidar():
    """evaluate/play of a run trained as a diffdrive of radius 0.25 with the safety filter and a 32-beam
    LiDAR at dropout 0.3, with env=dense (another world): the run's robot and LiDAR stay and the
    obstacles are dense's. A single key on the command line changes that key only (dropout 0, the
    filter off; the 32 beams and the 0.25 m radius stay); robot= swaps the robot."""
    from navexp import compose_config
    from navexp.config.run_config import load_run_config

    trained = [
        "robot=diffdrive",
        "env.robot.radius_m=0.25",
        "env.robot.safety_horizon_s=0.1",
        "env.lidar.dropout_prob=0.3",
        "env.lidar.num_beams=32",
    ]
    ckpt = {"_path": "run/model_5.pt", "infos": {"config": OmegaConf.to_container(compose_config(trained))}}
    cfg = load_run_config(ckpt, ["env=dense"])
    assert (cfg.env.robot.name, cfg.env.robot.radius_m, cfg.env.robot.safety_horizon_s) == (
        "diffdrive",
        0.25,
        0.1,
    )
    assert (cfg.env.lidar.dropout_prob, cfg.env.lidar.num_beams) == (0.3, 32)
    dense = compose_config(["env=dense"]).env.obstacles.cylinder_count
    assert list(cfg.env.obstacles.cylinder_count) == list(dense) != [0, 0]
    cfg = load_run_config(ckpt, ["env=dense", "env.lidar.dropout_prob=0", "env.robot.safety_horizon_s=0"])
    assert (cfg.env.lidar.dropout_prob, cfg.env.lidar.num_beams) == (0.0, 32)
    assert (cfg.env.robot.name, cfg.env.robot.radius_m, cfg.env.robot.safety_horizon_s) == (
        "diffdrive",
        0.25,
        0.0,
    )
    cfg = load_run_config(ckpt, ["env=dense", "robot=holonomic"])
    assert cfg.env.robot.name == "holonomic" and cfg.env.robot.radius_m == 0.2


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("env.lidar.nosie=1", "error: Could not override 'env.lidar.nosie'. To append to your config use "
         "+env.lidar.nosie=1 Key 'nosie' not in 'LidarCfg'"),
        ("env.lidar.latency_steps=1.5", "error: Error merging override env.lidar.latency_steps=1.5 "
         "Value '1.5' of type 'float' could not be converted to Integer"),
        ("robot=tank", "error: In 'config': Could not find 'robot/tank' Available options in 'robot': "),
    ],
)  # fmt: skip
def test_a_tools_bad_override_is_one_line(override, message, capsys):
    """evaluate, play and export compose the run's config with the command line: an override Hydra
    refuses ends the tool in one `error:` line (exit status 2), not Hydra's traceback."""
    from navexp import compose_config
    from navexp.config.cli import run_tool

    with pytest.raises(SystemExit) as stop:
        run_tool(lambda: compose_config([override]))
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith(message) and err.count("\n") == 1, err


KLL = "ppo.algorithm.desired_kll is not a config key; closest: ppo.algorithm.desired_kl"
TYPOS = [
    ("+ppo.algorithm.desired_kll=0.01", KLL),
    ("ppo.algorithm.desired_kll=0.01", KLL),
    ("ppo.desired_kll=0.01", "ppo.desired_kll is not a config key; closest: ppo.algorithm.desired_kl"),
    ("+reward.terms.colision.weight=-5", "closest: reward.terms.collision.weight"),
    ("+eval.num_episdes=5", "closest: eval.num_episodes"),
    (
        "reward=bcpo",
        "reward=bcpo is not an option of the reward group (in 'reward=bcpo'); options: bcppo | path",
    ),
]


@pytest.mark.parametrize(("override", "message"), TYPOS)
def test_a_misspelled_key_never_trains(override, message, tmp_path, monkeypatch):
    """A key the schema does not have, with or without `+`, and an unknown group option: train refuses
    it in one `Error:` line naming the closest valid keys before Hydra composes (no directory); evaluate
    and play (the shared parser) refuse it the same way. Before, `+ppo.algorithm.desired_kll=0.01`
    trained a full run that ignored the key."""
    from navexp.experiment.launch import app_argv

    monkeypatch.chdir(tmp_path)
    for argv in (
        ["train.py", override, "ppo.max_iterations=1"],
        ["train.py", "-m", "hydra/sweeper=optuna", override],
    ):
        with pytest.raises(SystemExit) as stop:
            app_argv(argv)
        error = str(stop.value.code)
        assert error.startswith("Error: ") and message in error and "\n" not in error, error
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_command_line(["checkpoint=a", override], PLAY, "usage")
    assert list(tmp_path.iterdir()) == []


def test_the_key_check_accepts_every_key_of_every_variant_and_the_open_dicts():
    """No false refusal: every key path of every group option's composed config passes the check, so do
    the open dict (`+env.robot.params.<k>`), Hydra's own keys and groups, a basic sweep over options, and
    a group added from a user's search path."""
    from navexp import compose_config
    from navexp.config.keys import _schema, check_overrides, config_groups, unknown_key

    groups, schema = config_groups(), _schema()
    assert "scenarios" not in groups and "suites" not in groups and "base_reward" not in groups["reward"]
    for group, options in groups.items():
        for option in options:
            cfg = compose_config([f"{group}={option}"])
            paths = [p for p in _key_paths(cfg) if not p.startswith("hydra")]
            assert len(paths) > 100
            bad = [p for p in paths if unknown_key(p, schema) is not None]
            assert bad == [], (group, option, bad[:5])
    check_overrides(
        [
            "+env.robot.params.lateral_k=5",
            "+hydra.job.env_set.A=1",
            "hydra/sweeper=optuna",
            "reward=bcppo,path",
        ]
    )
    check_overrides(["hydra.searchpath=[pkg://elsewhere]", "+exp=old"])


def _key_paths(node, prefix: str = "") -> list[str]:
    from omegaconf import DictConfig, ListConfig

    out = []
    if isinstance(node, DictConfig):
        items = [(str(k), node._get_node(k)) for k in node.keys()]
    elif isinstance(node, ListConfig):
        items = [(str(i), node._get_node(i)) for i in range(len(node))]
    else:
        return out
    for k, child in items:
        path = f"{prefix}.{k}" if prefix else k
        out += [path, *_key_paths(child, path)]
    return out


def test_ctrl_c_in_a_tool_ends_in_one_line(capsys):
    """KeyboardInterrupt inside a tool's main (Ctrl-C during evaluate's episodes): one line on stderr and
    exit status 130, the shell's for SIGINT; before, Python's traceback."""
    from navexp.config.cli import run_tool

    def main():
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as stop:
        run_tool(main)
    err = capsys.readouterr().err
    assert (
        stop.value.code == 130 and err == "[navexp] interrupted (Ctrl-C): stopped before writing any file\n"
    )


def test_a_missing_optional_package_names_its_extra(monkeypatch, capsys):
    """wandb, the launchers and the ONNX exporter are extras (`pip install -e .` alone leaves them out):
    logger=wandb, hydra/launcher=joblib and navexp-export without them fail in one line naming the extra
    to install, before anything runs (before: they were hard requirements; a missing one was a
    traceback from deep inside)."""
    import sys

    from navexp import compose_config, export
    from navexp.config.keys import check_overrides
    from navexp.config.validation import validate_run_cfg
    from navexp.extras import MissingExtraError

    for module in ("wandb", "hydra_plugins.hydra_joblib_launcher", "onnxscript"):
        monkeypatch.setitem(sys.modules, module, None)  # what find_spec reports for a module not installed
    with pytest.raises(MissingExtraError, match=re.escape("logger=wandb needs the Python package 'wandb'")):
        validate_run_cfg(compose_config(["logger=wandb"]))
    with pytest.raises(ValueError, match=re.escape('pip install -e ".[launchers]"')):
        check_overrides(["hydra/launcher=joblib"])
    monkeypatch.setattr(sys, "argv", ["navexp-export", "checkpoint=x"])
    with pytest.raises(SystemExit) as stop:
        export.cli()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and 'pip install -e ".[deploy]"' in err, err


def test_tab_completion_keeps_the_apps_groups_and_adds_the_old_ppo_names():
    """Hydra's completion words for a word, as the app offers them: the ConfigStore's schema entries
    (`reward=base_reward`) and the data folders (`suites=`, `scenarios/`) out; for `ppo.desi` the old
    name `ppo.desired_kl=` (which still trains, see navexp/config/aliases.py) beside Hydra's answer."""
    from navexp.config.completion import current_word, tidy

    hydra_words = ["reward=base_reward", "reward=bcppo", "reward=path", "suites=", "scenarios=", "seed="]
    assert tidy(hydra_words, "") == ["reward=bcppo", "reward=path", "seed="]
    assert tidy([], "ppo.desi") == ["ppo.desired_kl="]
    assert tidy(["ppo.algorithm.", "ppo.policy."], "ppo.") == ["ppo.algorithm.", "ppo.policy."]
    assert tidy([], "env.desi") == []
    assert current_word("navexp-train env=dense ppo.desi") == "ppo.desi"
    assert current_word("navexp-train env=dense ") == ""
