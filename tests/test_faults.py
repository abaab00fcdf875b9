"""Faults and bad input (issue 15): each check fails with a message naming the value, before anything is
written, and the files that must not change are byte-identical afterwards (sha256 of every file).

One tiny training (4 worlds, 1 iteration, 4 evaluation episodes) is shared by the module; most checks
fail before any simulator or training starts.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY

from navexp import compose_config, make_env
from navexp.train import run

ROOT = Path(__file__).resolve().parents[1]
RUN = [
    *TINY,
    "ppo.max_iterations=1",
    "ppo.save_interval=1",
    "eval.num_episodes=4",
    "eval.plot_episodes=0",
    "eval.video_episodes=0",
    "size=none",
]
LAYOUT_SEED = 42 + 1_000_003  # seed + eval.layout_seed_offset (defaults)


def snapshot(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` by relative path (an empty dict when it does not exist)."""
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def trained(tiny_run) -> Path:
    """A finished one-iteration run: model_0.pt, config.yaml, run_info.json, eval.json."""
    return tiny_run(RUN)


# -- 1. one owner per run directory ---------------------------------------------------------------
@pytest.mark.e2e
def test_second_training_on_a_locked_run_dir_fails_naming_the_owner(tmp_path):
    """A run dir held by a live process: a training there fails at once with that pid; nothing written."""
    run_dir = tmp_path / "busy"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from navexp.experiment.rundir import RunDirLock; "
         "RunDirLock(sys.argv[1]).acquire(); print('held', flush=True); sys.stdin.read()", str(run_dir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        before = snapshot(run_dir)
        assert list(before) == [".navexp.lock"]
        from navexp.experiment.rundir import RunDirBusyError

        with pytest.raises(RunDirBusyError, match=rf"in use by another training \(pid {holder.pid} on host"):
            run(compose_config(RUN), run_dir, RUN, quiet=True)
        assert snapshot(run_dir) == before
    finally:
        holder.stdin.close()
        holder.wait()


def test_stale_lock_of_a_dead_process_is_taken_over_with_a_warning(tmp_path):
    """A lock naming a pid that has exited on this host is replaced by ours, with a warning naming it."""
    from navexp.experiment.rundir import LOCK_NAME, RunDirLock

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid is free now
    stale = {"pid": dead.pid, "host": socket.gethostname(), "started": "2024-01-01T00:00:00+00:00"}
    (tmp_path / LOCK_NAME).write_text(json.dumps(stale))
    with pytest.warns(UserWarning, match=rf"taking over a stale lock of pid {dead.pid} .*no longer running"):
        lock = RunDirLock(tmp_path).acquire()
    assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()
    lock.release()
    assert not (tmp_path / LOCK_NAME).exists()


def test_lock_from_another_host_is_not_taken_over(tmp_path):
    """A lock written on another host cannot be checked from here: refused, naming host and file."""
    from navexp.experiment.rundir import LOCK_NAME, RunDirBusyError, RunDirLock

    lock_file = tmp_path / LOCK_NAME
    lock_file.write_text(json.dumps({"pid": 1, "host": "other-box", "started": "x"}))
    before = snapshot(tmp_path)
    with pytest.raises(
        RunDirBusyError, match=rf"pid 1 on host other-box .*delete {re.escape(str(lock_file))}"
    ):
        RunDirLock(tmp_path).acquire()
    assert snapshot(tmp_path) == before


def test_new_training_in_a_finished_run_dir_is_refused(trained):
    """Without resume=, a directory that holds a run is not reused: nothing in it changes."""
    before = snapshot(trained)
    with pytest.raises(
        FileExistsError, match=r"already holds a run \(run_info.json, config.yaml, model_0.pt\)"
    ):
        run(compose_config(RUN), trained, RUN, quiet=True)
    assert snapshot(trained) == before


@pytest.mark.e2e
def test_app_refuses_a_finished_run_dir_before_hydra_writes_into_it(trained):
    """`python -m navexp.train hydra.run.dir=<run>`: refused before Hydra's .hydra/ copy is written."""
    before = snapshot(trained)
    cmd = [sys.executable, "-m", "navexp.train", *RUN, f"hydra.run.dir={trained}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert proc.returncode != 0 and "already holds a run (run_info.json" in proc.stderr, proc.stderr[-2000:]
    assert snapshot(trained) == before


def test_default_run_dirs_differ_within_one_second():
    """The default run dir ends in date_time_microseconds, so two launches in one second differ."""
    from hydra import compose, initialize_config_dir

    from navexp.config.schemas import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose("config", overrides=["experiment_name=exp1"], return_hydra_config=True)
    run_dir = str(cfg.hydra.run.dir)
    assert re.fullmatch(r"outputs/exp1/\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d{6}", run_dir), run_dir


# -- 2. resume checks compatibility before anything is written ------------------------------------
@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "obs=asymmetric",
            r"observation groups .*'critic': \['policy'\].*this config uses .*'critic': \['policy', "
            r"'privileged'\].*obs.privileged_enabled: checkpoint False, this config True",
        ),
        (
            "obs.terms.lidar.params.encoding=linear",
            r"trained with observation term 'lidar' params \{'encoding': 'log', 'log_min_m': 0.1\}; this "
            r"config gives \{'encoding': 'linear', 'log_min_m': 0.1\}; resume with "
            r"obs.terms.lidar.params.encoding=log \(it is linear here\)",
        ),
        (
            "ppo.policy.hidden_dims=[64,64]",
            r"actor mlp.0.weight: checkpoint \(256, 78\), this config \(64, 78\).*"
            r"ppo.policy.hidden_dims: checkpoint \[256, 256\], this config \[64, 64\]",
        ),
    ],
)
def test_incompatible_resume_names_both_sides_and_touches_nothing(trained, tmp_path, override, message):
    """resume= with another obs layout or model size: ValueError naming both; the run dir is unchanged."""
    before = snapshot(trained)
    with pytest.raises(ValueError, match=message):
        run(compose_config([*RUN, override, f"resume={trained}"]), tmp_path / "x", RUN, quiet=True)
    assert snapshot(trained) == before and not (tmp_path / "x").exists()


def test_resuming_a_run_from_before_the_encoding_param_asks_for_its_linear_scan(trained, tmp_path):
    """A run stored before ``encoding`` existed (``lidar: {params: {}}``) was trained on the linear scan;
    resuming it on today's default (log) would feed its network other numbers in the same layout: the
    resume fails naming the override that keeps the linear scan, and with that override it fits."""
    from navexp.learn.checkpoint import check_obs_params, load_checkpoint

    ckpt = load_checkpoint(trained)  # its latest model_<it>.pt
    ckpt["infos"]["config"]["obs"]["terms"]["lidar"]["params"] = {}
    env = make_env(compose_config([*RUN]))
    with pytest.raises(
        ValueError, match=r"resume with obs.terms.lidar.params.encoding=linear \(it is log here\)"
    ):
        check_obs_params(ckpt, env.obs_manager.groups)
    linear = make_env(compose_config([*RUN, "obs.terms.lidar.params.encoding=linear"]))
    check_obs_params(ckpt, linear.obs_manager.groups)


# -- 3. checkpoints load with weights_only=True ---------------------------------------------------
class _RunsCode:
    """Unpickling this calls os.system: a checkpoint that executes code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_checkpoint_that_runs_code_is_refused_without_running(tmp_path):
    """A crafted .pt whose unpickling would create a file: refused naming the global; no file appears."""
    from navexp import evaluate

    marker = tmp_path / "executed"
    evil = tmp_path / "model_0.pt"
    torch.save({"actor_state_dict": _RunsCode(marker), "iter": 0}, evil)
    before = snapshot(tmp_path)
    with pytest.raises(ValueError, match=r"was refused: loading it needs code.*GLOBAL posix.system"):
        evaluate.main([f"checkpoint={evil}"])
    with pytest.raises(ValueError, match="was refused"):
        run(compose_config([*RUN, f"resume={evil}"]), tmp_path / "x", RUN, quiet=True)
    assert not marker.exists() and snapshot(tmp_path) == before


def test_navexp_checkpoints_need_no_allowlisted_globals(trained):
    """What navexp writes is tensors and plain containers: nothing beyond torch's weights-only set."""
    from navexp.learn.checkpoint import SAFE_GLOBALS, load_checkpoint

    path = trained / "model_0.pt"
    assert torch.serialization.get_unsafe_globals_in_checkpoint(str(path)) == [] and SAFE_GLOBALS == []
    ckpt = load_checkpoint(trained)
    assert ckpt["iter"] == 0 and ckpt["infos"]["config"]["seed"] == 42


# -- 4. the deploy policy refuses non-finite goal / velocity / yaw rate ---------------------------
def _tiny_numpy_policy():
    """NumpyPolicy over a 4-beam scan with zero weights and bias [0.5, -0.5, 0.25]: the mean action is
    the bias, so the command is [0.5 * 1.5, -0.5 * 1.5, 0.25 * 2.0] = [0.75, -0.75, 0.5]."""
    import numpy as np

    from navexp.deploy import NumpyPolicy

    terms = [["lidar", 4], ["goal_polar", 3], ["vel_body", 2], ["omega", 1]]
    meta = {
        "obs": {"terms": terms, "history_length": 1},
        "lidar": {"max_range_m": 6.0},
        "scales": {"goal_dist_scale_m": 5.0, "max_lin_vel_mps": 1.5, "max_ang_vel_radps": 2.0},
        "action": {"scale": [1.5, 1.5, 2.0]},
    }
    layers = [(np.zeros((3, 10)), np.array([0.5, -0.5, 0.25]))]
    return NumpyPolicy(layers, "elu", np.zeros(10), np.ones(10), 1e-8, meta)


@pytest.mark.parametrize(
    ("goal", "vel", "omega", "message"),
    [
        ([float("nan"), 0.0], [0.0, 0.0], 0.0, r"goal_body_xy=\[nan, 0.0\] is not finite"),
        ([1.0, 0.0], [0.0, float("inf")], 0.0, r"vel_body=\[0.0, inf\] is not finite"),
        ([1.0, 0.0], [0.0, 0.0], float("nan"), r"omega=nan is not finite"),
        ([1.0, 0.0], [0.0, 0.0], None, r"omega=None \(NoneType\) is invalid; expected numbers of shape \(\)"),
        ("ab", [0.0, 0.0], 0.0, r"goal_body_xy='ab' \(str\) is invalid; expected numbers of shape \(2,\)"),
    ],
)
def test_numpy_policy_refuses_non_finite_inputs(goal, vel, omega, message):
    """NaN/inf in goal, velocity or yaw rate raises ValueError naming the input (not a NaN command)."""
    policy = _tiny_numpy_policy()
    with pytest.raises(ValueError, match=message):
        policy.command([1.0] * 4, goal, vel, omega)


def test_numpy_policy_load_of_another_file_names_what_to_load(tmp_path):
    """NumpyPolicy.load of a checkpoint or the export's JSON (not its policy.npz): one ValueError naming
    the file and the policy.npz to load (before: a KeyError, or a hint to load it unsafely)."""
    import numpy as np

    from navexp.deploy import NumpyPolicy

    for name, content in (("model_0.pt", b"PK\x03\x04 not an npz"), ("policy_meta.json", b"{}")):
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=rf"{name} is not a policy.npz of navexp.export .*<run>/export/"):
            NumpyPolicy.load(str(tmp_path / name))
    np.savez(tmp_path / "other.npz", weights=np.zeros(2))
    with pytest.raises(
        ValueError, match=r"other.npz is not a policy.npz of navexp.export \(no 'meta' array\)"
    ):
        NumpyPolicy.load(str(tmp_path / "other.npz"))


def _tiny_npz(path, **change):
    """A policy.npz of ``_tiny_numpy_policy`` (4 beams, one zero layer with bias [0.5, -0.5, 0.25]) with
    the arrays of ``change`` replaced (None: left out)."""
    import json

    import numpy as np

    p = _tiny_numpy_policy()
    arrays = {
        "activation": np.array("elu"),
        "obs_mean": p.obs_mean,
        "obs_std": p.obs_std,
        "eps": np.array(1e-8),
        "meta": np.array(json.dumps(p.meta)),
        "model": np.array("mlp"),
        "num_layers": np.array(1),
        "w0": p.layers[0][0],
        "b0": p.layers[0][1],
    }
    arrays.update(change)
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    return path


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"w0": np.array([{"code": 1}, None], dtype=object)}, r"array 'w0' holds Python objects"),
        ({"num_layers": None}, r"no 'num_layers' array"),
        ({"num_layers": np.array("two")}, r"array 'num_layers' is not an integer: 'two'"),
        ({"num_layers": np.array(2)}, r"no 'w1' array"),
        ({"meta": np.array("{not json")}, r"its 'meta' is not JSON: Expecting property name"),
        ({"meta": np.array("[1, 2]")}, r"its 'meta' lacks obs.terms, obs.history_length, action.scale"),
        ({"w0": np.zeros((2, 10))}, r"layer 0: w0 is \(2, 10\), b0 is \(3,\)"),
        ({"w0": np.array([["a"] * 10] * 3)}, r"array 'w0' holds text, not numbers"),
        ({"activation": np.array("gelu")}, r"activation 'gelu' is not supported here"),
        ({"model": np.array("gpt")}, r"model 'gpt' is not supported here; supported: \['mlp', 'rnn', 'cnn"),
    ],
)
def test_a_crafted_policy_npz_is_one_value_error_naming_the_file(tmp_path, change, reason):
    """A policy.npz with an object array, a missing or non-integer num_layers, fewer layers than it
    declares, metadata that is not JSON or not a policy's, a misshapen or non-numeric layer, an unknown
    activation or model: NumpyPolicy.load raises one ValueError naming the file and what is wrong
    (before: numpy's bare ValueError, a KeyError, a JSONDecodeError or a TypeError, none naming the file);
    nothing in the file runs (no pickle). The untouched file loads and commands (0.75, -0.75, 0.5)."""
    from navexp.deploy import NumpyPolicy

    good = NumpyPolicy.load(str(_tiny_npz(tmp_path / "good.npz")))
    assert good.command([1.0] * 4, [1.0, 0.0], [0.0, 0.0], 0.0) == (0.75, -0.75, 0.5)
    path = _tiny_npz(tmp_path / "policy.npz", **change)
    expected = rf"^{path} is not a usable policy.npz of navexp.export: {reason}"
    with pytest.raises(ValueError, match=expected) as e:
        NumpyPolicy.load(str(path))
    assert type(e.value) is ValueError and "\n" not in str(e.value)


def test_numpy_policy_nan_beams_still_read_max_range():
    """NaN/inf scan beams keep their documented meaning; the command is the hand-computed one."""
    policy = _tiny_numpy_policy()
    obs = policy.observation([float("nan"), float("inf"), 3.0, 0.0], [1.0, 0.0], [0.0, 0.0], 0.0)
    assert obs[:4].tolist() == [1.0, 1.0, 0.5, 0.0]  # 6/6, 6/6, 3/6, 0/6
    assert policy.command([float("nan")] * 4, [1.0, 0.0], [0.0, 0.0], 0.0) == (0.75, -0.75, 0.5)


# -- 6. a CUDA device without CUDA ----------------------------------------------------------------
@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_cuda_device_without_cuda_is_a_config_error(tmp_path, device):
    """env.device=cuda on a CPU-only machine fails naming the key before a preset or env is chosen."""
    with pytest.raises(
        ValueError, match=rf"env config: device='{device}' but CUDA is not available.*auto \| cpu"
    ):
        run(compose_config([*RUN, f"env.device={device}", "size=auto"]), tmp_path / "x", [], quiet=True)
    assert not (tmp_path / "x").exists()


# -- 7. path-forming values stay inside their parent ----------------------------------------------
def test_path_forming_names_are_refused(tmp_path):
    """experiment_name and sweep.study_name with '..' or '/' fail naming the key; nothing is created."""
    from hydra import compose, initialize_config_dir

    from navexp.sweep.sweeper import study_paths

    with pytest.raises(ValueError, match=r"experiment_name='../../x' is invalid.*no '\.\.'"):
        run(compose_config([*RUN, "experiment_name=../../x"]), tmp_path / "x", RUN, quiet=True)
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose("config", overrides=["experiment_name=../../x"], return_hydra_config=True)
    with pytest.raises(Exception, match=r"experiment_name='../../x' is invalid"):
        str(cfg.hydra.run.dir)  # Hydra resolves this path before it creates the run directory
    with pytest.raises(ValueError, match=r"sweep.study_name='../../../s' is invalid"):
        study_paths(compose_config(["sweep.study_name=../../../s"]))
    assert not (tmp_path / "x").exists() and not (ROOT.parent / "x").exists()


def test_sweep_report_lands_next_to_its_study(tmp_path):
    """A study in <dir>/s.db (storage URL or file): its report directory is <dir>/s.db-<study_name>/
    (<dir>/<study_name>/ only for the default layout, <dir>/<study_name>.db)."""
    import optuna

    from navexp.sweep.report import _resolve
    from navexp.sweep.sweeper import study_paths

    url = f"sqlite:///{tmp_path / 's.db'}"
    optuna.create_study(study_name="demo", storage=url)
    assert _resolve(url, None)[2] == tmp_path / "s.db-demo"
    assert _resolve(str(tmp_path / "s.db"), None)[2] == tmp_path / "s.db-demo"
    cfg = compose_config(["sweep.study_name=demo", f"sweep.storage={url}"])
    assert study_paths(cfg) == ("demo", url, tmp_path / "s.db-demo")
    default = f"sqlite:///{tmp_path / 'demo.db'}"
    assert (
        study_paths(compose_config(["sweep.study_name=demo", f"sweep.storage={default}"]))[2]
        == tmp_path / "demo"
    )


# -- 8. divergence inside rsl_rl is caught like a NaN loss ----------------------------------------
def test_std_error_from_rsl_rl_names_iteration_and_last_good_checkpoint(tmp_path, monkeypatch):
    """torch's "normal expects all elements of std >= 0.0" in iteration 1: stops naming it and model_0."""
    from rsl_rl.algorithms import PPO

    from navexp.learn.runner import NonFiniteLossError

    act, calls = PPO.act, {"n": 0}

    def diverging_act(self, obs):
        calls["n"] += 1
        if calls["n"] == 16 + 3:  # the 3rd step of iteration 1 (16 steps per rollout)
            raise RuntimeError("normal expects all elements of std >= 0.0")
        return act(self, obs)

    monkeypatch.setattr(PPO, "act", diverging_act)
    overrides = [*RUN, "ppo.max_iterations=3", "eval.enabled=false"]
    with pytest.raises(
        NonFiniteLossError,
        match=r"diverged at iteration 1: RuntimeError: normal expects all elements of std >= 0.0; "
        r"last good checkpoint: .*model_0.pt",
    ):
        run(compose_config(overrides), tmp_path / "run", overrides, quiet=True)
    assert sorted(p.name for p in (tmp_path / "run").glob("model_*.pt")) == ["model_0.pt"]


# -- 9. PPO sizes that cannot work ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "ppo.algorithm.num_mini_batches=1000",
            r"ppo.algorithm.num_mini_batches=1000 is invalid; allowed: 1 <= value <= env.num_envs \* "
            r"ppo.num_steps_per_env = 4 \* 16 = 64",
        ),
        ("ppo.max_iterations=0", r"ppo.max_iterations=0 is invalid; allowed: an integer >= 1"),
    ],
)
def test_impossible_ppo_sizes_fail_before_training(tmp_path, override, message):
    """More mini-batches than transitions, or no iteration at all: ValueError before any env or file."""
    with pytest.raises(ValueError, match=message):
        run(compose_config([*RUN, override]), tmp_path / "x", [*RUN, override], quiet=True)
    assert not (tmp_path / "x").exists()


# -- 10. evaluation output checked first, metrics printed before written; disk full ---------------
def test_unwritable_evaluation_output_fails_before_any_episode(trained, tmp_path, monkeypatch):
    """out= under a regular file, or a directory: an error naming it, and not one episode was run."""
    from navexp import evaluate
    from navexp.analysis import rollout

    ran = []
    monkeypatch.setattr(rollout, "run_episodes", lambda *a, **k: ran.append(1))
    blocker = tmp_path / "file"
    blocker.write_text("")
    before = snapshot(trained)
    with pytest.raises(OSError, match=rf"out={re.escape(str(blocker))}/eval.json: cannot write there"):
        evaluate.main([f"checkpoint={trained}", f"out={blocker}/eval.json"])
    with pytest.raises(
        ValueError, match=rf"out='{re.escape(str(tmp_path))}' is a directory; give the path of"
    ):
        evaluate.main([f"checkpoint={trained}", f"out={tmp_path}"])  # before: a traceback after every episode
    assert ran == [] and snapshot(trained) == before


def test_evaluation_prints_its_metrics_before_a_failing_write(trained, tmp_path, monkeypatch, capsys):
    """The disk fills between the check and the write: the metrics are on stdout already."""
    from navexp import evaluate

    def full(path, data):
        raise OSError(errno.ENOSPC, f"could not write {path} (ENOSPC: No space left on device)")

    monkeypatch.setattr(evaluate, "write_atomic", full)  # the write of eval.json
    with pytest.raises(OSError, match="ENOSPC"):
        evaluate.main([f"checkpoint={trained}", f"out={tmp_path / 'e.json'}"])
    out = capsys.readouterr().out
    printed, _ = json.JSONDecoder().raw_decode(out[out.index("{\n") :])
    assert printed["num_episodes"] == 4 and printed["checkpoint"] == str(trained / "model_0.pt")
    assert (
        abs(
            sum(printed[k] for k in ("success_rate", "collision_rate", "timeout_rate", "out_of_bounds_rate"))
            - 1
        )
        < 1e-9
    )
    assert not (tmp_path / "e.json").exists()


@pytest.fixture
def small_disk(tmp_path):
    """A 256 KiB tmpfs (root only); skipped with the reason elsewhere."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("the disk-full check mounts a small tmpfs and needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


def test_disk_full_save_names_enospc_and_keeps_the_previous_checkpoint(small_disk):
    """A 1 MiB save onto a 256 KiB disk: OSError ENOSPC naming the file; no .tmp; old file intact."""
    from navexp.learn.checkpoint import save_atomic

    path = small_disk / "model_1.pt"
    save_atomic({"w": torch.zeros(1000)}, path)  # 4 kB of weights: fits
    before = snapshot(small_disk)
    with pytest.raises(
        OSError, match=r"could not write .*model_1.pt \(ENOSPC: No space left on device\)"
    ) as e:
        save_atomic({"w": torch.zeros(256 * 1024)}, path)  # 1 MiB
    assert e.value.errno == errno.ENOSPC
    assert snapshot(small_disk) == before and not (small_disk / "model_1.pt.tmp").exists()


# -- 11. scenario syntax errors name the file and line --------------------------------------------
def test_malformed_scenario_yaml_names_file_and_line(scenario_file):
    """An unclosed bracket on line 3: the error names the file and 'line 4' where the parser stops."""
    from conftest import build_env

    path = scenario_file(
        """\
        scenarios:
          - name: broken
            robot: {x: 1.0, y: [0.0
            goal: {x: 2.0, y: 0.0}
        """
    )
    before = snapshot(Path(path).parent)
    with pytest.raises(ValueError, match=rf"{re.escape(path)} is not valid YAML at line 4, column \d+"):
        build_env(f"env.scenarios={path}")
    assert snapshot(Path(path).parent) == before


# -- 12. the Python requirement matches what installs ---------------------------------------------
def test_python_requirement_is_3_11_everywhere():
    """mujoco-warp 4.0 installs only on 3.11+: pyproject, ruff's target and the README say so."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["requires-python"] == ">=3.11"
    assert meta["tool"]["ruff"]["target-version"] == "py311"
    readme = (ROOT / "README.md").read_text()
    assert "Python 3.11+" in readme and "3.10" not in readme


# -- 13. an evaluation never overwrites another's results -----------------------------------------
def test_evaluation_without_out_writes_its_own_file_with_its_record(trained):
    """env=dense without out=: eval_model_0_dense_<layout seed>_<hash>.json; the run's eval.json is
    unchanged; both files record checkpoint, overrides, scenario file and layout seed."""
    from navexp import evaluate

    before = snapshot(trained)
    overrides = ["env=dense", "eval.num_episodes=4"]
    metrics = evaluate.main([f"checkpoint={trained}", *overrides])
    new = sorted(set(snapshot(trained)) - set(before))
    assert len(new) == 1 and re.fullmatch(rf"eval_model_0_dense_{LAYOUT_SEED}_[0-9a-f]{{8}}\.json", new[0])
    assert {k: v for k, v in snapshot(trained).items() if k in before} == before
    written = json.loads((trained / new[0]).read_text())
    assert written == metrics and written["num_episodes"] == 4
    assert written["checkpoint"] == str(trained / "model_0.pt") and written["overrides"] == overrides
    assert written["scenario_file"] is None and written["layout_seed"] == LAYOUT_SEED
    own = json.loads((trained / "eval.json").read_text())
    assert own["layout_seed"] == LAYOUT_SEED and own["overrides"] == RUN
    (trained / new[0]).unlink()


def test_evaluation_refuses_a_default_file_holding_another_evaluation(trained):
    """A file at the default name that records another checkpoint is left alone; nothing runs."""
    from navexp import evaluate

    cfg = compose_config(RUN)
    target = evaluate.default_output(str(trained / "model_0.pt"), cfg, ["env=empty"])
    assert target.name == f"eval_model_0_empty_{LAYOUT_SEED}.json"
    target.write_text(json.dumps({"checkpoint": "elsewhere/model_7.pt", "overrides": ["env=empty"]}))
    before = snapshot(trained)
    with pytest.raises(
        FileExistsError, match=r"already holds another evaluation \(checkpoint elsewhere/model_7"
    ):
        evaluate.main([f"checkpoint={trained}", "env=empty"])
    assert snapshot(trained) == before
    target.unlink()
