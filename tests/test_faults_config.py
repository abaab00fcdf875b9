"""Bad config values and bad inputs (issue 22, "nothing lost, nothing silent"): each becomes a clear
error naming the key, the value and what is allowed, before anything is written, or behaves correctly.

One test per fault; the rows of docs/faults.md name this file.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import multiprocessing
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY, build_env
from omegaconf import DictConfig, OmegaConf

from navexp import compose_config
from navexp.deploy import NumpyPolicy
from navexp.deploy.export import UNGUARDED
from navexp.learn.checkpoint import write_atomic
from navexp.sim.layout import Layout
from navexp.task.env import NavEnv
from navexp.task.maps.families import FAMILIES, MapSpec
from navexp.task.maps.grid_path import shortest_paths
from navexp.task.maps.pool import LayoutPool
from navexp.task.maps.random_family import LayoutSpec
from navexp.task.validation import validate_env_cfg
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


# -- 7. env values that validated but could not be built or simulated ---------------------------
@functools.cache
def _composed(groups: tuple[str, ...]) -> DictConfig:
    """The config of these group choices (``env=families``), composed once per session."""
    return compose_config(list(groups))


def _env_error(*overrides: str, groups: tuple[str, ...] = ()) -> str:
    """The env validation's message for the config of ``groups`` with ``overrides`` (dotted keys, as on
    the command line) merged in; '' when it passes."""
    cfg = OmegaConf.merge(_composed(groups), OmegaConf.from_dotlist(list(overrides)))
    try:
        validate_env_cfg(cfg.env)
    except ValueError as e:
        return str(e)
    return ""


FAMILY_OFF = [f"env.maps.weights.{name}=0" for name in FAMILIES]
"""Every map family off: a test switches on the one it needs."""


def test_a_path_cell_that_can_step_over_the_thinnest_obstacle_is_refused():
    """A 0.1 m wall across the 8 m room, start (-3, 0), goal (3, 0), robot radius 0.2: with 0.2 m and
    0.4 m cells there is no free path; with 1 m cells the centres 0.5 m either side of the wall keep
    0.45 m > 0.2 m from it, so the old check found the 6 m straight line. path_cell_m must stay below
    (2 x 0.2 + 0.1) / 1.71 = 0.292 m (the thinnest default obstacle: 0.1 m walls) and at or above 8 m /
    256 cells = 0.03125 m (0.001 asked for 197 GB). A 0.15 m robot keeps the default 0.2 m cell
    ((0.3 + 0.1) / 1.71 = 0.234), a 0.1 m robot needs a finer one ((0.2 + 0.1) / 1.71 = 0.175)."""
    lay = Layout.empty(1, 0, 0, "cpu", 1)
    lay.wall_xy[:] = 0.0
    lay.wall_half[:] = torch.tensor([0.05, 4.0])  # 0.1 m thick, the room's whole 8 m
    lay.wall_active[:] = True
    lay.robot_xy[:], lay.goal_xy[:] = torch.tensor([-3.0, 0.0]), torch.tensor([3.0, 0.0])
    paths = [shortest_paths(lay, 4.0, 4.0, 0.2, cell).item() for cell in (0.2, 0.4, 1.0)]
    assert paths == [math.inf, math.inf, 6.0]
    allowed = (
        "allowed: 0.03125 <= path_cell_m < 0.2924: below (2 x robot.radius_m (0.2) + the thinnest obstacle"
    )
    for bad in ("1.0", "0.3", "0.001", "0.03"):
        message = _env_error(f"env.maps.path_cell_m={bad}")
        assert message.startswith(f"env config: maps.path_cell_m={bad} is invalid; {allowed}"), message
    assert _env_error("env.maps.path_cell_m=0.2") == _env_error("env.maps.path_cell_m=0.03125") == ""
    assert _env_error("env.maps.path_cell_m=0.29") == ""
    assert _env_error("env.robot.radius_m=0.15") == ""  # the default cell, a smaller robot
    assert "path_cell_m < 0.1754" in _env_error("env.robot.radius_m=0.1")
    assert _env_error("env.robot.radius_m=0.1", "env.maps.path_cell_m=0.15") == ""


@pytest.mark.parametrize(
    ("family", "bad", "good", "message"),
    [
        # across: 8 - 4 x 0.2 (walls 0.1 x 2.0 half thick) - 4 x 0.2 (radius) - 2 x 0.1 (lanes) = 6.2
        (
            "cul_de_sac",
            "cul_de_sac.width_m=[7.5,7.9]",
            "cul_de_sac.width_m=[6.2,6.2]",
            r"cul_de_sac.width_m=\[7.5, 7.9\]",
        ),
        # along: 8 - 4 x 0.35 (radius + spawn clearance) - 0.2 (back wall half) - 0.5 (mouth box) = 5.9
        (
            "cul_de_sac",
            "cul_de_sac.depth_m=[7.5,7.9]",
            "cul_de_sac.depth_m=[5.9,5.9]",
            r"cul_de_sac.depth_m=\[7.5, 7.9\]",
        ),
        # walls in 8 - 2 x 1.3 = 5.4 m, at least 0.4 + 0.45 = 0.85 m apart: 1 + floor(5.4 / 0.85) = 7
        ("staggered", "staggered.walls=[12,12]", "staggered.walls=[7,7]", r"staggered.walls=\[12, 12\]"),
        # n walls 8 / (n + 1) apart keep max(0.2 + 0.7, 0.4 + 0.45) = 0.9 m: floor(8 / 0.9) - 1 = 7
        ("corridor", "corridor.walls=[12,12]", "corridor.walls=[7,7]", r"corridor.walls=\[12, 12\]"),
    ],
)
def test_map_family_ranges_that_cannot_fit_the_room_are_refused(family, bad, good, message):
    """Family settings the generator cannot place in the 8 m room (a U wider or deeper than the room,
    12 walls in 5.4 m) are a config error naming the key, the value and the room's bound, before
    anything is built (before: 'found no collision-free start/goal ... lower obstacles.*_count' from
    the layout pool). The bound itself is accepted."""
    on = [*FAMILY_OFF, f"env.maps.weights.{family}=1", "env.obstacles.wall_slots=24"]
    bound = good.split("[")[1].split(",")[0]
    error = _env_error(*on, f"env.maps.{bad}")
    assert re.match(rf"env config: maps.{message} is invalid; allowed: max <= {bound}: ", error), error
    assert _env_error(*on, f"env.maps.{good}") == ""


def test_a_robot_too_big_for_the_staggered_start_box_is_refused():
    """The staggered start box lies between the room side and a wall 1.3 m from it: it must hold
    2 x (radius + 0.15 spawn clearance) + 0.2 (the thickest wall's half): radius <= 0.4 m."""
    on = [
        *FAMILY_OFF,
        "env.maps.weights.staggered=1",
        "env.maps.gap_m=[1.0,1.4]",
        "env.obstacles.wall_slots=3",
    ]
    on += ["env.maps.staggered.spacing_m=[1.5,2.7]", "env.maps.path_cell_m=0.2"]
    error = _env_error(*on, "env.robot.radius_m=0.45")
    assert error.startswith(
        "env config: robot.radius_m=0.45 is invalid; allowed: <= 0.4 for map family staggered"
    )
    assert _env_error(*on, "env.robot.radius_m=0.4") == ""


def test_an_ungeneratable_grid_fill_is_one_value_error_naming_its_keys():
    """grid.fill=[0.9, 1.0] (cells 90-100 % occupied) has no static bound: the layout pool finds no
    layout with a free path and raises one line naming maps.grid.fill and obstacles.wall_slots, a
    ValueError (before: a RuntimeError advising obstacles.*_count, which grid does not read)."""
    overrides = [*FAMILY_OFF, "env.maps.weights.grid=1", "env.obstacles.wall_slots=16"]
    cfg = OmegaConf.merge(_composed(()), OmegaConf.from_dotlist([*overrides, "env.maps.grid.fill=[0.9,1.0]"]))
    validate_env_cfg(cfg.env)
    maps = MapSpec.from_env_cfg(cfg.env)
    pool = LayoutPool(LayoutSpec.from_env_cfg(cfg.env), 1, torch.Generator().manual_seed(0), "cpu", 8, maps)
    with pytest.raises(ValueError) as info:
        pool.refill()
    text = str(info.value)
    assert "\n" not in text and "map family 'grid'" in text and "obstacles.*_count" not in text
    assert "maps.grid.fill ([0.9, 1.0]" in text and "obstacles.wall_slots (16" in text


@pytest.mark.parametrize(
    "override",
    [
        "env.robot.lin_kv=-20.0",
        "env.robot.lin_kv=0.0",
        "env.robot.ang_kv=-3.0",
        "env.robot.lin_force_limit_n=-5.0",
        "env.robot.ang_torque_limit_nm=0.0",
        "robot=diffdrive env.robot.params.lateral_kv=-5",
        "robot=diffdrive env.robot.params.lateral_force_limit_n=0",
    ],
)
def test_servo_gains_and_force_limits_must_be_positive(override):
    """Every velocity servo gain and force limit is > 0, diffdrive's lateral servo included (before:
    lin_kv=-20 drove into every obstacle, lin_kv=0 never moved, ang_kv=-3 died with a
    FloatingPointError, lin_force_limit_n=-5 with MuJoCo's own message, lateral_kv=-5 trained)."""
    *groups, key_value = override.split()
    key, value = key_value.removeprefix("env.").split("=")
    message = _env_error(key_value, groups=tuple(groups))
    assert message.startswith(f"env config: {key}={value} is invalid; allowed: ") and "> 0" in message


def test_checks_of_families_with_weight_0_do_not_refuse_a_bigger_robot():
    """The default room draws only the random family: a 0.3 m robot (holonomic) or a 0.5 m diffdrive
    is valid there (before: refused by staggered.spacing_m and gap_m, keys of families that are off).
    With env=families the same robots are still refused by those families' keys."""
    assert _env_error("env.robot.radius_m=0.3") == ""
    assert _env_error("env.robot.radius_m=0.5", groups=("robot=diffdrive",)) == ""
    families = _env_error("env.robot.radius_m=0.3", groups=("env=families",))
    assert "maps.staggered.spacing_m=[1.0, 2.7] is invalid" in families
    families = _env_error("env.robot.radius_m=0.5", groups=("env=families", "robot=diffdrive"))
    assert "maps.gap_m=[0.7, 1.4] is invalid" in families


def test_lidar_latency_is_shorter_than_an_episode_and_family_weights_sum_finite():
    """25 s episodes of 0.1 s control steps are 250 steps: latency_steps 0-249 (before: 100000000 died
    allocating 57 GB, 100000 ran). Weights of 1e308 + 1e308 sum to inf, which normalised every
    family's share to 0 (before: ZeroDivisionError in the layout pool)."""
    assert _env_error("env.lidar.latency_steps=249") == ""
    for steps in (250, 100000, 100000000):
        message = _env_error(f"env.lidar.latency_steps={steps}")
        assert f"lidar.latency_steps={steps} is invalid; allowed: an integer in [0, 249]" in message
    message = _env_error(
        "env.maps.weights.random=1e308", "env.maps.weights.grid=1e308", groups=("env=families",)
    )
    assert message.startswith("env config: maps.weights=") and "a finite sum" in message and "inf" in message
