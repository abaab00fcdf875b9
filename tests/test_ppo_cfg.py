"""The ``ppo`` group in rsl_rl's shape (runner keys, ``ppo.algorithm``, ``ppo.policy``): old flat names
keep working wherever a key is typed or stored, and every check of its keys lives in one function."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
import yaml
from conftest import NO_MEDIA, TINY
from omegaconf import OmegaConf

from navexp import compose_config
from navexp.config import aliases
from navexp.config.aliases import RENAMED_KEYS, translate_overrides
from navexp.config.cli import parse_command_line
from navexp.config.validation import validate_run_cfg
from navexp.learn import ppo_cfg
from navexp.learn.checkpoint import load_checkpoint, stored_config
from navexp.learn.ppo_schema import nest_ppo
from navexp.learn.rl_cfg import build_train_cfg
from navexp.sweep.space import distributions, distributions_from_config, load_space
from navexp.train import app_argv, run


@pytest.fixture
def fresh_notices(monkeypatch):
    """Every old name unannounced, as in a new process."""
    monkeypatch.setattr(aliases, "_ANNOUNCED", set())


def test_the_alias_table_maps_every_section_key_and_nothing_else():
    """27 keys moved, 13 into ppo.algorithm and 14 into ppo.policy: each old name is ppo.<key>, each new
    one exists in the composed config; the runner-level keys keep their names."""
    assert RENAMED_KEYS["ppo.desired_kl"] == "ppo.algorithm.desired_kl"
    assert RENAMED_KEYS["ppo.model"] == "ppo.policy.model"
    assert RENAMED_KEYS["ppo.hidden_dims"] == "ppo.policy.hidden_dims"
    sections = [new.split(".")[1] for new in RENAMED_KEYS.values()]
    assert (sections.count("algorithm"), sections.count("policy")) == (13, 14)
    cfg = compose_config([])
    for old, new in RENAMED_KEYS.items():
        assert new == f"ppo.{new.split('.')[1]}.{old.removeprefix('ppo.')}"
        assert OmegaConf.select(cfg, new, default="missing") != "missing", new
    for kept in (
        "num_steps_per_env",
        "max_iterations",
        "save_interval",
        "average_checkpoints",
        "max_minutes",
    ):
        assert f"ppo.{kept}" not in RENAMED_KEYS and kept in cfg.ppo


def test_old_keys_on_the_train_command_line_become_new_ones_announced_once(fresh_notices, capsys):
    """The headline command ``reward=bcppo ppo.desired_kl=0.01``: Hydra gets ppo.algorithm.desired_kl,
    and one line says so on stderr, once however often the command line is translated."""
    argv = app_argv(["train.py", "reward=bcppo", "ppo.desired_kl=0.01", "size=cpu"])
    assert "ppo.algorithm.desired_kl=0.01" in argv and not any(a.startswith("ppo.desired_kl") for a in argv)
    app_argv(["train.py", "ppo.desired_kl=0.02", "size=cpu"])
    err = capsys.readouterr().err.splitlines()
    assert err == ["[navexp] ppo.desired_kl is now ppo.algorithm.desired_kl (the old name keeps working)"]


def test_every_override_form_is_translated():
    """key=value, +key, ++key, ~key, a key below a renamed one, a sweep expression; others unchanged."""
    given = [
        "ppo.clip_param=0.1",
        "+ppo.model=rnn",
        "++ppo.hidden_dims=[64,64]",
        "~ppo.desired_kl",
        "ppo.cnn_channels.0=8",
        "ppo.learning_rate=tag(log,interval(1e-4,1e-3))",
        "ppo.max_iterations=5",
        "ppo.clip=0.1",
        "-m",
        "env=dense",
    ]
    assert translate_overrides(given) == [
        "ppo.algorithm.clip_param=0.1",
        "+ppo.policy.model=rnn",
        "++ppo.policy.hidden_dims=[64,64]",
        "~ppo.algorithm.desired_kl",
        "ppo.policy.cnn_channels.0=8",
        "ppo.algorithm.learning_rate=tag(log,interval(1e-4,1e-3))",
        "ppo.max_iterations=5",
        "ppo.clip=0.1",
        "-m",
        "env=dense",
    ]


def test_compose_config_and_the_tools_take_old_names():
    """compose_config with old names equals it with new ones; evaluate/play/export's parser hands on
    new names."""
    old = compose_config(
        ["ppo.clip_param=0.1", "ppo.model=rnn", "ppo.hidden_dims=[64,64]", "ppo.num_mini_batches=2"]
    )
    new = compose_config(
        [
            "ppo.algorithm.clip_param=0.1",
            "ppo.policy.model=rnn",
            "ppo.policy.hidden_dims=[64,64]",
            "ppo.algorithm.num_mini_batches=2",
        ]
    )
    assert old == new and old.ppo.algorithm.clip_param == 0.1 and list(old.ppo.policy.hidden_dims) == [64, 64]
    line = parse_command_line(
        ["checkpoint=x", "ppo.clip_param=0.1", "env=dense"], {"checkpoint": None}, "usage"
    )
    assert line.overrides == ["ppo.algorithm.clip_param=0.1", "env=dense"]


def test_sweep_spaces_take_old_names(tmp_path):
    """A space file, the command line's sweep expressions and the deprecated search_space form: old keys
    are searched under their new names; the shipped spaces use the new names."""
    path = tmp_path / "old.yaml"
    path.write_text("ppo.clip_param: interval(0.1, 0.3)\nreward.terms.goal.weight: interval(5.0, 25.0)\n")
    assert list(load_space(str(path))) == ["ppo.algorithm.clip_param", "reward.terms.goal.weight"]
    searched, fixed = distributions(["ppo.desired_kl=tag(log, interval(0.002, 0.05))", "ppo.model=mlp"])
    assert list(searched) == ["ppo.algorithm.desired_kl"] and fixed == {"ppo.policy.model": "mlp"}
    spec = {"ppo.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-3, "log": True}}
    assert list(distributions_from_config(spec)) == ["ppo.algorithm.learning_rate"]
    shipped = Path(__file__).resolve().parents[1] / "sweeps"
    for space in shipped.glob("*.yaml"):
        assert not set(yaml.safe_load(space.read_text())) & set(RENAMED_KEYS), space


def test_a_flat_stored_ppo_node_is_nested():
    """A run's ppo node from before the sections: runner keys stay, the others move; today's comes back
    equal."""
    flat = {"max_iterations": 5, "clip_param": 0.1, "model": "rnn", "hidden_dims": [64, 64]}
    nested = nest_ppo(flat)
    assert nested == {
        "max_iterations": 5,
        "algorithm": {"clip_param": 0.1},
        "policy": {"model": "rnn", "hidden_dims": [64, 64]},
    }
    assert nest_ppo(nested) == nested


RUN = [*TINY, *NO_MEDIA, "ppo.max_iterations=1", "ppo.save_interval=1", "eval.num_episodes=2", "size=none"]


def _flatten_ppo(config: dict) -> dict:
    """A stored config as a run from before the sections recorded it (flat ppo keys)."""
    ppo = dict(config["ppo"])
    for section in ("algorithm", "policy"):
        ppo.update(ppo.pop(section))
    return {**config, "ppo": ppo}


@pytest.fixture(scope="module")
def old_run(tmp_path_factory) -> Path:
    """A finished one-iteration run rewritten as one from before the ppo sections: its checkpoint's
    stored config, config.yaml and .hydra/overrides.yaml hold the flat names."""
    base = tmp_path_factory.mktemp("old_run")
    new = base / "new"
    overrides = [*RUN, "ppo.algorithm.clip_param=0.15"]
    run(compose_config(overrides), new, overrides, quiet=True)
    old = base / "run"
    shutil.copytree(new, old)
    for path in old.glob("model_*.pt"):
        ckpt = torch.load(path, weights_only=True)
        ckpt["infos"]["config"] = _flatten_ppo(ckpt["infos"]["config"])
        torch.save(ckpt, path)
    (old / "config.yaml").write_text(
        yaml.safe_dump(_flatten_ppo(yaml.safe_load((old / "config.yaml").read_text())))
    )
    (old / ".hydra").mkdir(exist_ok=True)
    (old / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([*RUN, "ppo.clip_param=0.15"]))
    return old


def test_a_stored_run_from_before_the_sections_evaluates_exports_and_resumes(old_run, tmp_path):
    """The flat stored config reads as today's (clip_param 0.15 in ppo.algorithm); evaluate (with an
    old-name override), export and a resume to iteration 1 work; the resume records no ppo key as
    changed but the one the command line changed, and repeats the run's overrides under new names."""
    from navexp import evaluate
    from navexp.deploy import export

    ckpt = load_checkpoint(old_run)
    assert ckpt["infos"]["config"]["ppo"]["clip_param"] == 0.15  # the file holds the flat form
    assert stored_config(ckpt)["ppo"]["algorithm"]["clip_param"] == 0.15
    result = evaluate.main([f"checkpoint={old_run}", "ppo.desired_kl=0.02", f"out={tmp_path / 'e.json'}"])
    assert 0.0 <= result["success_rate"] <= 1.0
    export.main([f"checkpoint={old_run}", f"out={tmp_path / 'export'}"])
    assert (tmp_path / "export" / "policy.npz").is_file()
    argv = app_argv(["train.py", f"resume={old_run}", "ppo.max_iterations=2"])
    assert "ppo.algorithm.clip_param=0.15" in argv and "ppo.clip_param=0.15" not in argv
    overrides = [*RUN, "ppo.algorithm.clip_param=0.15", f"resume={old_run}", "ppo.max_iterations=2"]
    run(compose_config(overrides), old_run, overrides, quiet=True)
    info = yaml.safe_load((old_run / "run_info.json").read_text())
    assert {k for k in info["segments"][-1]["changed"] if k.startswith("ppo")} == {"ppo.max_iterations"}
    assert load_checkpoint(old_run)["iter"] == 1


def test_every_ppo_check_is_in_one_function_called_once_per_run(tmp_path, monkeypatch):
    """ppo.algorithm.clip_param=1.5 is refused by check_ppo_cfg (through validate_run_cfg) in one line
    naming the value and the allowed range; build_train_cfg builds the dict without checking again; a
    training calls check_ppo_cfg once."""
    bad = compose_config(["ppo.clip_param=1.5"])
    with pytest.raises(ValueError) as refused:
        validate_run_cfg(bad)
    assert (
        str(refused.value) == "ppo config: ppo.algorithm.clip_param=1.5 is invalid; allowed: 0 < value <= 1"
    )
    assert build_train_cfg(bad)["algorithm"]["clip_param"] == 1.5
    calls = []
    check = ppo_cfg.check_ppo_cfg
    monkeypatch.setattr("navexp.config.validation.check_ppo_cfg", lambda cfg: calls.append(1) or check(cfg))
    overrides = [*RUN, "eval.enabled=false"]
    run(compose_config(overrides), tmp_path / "run", overrides, quiet=True)
    assert len(calls) == 1


def test_torch_compile_mode_reaches_rsl_rl_and_its_cuda_graph_modes_are_refused():
    """``ppo.torch_compile_mode`` is rsl_rl's runner key: ``default`` makes rsl_rl wrap actor and critic
    in torch.compile (the policy it saves and exports stays the plain module); ``reduce-overhead``,
    which rsl_rl refuses, fails validation naming the valid choices; null (the default) compiles
    nothing."""
    from navexp import make_env
    from navexp.learn.runner import NavRunner

    bad = compose_config([*TINY, "ppo.torch_compile_mode=reduce-overhead"])
    allowed = "allowed: null | default | max-autotune-no-cudagraphs"
    with pytest.raises(ValueError, match=rf"ppo.torch_compile_mode='reduce-overhead' is invalid; {allowed}"):
        validate_run_cfg(bad)
    assert build_train_cfg(compose_config(TINY))["torch_compile_mode"] is None
    cfg = compose_config([*TINY, "ppo.torch_compile_mode=default"])
    validate_run_cfg(cfg)
    env = make_env(cfg)
    runner = NavRunner(env, build_train_cfg(cfg), None, "cpu", infos={}, quiet=True)
    compiled = torch._dynamo.eval_frame.OptimizedModule
    assert isinstance(runner.alg.actor, compiled) and isinstance(runner.alg.critic, compiled)
    assert runner.alg.get_policy() is runner.alg.actor._orig_mod
