"""Many workers on one study: per-trial sampler seeds, stopped workers' trials, trial dirs, devices.

Every worker (the same sweep command in another terminal, on another machine, or as a launcher
job) talks to the others only through the study's storage:

- the sampler is re-seeded before each trial from ``(sweep.sampler_seed, trial number)``; trial
  numbers are unique in a study, so concurrent workers sample distinct parameters, and one worker
  alone draws the same sequence on every run;
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
import logging
import random
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.storages._rdb import models
from optuna.storages._rdb.storage import _create_scoped_session
from optuna.trial import TrialState
from sqlalchemy import func, orm, text

log = logging.getLogger(__name__)

WORKER_STOPPED = "worker_stopped"
"""System attribute of a trial failed because its worker stopped (value: its last heartbeat)."""


# -- seeds ------------------------------------------------------------------------------------
def derived_seed(sampler_seed: int, trial_number: int) -> int:
    """The sampler seed for one trial: a hash of (sweep.sampler_seed, trial number), in [0, 2**32)."""
    return int(np.random.SeedSequence([int(sampler_seed), int(trial_number)]).generate_state(1)[0])


def reseed_sampler(sampler: optuna.samplers.BaseSampler, seed: int) -> None:
    """Seed every random source of an optuna 2.10 sampler (TPE, MOTPE, random, CMA-ES, grid)."""
    for obj in (
        sampler,
        getattr(sampler, "_random_sampler", None),
        getattr(sampler, "_independent_sampler", None),
    ):
        if obj is not None and hasattr(obj, "_rng"):
            obj._rng = np.random.RandomState(seed)
    if hasattr(sampler, "_cma_rng"):
        sampler._cma_rng = np.random.RandomState(seed)
    if isinstance(sampler, optuna.samplers.GridSampler):  # it picks grid points with `random.choice`
        random.seed(seed)


def ask(study: optuna.Study, sampler_seed: int) -> optuna.trial.Trial:
    """``study.ask()`` with the sampler seeded for the new trial's number before it samples anything.

    Enqueued (WAITING) trials come first, as in ``Study.ask``; their fixed parameters win over sampling.
    """
    storage = study._storage
    storage.read_trials_from_remote_storage(study._study_id)
    trial_id = study._pop_waiting_trial_id()
    if trial_id is None:
        trial_id = storage.create_new_trial(study._study_id)
    reseed_sampler(study.sampler, derived_seed(sampler_seed, storage.get_trial_number_from_id(trial_id)))
    return optuna.trial.Trial(study, trial_id)


def counts_as_finished(trial: optuna.trial.FrozenTrial) -> bool:
    """COMPLETE, PRUNED or FAIL, except a FAIL whose worker stopped (its parameters run again)."""
    return trial.state.is_finished() and WORKER_STOPPED not in trial.system_attrs


# -- trials of stopped workers ------------------------------------------------------------------
def stale_trials(storage: optuna.storages.RDBStorage, study_id: int, grace_s: float) -> list[tuple[int, str]]:
    """(trial id, last heartbeat) of RUNNING trials whose last heartbeat is older than ``grace_s``.

    Heartbeats and "now" both come from the database server's clock, so workers' clocks may differ. A
    RUNNING trial without any heartbeat (its worker died between creating it and the first beat, a few
    milliseconds) counts as stale once its start (worker clock) is older than the grace period.
    """
    out = []
    with _create_scoped_session(storage.scoped_session) as session:
        now = session.execute(func.now()).scalar().replace(tzinfo=None)
        running = (
            session.query(models.TrialModel)
            .options(orm.selectinload(models.TrialModel.heartbeats))
            .filter(models.TrialModel.state == TrialState.RUNNING)
            .filter(models.TrialModel.study_id == study_id)
            .all()
        )
        for t in running:
            if t.heartbeats:
                beat = t.heartbeats[0].heartbeat
                if (now - beat).total_seconds() > grace_s:
                    out.append((t.trial_id, f"{beat:%Y-%m-%d %H:%M:%S} (storage clock)"))
            elif t.datetime_start and (datetime.now() - t.datetime_start).total_seconds() > grace_s:
                out.append((t.trial_id, f"its start at {t.datetime_start:%Y-%m-%d %H:%M:%S} (never beat)"))
    return out


def _claim_failure(storage: optuna.storages.RDBStorage, trial_id: int) -> bool:
    """Set a RUNNING trial to FAIL in one conditional UPDATE; True for the one worker whose UPDATE hit.

    ``RDBStorage.set_trial_state`` reads then writes, and on sqlite two workers can both pass the read,
    so both would enqueue the parameters again; ``UPDATE ... WHERE state = RUNNING`` is atomic.
    """
    model = models.TrialModel
    with _create_scoped_session(storage.scoped_session) as session:
        hit = (
            session.query(model)
            .filter(model.trial_id == trial_id, model.state == TrialState.RUNNING)
            .update(
                {model.state: TrialState.FAIL, model.datetime_complete: datetime.now()},
                synchronize_session=False,
            )
        )
    return hit == 1


def fail_stale_trials(
    study: optuna.Study, storage: optuna.storages.RDBStorage, grace_s: float
) -> list[tuple[int, dict]]:
    """Mark trials of stopped workers FAIL with a ``fail_reason`` and enqueue their parameters again.

    Returns (trial number, parameters enqueued) for each trial this worker failed. When several workers
    find the same stale trial, exactly one changes its state (see ``_claim_failure``) and enqueues.
    """
    failed = []
    for trial_id, since in stale_trials(storage, study._study_id, grace_s):
        reason = f"worker stopped: no heartbeat since {since}"
        try:  # attributes first: a finished trial takes none (both workers write the same values)
            storage.set_trial_user_attr(trial_id, "fail_reason", reason)
            storage.set_trial_system_attr(trial_id, "fail_reason", reason)
            storage.set_trial_system_attr(trial_id, WORKER_STOPPED, since)
        except RuntimeError:  # finished meanwhile: another worker failed it, or its own worker told it
            continue
        if not _claim_failure(storage, trial_id):
            continue
        trial = storage.get_trial(trial_id)
        if trial.params:
            study.enqueue_trial(trial.params)
        log.warning(f"trial {trial.number}: {reason}; marked FAIL, parameters enqueued again: {trial.params}")
        failed.append((trial.number, trial.params))
    return failed


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
def admission_lock(storage: optuna.storages.RDBStorage, study_name: str, sweep_dir: Path) -> Iterator[None]:
    """Serialise "count the study's trials, then create the missing ones" across workers.

    Without it two workers that both see one trial missing both start one, and the study overshoots
    ``sweep.n_trials``. PostgreSQL: a session advisory lock keyed by the study name (workers on any
    machine). SQLite: an exclusive ``flock`` on ``<db>.<study>.admit.lock`` next to the database file
    (workers on one machine, as SQLite itself needs). Any other storage: the same lock file in the
    sweep directory (workers sharing it).
    """
    url = str(storage.engine.url)
    if url.startswith("postgresql"):
        key = int.from_bytes(hashlib.sha256(f"navexp:{study_name}".encode()).digest()[:8], "big", signed=True)
        # Autocommit: the connection holding the lock is never left idle inside a transaction (a
        # server's idle_in_transaction_session_timeout would end it and drop the lock).
        with storage.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
            try:
                yield
            finally:
                try:
                    conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                except Exception as e:  # a lost connection released the lock already
                    log.warning(
                        f"admission lock of study {study_name}: unlock failed ({type(e).__name__}: {e})"
                    )
        return
    if url.startswith("sqlite:///") and storage.engine.url.database:
        db = Path(storage.engine.url.database)
        path = db.with_name(f"{db.name}.{study_name}.admit.lock")
    else:
        path = Path(sweep_dir) / f".{study_name}.admit.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
