"""scripts/learning_seeds.sh's bookkeeping, with a stand-in for python that records each call: bad
arguments refused, a finished seed not trained again, an unfinished one reported, logs kept, a failed
seed named in the exit status. (The trainings themselves: BENCHMARKS.md; the tools: their own tests.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "learning_seeds.sh"

STUB = f"""\
#!{sys.executable}
# Stands in for python: navexp.train makes the run dir, Hydra's record of its overrides and its
# eval.json (seed=13 fails), navexp.evaluate writes its suite file, navexp.compare does nothing (fails
# with COMPARE_FAILS set); every call is recorded.
import json, os, pathlib, subprocess, sys
args = sys.argv[1:]
with open(os.environ["CALLS"], "a") as f:
    f.write(" ".join(args) + "\\n")
if args[0] == "-c":
    sys.exit(subprocess.call([{sys.executable!r}, *args]))
opts = dict(a.split("=", 1) for a in args[2:] if "=" in a)
if args[1] == "navexp.train":
    if opts["seed"] == "13":
        print("Error: boom"); sys.exit(1)
    d = pathlib.Path(opts["hydra.run.dir"]); (d / ".hydra").mkdir(parents=True)
    (d / "config.yaml").write_text("seed: 1\\n")
    given = [a for a in args[2:] if not a.startswith("hydra.")]
    if not any(a.startswith("size=") for a in given):
        given.append("size=cpu")  # as the app records the preset it resolved
    (d / ".hydra" / "overrides.yaml").write_text("".join(f"- {{a}}\\n" for a in given))
    (d / "eval.json").write_text(json.dumps({{"success_rate": 1.0, "entries": {{"random": {{}}}}}}))
    print("[navexp] it 1/1")
elif args[1] == "navexp.evaluate":
    d = pathlib.Path(opts["checkpoint"])
    ev = json.dumps({{"entries": {{"x": {{}}}}}})
    (d / f"eval_model_0_run_0_suite-{{opts['suite']}}.json").write_text(ev)
elif args[1] == "navexp.compare" and os.environ.get("COMPARE_FAILS"):
    print("error: no finished runs", file=sys.stderr); sys.exit(2)
"""


def launch(tmp_path: Path, out: Path, *overrides: str, **env: str) -> subprocess.CompletedProcess:
    stub = tmp_path / "python"
    stub.write_text(STUB)
    stub.chmod(0o755)
    full = {
        **os.environ,
        "PYTHON": str(stub),
        "CALLS": str(tmp_path / "calls"),
        "RECIPES": "ppo.policy.model=mlp",
        **env,
    }
    return subprocess.run(
        ["bash", str(SCRIPT), str(out), *overrides], env=full, capture_output=True, text=True, timeout=60
    )


def calls(tmp_path: Path, tool: str) -> list[str]:
    lines = (tmp_path / "calls").read_text().splitlines()
    (tmp_path / "calls").unlink()
    return [line for line in lines if line.startswith(f"-m navexp.{tool}")]


@pytest.mark.parametrize(
    "env,message",
    [
        ({"SEEDS": ""}, "SEEDS is empty"),
        ({"SEEDS": "1 x"}, "SEEDS holds 'x'; allowed: integers >= 0"),
        ({"PARALLEL": "x"}, "PARALLEL=x; allowed: an integer >= 1"),
        ({"PARALLEL": "0"}, "PARALLEL=0; allowed: an integer >= 1"),
        ({"SEEDS": "\t\n"}, "SEEDS is empty"),
        ({"SEEDS": "*"}, "SEEDS holds '*'"),
        ({"RECIPES": " "}, "RECIPES is empty"),
        ({"SEEDS": "1 2 01"}, "SEEDS holds seed 1 twice ('1' and '01'); give each seed once"),
        ({"RECIPES": "a=1 a=1"}, "RECIPES 'a=1' and 'a=1' share the folder a_1; give each recipe once"),
        (
            {"SUITES": "ood nowhere"},
            "suite 'nowhere' (FINAL_SUITE/SUITES) is not in configs/suites; allowed: ",
        ),
        ({"FINAL_SUITE": "ood"}, "SUITES holds 'ood', the final suite (FINAL_SUITE); give it once"),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(tmp_path, env, message):
    result = launch(tmp_path, tmp_path / "out", **env)
    assert result.returncode == 2 and message in result.stderr
    assert not (tmp_path / "calls").exists() and not (tmp_path / "out").exists()


def test_a_second_launch_completes_only_what_is_missing_and_a_failure_is_the_exit_status(tmp_path):
    """SEEDS="1 13": seed 1 trains and is evaluated on ood and default; seed 13's training fails, so the
    script exits 1 naming it, after writing the tables. Relaunched: seed 1 is not trained or evaluated
    again and its log keeps the first launch's lines; seed 13 is tried again. A seed directory left
    unfinished (no eval.json) is reported, not overwritten."""
    out = tmp_path / "out"
    first = launch(tmp_path, out, SEEDS="1 13")
    assert first.returncode == 1 and "failed (see each seed's .log):" in first.stderr
    assert "ppo.policy.model_mlp/seed_13" in first.stderr and "seed_1 " not in first.stderr
    assert len(calls(tmp_path, "train")) == 2
    seed1 = out / "ppo.policy.model_mlp" / "seed_1"
    assert sorted(p.name for p in seed1.glob("eval_*")) == [
        "eval_model_0_run_0_suite-default.json",
        "eval_model_0_run_0_suite-ood.json",
    ]
    assert (out / "entries.md").is_file()
    log_before = (out / "ppo.policy.model_mlp" / "seed_1.log").read_text()

    again = launch(tmp_path, out, SEEDS="1 13")
    assert again.returncode == 1
    lines = (tmp_path / "calls").read_text().splitlines()
    trained = [c for c in lines if c.startswith("-m navexp.train")]
    assert len(trained) == 1 and "seed=13" in trained[0]
    assert not [c for c in lines if c.startswith("-m navexp.evaluate") and f"checkpoint={seed1} " in c + " "]
    (tmp_path / "calls").unlink()
    log = (out / "ppo.policy.model_mlp" / "seed_1.log").read_text()
    assert log.startswith(log_before) and "is a finished run: not trained again" in log

    (out / "ppo.policy.model_mlp" / "seed_2").mkdir()  # a run killed before its eval.json
    third = launch(tmp_path, out, SEEDS="1 2")  # seed 13's earlier failure is not this launch's
    assert third.returncode == 1 and "holds an unfinished run: resume it" in third.stderr
    assert third.stderr.strip().endswith(f"failed (see each seed's .log): {out}/ppo.policy.model_mlp/seed_2")
    assert not calls(tmp_path, "train") and not list((out / "ppo.policy.model_mlp" / "seed_2").iterdir())
    assert launch(tmp_path, out, SEEDS="1").returncode == 0


def test_the_usage_is_printed_without_an_output_dir():
    result = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "usage: learning_seeds.sh OUT_DIR" in result.stderr


def test_a_finished_run_of_other_overrides_is_reported_not_reused(tmp_path):
    """The same OUT_DIR relaunched with another training override: seed 1's finished run is not counted
    as the new setup's; the script names both override lists and exits 1, training nothing."""
    out = tmp_path / "out"
    assert launch(tmp_path, out, SEEDS="1").returncode == 0
    (tmp_path / "calls").unlink()
    again = launch(tmp_path, out, "ppo.max_iterations=6", SEEDS="1")
    assert again.returncode == 1
    assert (
        "is a finished run of other overrides (its overrides ['eval.suite=families', 'ppo.policy.model=mlp', "
        in again.stderr
    )
    assert "'ppo.max_iterations=6'" in again.stderr and "use another OUT_DIR, or remove it" in again.stderr
    assert not calls(tmp_path, "train")


def test_a_recipe_value_with_commas_stays_one_override(tmp_path):
    """RECIPES="ppo.actor_hidden_dims=[64,64],ppo.policy.model=mlp": two overrides, the list whole (before:
    split into `ppo.actor_hidden_dims=[64` and `64]`, which Hydra refused)."""
    launch(
        tmp_path, tmp_path / "out", SEEDS="1", RECIPES="ppo.actor_hidden_dims=[64,64],ppo.policy.model=mlp"
    )
    (train,) = calls(tmp_path, "train")
    assert " ppo.actor_hidden_dims=[64,64] ppo.policy.model=mlp seed=1 " in train


def test_an_output_dir_that_is_a_file_is_refused(tmp_path):
    """OUT_DIR an existing file: exit 2 naming it, nothing launched (before: mkdir errors, a false
    "wrote" line and exit 0)."""
    (tmp_path / "out").write_text("hi")
    result = launch(tmp_path, tmp_path / "out", SEEDS="1")
    assert (
        result.returncode == 2
        and f"OUT_DIR {tmp_path / 'out'} exists and is not a directory" in result.stderr
    )
    assert not (tmp_path / "calls").exists()


def test_a_table_that_cannot_be_written_is_the_exit_status(tmp_path):
    """navexp.compare failing for every table: the script names the tables and exits 1 (before: 0, with
    the old tables left in place)."""
    result = launch(tmp_path, tmp_path / "out", SEEDS="1", COMPARE_FAILS="1")
    assert result.returncode == 1
    assert (
        "tables not written or incomplete (navexp.compare's errors above): families.md ood.md default.md"
        in (result.stderr)
    )


def test_the_final_suite_and_the_suites_after_it_are_chosen(tmp_path):
    """FINAL_SUITE=floorplans SUITES="families ood": each training ends on eval.suite=floorplans, then each
    run is evaluated on suite=families and suite=ood (not ood and default), and the tables are named
    after the suites: floorplans.md, families.md, ood.md."""
    out = tmp_path / "out"
    result = launch(tmp_path, out, SEEDS="1", FINAL_SUITE="floorplans", SUITES="families ood")
    assert result.returncode == 0, result.stderr
    lines = (tmp_path / "calls").read_text().splitlines()
    (train,) = [c for c in lines if c.startswith("-m navexp.train")]
    assert "eval.suite=floorplans" in train.split()
    suites = [
        w for c in lines if c.startswith("-m navexp.evaluate") for w in c.split() if w.startswith("suite=")
    ]
    assert suites == ["suite=families", "suite=ood"]
    tables = [
        w for c in lines if c.startswith("-m navexp.compare") for w in c.split() if w.startswith("out=")
    ]
    assert tables == [f"out={out}/{name}.md" for name in ("floorplans", "families", "ood")]
