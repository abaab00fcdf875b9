"""Many workers on one study: heartbeats, stopped workers' trials, trial dirs, devices, admission.

Every worker (the same sweep command in another terminal, on another machine, or as a launcher
job) talks to the others only through the study's storage (any of navexp/sweep/storage.py's):

- the sampler is rebuilt before each trial with a seed from ``(sweep.sampler_seed, trial number)``
  (navexp/sweep/samplers.py), so concurrent workers sample distinct parameters;
- a RUNNING trial whose heartbeat is older than the grace period belongs to a worker that stopped:
  it is marked FAIL with a ``fail_reason``, flagged ``worker_stopped`` (not counted as a finished
  trial) and its parameters are enqueued again;
- each trial's run directory ``<sweep dir>/trial_<n>`` is created by the sweeper before the trial
  starts, with ``exist_ok=False``, so no trial ever writes into a directory that already exists;
- ``sweep.devices`` spreads the trials of a parallel batch over GPUs, round-robin.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import TrialState
from sqlalchemy import create_engine, text

from navexp.experiment.rundir import LOCK_NAME
from navexp.sweep.storage import sqlalchemy_url, storage_file, trial_id

log = logging.getLogger(__name__)

WORKER_STOPPED = "worker_stopped"
"""System attribute of a trial failed because its worker stopped (value: its last heartbeat)."""
HEARTBEAT = "navexp:heartbeat"
"""System attribute of a running trial: the time (seconds since the epoch) its worker last beat."""


# -- heartbeats and trials of stopped workers ---------------------------------------------------------
def beat(storage: optuna.storages.BaseStorage, trial: int) -> None:
    """Record that the worker of trial id ``trial`` is alive (any storage: a system attribute)."""
    storage.set_trial_system_attr(trial, HEARTBEAT, time.time())


def counts_as_finished(trial: optuna.trial.FrozenTrial) -> bool:
    """COMPLETE, PRUNED or FAIL, except a FAIL whose worker stopped (its parameters run again)."""
    if trial.state == TrialState.FAIL:
        return WORKER_STOPPED not in trial.system_attrs
    return trial.state.is_finished()


def stale_trials(study: optuna.Study, grace_s: float) -> list[tuple[optuna.trial.FrozenTrial, str]]:
    """(trial, last heartbeat) of RUNNING trials whose last heartbeat is older than ``grace_s``.

    Heartbeats are the workers' clocks (workers on several machines need clocks that agree to well
    within the grace period, as NTP gives). A RUNNING trial without any heartbeat (its worker died
    between creating it and the first beat, a few milliseconds) counts from its start.
    """
    now = time.time()
    out = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        last = t.system_attrs.get(HEARTBEAT)
        if last is not None and now - float(last) > grace_s:
            out.append((t, f"{datetime.fromtimestamp(float(last)):%Y-%m-%d %H:%M:%S}"))
        elif (
            last is None
            and t.datetime_start
            and (datetime.now() - t.datetime_start).total_seconds() > grace_s
        ):
            out.append((t, f"its start at {t.datetime_start:%Y-%m-%d %H:%M:%S} (never beat)"))
    return out


def fail_stale_trials(
    study: optuna.Study, storage: optuna.storages.BaseStorage, grace_s: float
) -> list[tuple[int, dict]]:
    """Mark trials of stopped workers FAIL with a ``fail_reason`` and enqueue their parameters again.

    Returns (trial number, parameters enqueued) for each trial this worker failed. The sweeper calls it
    under the admission lock, so two workers never fail and enqueue the same trial; a trial whose own
    worker tells its result meanwhile keeps that result (``UpdateFinishedTrialError``).
    """
    failed = []
    for trial, since in stale_trials(study, grace_s):
        reason = f"worker stopped: no heartbeat since {since}"
        if release_trial(study, storage, trial, reason, since):
            failed.append((trial.number, trial.params))
    return failed


def release_trial(
    study: optuna.Study,
    storage: optuna.storages.BaseStorage,
    trial: optuna.trial.FrozenTrial,
    reason: str,
    since: str,
) -> bool:
    """Fail a trial whose worker stopped (``reason``; not counted as finished), enqueue its parameters to
    run again and clear the lock its run left in its trial directory (``clear_stale_lock``). False when
    its own worker told a result meanwhile (that result stays)."""
    tid = trial_id(trial)
    try:
        storage.set_trial_user_attr(tid, "fail_reason", reason)
        storage.set_trial_system_attr(tid, WORKER_STOPPED, since)
        storage.set_trial_state_values(tid, TrialState.FAIL)
    except UpdateFinishedTrialError:  # its own worker told it meanwhile
        return False
    if trial.params:
        study.enqueue_trial(trial.params, user_attrs={"rerun_of_trial": trial.number})
    lock = clear_stale_lock(Path(trial.user_attrs["trial_dir"])) if "trial_dir" in trial.user_attrs else ""
    log.warning(
        f"trial {trial.number}: {reason}; marked FAIL, parameters enqueued again: {trial.params}"
        + (f"; {lock}" if lock else "")
    )
    return True


def clear_stale_lock(trial_dir: Path) -> str:
    """Remove the run lock (``<trial dir>/.navexp.lock``, navexp.experiment.rundir) that a trial killed
    with its worker (``kill -9``) left behind, when its recorded host is this one and its pid is gone; a
    lock of another host (its pid cannot be checked here) or of a live pid is left. Returns what was
    done, for the log ("" without a lock)."""
    path = trial_dir / LOCK_NAME
    try:
        owner = json.loads(path.read_text())
    except FileNotFoundError:
        return ""
    except (OSError, ValueError):
        owner = {}
    pid, host = owner.get("pid"), owner.get("host")
    if host == socket.gethostname() and isinstance(pid, int) and not _pid_alive(pid):
        path.unlink(missing_ok=True)
        return f"removed the stale lock {path} (pid {pid} is gone)"
    return f"left the lock {path} (pid {pid} on host {host}: alive, or not checkable from here)"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


# -- run directories ----------------------------------------------------------------------------
def claim_trial_dir(sweep_dir: Path, trial_number: int) -> str:
    """Create ``<sweep_dir>/trial_<n>`` (or ``trial_<n>.<k>`` if taken) and return its name.

    Created here with ``exist_ok=False`` (atomic), so a trial never shares a directory with another
    trial, another study using the same sweep directory, or a killed run's leftovers.
    """
    sweep_dir.mkdir(parents=True, exist_ok=True)
    for k in range(1000):
        name = f"trial_{trial_number}" + (f".{k}" if k else "")
        try:
            (sweep_dir / name).mkdir()
            return name
        except FileExistsError:
            continue
    raise RuntimeError(f"{sweep_dir}: trial_{trial_number} and 999 alternatives exist already")


# -- devices ------------------------------------------------------------------------------------
def sweep_devices(spec: Any, env_device: str, gpu_count: int) -> list[str]:
    """The devices parallel trials rotate over, from ``sweep.devices``.

    ``auto``: every visible GPU when ``env.device`` resolves to CUDA, else ``[env_device]`` (the CPU stays
    the CPU); ``none``: [] (each trial keeps ``env.device``); a list of GPU indices or device names,
    e.g. ``[0,1]`` or ``[cuda:0,cuda:2]``.
    """
    if isinstance(spec, str) and spec in ("auto", "none"):
        if spec == "none":
            return []
        if env_device.startswith("cuda") and gpu_count > 0:
            return [f"cuda:{i}" for i in range(gpu_count)]
        return [env_device]
    if isinstance(spec, (str, int)) or not spec:
        raise ValueError(
            f"sweep.devices={spec!r} is invalid; allowed: auto | none | a list of GPU indices or "
            f"devices, e.g. [0,1] or [cuda:0,cuda:1]"
        )
    out = []
    for d in spec:
        name = f"cuda:{d}" if isinstance(d, int) or str(d).isdigit() else str(d)
        if name == "cpu":
            out.append(name)
            continue
        index = name.removeprefix("cuda:")
        if not name.startswith("cuda:") or not index.isdigit():
            raise ValueError(
                f"sweep.devices entry {d!r} is invalid; allowed: cpu, a GPU index or cuda:<index>"
            )
        if int(index) >= gpu_count:
            raise ValueError(
                f"sweep.devices entry {d!r}: this machine has {gpu_count} GPU(s), valid indices "
                f"{list(range(gpu_count))}"
            )
        out.append(name)
    return out


def assign_devices(n_trials: int, devices: list[str]) -> list[str | None]:
    """One device per trial of a parallel batch, round-robin (4 trials, 2 GPUs: cuda:0, 1, 0, 1)."""
    if not devices:
        return [None] * n_trials
    return [devices[i % len(devices)] for i in range(n_trials)]


# -- admission: how many trials to start ------------------------------------------------------------
@contextlib.contextmanager
def admission_lock(url: str, study_name: str, sweep_dir: Path) -> Iterator[None]:
    """Serialise "count the study's trials, then create the missing ones" across workers.

    Without it two workers that both see one trial missing both start one, and the study overshoots
    ``n_trials``. PostgreSQL: a session advisory lock keyed by the study name (workers on any
    machine). SQLite or a journal file: an exclusive ``flock`` on ``<file>.<study>.admit.lock`` next to
    it (workers on that machine or that shared filesystem). Any other storage: the same lock file in
    the sweep directory (workers sharing it).
    """
    if url.startswith(("postgresql", "postgres:")):
        with _advisory_lock(url, study_name):
            yield
        return
    file = storage_file(url)  # one path for every spelling of the file (sqlite:///q.db?timeout=30)
    if file is not None:
        path = file.with_name(f"{file.name}.{study_name}.admit.lock")
    else:
        path = Path(sweep_dir) / f".{study_name}.admit.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_ENGINES: dict[str, Any] = {}


@contextlib.contextmanager
def _advisory_lock(url: str, study_name: str) -> Iterator[None]:
    key = int.from_bytes(hashlib.sha256(f"navexp:{study_name}".encode()).digest()[:8], "big", signed=True)
    engine = _ENGINES.get(url)
    if engine is None:
        engine = _ENGINES[url] = create_engine(sqlalchemy_url(url), pool_pre_ping=True)
    # Autocommit: the connection holding the lock is never left idle inside a transaction (a
    # server's idle_in_transaction_session_timeout would end it and drop the lock).
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
        try:
            yield
        finally:
            try:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
            except Exception as e:  # a lost connection released the lock already
                log.warning(f"admission lock of study {study_name}: unlock failed ({type(e).__name__}: {e})")
