"""scripts/gpu_check.sh, the one command for a lent GPU machine: it fits its 8 minutes, and its dry run
(the same steps on the CPU at tiny sizes) goes through every step and leaves the figures' files."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
STEPS = ["env_info", "warmup", "bench", "gpu_tests", "train"]


def test_the_steps_run_in_order_and_their_limits_fit_8_minutes():
    """bash parses the script; its steps are, in order, the environment, the cold compile, the bench,
    the gpu tests and the training, and their time limits add up to at most 480 s."""
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0
    steps = re.findall(r"^step (\w+) (\d+) ", SCRIPT.read_text(), flags=re.M)
    assert [name for name, _ in steps] == STEPS
    assert sum(int(limit) for _, limit in steps) <= 480


@pytest.mark.e2e
def test_the_dry_run_goes_through_every_step_and_writes_the_figures(tmp_path):
    """DRY_RUN=1 on the CPU: every step exits 0 within its limit; warmup.json names the cache,
    bench_gpu.json has the warp rows at 4 and 8 worlds and a PPO iteration at 8 x 4, and the training's
    evaluation is copied as eval.json."""
    res = tmp_path / "res"
    env = {**os.environ, "DRY_RUN": "1", "PYTHON": "python"}
    proc = subprocess.run(
        ["bash", str(SCRIPT), str(res)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = (res / "summary.txt").read_text().splitlines()
    assert [line.split()[0] for line in summary] == STEPS
    assert all(" rc=0 " in line for line in summary), summary
    assert json.loads((res / "warmup.json").read_text())["cache_dir"]
    bench = json.loads((res / "bench_gpu.json").read_text())
    assert [(r["backend"], r["num_envs"]) for r in bench["worlds"]] == [("warp", 4), ("warp", 8)]
    assert [p["transitions"] for p in bench["ppo"]] == [32]
    assert "success_rate" in json.loads((res / "eval.json").read_text())
