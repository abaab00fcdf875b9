"""The benchmark must not rot: a tiny run produces a complete, well-formed table (no speed asserted)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch
from conftest import build_env


def test_tiny_benchmark_produces_a_complete_table(tmp_path):
    from navexp import bench

    out = tmp_path / "bench.json"
    result = bench.main(["device=cpu", "num_envs=2,4", "steps=2", "ppo=4x4", f"out={out}"])
    assert json.loads(out.read_text())["command"].startswith("python -m navexp.bench")
    assert [(r["backend"], r["num_envs"]) for r in result["worlds"]] == [
        ("warp", 2),
        ("warp", 4),
        ("mujoco", 2),
        ("mujoco", 4),
    ]
    keys = [
        "physics_sps",
        "physics_lidar_sps",
        "full_step_sps",
        "baseline_physics_sps",
        "baseline_physics_lidar_sps",
        "ratio_physics",
        "ratio_physics_lidar",
        "first_step_s",
        "peak_host_mb",
    ]
    for row in result["worlds"]:
        for k in keys:
            assert isinstance(row[k], float) and math.isfinite(row[k]) and row[k] > 0, k
    # The warp step makes no host sync between fault checks; mujoco's step runs on the host anyway.
    assert [r["host_syncs_per_step"] for r in result["worlds"] if r["backend"] == "warp"] == [0.0, 0.0]
    assert all(r["torch_ops_per_step"] > 50 for r in result["worlds"])
    assert [p["backend"] for p in result["ppo"]] == ["warp", "mujoco"]
    for ppo in result["ppo"]:
        assert ppo["transitions"] == 16 and ppo["collect_s"] > 0 and ppo["learn_s"] > 0
    table = result["table"].splitlines()
    assert (
        table[0].startswith("| backend | worlds |") and len(table) == 2 + 4 + 2 * 2
    )  # header, rule, rows, PPO
    assert result["machine"]["cpu_count"] >= 1


def test_ppo_mode_times_iterations_per_shape_with_the_configured_mini_batches(tmp_path):
    """``bench ppo``: per shape, the median collect and learn time of 2 iterations after a warm-up one;
    4 worlds x 4 steps = 16 transitions, the default 5 epochs x 4 mini-batches = 20 gradient steps."""
    from navexp import bench

    out = tmp_path / "ppo.json"
    result = bench.main(["ppo", "device=cpu", "shapes=4x4", "iterations=2", f"out={out}"])
    (row,) = json.loads(out.read_text())["ppo"]
    assert (row["backend"], row["transitions"], row["model"]) == ("mujoco", 16, "mlp")
    assert (row["num_learning_epochs"], row["num_mini_batches"], row["gradient_steps"]) == (5, 4, 20)
    assert len(row["times"]) == 2 and row["collect_s"] > 0 and row["learn_s"] > 0
    assert math.isclose(row["learn_s_per_gradient_step"], row["learn_s"] / 20)
    assert result["table"].splitlines()[2].startswith("| mujoco | 4 x 4 | 16 | mlp | 5 x 4 |")


def test_ppo_mode_refuses_a_bad_shape_before_running_anything():
    """A shape that is not WORLDSxSTEPS is named in one line (the first, good shape never runs)."""
    from navexp import bench

    with pytest.raises(ValueError, match=r"shape '4096by32': expected WORLDSxSTEPS"):
        bench.main(["ppo", "device=cpu", "shapes=4x4,4096by32"])


def test_a_cold_kernel_cache_is_announced_until_a_first_step_compiled_it(tmp_path, monkeypatch, capsys):
    """Without navexp's marker in Warp's kernel cache, building the warp backend prints one line (what
    compiles, about how long, where it is cached); its first step leaves the marker, and the next
    build prints nothing."""
    from navexp.sim import kernel_cache

    monkeypatch.setattr(kernel_cache, "cache_dir", lambda: tmp_path)
    env = build_env("env.sim.backend=warp", "env.num_envs=2")
    line = "[navexp] compiling MuJoCo Warp kernels for this machine, once: about 35 s; cached in "
    assert capsys.readouterr().out.count(line + str(tmp_path)) == 1
    assert not kernel_cache.is_warm("cpu")
    env.step(torch.zeros(2, 3))
    assert kernel_cache.is_warm("cpu") and json.loads(next(tmp_path.glob("navexp-warm-cpu-*")).read_text())
    build_env("env.sim.backend=warp", "env.num_envs=2")
    assert "compiling MuJoCo Warp kernels" not in capsys.readouterr().out


@pytest.mark.e2e
def test_warmup_fills_an_empty_kernel_cache_without_the_constraint_solver(tmp_path):
    """``navexp-bench warmup`` into an empty cache (WARP_CACHE_PATH): cold, the compile line, the
    scene's modules compiled, none of them mujoco_warp's constraint solver (the warp step has no
    constraints); run again: warm, nothing compiled, no line."""
    env = {**os.environ, "WARP_CACHE_PATH": str(tmp_path / "cache")}
    cmd = [
        sys.executable,
        "-m",
        "navexp.bench",
        "warmup",
        "device=cpu",
        "num_envs=2",
        f"out={tmp_path}/w.json",
    ]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "compiling MuJoCo Warp kernels for this machine, once" in first.stdout
    cold = json.loads((tmp_path / "w.json").read_text())
    holonomic = cold["robots"][0]
    assert not holonomic["cache_was_warm"] and holonomic["modules_compiled"] >= 10
    compiled = " ".join(r for row in cold["robots"] for r in row["compiled"])
    assert not any(k in compiled for k in ("solver", "efc", "linesearch", "update_gradient")), compiled
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0 and "compiling MuJoCo Warp" not in second.stdout
    warm = json.loads((tmp_path / "w.json").read_text())
    assert [r["modules_compiled"] for r in warm["robots"]] == [0, 0]
    assert all(r["cache_was_warm"] for r in warm["robots"])


def test_warmup_refuses_an_unknown_robot_before_building_anything():
    """``bench warmup robots=tank``: one line naming the value and the valid robots."""
    from navexp import bench

    with pytest.raises(
        ValueError, match=r"robots=holonomic,tank: unknown \['tank'\]; valid: holonomic, diffdrive"
    ):
        bench.main(["warmup", "device=cpu", "robots=holonomic,tank"])
