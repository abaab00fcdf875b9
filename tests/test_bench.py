"""The benchmark must not rot: a tiny run produces a complete, well-formed table (no speed asserted)."""

from __future__ import annotations

import json
import math


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
