"""The installed console scripts, as a user calls them from any folder: ``navexp-train`` (Hydra's flags,
shell completion, a first run) and every other tool's ``--help``. Run through the script pip installed
(``shutil.which``), from a folder outside the checkout, with PYTHONPATH on this tree."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = [
    "navexp-train",
    "navexp-evaluate",
    "navexp-play",
    "navexp-export",
    "navexp-bench",
    "navexp-bench-dist",
    "navexp-sweep-report",
    "navexp-compare",
]
"""Every console script of pyproject.toml (the README lists them)."""

pytestmark = pytest.mark.e2e


def script(
    name: str, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run the installed console script ``name`` in ``cwd``, on this tree's code."""
    exe = shutil.which(name)
    assert exe is not None, f"{name} is not installed (pip install -e .)"
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([exe, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=600)


def test_every_console_script_of_pyproject_is_tested():
    """SCRIPTS is pyproject's [project.scripts], so a new tool gets its --help checked."""
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert sorted(declared) == sorted(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS[1:])
def test_each_tools_help(name, tmp_path):
    """`navexp-<tool> --help` prints its usage (exit 0) from a folder outside the checkout."""
    proc = script(name, "--help", cwd=tmp_path)
    assert proc.returncode == 0 and "usage" in proc.stdout.lower(), proc.stderr[-2000:]


def test_train_help_lists_each_groups_options_only(tmp_path):
    """`navexp-train --help` (before: "Primary config module 'configs' not found") lists the groups and
    their options: no schema entries (base_reward) and no data folders (scenarios, suites)."""
    proc = script("navexp-train", "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    groups = proc.stdout.split("== Configuration groups ==")[1].split("== Config ==")[0]
    assert (
        "reward: bcppo, path, progress, sparse\n" in groups and "size: auto, cpu, gpu, none, tiny\n" in groups
    )
    assert "base_" not in groups and "scenarios:" not in groups and "suites:" not in groups


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--hydra-help"], "== Flags =="),
        (["--info", "defaults"], "size/cpu"),
        (["--cfg", "job", "ppo.max_iterations=3"], "max_iterations: 3"),
        (["-sc", "install=bash"], "complete -o nospace -o default -F hydra_bash_completion navexp-train"),
    ],
)
def test_hydras_flags_with_the_injected_size_preset(args, expected, tmp_path):
    """--hydra-help (before: "Could not override 'size'"), --info, --cfg and -sc answer without a
    traceback although the app adds `size=` to the command line."""
    proc = script("navexp-train", *args, cwd=tmp_path, env={"CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert expected in proc.stdout


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("navexp-train reward=", ["reward=bcppo", "reward=path", "reward=progress", "reward=sparse"]),
        ("navexp-train env=dense ppo.algorithm.desi", ["ppo.algorithm.desired_kl="]),
        ("navexp-train ppo.desi", ["ppo.desired_kl="]),
        ("navexp-train rewa", ["reward.", "reward="]),
    ],
)
def test_tab_completion_queries_the_apps_config(line, expected, tmp_path):
    """What the bash function of `eval "$(navexp-train -sc install=bash)"` runs on TAB:
    `COMP_LINE=... navexp-train -sc query=bash` answers exactly the group's options and the key's
    completion: no schema entry (Hydra offered `reward=base_reward`), the old PPO names too
    (`ppo.desi` -> `ppo.desired_kl=`; Hydra offered nothing)."""
    env = {"COMP_LINE": line, "COMP_POINT": str(len(line))}
    proc = script("navexp-train", "-sc", "query=bash", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(proc.stdout.split()) == expected, proc.stdout


def test_tab_completion_offers_groups_not_schemas_or_data_folders(tmp_path):
    """TAB on an empty word lists the app's groups (`reward=`, `env=`) and keys (`ppo.`), never the
    data folders `scenarios=`/`suites=` (files for env.scenarios= and eval.suite=), as --help does."""
    line = "navexp-train "
    env = {"COMP_LINE": line, "COMP_POINT": str(len(line))}
    words = script("navexp-train", "-sc", "query=bash", cwd=tmp_path, env=env).stdout.split()
    assert {"reward=", "env=", "obs=", "ppo.", "seed="} <= set(words), words
    assert not {"scenarios=", "suites=", "scenarios.", "suites."} & set(words), words
    assert not [w for w in words if "base_" in w], words


def test_a_misspelled_key_with_plus_writes_nothing(tmp_path):
    """`navexp-train +ppo.algorithm.desired_kll=0.01` (Hydra's own hint for the typo) ends in one
    `Error:` line naming ppo.algorithm.desired_kl; no outputs/ folder appears."""
    proc = script("navexp-train", "+ppo.algorithm.desired_kll=0.01", cwd=tmp_path)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(err) == 1 and err[0].startswith("Error: "), proc.stderr[-2000:]
    assert "closest: ppo.algorithm.desired_kl" in err[0]
    assert not (tmp_path / "outputs").exists()


def test_a_first_run_with_the_tiny_preset(tmp_path):
    """`navexp-train size=tiny` from an empty folder: 3 iterations whose progress lines count like the
    checkpoints (`it 2/2` is `model_2.pt`), a quiet console (no rsl_rl model printout), and the run's
    train.log holding what the console showed. Before: the script failed, the lines read 1/3..3/3 for
    model_0..2.pt, and train.log held none of them."""
    proc = script("navexp-train", "size=tiny", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[navexp] it ")]
    assert [ln.split("|")[0].split()[-1] for ln in lines] == ["0/2", "1/2", "2/2"]
    assert "Actor Model" not in proc.stdout and "Resolved observation sets" not in proc.stdout
    (run_dir,) = (tmp_path / "outputs" / "navexp").iterdir()
    assert sorted(p.name for p in run_dir.glob("model_*.pt")) == ["model_0.pt", "model_1.pt", "model_2.pt"]
    log = (run_dir / "train.log").read_text()
    assert all(ln in log for ln in lines) and "[navexp] eval over 16 held-out episodes" in log
    assert (run_dir / "eval.json").is_file()
    ctrl_c_in_evaluate(run_dir, tmp_path)


def ctrl_c_in_evaluate(run_dir: Path, tmp_path: Path) -> None:
    """Ctrl-C (SIGINT) while `navexp-evaluate` runs its episodes: exit status 130, one line, no
    traceback (before: KeyboardInterrupt's traceback), no result file."""
    exe = shutil.which("navexp-evaluate")
    out = tmp_path / "e.json"
    args = [exe, f"checkpoint={run_dir}", "eval.num_episodes=100000", f"out={out}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # A shell's Ctrl-C: SIGINT at its default disposition in the child (a test run started in the
    # background of a script inherits SIGINT ignored, and Python then installs no handler for it).
    proc = subprocess.Popen(
        args,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    for line in proc.stdout:
        if line.startswith("[navexp] evaluation: 100000 episodes on "):
            proc.send_signal(signal.SIGINT)
            break
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert err.strip().splitlines()[-1] == "[navexp] interrupted (Ctrl-C): stopped before writing any file"
    assert not out.exists()
