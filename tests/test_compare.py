"""`python -m navexp.compare` on a hand-built tree of run directories: groups, counts, means, IQM and
intervals checked by hand, unfinished runs listed, a bad `by=` key named with the keys that vary."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats

from navexp import compare
from navexp.analysis.compare import COLUMNS, group_label

# clip 0.1: seeds 1-4; clip 0.2: seeds 1-2 and one unfinished run; one lone run of clip 0.3.
RUNS = {
    "a1": ("0.1", 1, 0.80),
    "a2": ("0.1", 2, 0.90),
    "a3": ("0.1", 3, 0.50),
    "a4": ("0.1", 4, 0.60),
    "b1": ("0.2", 1, 0.95),
    "b2": ("0.2", 2, 0.85),
    "b3": ("0.2", 3, None),
    "c1": ("0.3", 1, 0.70),
}


def make_run(
    root: Path,
    name: str,
    clip: str,
    seed: int,
    success: float | None,
    old: bool = False,
    env: str = "room",
    extra: list[str] = (),
) -> Path:
    """A run dir as navexp.train leaves it: config.yaml (the resolved config: the sweeper's trial id,
    the W&B name and the device in it too), .hydra/overrides.yaml and .hydra/hydra.yaml (its group
    choices), eval.json when done (``old``: as it left it before the ``ppo`` sections, with
    ``ppo.clip_param``). ``env=traps`` changes two env keys, as the group's file would; ``extra``
    overrides (``env.num_envs=8``) are set in the config and recorded on the command line."""
    d = root / name
    (d / ".hydra").mkdir(parents=True)
    # What a sweeper adds to a trial (its id, W&B name, device) never splits a group.
    key = "ppo.clip_param" if old else "ppo.algorithm.clip_param"
    overrides = [f"{key}={clip}", f"seed={seed}", "hydra.run.dir=x", f"sweep.trial_id={seed}"]
    overrides += [f"logger.name=trial_{seed}", f"env.device=cuda:{seed % 2}", *extra]
    overrides += [] if env == "room" else [f"env={env}"]
    (d / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    choices = {"env": env, "reward": "bcppo", "hydra/launcher": "basic"}
    (d / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"runtime": {"choices": choices}}}))
    ppo = {"clip_param": float(clip), "desired_kl": 0.01}
    env_cfg = {
        "num_envs": 4,
        "device": f"cuda:{seed % 2}",
        "maps": {"weights": {"room": 1.0, "dead_end": 0.0}},
    }
    if env == "traps":
        env_cfg["maps"]["weights"] = {"room": 0.2, "dead_end": 0.25}
    config = {"seed": seed, "ppo": ppo if old else {"algorithm": ppo}, "env": env_cfg}
    config |= {"sweep": {"trial_id": seed}, "logger": {"name": f"trial_{seed}"}}
    for o in (o for o in extra if "." in o.split("=")[0]):  # reward=bcppo: a choice, in hydra.yaml
        k, v = o.split("=", 1)
        node = config
        for part in k.split(".")[:-1]:
            node = node.setdefault(part, {})
        node[k.split(".")[-1]] = yaml.safe_load(v)
    (d / "config.yaml").write_text(yaml.safe_dump(config))
    (d / "wandb" / "offline-run-x" / "files").mkdir(parents=True)  # W&B's own config.yaml: not a run
    (d / "wandb" / "offline-run-x" / "files" / "config.yaml").write_text("{}")
    if success is not None:
        ev = {
            "success_rate": success,
            "collision_rate": round(1 - success, 2),
            "timeout_rate": 0.0,
            "spl": success / 2,
            "barn_score": None,
            "ci95": {"success_rate": [success - 0.1, success + 0.05]},
            "entries": {
                "room": {"success_rate": success},
                "dense": {
                    "success_rate": success - 0.1,
                    "collision_rate": 0.05,
                    "ci95": {"success_rate": [success - 0.2, success]},
                },
            },
        }
        (d / "eval.json").write_text(json.dumps(ev))
    return d


def assert_bootstrap_interval(row: dict, rates: list[float]) -> None:
    """The row's interval is scipy's percentile bootstrap of the mean of ``rates`` (10,000, seed 0)."""
    boot = stats.bootstrap(
        (np.array(rates),), np.mean, n_resamples=10_000, method="percentile", random_state=0
    )
    assert (row["success_rate_ci95_low"], row["success_rate_ci95_high"]) == pytest.approx(
        (boot.confidence_interval.low, boot.confidence_interval.high)
    )


@pytest.fixture
def tree(tmp_path) -> Path:
    for name, (clip, seed, success) in RUNS.items():
        make_run(tmp_path / "multirun", name, clip, seed, success)
    return tmp_path / "multirun"


def test_groups_by_overrides_without_the_seed(tree, capsys):
    """Three groups (clip 0.1, 0.2, 0.3); clip 0.1: 4 runs, mean (0.8+0.9+0.5+0.6)/4 = 0.70, IQM the
    mean of the middle two (0.6, 0.8) = 0.70, the interval scipy's bootstrap of the mean; the unfinished
    b3 is listed."""
    result = compare.main([str(tree)])
    rows = {r["ppo.algorithm.clip_param"]: r for r in result.rows}
    assert set(rows) == {"0.1", "0.2", "0.3"}
    a = rows["0.1"]
    assert a["n_runs"] == 4
    assert a["success_rate_mean"] == pytest.approx(0.70)
    assert a["success_rate_iqm"] == pytest.approx((0.6 + 0.8) / 2)
    assert_bootstrap_interval(a, [0.8, 0.9, 0.5, 0.6])
    assert 0.5 <= a["success_rate_ci95_low"] < 0.70 < a["success_rate_ci95_high"] <= 0.9
    assert a["collision_rate_mean"] == pytest.approx((0.2 + 0.1 + 0.5 + 0.4) / 4)
    assert a["spl_mean"] == pytest.approx(0.35) and a["barn_score_mean"] is None
    assert a["dense.success_rate_mean"] == pytest.approx(0.60)
    b = rows["0.2"]
    assert b["n_runs"] == 2 and b["success_rate_mean"] == pytest.approx(0.90)
    c = rows["0.3"]  # one run: its own Wilson interval from eval.json
    assert c["n_runs"] == 1 and (c["success_rate_ci95_low"], c["success_rate_ci95_high"]) == pytest.approx(
        (0.60, 0.75)
    )
    assert result.unfinished == [tree / "b3"]
    out = capsys.readouterr().out
    assert (
        f"unfinished (no eval.json): {tree / 'b3'}" in out and "| ppo.algorithm.clip_param | n_runs |" in out
    )


def test_out_writes_csv_with_the_documented_columns_and_the_plots(tree, tmp_path):
    """out=table.csv: the grouping key, then n_runs, success_rate_mean, _ci95_low, _ci95_high, _iqm; the
    values as printed; table_success.png and table_profile.png beside it. out=.md: Markdown."""
    compare.main([str(tree), f"out={tmp_path / 'table.csv'}"])
    with open(tmp_path / "table.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:6] == [
        "ppo.algorithm.clip_param",
        "n_runs",
        "success_rate_mean",
        "success_rate_ci95_low",
        "success_rate_ci95_high",
        "success_rate_iqm",
    ]
    assert {r["ppo.algorithm.clip_param"]: int(r["n_runs"]) for r in rows} == {"0.1": 4, "0.2": 2, "0.3": 1}
    for name in ("table_success.png", "table_profile.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    compare.main([str(tree), f"out={tmp_path / 'table.md'}"])
    assert (tmp_path / "table.md").read_text().startswith("| ppo.algorithm.clip_param | n_runs |")


def test_by_groups_on_config_keys_and_a_bad_key_names_the_varying_ones(tree):
    """by=ppo.algorithm.desired_kl puts all 7 finished runs in one group; by=ppo.clip fails naming
    the config keys that vary (ppo.algorithm.clip_param, the seed and what differs by trial)."""
    (row,) = compare.main([str(tree), "by=ppo.algorithm.desired_kl"]).rows
    assert row["n_runs"] == 7 and row["ppo.algorithm.desired_kl"] == "0.01"
    with pytest.raises(
        KeyError,
        match=r"by='ppo.clip' is not a config key .*keys that vary: \['env.device', 'logger.name', "
        r"'ppo.algorithm.clip_param', 'seed', 'sweep.trial_id'\]",
    ):
        compare.main([str(tree), "by=ppo.clip"])
    with pytest.raises(ValueError, match="unknown option 'bye=seed'; options: by=, out="):
        compare.main([str(tree), "bye=seed"])
    with pytest.raises(FileNotFoundError, match="no such directory"):
        compare.main([str(tree / "nope")])


def test_entry_aggregates_one_suite_entry_instead_of_the_main_one(tree):
    """entry=dense: clip 0.1's success is the mean of its dense rates (0.7+0.8+0.4+0.5)/4 = 0.60, its
    interval scipy's bootstrap of those four, its IQM (0.5+0.7)/2; the lone clip 0.3 run reports its
    dense entry's own interval (0.50, 0.70) and collision rate 0.05; each row says entry=dense; the
    unfinished run is still listed. A finished run without the entry stops the comparison, naming the
    run and its entries."""
    result = compare.main([str(tree), "entry=dense"])
    assert result.unfinished == [tree / "b3"]
    rows = {r["ppo.algorithm.clip_param"]: r for r in result.rows}
    a = rows["0.1"]
    assert a["entry"] == "dense" and a["n_runs"] == 4
    assert a["success_rate_mean"] == pytest.approx(0.60)
    assert a["success_rate_iqm"] == pytest.approx((0.5 + 0.7) / 2)
    assert_bootstrap_interval(a, [0.7, 0.8, 0.4, 0.5])
    assert a["room.success_rate_mean"] == pytest.approx(0.70)  # the per-entry means stay
    c = rows["0.3"]
    assert (c["success_rate_ci95_low"], c["success_rate_ci95_high"]) == pytest.approx((0.50, 0.70))
    assert c["collision_rate_mean"] == pytest.approx(0.05)
    with pytest.raises(
        KeyError, match=r"entry='hairpin' is not an entry of .*its entries: \['dense', 'room'\]"
    ):
        compare.main([str(tree), "entry=hairpin"])


@pytest.mark.filterwarnings("error")
def test_plots_wrap_long_group_names(tmp_path):
    """Groups told apart by several long keys (as scripts/learning_seeds.sh's recipes make them,
    80-130 characters) are drawn whole and without a layout warning: the names wrap at 48 characters,
    so the success plot stays near its 7-inch width at 90 dpi (630 px plus a 48-character label column,
    under 1000 px; one line per name made it about 1800 px)."""
    keys = ["reward.terms.near_obstacle.params.safe_dist", "reward.terms.near_obstacle.weight"]
    keys += ["reward.terms.path_progress.weight", "ppo.algorithm.entropy_coef"]
    for i, values in enumerate((("0.5", "-0.15", "1.0", "0.005"), ("0.4", "-0.3", "2.0", "0.01"))):
        for seed in (1, 2):
            extra = [f"{k}={v}" for k, v in zip(keys, values, strict=True)]
            make_run(tmp_path / "multirun", f"r{i}_{seed}", "0.2", seed, 0.9, env="traps", extra=extra)
    result = compare.main([str(tmp_path / "multirun"), f"out={tmp_path / 'long.md'}"])
    assert len(result.rows) == 2 and len(group_label(result.rows[0])) > 130
    for name in ("long_success.png", "long_profile.png"):
        png = (tmp_path / name).read_bytes()
        width = int.from_bytes(png[16:20], "big")  # the IHDR chunk's width
        assert 300 < width < 1000, (name, width)


def test_of_several_matching_files_the_one_scoring_the_runs_policy_is_read(tmp_path, capsys):
    """A run whose policy is model_2_avg3.pt holds two ood evaluations: of the policy (0.90, written
    first) and of the raw model_2.pt (0.40, written later, and after it by name). eval='eval_*ood*.json'
    reads the policy's. Where none scores the policy (model_3.pt saved since) it reads the newest file
    and says so; a run without checkpoints reads the newest."""
    d = make_run(tmp_path / "runs", "a1", "0.1", 1, 0.80)
    for name in ("model_1.pt", "model_2.pt", "model_2_avg3.pt"):
        (d / name).write_bytes(b"")
    policy_eval = d / "eval_model_2_avg3_run_0_suite-ood.json"
    raw_eval = d / "eval_model_2_run_0_suite-ood.json"
    policy_eval.write_text(json.dumps({"success_rate": 0.90, "checkpoint": str(d / "model_2_avg3.pt")}))
    raw_eval.write_text(json.dumps({"success_rate": 0.40, "checkpoint": str(d / "model_2.pt")}))
    os.utime(policy_eval, ns=(1_000_000_000, 1_000_000_000))
    os.utime(raw_eval, ns=(2_000_000_000, 2_000_000_000))
    assert sorted(p.name for p in d.glob("eval_*ood*.json"))[-1] == raw_eval.name
    (row,) = compare.main([str(tmp_path / "runs"), "eval=eval_*ood*.json"]).rows
    assert row["success_rate_mean"] == pytest.approx(0.90)
    (d / "model_3.pt").write_bytes(b"")  # the policy is now model_3.pt, which neither file scores
    (row,) = compare.main([str(tmp_path / "runs"), "eval=eval_*ood*.json"]).rows
    assert row["success_rate_mean"] == pytest.approx(0.40)
    assert (
        "scores the run's policy model_3.pt; reading the newest, eval_model_2_run_0"
        in capsys.readouterr().err
    )
    for p in d.glob("model_*.pt"):
        p.unlink()
    os.utime(policy_eval, ns=(3_000_000_000, 3_000_000_000))
    (row,) = compare.main([str(tmp_path / "runs"), "eval=eval_*ood*.json"]).rows
    assert row["success_rate_mean"] == pytest.approx(0.90)


def test_runs_mixing_suites_main_entries_are_refused_naming_both(tmp_path):
    """Two runs, one evaluated on suite=families (main entry random), one on suite=default (main entry
    room): their top-level success rates score different maps, so comparing them is refused, naming
    both files, in one group and side by side (by=seed); entry=dense (an entry both have) compares them."""
    for name, suite, main in (("a1", "families", "random"), ("a2", "default", "room")):
        d = make_run(tmp_path / "runs", name, "0.1", int(name[1]), 0.80)
        ev = json.loads((d / "eval.json").read_text()) | {"suite": suite, "suite_main_entry": main}
        (d / "eval.json").write_text(json.dumps(ev))
    for by in ([], ["by=seed"]):
        with pytest.raises(
            ValueError,
            match=r"mix evaluations of different suites: .*a1/eval.json scores suite families, main entry "
            r"random, .*a2/eval.json scores suite default, main entry room",
        ):
            compare.main([str(tmp_path / "runs"), *by])
    (row,) = compare.main([str(tmp_path / "runs"), "entry=dense"]).rows
    assert row["n_runs"] == 2


def test_by_values_are_written_as_they_read(tmp_path):
    """by=recipe,ppo.algorithm.desired_kl: the string traps is written traps (not "traps"), the number
    0.01 as 0.01."""
    for name in ("a1", "a2"):
        d = make_run(tmp_path / "runs", name, "0.1", int(name[1]), 0.80)
        cfg = yaml.safe_load((d / "config.yaml").read_text()) | {"recipe": "traps"}
        (d / "config.yaml").write_text(yaml.safe_dump(cfg))
    compare.main([str(tmp_path / "runs"), "by=recipe,ppo.algorithm.desired_kl", f"out={tmp_path / 't.csv'}"])
    with open(tmp_path / "t.csv") as f:
        (row,) = list(csv.DictReader(f))
    assert (row["recipe"], row["ppo.algorithm.desired_kl"], row["n_runs"]) == ("traps", "0.01", "2")
    cfg = yaml.safe_load((tmp_path / "runs" / "a2" / "config.yaml").read_text()) | {"recipe": 1}
    (tmp_path / "runs" / "a2" / "config.yaml").write_text(yaml.safe_dump(cfg))
    cfg["recipe"] = "1"  # the string "1" and the number 1 stay two groups
    (tmp_path / "runs" / "a1" / "config.yaml").write_text(yaml.safe_dump(cfg))
    rows = compare.main([str(tmp_path / "runs"), "by=recipe"]).rows
    assert sorted((r["recipe"], r["n_runs"]) for r in rows) == [("1", 1), ("1", 1)]


def test_each_run_counts_once_however_the_folders_overlap(tree):
    """The tree, then one of its runs again (and the tree by another spelling): clip 0.1 still has its 4
    runs and mean 0.70, not 5 runs (a1 twice: (0.8+0.8+0.9+0.5+0.6)/5 = 0.72)."""
    spelled = tree.parent / "." / tree.name
    result = compare.main([str(tree), str(tree / "a1"), str(spelled)])
    rows = {r["ppo.algorithm.clip_param"]: r for r in result.rows}
    assert rows["0.1"]["n_runs"] == 4 and rows["0.1"]["success_rate_mean"] == pytest.approx(0.70)
    assert result.unfinished == [tree / "b3"]


def test_a_run_in_a_folder_named_wandb_is_a_run_and_the_logger_splits_no_group(tmp_path):
    """experiment_name=wandb puts runs in outputs/wandb/<time>/: they are runs (only W&B's folder inside a
    run is not). A run logged with logger=tensorboard groups with the others (logger is neutral)."""
    make_run(tmp_path / "outputs" / "wandb", "t1", "0.1", 1, 0.80)
    run = make_run(tmp_path / "outputs" / "wandb", "t2", "0.1", 2, 0.60)
    overrides = yaml.safe_load((run / ".hydra" / "overrides.yaml").read_text()) + ["logger=tensorboard"]
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (row,) = compare.main([str(tmp_path / "outputs")]).rows
    assert row["n_runs"] == 2 and row["success_rate_mean"] == pytest.approx(0.70)


def test_no_finished_run_for_a_table_is_an_error_that_keeps_the_old_table(tree, tmp_path):
    """eval= matching no run's file with out=: an error naming the files the runs do have; the table
    written before is left as it was."""
    table = tmp_path / "table.csv"
    compare.main([str(tree), f"out={table}"])
    before = table.read_bytes()
    with pytest.raises(
        FileNotFoundError, match=r"none has eval_\*ood\*\.json \(the runs' evaluation files: eval\.json\)"
    ):
        compare.main([str(tree), "eval=eval_*ood*.json", f"out={table}"])
    assert table.read_bytes() == before


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("out={tree}", "is a directory"),
        ("out={tree}/t.txt", "give a .csv or .md file"),
        ("out={tree}/a1/eval.json/t.csv", "its folder cannot be made"),
        ("eval=/tmp/x.json", "give a file name pattern inside each run directory, not a path"),
        ("by=", "option 'by=' has no value"),
    ],
)
def test_bad_options_are_named_before_any_run_is_read(tree, arg, message):
    with pytest.raises(ValueError, match=message):
        compare.main([str(tree), arg.format(tree=tree)])


@pytest.mark.parametrize(
    ("file", "content", "reason"),
    [
        ("eval.json", '{"success_rate": 0.5', r"not JSON \(Expecting"),
        ("eval.json", '{"spl": 0.5}', r"not an evaluation of navexp.train or navexp.evaluate"),
        ("eval.json", "[1, 2]", r"not an evaluation of navexp.train or navexp.evaluate"),
        ("eval.json", '{"success_rate": null}', r"success_rate is 'None'; allowed: a number in \[0, 1\]"),
        ("eval.json", '{"success_rate": NaN}', r"success_rate is 'nan'; allowed: a number in \[0, 1\]"),
        ("eval.json", '{"success_rate": "abc"}', r"success_rate is 'abc'; allowed: a number in \[0, 1\]"),
        ("eval.json", '{"success_rate": 0.5, "entries": [1]}', r"'entries' is a list, not a mapping"),
        (
            "eval.json",
            '{"success_rate": 0.5, "entries": {"dense": {"success_rate": "x"}}}',
            r"entries.dense.",
        ),
        (".hydra/overrides.yaml", "- seed=1\n- [unclosed", r"not YAML \(while parsing"),
        (".hydra/overrides.yaml", "seed=1", r"not a list of key=value overrides \(holds a str: seed=1\)"),
        (
            ".hydra/overrides.yaml",
            "{seed: 1}",
            r"not a list of key=value overrides \(holds a dict: \{'seed': 1\}\)",
        ),
        (".hydra/overrides.yaml", "- {seed: 1}", r"not a list of key=value overrides"),
        (".hydra/hydra.yaml", "hydra: [", r"not YAML"),
        ("config.yaml", "ppo: [unclosed\n", r"not a run's config"),
        ("config.yaml", "3", r"not a run's config \(Invalid loaded object type: int"),
    ],
)
def test_a_run_with_a_corrupt_file_is_listed_as_unreadable_and_the_rest_compared(
    tree, tmp_path, capsys, file, content, reason
):
    """Run a1 with a corrupt eval.json (truncated, foreign, a success rate that is null, NaN, text,
    entries as a list or with a bad entry), .hydra/overrides.yaml (truncated, a scalar, a mapping, a
    mapping item), hydra.yaml or config.yaml: one line `unreadable, left out: <file>: <what is wrong>`,
    and the table of the other runs is printed and written: clip 0.1 of a2-a4 alone, 3 runs, mean
    (0.9+0.5+0.6)/3 = 66.7 %. Before: exit 0 with a blank mean (null, NaN), tracebacks (entries as a
    list, overrides.yaml) or the whole comparison refused (a truncated eval.json) and a mapping in
    overrides.yaml left the run silently ungrouped."""
    bad = tree / "a1" / file
    bad.write_text(content)
    result = compare.main([str(tree), f"out={tmp_path / 't.csv'}"])
    (unreadable,) = result.unreadable
    assert re.fullmatch(rf"{re.escape(str(bad))}: .*{reason}.*", str(unreadable)), str(unreadable)
    rows = {r["ppo.algorithm.clip_param"]: r for r in result.rows}
    assert rows["0.1"]["n_runs"] == 3 and rows["0.1"]["success_rate_mean"] == pytest.approx(2.0 / 3)
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if x.startswith("unreadable")]
    assert line == f"unreadable, left out: {unreadable}"
    with open(tmp_path / "t.csv") as f:
        assert {r["ppo.algorithm.clip_param"]: r["n_runs"] for r in csv.DictReader(f)} == {
            "0.1": "3",
            "0.2": "2",
            "0.3": "1",
        }


def test_groups_follow_the_resolved_config_not_the_command_line(tmp_path, capsys):
    """Two runs with one config, one launched with the defaults spelled out (reward=bcppo
    ppo.algorithm.desired_kl=0.01): one group of 2, and the settings every run has alike printed once
    above the table (before: two groups, the default run's desired_kl shown as '-'). A run with
    desired_kl 0.02 is a group of its own; its column shows 0.01 for the others."""
    root = tmp_path / "runs"
    make_run(root, "a1", "0.1", 1, 0.80, extra=["reward=bcppo", "ppo.algorithm.desired_kl=0.01"])
    make_run(root, "a2", "0.1", 2, 0.60)
    make_run(root, "b1", "0.1", 3, 0.90, extra=["ppo.algorithm.desired_kl=0.02"])
    result = compare.main([str(root)])
    rows = {r["ppo.algorithm.desired_kl"]: r for r in result.rows}
    assert {k: r["n_runs"] for k, r in rows.items()} == {"0.01": 2, "0.02": 1}
    assert rows["0.01"]["success_rate_mean"] == pytest.approx(0.70)
    assert list(rows["0.01"])[0] == "ppo.algorithm.desired_kl" and "reward" not in rows["0.01"]
    assert result.shared == {"ppo.algorithm.clip_param": "0.1", "reward": "bcppo"}
    out = capsys.readouterr().out
    assert out.startswith("same in every run compared: ppo.algorithm.clip_param=0.1 reward=bcppo\n")


def test_a_group_choice_is_one_column_and_the_keys_it_sets_are_named_below(tmp_path, capsys):
    """env=traps against the default env=room: one column `env` (room, traps), not a column per env
    key it changes (env.maps.weights.dead_end, .room: named once below the table); a key a command line
    sets (env.num_envs=8) keeps its column. The group of 2 runs shows no IQM, the legend says why."""
    root = tmp_path / "runs"
    make_run(root, "a1", "0.1", 1, 0.80)
    make_run(root, "a2", "0.1", 2, 0.60)
    make_run(root, "t1", "0.1", 1, 0.50, env="traps")
    make_run(root, "t2", "0.1", 2, 0.40, env="traps", extra=["env.num_envs=8"])
    result = compare.main([str(root)])
    keys = [(r["env"], r["env.num_envs"], r["n_runs"]) for r in result.rows]
    assert sorted(keys) == [("room", "4", 2), ("traps", "4", 1), ("traps", "8", 1)]
    assert [k for k in result.rows[0] if k not in COLUMNS and "_mean" not in k] == [
        "env",
        "env.num_envs",
    ]
    assert result.hidden == ["env.maps.weights.dead_end", "env.maps.weights.room"]
    assert result.rows[0]["success_rate_iqm"] is None
    out = capsys.readouterr().out
    assert "also differing, with the columns above: env.maps.weights.dead_end, env.maps.weights.room" in out
    assert "| room | 4 | 2 | 70.0 |" in out
    assert "iqm: interquartile mean, the mean of the middle 50 % of runs (from 4 runs; '-' below)" in out
    assert (
        "ci95: 95 % interval of the mean over a group's runs (percentile bootstrap, 10,000 resamples" in out
    )


def test_runs_from_before_the_ppo_sections_group_with_todays(tmp_path):
    """Runs stored with flat ppo keys (``ppo.clip_param`` in overrides.yaml and config.yaml) group with
    today's runs of the same value, by their overrides and by ``by=`` in either name."""
    for name, (clip, seed, success) in RUNS.items():
        make_run(tmp_path, name, clip, seed, success, old=name in ("a1", "a2", "c1"))
    rows = compare.compare([tmp_path]).rows
    assert {r["ppo.algorithm.clip_param"]: int(r["n_runs"]) for r in rows} == {"0.1": 4, "0.2": 2, "0.3": 1}
    for by in ("ppo.clip_param", "ppo.algorithm.clip_param"):
        rows = compare.compare([tmp_path], by=[by]).rows
        assert {r["ppo.algorithm.clip_param"]: int(r["n_runs"]) for r in rows} == {
            "0.1": 4,
            "0.2": 2,
            "0.3": 1,
        }


def test_console_verbosity_and_the_env_label_never_split_a_group(tmp_path):
    """A run launched with verbose=true and env.name=room in its config (runs made since the env got
    its label) against one made before the label existed: one group of 2 (before: two groups, the
    label and the verbosity shown as columns)."""
    root = tmp_path / "runs"
    make_run(root, "new", "0.1", 1, 0.80, extra=["verbose=true", "env.name=room"])
    make_run(root, "old", "0.1", 2, 0.60)
    result = compare.main([str(root)])
    assert [r["n_runs"] for r in result.rows] == [2]
    assert result.rows[0]["success_rate_mean"] == pytest.approx(0.70)


def add_moving(run: Path, moving: float, wait_s: float, entry: str | None = None) -> None:
    """eval.json of ``run`` (or of its suite ``entry``) gains what an evaluation since issue 50 writes:
    ``moving_collision_rate`` (a fraction of the episodes) and ``mean_wait_s`` (seconds)."""
    path = run / "eval.json"
    ev = json.loads(path.read_text())
    figures = ev["entries"].setdefault(entry, {"success_rate": 0.75}) if entry else ev
    figures.update(moving_collision_rate=moving, mean_wait_s=wait_s)
    path.write_text(json.dumps(ev))


def test_moving_collisions_and_waiting_are_columns_when_a_run_had_moving_obstacles(tmp_path, capsys):
    """Runs with moving slots (env.dynamic.cylinder_slots=3), 8 evaluation episodes each: clip 0.1's
    runs had 2 and 0 moving collisions (2/8 = 25 %, 0 %: mean 12.5 %) and waited 1.5 s and 2.5 s (mean
    2.000 s); clip 0.2's one run 4 of 8 (50.0 %), 0.25 s. Printed, in the CSV and the .md table: in
    percent like the other rates, the waiting time in seconds; the legend says so."""
    root = tmp_path / "runs"
    extra = ["env.dynamic.cylinder_slots=3"]
    for name, clip, seed, moving, wait in (
        ("a1", "0.1", 1, 2 / 8, 1.5),
        ("a2", "0.1", 2, 0 / 8, 2.5),
        ("b1", "0.2", 1, 4 / 8, 0.25),
    ):
        add_moving(make_run(root, name, clip, seed, 0.75, extra=extra), moving, wait)
    result = compare.main([str(root)])
    rows = {r["ppo.algorithm.clip_param"]: r for r in result.rows}
    assert rows["0.1"]["moving_collision_rate_mean"] == pytest.approx(0.125)
    assert rows["0.1"]["mean_wait_s_mean"] == pytest.approx(2.0)
    assert rows["0.2"]["moving_collision_rate_mean"] == pytest.approx(0.5)
    out = capsys.readouterr().out
    head = "| barn_score_mean | moving_collision_rate_mean | mean_wait_s_mean |"
    assert head in out
    assert "| - | 12.5 | 2.000 |" in out and "| - | 50.0 | 0.250 |" in out
    assert "mean_wait_s: seconds waited" in out
    compare.main([str(root), f"out={tmp_path / 'table.csv'}"])
    with open(tmp_path / "table.csv") as f:
        table = {r["ppo.algorithm.clip_param"]: r for r in csv.DictReader(f)}
    assert (table["0.1"]["moving_collision_rate_mean"], table["0.1"]["mean_wait_s_mean"]) == ("12.5", "2.0")
    compare.main([str(root), f"out={tmp_path / 'table.md'}"])
    assert "| - | 50.0 | 0.250 |" in (tmp_path / "table.md").read_text()


def test_static_runs_keep_their_columns_whether_or_not_eval_json_has_the_moving_keys(tree, capsys):
    """The tree's static runs (no moving slots), first as old eval.json files left them (no moving
    keys), then as today's evaluation writes them (moving_collision_rate 0, mean_wait_s 0.7): the same
    columns both times, none of them for moving obstacles, and the same legend."""
    compare.main([str(tree)])
    before = capsys.readouterr().out
    for name, (_, _, success) in RUNS.items():
        if success is not None:
            add_moving(tree / name, 0.0, 0.7)
    result = compare.main([str(tree)])
    after = capsys.readouterr().out
    assert after == before
    assert not [k for k in result.rows[0] if "moving" in k or "wait" in k]


def test_an_entry_with_moving_collisions_shows_them_and_the_static_main_entry_does_not(tmp_path, capsys):
    """Two static runs (no moving slots) evaluated on a suite with a moving entry `dynamic` (success
    75 %): run a1 had 2 moving collisions in 8 episodes there (25.0 %) and waited 3.0 s, a2 none and
    1.0 s. entry=dynamic: the row shows (25 + 0) / 2 = 12.5 % and (3 + 1) / 2 = 2.000 s; the main entry
    (static, moving_collision_rate 0) has no such columns."""
    root = tmp_path / "runs"
    for name, seed, moving, wait in (("a1", 1, 2 / 8, 3.0), ("a2", 2, 0.0, 1.0)):
        run = make_run(root, name, "0.1", seed, 0.80)
        add_moving(run, 0.0, 0.5)
        add_moving(run, moving, wait, entry="dynamic")
    (row,) = compare.main([str(root), "entry=dynamic"]).rows
    assert row["entry"] == "dynamic" and row["success_rate_mean"] == pytest.approx(0.75)
    assert row["moving_collision_rate_mean"] == pytest.approx(0.125)
    assert row["mean_wait_s_mean"] == pytest.approx(2.0)
    assert "| 12.5 | 2.000 |" in capsys.readouterr().out
    (row,) = compare.main([str(root)]).rows
    assert not [k for k in row if "moving" in k or "wait" in k]
