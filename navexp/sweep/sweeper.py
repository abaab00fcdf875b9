"""navexp's Optuna sweeper: the plugin's search-space parsing and trial configuration, with a study loop
that survives bad trials.

Differences from the plugin's own loop (hydra-optuna-sweeper 1.3.0):
- the search space, study, storage and budget come from the ``sweep`` config group, and every key of
  the space and of the command line is checked against the composed config before the first trial;
- a NaN/inf objective or a crashed trial is recorded as FAIL (the plugin crashes on NaN and leaves the
  trial RUNNING); the study aborts only when failed/finished passes ``sweep.max_failure_rate``;
- ``sweep.n_trials`` is the number of finished trials the study should reach, so re-running the same
  command continues the study and only adds what is missing;
- any number of workers (sweeper processes) share one study through its storage (see
  ``navexp/sweep/parallel.py``): per-trial sampler seeds and TPE's constant liar keep their parameters
  apart, run directories are ``<sweep dir>/trial_<n>``, and a worker that finds trials of a stopped
  worker (no heartbeat) marks them FAIL with a reason and runs their parameters again; a worker with
  nothing left to start waits for the other workers' running trials;
- parallel trials of a batch rotate over ``sweep.devices`` (one GPU per trial, round-robin);
- each trial gets its trial id/number, the study as W&B group and ``trial_<n>`` as W&B name;
- a report (summary, table, importances, plots) is written next to the study when the sweep ends or
  aborts.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import optuna
import torch
from hydra_plugins.hydra_optuna_sweeper._impl import OptunaSweeperImpl, create_params_from_overrides
from omegaconf import DictConfig, OmegaConf
from optuna.trial import TrialState
from sqlalchemy.exc import IntegrityError, ProgrammingError

from navexp.sim import resolve_device
from navexp.sweep.parallel import (
    admission_lock,
    ask,
    assign_devices,
    claim_trial_dir,
    counts_as_finished,
    fail_stale_trials,
    sweep_devices,
)
from navexp.sweep.report import log_study_run, report_dir, write_report
from navexp.sweep.space import check_keys, load_space

log = logging.getLogger(__name__)

DIRECTIONS = {
    "success_rate": "maximize",
    "collision_rate": "minimize",
    "timeout_rate": "minimize",
    "mean_time_to_goal_s": "minimize",
    "mean_path_length_m": "minimize",
}


def study_paths(cfg: DictConfig) -> tuple[str, str, Path]:
    """(study name, storage URL, report directory) of a config's study."""
    sw = cfg.sweep

    name = sw.study_name or f"{cfg.experiment_name}_{Path(str(sw.space)).stem}"
    root = Path("outputs/studies").resolve()
    url = sw.storage or f"sqlite:///{root / (name + '.db')}"
    return name, url, report_dir(url, name, root / name)  # report_dir refuses a name with '/' or '..'


class _Heartbeat:
    """Record heartbeats for running trials from a background thread while a batch runs."""

    def __init__(self, storage: optuna.storages.RDBStorage, trial_ids: list[int], interval_s: float) -> None:
        self.storage, self.trial_ids, self.interval_s = storage, trial_ids, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            for tid in self.trial_ids:
                try:
                    self.storage.record_heartbeat(tid)
                except Exception as e:  # a storage hiccup must not kill the sweep
                    log.warning(f"heartbeat for trial {tid} failed: {e}")
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


class NavOptunaSweeperImpl(OptunaSweeperImpl):
    """The plugin's implementation with navexp's study loop (see the module docstring)."""

    def setup(self, *, hydra_context, task_function, config: DictConfig) -> None:
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)

        sw = config.sweep
        self.study_name, self.storage_url, self.report_dir = study_paths(config)
        self.objectives = [str(o) for o in sw.objectives]
        unknown = [o for o in self.objectives if o not in DIRECTIONS]
        if not self.objectives or unknown:
            raise ValueError(f"sweep.objectives={self.objectives} is invalid; allowed: {sorted(DIRECTIONS)}")
        self.direction = [DIRECTIONS[o] for o in self.objectives]
        env_device = resolve_device(str(config.env.device))
        on_gpu = env_device.startswith("cuda")
        spec = sw.devices if isinstance(sw.devices, (str, int)) else OmegaConf.to_container(sw.devices)
        self.devices = sweep_devices(spec, env_device, torch.cuda.device_count())
        self.n_trials = int(sw.n_trials) if sw.n_trials is not None else (50 if on_gpu else 10)
        self.n_jobs = int(sw.n_jobs)
        self.max_failure_rate = float(sw.max_failure_rate)
        if self.n_trials < 1 or self.n_jobs < 1 or not 0.0 <= self.max_failure_rate <= 1.0:
            raise ValueError(
                f"sweep.n_trials={self.n_trials}, sweep.n_jobs={self.n_jobs} must be >= 1 and "
                f"sweep.max_failure_rate={self.max_failure_rate} in [0, 1]"
            )
        self.heartbeat_s = int(sw.heartbeat_interval_s)
        if self.heartbeat_s < 1:
            raise ValueError(f"sweep.heartbeat_interval_s={self.heartbeat_s} must be >= 1 (seconds)")
        self.grace_s = 2 * self.heartbeat_s
        self.trial_overrides = list(sw.trial_overrides_gpu if on_gpu else sw.trial_overrides_cpu)
        space = load_space(str(sw.space))
        if self.params:  # hydra.sweeper.params from a config; `<key>=<expression>` arrives in sweep()
            space.update({str(k): str(v) for k, v in self.params.items()})
        self.params = OmegaConf.create(space)
        # Re-seeded before every trial from (sampler_seed, trial number): see parallel.ask.
        self.sampler_seed = int(sw.sampler_seed)
        if isinstance(self.sampler, optuna.samplers.TPESampler) and len(self.objectives) > 1:
            self.sampler = optuna.samplers.MOTPESampler(seed=self.sampler_seed)
        elif isinstance(self.sampler, optuna.samplers.TPESampler):
            with warnings.catch_warnings():  # constant_liar is experimental in optuna 2.10
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                # Running trials count as bad results, so concurrent trials keep apart.
                self.sampler = optuna.samplers.TPESampler(seed=self.sampler_seed, constant_liar=True)

    # -- the study loop ---------------------------------------------------------------------
    def sweep(self, arguments: list[str]) -> None:
        params_conf = self._parse_sweeper_params_config() + list(arguments)
        distributions, fixed = create_params_from_overrides(params_conf)
        check_keys(
            [k for k in [*distributions, *fixed] if not k.startswith(("hydra.", "hydra/"))],
            self.config,
            f"search space '{self.config.sweep.space}' and command line",
        )
        for key in fixed:
            distributions.pop(key, None)
        self._grid_sampler(distributions)
        user_keys = {a.split("=", 1)[0].lstrip("+~") for a in arguments}
        storage = self._rdb = self._storage()
        study = optuna.create_study(
            study_name=self.study_name,
            storage=storage,
            sampler=self.sampler,
            directions=self.direction,
            load_if_exists=True,
        )
        self._write_study_info()
        log.info(
            f"Study {self.study_name} in {self.storage_url}: target {self.n_trials} finished trials, "
            f"objectives {dict(zip(self.objectives, self.direction, strict=True))}"
        )
        waiting_logged = False
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        while True:
            # Counting and starting trials is one step across workers, so none overshoots n_trials.
            with admission_lock(storage, self.study_name, sweep_dir):
                fail_stale_trials(study, storage, self.grace_s)
                trials = study.get_trials(deepcopy=False)
                finished = sum(counts_as_finished(t) for t in trials)
                running = sum(t.state == TrialState.RUNNING for t in trials)
                to_go = self.n_trials - finished - running
                batch = self._ask_batch(study, storage, min(to_go, self.n_jobs)) if to_go > 0 else []
            if to_go <= 0 and running == 0:
                break
            if not batch:  # other workers' trials: wait for them, take over if their worker stops
                if not waiting_logged:
                    log.info(f"waiting for {running} running trial(s) of other workers")
                    waiting_logged = True
                time.sleep(min(self.heartbeat_s, 5))
                continue
            self._run_batch(study, storage, batch, distributions, fixed, user_keys)
            self._check_failure_rate(study)
        self._finish(study)

    def _ask_batch(self, study: optuna.Study, storage: optuna.storages.RDBStorage, size: int) -> list:
        """Start ``size`` trials (heartbeats on from now: a stopped worker's trials are detectable)."""
        batch = []
        for _ in range(size):
            trial = ask(study, self.sampler_seed)
            storage.record_heartbeat(trial._trial_id)
            batch.append(trial)
        return batch

    def _run_batch(
        self,
        study: optuna.Study,
        storage: optuna.storages.RDBStorage,
        batch: list,
        distributions: dict,
        fixed: dict,
        user_keys: set[str],
    ) -> None:
        """Run the started trials through the launcher (in parallel if it can), tell the results."""
        overrides = self._configure_trials(batch, distributions, fixed)
        devices = assign_devices(len(batch), self.devices if "env.device" not in user_keys else [])
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        overrides = [
            list(o) + self._trial_extras(t, user_keys, claim_trial_dir(sweep_dir, t.number), dev)
            for o, t, dev in zip(overrides, batch, devices, strict=True)
        ]
        with _Heartbeat(storage, [t._trial_id for t in batch], self.heartbeat_s):
            returns = self.launcher.launch(overrides, initial_job_idx=self.job_idx)
        self.job_idx += len(returns)
        for trial, ret in zip(batch, returns, strict=True):
            self._tell(study, trial, ret)

    def _grid_sampler(self, distributions: dict) -> None:
        """hydra/sweeper/sampler=grid: build the grid from the space and cap n_trials at its size."""
        if isinstance(self.sampler, functools.partial) and self.sampler.func == optuna.samplers.GridSampler:
            grid = {k: self._to_grid_sampler_choices(d) for k, d in distributions.items()}
            self.sampler = self.sampler(grid)
            self.n_trials = min(self.n_trials, math.prod(len(v) for v in grid.values()))

    def _storage(self) -> optuna.storages.RDBStorage:
        """The study's storage, with heartbeats on; workers starting together on an empty database
        race to create its tables, so a loser of that race retries."""
        if self.storage_url.startswith("sqlite:///"):
            Path(self.storage_url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(5):
            try:
                return optuna.storages.RDBStorage(
                    self.storage_url, heartbeat_interval=self.heartbeat_s, grace_period=self.grace_s
                )
            except (IntegrityError, ProgrammingError) as e:  # e.g. pg_type "studies" already exists
                if attempt == 4:
                    raise
                log.info(f"storage tables being created by another worker ({type(e).__name__}); retrying")
                time.sleep(1.0 + attempt)
            except ImportError as e:
                raise ImportError(
                    f"sweep.storage={self.storage_url!r} needs a database driver that is not installed "
                    f"({e}); for PostgreSQL: pip install -e '.[postgres]' (psycopg2-binary)"
                ) from e
        raise AssertionError("unreachable")

    def _trial_extras(
        self, trial: optuna.trial.Trial, user_keys: set[str], subdir: str, device: str | None
    ) -> list[str]:
        """Per-trial overrides: its run directory, ids, W&B names, size and device."""
        log.info(f"trial {trial.number}: run dir {subdir}" + (f", device {device}" if device else ""))
        extras = [
            f"hydra.sweep.subdir={subdir}",
            f"sweep.trial_id={trial._trial_id}",
            f"sweep.trial_number={trial.number}",
            f"sweep.study_name={self.study_name}",
            f"sweep.storage='{self.storage_url}'",
        ]
        if "logger.group" not in user_keys:
            extras.append(f"logger.group={self.study_name}")
        if "logger.name" not in user_keys:
            extras.append(f"logger.name=trial_{trial.number}")
        extras += [o for o in self.trial_overrides if o.split("=", 1)[0] not in user_keys]
        if device is not None:
            extras.append(f"env.device={device}")
        return extras

    def _tell(self, study: optuna.Study, trial: optuna.trial.Trial, ret: Any) -> None:
        try:
            value = ret.return_value  # re-raises the trial's exception
        except optuna.TrialPruned:
            self._safe_tell(study, trial, state=TrialState.PRUNED)
            log.info(f"trial {trial.number} pruned")
            return
        except Exception as e:
            self._fail(study, trial, f"{type(e).__name__}: {e}")
            return
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        try:
            values = [float(v) for v in values]
        except (TypeError, ValueError):
            self._fail(study, trial, f"objective {value!r} is not a number or list of numbers")
            return
        if len(values) != len(self.direction):
            self._fail(study, trial, f"{len(values)} objective values for {len(self.direction)} objectives")
        elif not all(math.isfinite(v) for v in values):
            self._fail(study, trial, f"non-finite objective {values}")
        else:
            self._safe_tell(study, trial, values=values)

    def _safe_tell(self, study: optuna.Study, trial: optuna.trial.Trial, **kwargs) -> None:
        try:
            study.tell(trial, **kwargs)
        except RuntimeError as e:  # an exhausted GridSampler calls study.stop(), meant for optimize()
            if "Study.stop" in str(e):
                return
            state = self._rdb.get_trial(trial._trial_id).state  # the database's, not this worker's cache
            if not state.is_finished():
                raise
            # Another worker saw no heartbeat (e.g. a storage outage) and failed it; its parameters
            # were enqueued again, so this result is dropped rather than overwriting that verdict.
            log.warning(f"trial {trial.number} was already {state.name} (set by another worker): {e}")

    def _fail(self, study: optuna.Study, trial: optuna.trial.Trial, reason: str) -> None:
        log.warning(f"trial {trial.number} failed: {reason}")
        try:
            study._storage.set_trial_user_attr(trial._trial_id, "fail_reason", reason[:2000])
        except RuntimeError:  # already finished by another worker; _safe_tell says so
            pass
        self._safe_tell(study, trial, state=TrialState.FAIL)

    def _check_failure_rate(self, study: optuna.Study) -> None:
        done = [t for t in study.get_trials(deepcopy=False) if counts_as_finished(t)]
        failed = sum(t.state == TrialState.FAIL for t in done)
        if len(done) >= 3 and failed / len(done) > self.max_failure_rate:
            try:  # the message points to the report: write it first
                self._finish(study)
            except Exception as e:
                log.warning(f"could not write the study report: {type(e).__name__}: {e}")
            raise RuntimeError(
                f"study {self.study_name}: {failed} of {len(done)} finished trials failed, more than "
                f"sweep.max_failure_rate={self.max_failure_rate}; see each trial's fail_reason in the report "
                f"{self.report_dir / 'report.md'}"
            )

    def _write_study_info(self) -> None:
        info = {
            "study_name": self.study_name,
            "storage": self.storage_url,
            "objectives": self.objectives,
            "directions": self.direction,
            "n_trials": self.n_trials,
            "space": dict(self.params),
        }
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / "study.json").write_text(json.dumps(info, indent=2))

    def _finish(self, study: optuna.Study) -> None:
        # A fresh load: the sweeper's cached trials miss the metrics the trials stored themselves.
        fresh = optuna.load_study(study_name=self.study_name, storage=self.storage_url)
        out = write_report(fresh, self.report_dir, objectives=self.objectives)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        summary = json.loads((out / "summary.json").read_text())
        (sweep_dir / "optimization_results.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(summary)))
        log.info(f"Study report: {out / 'report.md'}")
        lg = self.config.logger
        if lg.type == "wandb":  # the study as one W&B run beside its trials' runs
            folder = log_study_run(
                fresh,
                out,
                self.objectives,
                str(lg.project),
                str(lg.mode),
                lg.entity,
                lg.group or self.study_name,
            )
            if folder is not None:
                log.info(f"W&B study run: {folder}")
