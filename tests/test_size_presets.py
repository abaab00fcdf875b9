"""Size presets as the Hydra group ``size``: the composed config is the run config; the command line wins."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import TINY
from omegaconf import OmegaConf

from navexp import compose_config
from navexp.config.presets import preset_values, size_override_argv

ROOT = Path(__file__).parents[1]


def app(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python -m navexp.train <args>`` from the repository root."""
    cmd = [sys.executable, "-m", "navexp.train", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.e2e
@pytest.mark.skipif(torch.cuda.is_available(), reason="size=auto resolves to cpu only without CUDA")
def test_run_config_equals_hydra_composed_config(tmp_path):
    """A real tiny run with the default size=auto: .hydra/config.yaml and config.yaml hold the same
    values; the cpu preset filled the keys the command line left (ppo.save_interval 50), and the
    command line's env.num_envs=4 beat the preset's 256."""
    run_dir = tmp_path / "run"
    proc = app(
        *TINY,
        "eval.num_episodes=4",
        "eval.plot_episodes=0",
        "eval.video_episodes=0",
        f"hydra.run.dir={run_dir}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    composed = OmegaConf.to_container(OmegaConf.load(run_dir / ".hydra" / "config.yaml"), resolve=True)
    written = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert composed == written
    assert written["size"] == "cpu"
    assert written["env"]["num_envs"] == 4  # command line, not the preset's 256
    assert written["ppo"]["save_interval"] == 50  # the preset's (the group default is also 50)
    assert written["ppo"]["max_iterations"] == 2  # command line, not the preset's 350
    assert "size=cpu" in yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text())
    info = json.loads((run_dir / "run_info.json").read_text())
    assert info["size_preset"] == "cpu"
    # cpu sets 6 keys; the command line set env.num_envs, ppo.num_steps_per_env,
    # ppo.algorithm.num_mini_batches, ppo.max_iterations and eval.num_episodes, which leaves
    # ppo.save_interval.
    assert info["size_applied"] == {"ppo.save_interval": 50}


@pytest.mark.parametrize("order", ["preset_first", "key_first"])
def test_command_line_key_wins_over_the_preset(order):
    """size=cpu with env.num_envs=8 in either order: 8 worlds, the preset's other keys (350 iterations)."""
    args = ["size=cpu", "env.num_envs=8"] if order == "preset_first" else ["env.num_envs=8", "size=cpu"]
    cfg = compose_config(args)
    assert cfg.env.num_envs == 8
    assert cfg.ppo.max_iterations == 350 and cfg.eval.num_episodes == 200 and cfg.size == "cpu"


@pytest.mark.parametrize("size", ["gpu", "cpu", "tiny", "none"])
def test_every_size_variant_composes_with_its_values(size):
    """Each configs/size/<size>.yaml composes and every key it sets holds its value."""
    cfg = compose_config([f"size={size}"])
    assert cfg.size == size
    values = preset_values(size)
    assert (size == "none") == (values == {})
    for key, value in values.items():
        assert OmegaConf.select(cfg, key) == value, key
    if size == "gpu":  # the reference setup: 4096 worlds x 32 steps = 131,072 transitions per iteration
        assert cfg.env.num_envs * cfg.ppo.num_steps_per_env == 131_072


def test_without_a_size_the_api_applies_no_preset():
    """compose_config without size=: the groups' own values (64 worlds, 300 iterations), size none."""
    cfg = compose_config([])
    assert (cfg.size, cfg.env.num_envs, cfg.ppo.max_iterations) == ("none", 64, 300)


def test_size_auto_resolves_from_the_device_before_composing():
    """auto -> cpu without CUDA, gpu with it; env.device=cpu or cuda:N decides regardless; the app's
    command line gets size= next to its other overrides (Hydra's parser needs them in one run)."""
    assert size_override_argv(["prog"], cuda_available=False) == ["prog", "size=cpu"]
    assert size_override_argv(["prog"], cuda_available=True) == ["prog", "size=gpu"]
    assert size_override_argv(["prog", "env.device=cpu"], cuda_available=True)[-1] == "size=cpu"
    assert size_override_argv(["prog", "size=auto", "env.device=cuda:1"], cuda_available=False) == [
        "prog",
        "size=gpu",
        "env.device=cuda:1",
    ]
    assert size_override_argv(["prog", "seed=1", "--cfg", "job"], cuda_available=False) == [
        "prog",
        "seed=1",
        "size=cpu",
        "--cfg",
        "job",
    ]
    assert size_override_argv(["prog", "-m", "size=none", "seed=1,2"]) == [
        "prog",
        "-m",
        "size=none",
        "seed=1,2",
    ]
    assert size_override_argv(["prog", "-m", "size=auto,none"], cuda_available=False)[-1] == "size=cpu,none"


@pytest.mark.e2e
@pytest.mark.skipif(torch.cuda.is_available(), reason="size=auto resolves to cpu only without CUDA")
def test_app_composes_the_cpu_preset_here():
    """`python -m navexp.train --cfg job` (composes, runs nothing) shows size cpu and 256 worlds;
    compose_config(["size=auto"]) resolves the same way."""
    proc = app("seed=3", "--cfg", "job", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    job = yaml.safe_load(proc.stdout)
    assert job["size"] == "cpu" and job["env"]["num_envs"] == 256 and job["seed"] == 3
    assert compose_config(["size=auto"]).env.num_envs == 256


@pytest.mark.e2e
def test_invalid_size_names_the_valid_options():
    """size=big: an error naming the value and auto | cpu | gpu | none, from the API and from the app."""
    with pytest.raises(
        ValueError, match=r"size='big' is invalid; allowed: auto \| cpu \| gpu \| none \| tiny"
    ):
        compose_config(["size=big"])
    proc = app("size=big", timeout=120)
    assert proc.returncode != 0
    assert "size='big' is invalid; allowed: auto | cpu | gpu | none | tiny" in proc.stderr


def test_evaluation_with_another_size_takes_the_presets_keys():
    """load_run_config of a cpu-trained run with size=gpu: 4096 worlds and 1000 episodes, unless the
    command line also sets eval.num_episodes."""
    from navexp.config.run_config import load_run_config

    ckpt = {"infos": {"config": OmegaConf.to_container(compose_config(["size=cpu", "seed=5"]))}}
    cfg = load_run_config(ckpt, ["size=gpu"])
    assert (cfg.size, cfg.env.num_envs, cfg.eval.num_episodes, cfg.seed) == ("gpu", 4096, 1000, 5)
    cfg = load_run_config(ckpt, ["size=gpu", "eval.num_episodes=7"])
    assert cfg.eval.num_episodes == 7 and cfg.ppo.max_iterations == 1000


def test_every_torchrun_rank_resolves_the_same_size(monkeypatch):
    """Under torchrun each rank's command line gets the same size= (rank 1 also its no-run-dir overrides,
    after it, so Hydra still reads one run of overrides)."""
    from navexp.experiment.launch import app_argv

    monkeypatch.setenv("WORLD_SIZE", "2")
    expected = "size=gpu" if torch.cuda.is_available() else "size=cpu"
    monkeypatch.setenv("RANK", "0")
    assert app_argv(["train.py", "seed=1"]) == ["train.py", "seed=1", expected]
    monkeypatch.setenv("RANK", "1")
    rank1 = app_argv(["train.py", "seed=1"])
    assert rank1[:3] == ["train.py", "seed=1", expected] and "hydra.run.dir=." in rank1[3:]
