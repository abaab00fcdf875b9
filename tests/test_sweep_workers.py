"""Many workers on one study (sqlite, PostgreSQL, a journal file): distinct parameters, distinct run
directories, and trials of a killed worker re-run without touching finished ones. Real sweeper
subprocesses, tiny trials."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import optuna
import pytest
from conftest import TINY
from optuna.trial import TrialState

from navexp.sweep.parallel import (
    WORKER_STOPPED,
    assign_devices,
    beat,
    counts_as_finished,
    fail_stale_trials,
    sweep_devices,
)
from navexp.sweep.samplers import derived_seed
from navexp.sweep.storage import open_storage, trial_id

# 1 PPO iteration, 4 held-out episodes: a trial takes a few seconds on 2 cores.
RUN = [o for o in TINY if not o.startswith("ppo.max_iterations")]
RUN += ["ppo.max_iterations=1", "eval.num_episodes=4", "eval.plot_episodes=0", "eval.video_episodes=0"]
# The README's command-line forms: a search-space entry replaced (clip range 0.12-0.28 instead of
# 0.1-0.3) and two entries fixed, so clip_param is the whole space of these studies.
SPACE = [
    "sweep.space=ppo_trust_region",
    "ppo.algorithm.clip_param=interval(0.12,0.28)",
    "ppo.algorithm.desired_kl=0.01",
    "ppo.algorithm.learning_rate=0.0003",
]


def sweep_cmd(tmp_path: Path, storage: str, study: str, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "navexp.train",
        "-m",
        "hydra/sweeper=optuna",
        *RUN,
        *SPACE,
        f"hydra.sweep.dir={tmp_path}/sweep",
        f"sweep.storage={storage}",
        f"sweep.study_name={study}",
        *args,
    ]


def start(tmp_path: Path, storage: str, study: str, *args: str, log: str = "worker") -> subprocess.Popen:
    """A sweeper process in its own process group, output in tmp_path/<log>.log."""
    out = open(tmp_path / f"{log}.log", "w")  # noqa: SIM115 - closed with the process
    env = {**os.environ, "WANDB_MODE": "offline", "HYDRA_FULL_ERROR": "1"}
    return subprocess.Popen(
        sweep_cmd(tmp_path, storage, study, *args),
        stdout=out,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
        env=env,
        start_new_session=True,
    )


def wait_ok(proc: subprocess.Popen, tmp_path: Path, log: str = "worker") -> str:
    rc = proc.wait(timeout=600)
    text = (tmp_path / f"{log}.log").read_text()
    assert rc == 0, text[-5000:]
    return text


def postgres_url() -> str:
    """NAVEXP_TEST_POSTGRES_URL (e.g. from `bash .ci/postgres.sh`), or skip with the reason."""
    url = os.environ.get("NAVEXP_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("NAVEXP_TEST_POSTGRES_URL is not set (start a server with `bash .ci/postgres.sh`)")
    try:
        import sqlalchemy

        from navexp.sweep.storage import sqlalchemy_url

        sqlalchemy.create_engine(sqlalchemy_url(url), connect_args={"connect_timeout": 5}).connect().close()
    except Exception as e:
        pytest.skip(f"PostgreSQL at {url} is not reachable: {type(e).__name__}: {str(e)[:200]}")
    return url


def two_workers(tmp_path: Path, storage: str, study: str) -> optuna.Study:
    """Two sweeper processes started together on one study of 3 trials; both must exit 0."""
    procs = [start(tmp_path, storage, study, "sweep.n_trials=3", log=f"w{i}") for i in range(2)]
    try:
        for i, p in enumerate(procs):
            wait_ok(p, tmp_path, f"w{i}")
    finally:  # a failed worker must not leave the other one running into later tests
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return optuna.load_study(study_name=study, storage=open_storage(storage))


def check_shared_study(study: optuna.Study, tmp_path: Path) -> None:
    """3 COMPLETE trials, pairwise distinct parameters, each in its own <sweep dir>/trial_<n>."""
    trials = study.trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    clips = [t.params["ppo.algorithm.clip_param"] for t in trials]
    assert len(set(clips)) == 3 and all(0.12 <= c <= 0.28 for c in clips)
    dirs = [Path(t.user_attrs["run_dir"]) for t in trials]
    assert dirs == [tmp_path / "sweep" / f"trial_{t.number}" for t in trials]
    for t, d in zip(trials, dirs, strict=True):  # each run's config holds its own sampled value
        assert f"clip_param: {t.params['ppo.algorithm.clip_param']}" in (d / "config.yaml").read_text()
        assert (d / "eval.json").is_file()


@pytest.mark.e2e
def test_two_workers_on_one_sqlite_study(tmp_path):
    storage = f"sqlite:///{tmp_path}/study.db"
    check_shared_study(two_workers(tmp_path, storage, "unit"), tmp_path)


@pytest.mark.e2e
def test_two_workers_on_one_journal_file_study(tmp_path):
    """optuna's JournalStorage on a file (workers on a shared filesystem): the same guarantees."""
    storage = f"journal:{tmp_path}/study.log"
    check_shared_study(two_workers(tmp_path, storage, "unit"), tmp_path)


@pytest.mark.e2e
def test_two_workers_on_one_postgres_study(tmp_path):
    url = postgres_url()
    study = f"unit_{uuid.uuid4().hex[:8]}"
    check_shared_study(two_workers(tmp_path, url, study), tmp_path)


def tree_hashes(root: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under root."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


@pytest.mark.e2e
def test_killed_worker_trial_fails_with_reason_and_is_rerun(tmp_path):
    """kill -9 during trial 1; the re-run fails it ("worker stopped ..."), runs its parameters again as
    trial 2 in a new directory, and leaves trial 0's files byte-identical: 2 COMPLETE, 1 FAIL."""
    storage = f"sqlite:///{tmp_path}/study.db"
    args = ("sweep.n_trials=2", "sweep.heartbeat_interval_s=1")
    proc = start(tmp_path, storage, "unit", *args, log="killed")
    log = tmp_path / "killed.log"
    try:
        while "trial 1: run dir" not in log.read_text():  # trial 0 is done, trial 1 has started
            assert proc.poll() is None, log.read_text()[-3000:]
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # kill -9 of the worker and its trial
        proc.wait()
    before = tree_hashes(tmp_path / "sweep" / "trial_0")
    assert "eval.json" in before and any(k.endswith(".pt") for k in before)

    wait_ok(start(tmp_path, storage, "unit", *args, log="rerun"), tmp_path, "rerun")
    trials = optuna.load_study(study_name="unit", storage=storage).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE]
    killed = trials[1]
    assert killed.user_attrs["fail_reason"].startswith("worker stopped: no heartbeat since ")
    assert WORKER_STOPPED in killed.system_attrs and not counts_as_finished(killed)
    assert trials[2].params == killed.params != trials[0].params
    assert trials[2].user_attrs["run_dir"] == str(tmp_path / "sweep" / "trial_2")
    assert tree_hashes(tmp_path / "sweep" / "trial_0") == before


def test_device_assignment_is_round_robin():
    """4 parallel trials on 2 GPUs: cuda:0, cuda:1, cuda:0, cuda:1; on the CPU every trial stays cpu."""
    gpus = sweep_devices("auto", "cuda:0", gpu_count=2)
    assert gpus == ["cuda:0", "cuda:1"]
    assert assign_devices(4, gpus) == ["cuda:0", "cuda:1", "cuda:0", "cuda:1"]
    assert assign_devices(3, sweep_devices("auto", "cpu", gpu_count=0)) == ["cpu"] * 3
    assert assign_devices(2, sweep_devices("none", "cuda:0", gpu_count=2)) == [None, None]
    listed = sweep_devices([2, "cuda:0"], "cuda:0", gpu_count=3)
    assert assign_devices(3, listed) == ["cuda:2", "cuda:0", "cuda:2"]
    with pytest.raises(ValueError, match=r"sweep.devices='gpus' is invalid; allowed: auto \| none"):
        sweep_devices("gpus", "cuda:0", gpu_count=2)
    with pytest.raises(ValueError, match=r"entry 3: this machine has 2 GPU\(s\), valid indices \[0, 1\]"):
        sweep_devices([0, 3], "cuda:0", gpu_count=2)


def test_trial_seeds_are_reproducible_and_distinct_per_trial():
    """The seed depends only on (sampler_seed, trial number): same inputs, same seed; other numbers differ."""
    assert derived_seed(0, 5) == derived_seed(0, 5)
    seeds = {derived_seed(0, n) for n in range(100)} | {derived_seed(1, n) for n in range(100)}
    assert len(seeds) == 200 and all(0 <= s < 2**32 for s in seeds)


def test_sweep_report_reads_a_study_in_progress(tmp_path, capsys):
    """A study with trials COMPLETE, RUNNING and WAITING (workers still busy): counts per state."""
    from navexp import sweep_report

    storage = f"sqlite:///{tmp_path}/live.db"
    study = optuna.create_study(study_name="live", storage=storage, direction="maximize")
    for value in (0.25, 0.5):
        t = study.ask()
        t.suggest_float("ppo.algorithm.clip_param", 0.1, 0.3)
        study.tell(t, value)
    study.ask().suggest_float("ppo.algorithm.clip_param", 0.1, 0.3)  # left RUNNING
    study.enqueue_trial({"ppo.algorithm.clip_param": 0.2})  # WAITING
    out = sweep_report.main([str(tmp_path / "live.db"), f"out={tmp_path / 'rep'}"])
    assert "study live: RUNNING 1, COMPLETE 2, WAITING 1" in capsys.readouterr().out
    assert "| 2 | RUNNING |" in (out / "trials.md").read_text()


def readme_sweep_commands() -> list[list[str]]:
    """The overrides of every `python -m navexp.train -m ...` line in docs/sweeps.md's Sweeps section."""
    import re
    import shlex

    text = (Path(__file__).parents[1] / "docs" / "sweeps.md").read_text()
    start = text.index("## Sweeps (Optuna)")
    section = text[start : text.index("\n## ", start + 1)]
    section = re.sub(r"\\\n\s*", " ", section)  # join continued lines
    lines = [ln.split("#")[0] for ln in section.splitlines() if "python -m navexp.train -m" in ln]
    return [shlex.split(ln.strip().strip("`"))[4:] for ln in lines]


def test_readme_sweep_commands_are_what_hydra_accepts():
    """Every README sweep command parses with Hydra's override grammar, its search-space entries become
    Optuna distributions, and its config keys exist (the command-line forms the README promises)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    from navexp import compose_config
    from navexp.sweep.space import check_keys, distributions

    commands = readme_sweep_commands()
    assert len(commands) == 13
    parser = OverridesParser.create()
    cfg = compose_config([])
    searched = {}
    for args in commands:
        parser.parse_overrides(args)  # raises on anything Hydra's command line would reject
        task = [a for a in args if not a.startswith(("hydra.", "hydra/"))]
        dist, fixed = distributions(task)
        searched.update(dist)
        check_keys([*dist, *fixed], cfg, "README")
    assert searched["ppo.algorithm.clip_param"] == FloatDistribution(0.12, 0.28)
    assert searched["reward.terms.goal.weight"] == CategoricalDistribution([10, 15, 20])
    assert searched["ppo.algorithm.desired_kl"] == FloatDistribution(0.002, 0.05, log=True)


@pytest.mark.slow
def test_submitit_local_launcher_runs_a_batch_in_parallel_processes(tmp_path):
    """hydra/launcher=submitit_local with sweep.n_jobs=2: both trials run as submitit jobs, COMPLETE,
    in <sweep dir>/trial_0 and trial_1 (slow: each job starts a fresh Python, ~1-2 min on 2 cores)."""
    storage = f"sqlite:///{tmp_path}/study.db"
    proc = start(
        tmp_path, storage, "unit", "hydra/launcher=submitit_local", "sweep.n_jobs=2", "sweep.n_trials=2"
    )
    text = wait_ok(proc, tmp_path)
    assert "Submitit 'local' sweep output dir" in text
    trials = optuna.load_study(study_name="unit", storage=storage).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2
    assert [t.user_attrs["run_dir"] for t in trials] == [
        str(tmp_path / "sweep" / f"trial_{i}") for i in (0, 1)
    ]
    assert len(list((tmp_path / "sweep" / ".submitit").glob("*/*_result.pkl"))) == 2


def test_stale_trial_is_failed_and_enqueued_once_on_each_storage(tmp_path):
    """A trial whose worker stopped beating, on sqlite and on a journal file: a live worker marks it
    FAIL with the reason and the worker_stopped flag (not counted as finished) and enqueues its
    parameters once (a WAITING trial with the same value); a second pass finds nothing."""
    for url in (f"sqlite:///{tmp_path}/s.db", f"journal:{tmp_path}/s.log"):
        storage = open_storage(url)
        trial = optuna.create_study(study_name="s", storage=storage).ask()  # the worker that stops
        trial.suggest_float("x", 0.0, 1.0)
        beat(storage, trial_id(trial))
        study = optuna.load_study(study_name="s", storage=storage)  # a live worker
        assert fail_stale_trials(study, storage, grace_s=60) == []  # it beat just now
        # grace -1 s: every heartbeat counts as expired, no waiting in the test
        assert [n for n, _ in fail_stale_trials(study, storage, grace_s=-1)] == [0], url
        assert fail_stale_trials(study, storage, grace_s=-1) == []
        trials = study.get_trials()
        assert [t.state for t in trials] == [TrialState.FAIL, TrialState.WAITING], url
        assert trials[0].user_attrs["fail_reason"].startswith("worker stopped: no heartbeat since ")
        assert trials[1].system_attrs["fixed_params"] == {"x": trials[0].params["x"]}
        assert trials[1].user_attrs["rerun_of_trial"] == 0
        assert not counts_as_finished(trials[0])


def test_a_late_result_does_not_overwrite_another_workers_verdict(tmp_path):
    """A worker whose heartbeats stalled tells its result after another worker failed the trial: the
    sweeper logs and keeps FAIL (its parameters were enqueued again) instead of crashing."""
    from navexp.sweep.sweeper import StudySweeper

    storage = open_storage(f"sqlite:///{tmp_path}/s.db")
    slow = optuna.create_study(study_name="s", storage=storage, direction="maximize")
    trial = slow.ask()
    trial.suggest_float("x", 0.0, 1.0)
    beat(storage, trial_id(trial))
    fail_stale_trials(optuna.load_study(study_name="s", storage=storage), storage, grace_s=-1)
    sweeper = StudySweeper()
    sweeper.storage = storage
    sweeper._safe_tell(slow, trial, values=[0.5])
    assert storage.get_trial(trial_id(trial)).state == TrialState.FAIL
    # a trial its own worker finishes keeps its result, even if flagged meanwhile
    done = slow.ask()
    done.suggest_float("x", 0.0, 1.0)
    slow.tell(done, 0.7)
    assert fail_stale_trials(slow, storage, grace_s=-1) == []
    assert counts_as_finished(storage.get_trial(trial_id(done)))
