"""Bad config values and bad inputs (issue 22, "nothing lost, nothing silent"): each becomes a clear
error naming the key, the value and what is allowed, before anything is written, or behaves correctly.

One test per fault; the rows of docs/faults.md name this file.
"""

from __future__ import annotations

import importlib.util
import json
import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY, build_env

from navexp import compose_config
from navexp.deploy import NumpyPolicy
from navexp.deploy.export import UNGUARDED
from navexp.learn.checkpoint import write_atomic
from navexp.task.env import NavEnv
from navexp.train import run

ROOT = Path(__file__).resolve().parents[1]


# -- 1. NaN/inf config values -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("override", "key", "value"),
    [
        ("env.maps.weights.random=inf", "env.maps.weights.random", "inf"),
        ("env.lidar.max_range_m=inf", "env.lidar.max_range_m", "inf"),
        ("env.lidar.range_noise_std_m=inf", "env.lidar.range_noise_std_m", "inf"),
        ("env.obstacles.cylinder_radius_m=[0.15,nan]", r"env.obstacles.cylinder_radius_m\[1\]", "nan"),
        ("env.robot.lin_kv=-inf", "env.robot.lin_kv", "-inf"),
        ("reward.terms.collision.weight=-inf", "reward.terms.collision.weight", "-inf"),
    ],
)
def test_non_finite_config_values_are_refused_naming_the_key(tmp_path, override, key, value):
    """NaN/inf in any float of env, obs or reward is a config error naming the key, the value and
    'a finite number', from NavEnv (env keys) and from the training before its run directory exists.
    Before: maps.weights.random=inf died in the layout pool ('cannot convert float NaN to integer'),
    lidar.max_range_m=inf built an env whose LiDAR observation was all 0."""
    group = key.split(".", 1)[0]
    message = rf"{group} config: {key}={value} is invalid; allowed: a finite number"
    cfg = compose_config([*TINY, override])
    if group == "env":
        with pytest.raises(ValueError, match=message):
            NavEnv(cfg)
    with pytest.raises(ValueError, match=message):
        run(cfg, tmp_path / "x", [override], quiet=True)
    assert not (tmp_path / "x").exists()


# -- 2. check_every does not size the layout pool -----------------------------------------------
def test_a_huge_check_every_keeps_the_layout_pool_at_worlds_times_64():
    """check_every=1000000 with 4 worlds: the pool reserves 4 x min(1000000, 64) = 256 layouts and
    draws 2 x 256 = 512, as with check_every=100 (before: 4 x 1000000 reserved, a build of hours).

    Episodes of one control step (0.1 s) reset all 4 worlds every step: 4 layouts per step. The
    pool is topped up every 64 steps: at step 64, 4 (the first reset) + 64 x 4 = 260 are taken, 252
    left < 256: refill; at step 128, 256 taken, 256 left: none; at step 192, 512 taken: refill. So
    200 steps take 804 layouts from pools of 512 and no layout is handed out twice."""
    t0 = time.perf_counter()
    env = build_env("env.num_envs=4", "env.check_every=1000000", "env.episode_length_s=0.1")
    build_s = time.perf_counter() - t0
    ref = build_env("env.num_envs=4", "env.check_every=100", "env.episode_length_s=0.1")
    pool = env.layout_pool
    assert (env.check_every, env.pool_every, pool.reserve, pool._pool.num_worlds) == (1000000, 64, 256, 512)
    assert (ref.pool_every, ref.layout_pool.reserve, ref.layout_pool._pool.num_worlds) == (64, 256, 512)
    assert build_s < 60, f"the env took {build_s:.0f} s to build"
    refills, actions = [], torch.zeros(4, 3)
    for step in range(1, 201):
        before = pool._pool
        _, _, dones, _ = env.step(actions)
        assert bool(dones.all())
        assert int(pool._cursor) <= int(pool._num_valid), f"pool overrun at step {step}"
        if pool._pool is not before:
            refills.append(step)
    assert refills == [64, 192]


# -- 3. the deploy policy's scan ----------------------------------------------------------------
def _tiny_policy() -> NumpyPolicy:
    """A 4-beam NumpyPolicy with zero weights and bias [0.5, -0.5, 0.25]: the command is the bias
    scaled, [0.5 x 1.5, -0.5 x 1.5, 0.25 x 2.0] = (0.75, -0.75, 0.5), whatever the observation."""
    meta = {
        "obs": {
            "terms": [["lidar", 4], ["goal_polar", 3], ["vel_body", 2], ["omega", 1]],
            "history_length": 1,
        },
        "lidar": {"max_range_m": 6.0},
        "scales": {"goal_dist_scale_m": 5.0, "max_lin_vel_mps": 1.5, "max_ang_vel_radps": 2.0},
        "action": {"scale": [1.5, 1.5, 2.0]},
    }
    layers = [(np.zeros((3, 10)), np.array([0.5, -0.5, 0.25]))]
    return NumpyPolicy(layers, "elu", np.zeros(10), np.ones(10), 1e-8, meta)


def test_deploy_scan_none_or_misshapen_is_named_and_negative_beams_read_max_range():
    """A None scan is a TypeError and a 3-beam scan a ValueError, both naming scan_m and the expected
    shape (4,) (before: IndexError 'tuple index out of range'). -inf and -1 read max range like NaN
    and +inf: [-inf, -1, 3, 7.5] m at 6 m max range -> [6/6, 6/6, 3/6, 6/6] = [1, 1, 0.5, 1]
    (before: -inf read 0 m, an obstacle touching the robot). The ONNX/TorchScript caveat printed by
    export points at a section docs/deploy.md has."""
    policy, goal, vel = _tiny_policy(), [1.0, 0.0], [0.0, 0.0]
    with pytest.raises(TypeError, match=r"scan_m=None \(NoneType\) is invalid; expected .*shape \(4,\)"):
        policy.command(None, goal, vel, 0.0)
    with pytest.raises(ValueError, match=r"scan_m has shape \(3,\); expected .*shape \(4,\)"):
        policy.command([1.0, 2.0, 3.0], goal, vel, 0.0)
    obs = policy.observation([float("-inf"), -1.0, 3.0, 7.5], goal, vel, 0.0)
    assert obs[:4].tolist() == [1.0, 1.0, 0.5, 1.0]
    assert policy.command([float("-inf")] * 4, goal, vel, 0.0) == (0.75, -0.75, 0.5)
    anchor = UNGUARDED.split("docs/deploy.md#", 1)[1].rstrip(")")
    headings = [line.lstrip("#").strip() for line in (ROOT / "docs/deploy.md").read_text().splitlines()]
    assert anchor in [h.lower().replace(" ", "-") for h in headings if h]


# -- 4. concurrent writers of one file ----------------------------------------------------------
WRITERS, WRITES = 4, 100


def _writer(path: str, index: int, barrier, errors) -> None:
    """Write this writer's own JSON document to ``path`` WRITES times; report every failure."""
    doc = json.dumps({"writer": index, "payload": [index] * 20000})  # about 60-80 kB
    barrier.wait()
    failed = []
    for _ in range(WRITES):
        try:
            write_atomic(path, doc)
        except OSError as e:
            failed.append(str(e))
    errors.put((index, failed))


def test_concurrent_writers_of_one_path_each_publish_a_whole_document(tmp_path):
    """4 processes x 100 writes of their own 60-80 kB JSON document to one path: no write fails
    (before: a shared '<file>.tmp' made about 20 % fail with ENOENT), the file is exactly one writer's
    document, and the directory holds nothing but it (no temporary file left)."""
    ctx = multiprocessing.get_context("fork")
    path = tmp_path / "eval.json"
    barrier, errors = ctx.Barrier(WRITERS), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(path), i, barrier, errors)) for i in range(WRITERS)]
    for p in procs:
        p.start()
    results = dict(errors.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    assert results == {i: [] for i in range(WRITERS)}
    final = json.loads(path.read_text())
    assert final["payload"] == [final["writer"]] * 20000 and final["writer"] in range(WRITERS)
    assert [p.name for p in tmp_path.iterdir()] == ["eval.json"]


# -- 6. an unusable sweep storage ---------------------------------------------------------------
@pytest.mark.e2e  # starts `python -m navexp.train -m` processes
@pytest.mark.parametrize("kind", ["unreachable", "corrupt"])
def test_an_unusable_sweep_storage_is_one_line_naming_the_url(tmp_path, kind):
    """`python -m navexp.train -m hydra/sweeper=optuna sweep.storage=<url>` with a PostgreSQL server
    that is not there (port 1) or a sqlite file that is not a database: exit 1, stderr names the URL
    (the password left out) in at most 4 lines without a traceback (before: about 150 lines of
    SQLAlchemy), and no sweep directory is made. Without the PostgreSQL extra (README's plain
    `.[dev]` install) the line says which driver is missing and how to install it."""
    problem = "cannot be opened: "
    if kind == "unreachable":
        url, shown = "postgresql://nobody:secret@127.0.0.1:1/x", "postgresql://nobody@127.0.0.1:1/x"
        reason = "Connection refused"
        if importlib.util.find_spec("psycopg") is None:
            problem, reason = "needs a database driver that is not installed", "pip install -e '.[postgres]'"
    else:
        bad = tmp_path / "bad.db"
        bad.write_text("not a database\n" * 100)
        url = shown = f"sqlite:///{bad}"
        reason = "file is not a database"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "navexp.train",
            "-m",
            "hydra/sweeper=optuna",
            f"sweep.storage={url}",
            f"hydra.sweep.dir={tmp_path}/sweep",
            "sweep.study_name=broken",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    err = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1, proc.stderr
    assert len(err) <= 4 and "Traceback" not in proc.stderr, proc.stderr
    assert f"Error: sweep.storage='{shown}' {problem}" in err[0] and reason in err[0]
    assert "secret" not in proc.stderr + proc.stdout
    assert not (tmp_path / "sweep").exists()
