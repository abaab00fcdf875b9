"""navexp's Optuna sweeper: a Hydra ``Sweeper`` whose study loop survives bad trials and shares a study
between any number of workers.

Hydra instantiates it for ``hydra/sweeper=optuna`` (hydra_plugins/navexp_sweeper). What it does:
- its settings are one ``StudySettings`` (navexp/sweep/settings.py), translated once from ``sweep.*``
  and the plugin's config (hydra-optuna-sweeper's ``hydra.sweeper.*`` keys);
- the search space is ``sweep.space`` plus ``hydra.sweeper.params`` (or the deprecated
  ``search_space``) plus ``<key>=<expression>`` on the command line (navexp/sweep/space.py); every key
  is checked against the composed config before the first trial;
- the sampler comes from ``hydra/sweeper/sampler`` and is rebuilt per trial with a seed derived from
  the trial number (navexp/sweep/samplers.py);
- a NaN/inf objective or a crashed trial is recorded FAIL with its ``fail_reason``; the study aborts
  only when failed/finished passes ``max_failure_rate``;
- ``n_trials`` is the number of finished trials the study should reach, so re-running the same command
  continues the study and only adds what is missing;
- a study keeps one setup: the fixed overrides, trial size and objectives of the sweep that started it
  (neutral keys aside); a sweep of another setup is refused before any trial and before every batch
  (``check_study_setup``);
- workers share one study through its storage (navexp/sweep/parallel.py): heartbeats, trials of
  stopped workers failed with a reason and run again, trial dirs ``<sweep dir>/trial_<n>``, and an
  admission lock so that workers never overshoot ``n_trials``;
- parallel trials of a batch rotate over ``sweep.devices`` (one GPU per trial, round-robin);
- each trial gets its trial id/number, the study as W&B group and ``trial_<n>`` as W&B name;
- a report (summary, table, importances, plots) is written next to the study when the sweep ends or
  aborts.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import optuna
import torch
from hydra.core.plugins import Plugins
from hydra.errors import CompactHydraException
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from hydra.utils import get_method
from omegaconf import DictConfig, OmegaConf
from optuna.trial import TrialState

from navexp.config.aliases import translate_key
from navexp.sim import resolve_device
from navexp.sweep.parallel import (
    admission_lock,
    assign_devices,
    beat,
    claim_trial_dir,
    counts_as_finished,
    fail_stale_trials,
    release_trial,
)
from navexp.sweep.report import log_study_run, write_report
from navexp.sweep.samplers import build_sampler
from navexp.sweep.settings import command_line_keys, study_settings
from navexp.sweep.settings import study_paths as study_paths  # its callers import it from here
from navexp.sweep.space import check_keys, distributions, distributions_from_config, load_space
from navexp.sweep.storage import describe, open_storage, trial_id

log = logging.getLogger(__name__)


class StorageError(CompactHydraException):
    """A study storage that cannot be opened (unreachable server, not a database, unknown scheme,
    missing driver): Hydra prints this one line, naming the URL, without a traceback, and exits 1."""


class StudySetupError(CompactHydraException):
    """A study whose trials ran with another setup than this sweep's (fixed overrides, trial size,
    objectives): adding to it would rank trials of different setups together (one line naming the keys,
    both values and the way out)."""


NEUTRAL_PREFIXES = ("sweep.", "logger.", "hydra.", "hydra/")
NEUTRAL_KEYS = ("logger", "experiment_name", "env.device")
"""Fixed overrides that leave what a trial measures unchanged: the study's own settings, logging and
names, and the device (each worker of one study may use its own GPU)."""

SPACE_KEY = "search space"
"""The setup's entry of the search space: ``<sweep.space's name> [<searched keys>]``."""

SETUP_ATTR = "navexp_setup"
"""The study's user attribute holding its setup: the fixed overrides (the neutral ones aside), the trial
size (``sweep.trial_overrides_cpu``/``_gpu`` where the command line does not set the key) and the
``sweep.objectives`` of the sweep that started its first trial, to which every later sweep must agree."""


def fixed_setup(fixed: dict[str, Any], config_keys: set[str]) -> dict[str, str]:
    """The fixed overrides that shape what a trial measures. ``config_keys``: the config's top-level keys,
    which tell an override key (``recipe``, ``seed``, ``env.num_envs``) from a trial's other user
    attributes (``run_dir``, metrics), as both are stored there."""
    return {
        str(k): str(v)
        for k, v in fixed.items()
        if not str(k).startswith(NEUTRAL_PREFIXES)
        and str(k) not in NEUTRAL_KEYS
        and ("." in str(k) or "/" in str(k) or str(k) in config_keys)
    }


def check_study_setup(
    study: optuna.Study,
    setup: dict[str, str],
    fixed: dict[str, str],
    searched: set[str],
    config_keys: set[str],
    size_keys: set[str] = frozenset(),
) -> None:
    """Raise StudySetupError when ``study`` holds trials of another setup than ``setup`` (this sweep's:
    its ``fixed`` overrides, see ``fixed_setup``, its trial size and objectives). Called under the
    admission lock, after stale trials were failed. A study with no trial that ran or runs (COMPLETE,
    PRUNED, RUNNING) takes this sweep's setup (a first sweep stopped before any trial finished may be
    corrected). Otherwise it is compared with the recorded setup (``SETUP_ATTR``) or, for a study from
    before navexp recorded it, with the fixed overrides its navexp trials hold (user attributes of the
    trials with a ``run_dir``). ``searched``: this sweep's searched keys, named as such in the message;
    ``size_keys``: its trial-size keys, whose values come from ``sweep.trial_overrides_cpu``/``_gpu``."""
    ran = study.get_trials(
        deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
    )
    recorded = study.user_attrs.get(SETUP_ATTR)
    if not ran:
        if recorded is not None and recorded != setup:
            log.warning(f"study {study.study_name}: none of its trials ran; its setup is now this sweep's")
        study.set_user_attr(SETUP_ATTR, setup)
        return
    if recorded is not None:
        theirs, mine = _recorded_setup(recorded, setup, ran, searched), setup
    else:
        older = [fixed_setup(t.user_attrs, config_keys) for t in ran if "run_dir" in t.user_attrs]
        distinct = [dict(d) for d in {tuple(sorted(d.items())) for d in older}]
        if len(distinct) > 1:
            keys = sorted({k for d in distinct for k in d if len({x.get(k) for x in distinct}) > 1})
            raise StudySetupError(
                f"Error: study {study.study_name} already holds trials of {len(distinct)} setups (their "
                f"fixed overrides differ in {keys}); start another study: sweep.study_name=<new name> (or "
                f"another sweep.storage)"
            )
        if not distinct:  # no trial of a navexp sweep (made by hand or by another tool): nothing to match
            study.set_user_attr(SETUP_ATTR, setup)
            return
        theirs, mine = distinct[0], fixed
    differ = sorted(k for k in {*mine, *theirs} if mine.get(k) != theirs.get(k))
    if differ:

        def given(k: str) -> str:
            if k in searched:
                return "searches it"
            origin = " (its trial size, sweep.trial_overrides_cpu/_gpu)" if k in size_keys else ""
            return f"gives {mine.get(k, '(not given)')}{origin}"

        pairs = "; ".join(
            f"{k}: its trials ran with {theirs.get(k, '(not given)')}, this sweep {given(k)}" for k in differ
        )
        raise StudySetupError(
            f"Error: study {study.study_name} holds trials of another setup ({pairs}), which would be "
            f"ranked with this sweep's. To add to the study give its overrides; otherwise start another "
            f"study: sweep.study_name=<new name> (or another sweep.storage)"
        )
    if recorded != setup:  # first recorded, or recorded before the search space was part of it
        study.set_user_attr(SETUP_ATTR, setup)


def _recorded_setup(
    recorded: dict[str, str], setup: dict[str, str], ran: list, searched: set[str]
) -> dict[str, str]:
    """A study's recorded setup in today's terms: its keys' old ``ppo`` names translated, and for a setup
    recorded before the search space was part of it, the space its trials' parameters show (this sweep's
    when they searched the same keys)."""
    theirs = {translate_key(k, announce=False): v for k, v in recorded.items()}
    if SPACE_KEY in setup and SPACE_KEY not in theirs:
        keys = sorted({k for t in ran for k in t.params})
        theirs[SPACE_KEY] = setup[SPACE_KEY] if keys == sorted(searched) else f"(not recorded) {keys}"
    return theirs


def trial_size(trial_overrides: list[str], user_keys: set[str]) -> dict[str, str]:
    """``{key: value}`` of the sweep's per-trial size (``sweep.trial_overrides_cpu``/``_gpu``) that
    applies: the keys the command line does not set."""
    applies = [o for o in trial_overrides if "=" in o and o.split("=", 1)[0] not in user_keys]
    return distributions(applies)[1]  # Hydra's parser, as the command line's values: 1e-3 reads 0.001


def setup_warnings(
    config: DictConfig,
    searched: list[str],
    trial_overrides: list[str],
    user_keys: set[str],
    fixed: dict[str, Any] | None = None,
) -> list[str]:
    """What a sweep's trials will do that its user may not expect, said before the first trial: a
    searched reward term the composed reward has off (weight 0: ``reward=path`` with the default space,
    built around ``reward=bcppo``, switches ``progress`` on), and a policy averaged over checkpoints
    (``ppo.average_checkpoints``) that reaches iteration 0 at the trial size (``trial_overrides`` where the
    command line does not set the key, over the sweep's ``fixed`` values, as in the trial; not said when
    one of the three keys is searched or not a number)."""
    out = []
    for key in searched:
        parts = key.split(".")
        if len(parts) == 4 and parts[0] == "reward" and parts[1] == "terms" and parts[3] == "weight":
            if OmegaConf.select(config, key) == 0:
                choice = OmegaConf.select(config, "hydra.runtime.choices.reward")
                out.append(
                    f"the search space searches {key}, a term the composed reward (reward={choice}) has off "
                    f"(weight 0): its trials switch the term on"
                )
    keys = ("ppo.max_iterations", "ppo.save_interval", "ppo.average_checkpoints")
    if set(keys) & set(searched):
        return out
    size = {**{str(k): v for k, v in (fixed or {}).items()}, **trial_size(trial_overrides, user_keys)}
    try:
        iterations, interval, n = (int(size.get(k, OmegaConf.select(config, k))) for k in keys)
    except (TypeError, ValueError):
        return out
    saved = sorted({*range(0, iterations, max(interval, 1)), iterations - 1})
    if n > 1 and n >= len(saved):
        out.append(
            f"each trial saves iterations {saved} (ppo.max_iterations={iterations}, "
            f"ppo.save_interval={interval}), so its policy, the average of its last {n} checkpoints "
            f"(ppo.average_checkpoints), includes iteration 0; a smaller ppo.average_checkpoints or more "
            f"iterations (sweep.trial_overrides_cpu / _gpu) keep the average on trained checkpoints"
        )
    return out


class _Heartbeat:
    """Beat for running trials from a background thread while a batch runs."""

    def __init__(self, storage: optuna.storages.BaseStorage, trial_ids: list[int], interval_s: float) -> None:
        self.storage, self.trial_ids, self.interval_s = storage, trial_ids, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for tid in self.trial_ids:
                try:
                    beat(self.storage, tid)
                except Exception as e:  # a storage hiccup must not kill the sweep
                    log.warning(f"heartbeat for trial {tid} failed: {type(e).__name__}: {e}")

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class _Space:
    searched: dict  # {key: optuna distribution}
    fixed: dict  # {key: value string}
    user_keys: set  # keys the command line sets


class StudySweeper(Sweeper):
    """The study loop behind ``hydra/sweeper=optuna`` (see the module docstring).

    Constructed with the plugin's config (``hydra.sweeper``'s keys, as Hydra passes them to the plugin);
    ``setup`` translates it and the composed config's ``sweep.*`` once into ``self.settings``
    (``StudySettings``, navexp/sweep/settings.py), the only settings the loop reads.
    """

    def __init__(self, **plugin: Any) -> None:
        self.plugin = plugin
        """The plugin's config: hydra-optuna-sweeper's keys (``n_trials``, ``sampler``, ...)."""
        self.job_idx = 0

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        env_device = resolve_device(str(config.env.device))
        self.settings = study_settings(self.plugin, config, env_device, torch.cuda.device_count())
        self.config, self.hydra_context = config, hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            config=config, hydra_context=hydra_context, task_function=task_function
        )
        extender = self.settings.custom_search_space
        self.extend = get_method(extender) if extender else None

    # -- the search space ------------------------------------------------------------------------
    def _space(self, arguments: list[str]) -> _Space:
        s = self.settings
        expressions = {**load_space(s.space), **s.params}  # `<key>=<expression>` arrive in `arguments`
        distributions(list(arguments), where="the command line")  # a key given twice there: refused
        # The command line's entry of a key replaces the space's (a value there fixes a searched key).
        searched, fixed = distributions([f"{k}={v}" for k, v in expressions.items()] + list(arguments))
        if s.search_space:
            searched = {**distributions_from_config(s.search_space), **searched}
        check_keys(
            [k for k in [*searched, *fixed] if not k.startswith(("hydra.", "hydra/"))],
            self.config,
            f"search space '{s.space}' and command line",
        )
        for key in fixed:
            searched.pop(key, None)
        self.space_expressions = {**expressions, **{k: str(v) for k, v in searched.items()}}
        return _Space(searched, fixed, command_line_keys(arguments))

    # -- the study loop ----------------------------------------------------------------------------
    def sweep(self, arguments: list[str]) -> None:
        space = self._space(arguments)
        for warning in setup_warnings(
            self.config,
            list(space.searched),
            list(self.settings.trial_overrides),
            space.user_keys,
            space.fixed,
        ):
            log.warning(warning)
        self._build_sampler(space)
        study = self._open_study()
        check_setup = self._setup_check(study, space)
        s = self.settings
        with admission_lock(s.storage, s.study_name, s.sweep_dir):
            check_setup()
            if study.metric_names != list(s.objectives):  # their names in the plots and optuna-dashboard
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    study.set_metric_names(list(s.objectives))
        self._write_study_info()
        log.info(
            f"Study {s.study_name} in {describe(s.storage)}: target {s.n_trials} finished trials, "
            f"objectives {dict(zip(s.objectives, s.directions, strict=True))}, "
            f"sampler {type(self.sampler.inner).__name__}"
        )
        self._run_trials(study, space, check_setup)
        self._finish()

    def _build_sampler(self, space: _Space) -> None:
        """The study's sampler (rebuilt per trial); a grid or brute-force space caps ``n_trials`` at its
        number of points."""
        s = self.settings
        self.sampler, points = build_sampler(
            s.sampler, s.sampler_seed, space.searched, len(s.objectives), label=s.sampler_label
        )
        if points is not None and points < s.n_trials:
            log.info(f"the space has {points} points: n_trials {s.n_trials} -> {points}")
            self.settings = replace(s, n_trials=points)

    def _open_study(self) -> optuna.Study:
        """Create or load the study; one that optimizes other directions than ``sweep.objectives``' is
        refused."""
        s = self.settings
        try:
            self.storage = open_storage(s.storage)
        except (ConnectionError, ImportError, ValueError) as e:  # each names the URL in one line
            raise StorageError(f"Error: {e}") from None
        study = optuna.create_study(
            study_name=s.study_name,
            storage=self.storage,
            sampler=self.sampler,
            directions=list(s.directions),
            load_if_exists=True,
        )
        old = sorted(
            {k for t in study.get_trials(deepcopy=False) for k in t.params if translate_key(k, False) != k}
        )
        if old:  # optuna cannot rename a stored parameter; a sweep under today's names would not match them
            renamed = ", ".join(f"{k} (now {translate_key(k, False)})" for k in old)
            raise StudySetupError(
                f"Error: study {s.study_name} holds trials whose parameters have the names from before the "
                f"ppo rename: {renamed}; it cannot be continued under today's names: start another study: "
                f"sweep.study_name=<new name>"
            )
        theirs = [d.name.lower() for d in study.directions]
        if theirs != list(s.directions):
            raise StudySetupError(
                f"Error: study {s.study_name} optimizes {theirs}, this sweep's sweep.objectives="
                f"{list(s.objectives)} {list(s.directions)}; start another study: sweep.study_name=<new name>"
            )
        return study

    def _setup_check(self, study: optuna.Study, space: _Space) -> Callable[[], None]:
        """The check of this sweep's setup against the study's, to call under the admission lock."""
        config_keys = {str(k) for k in self.config if k != "hydra"}
        fixed = fixed_setup(space.fixed, config_keys)
        size = trial_size(list(self.settings.trial_overrides), space.user_keys)
        space_name = Path(self.settings.space).stem
        setup = {
            **fixed,
            **size,
            "sweep.objectives": str(list(self.settings.objectives)),
            SPACE_KEY: f"{space_name} {sorted(space.searched)}",
        }

        def check_setup() -> None:  # before the first trial, and every batch
            fail_stale_trials(study, self.storage, 2 * self.settings.heartbeat_s)
            check_study_setup(study, setup, fixed, set(space.searched), config_keys, set(size))

        return check_setup

    def _run_trials(self, study: optuna.Study, space: _Space, check_setup: Callable[[], None]) -> None:
        """Start and run batches until the study has ``n_trials`` finished trials and none running."""
        s = self.settings
        waiting_logged = False
        while True:
            # Counting and starting trials is one step across workers, so none overshoots n_trials.
            with admission_lock(s.storage, s.study_name, s.sweep_dir):
                check_setup()  # a worker of another setup that started at the same time: refused here
                trials = study.get_trials(deepcopy=False)
                finished = sum(counts_as_finished(t) for t in trials)
                running = sum(t.state == TrialState.RUNNING for t in trials)
                to_go = 0 if self.sampler.exhausted else s.n_trials - finished - running
                batch = self._ask_batch(study, space, min(to_go, s.n_jobs)) if to_go > 0 else []
            if to_go <= 0 and running == 0:
                return
            if not batch:  # other workers' trials: wait for them, take over if their worker stops
                if not waiting_logged:
                    log.info(f"waiting for {running} running trial(s) of other workers")
                    waiting_logged = True
                time.sleep(min(s.heartbeat_s, 5))
                continue
            self._run_batch(study, batch, space)
            self._check_failure_rate(study)

    def _ask_batch(
        self, study: optuna.Study, space: _Space, size: int
    ) -> list[tuple[optuna.trial.Trial, list]]:
        """Start ``size`` trials (heartbeats on from now: a stopped worker's trials are detectable) and
        sample each one's parameters; returns (trial, its overrides)."""
        batch = []
        for _ in range(size):
            trial = study.ask(fixed_distributions=space.searched)
            beat(self.storage, trial_id(trial))
            for key, value in space.fixed.items():
                trial.set_user_attr(key, value)
            if self.extend is not None:
                self.extend(self.config, trial)
            overlap = set(trial.params) & set(space.fixed)
            if overlap:
                raise ValueError(f"keys both searched and fixed: {sorted(overlap)}")
            params = {**trial.params, **space.fixed}
            batch.append((trial, [f"{k}={v}" for k, v in params.items()]))
        return batch

    def _run_batch(self, study: optuna.Study, batch: list, space: _Space) -> None:
        """Run the started trials through the launcher (in parallel if it can), tell the results."""
        s = self.settings
        devices = assign_devices(len(batch), list(s.devices) if "env.device" not in space.user_keys else [])
        overrides = []
        for (trial, o), dev in zip(batch, devices, strict=True):
            subdir = claim_trial_dir(s.sweep_dir, trial.number)
            trial.set_user_attr("trial_dir", str((s.sweep_dir / subdir).resolve()))  # for a killed worker
            overrides.append([*o, *self._trial_extras(trial, space.user_keys, subdir, dev)])
        try:
            with _Heartbeat(self.storage, [trial_id(t) for t, _ in batch], s.heartbeat_s):
                returns = self.launcher.launch(overrides, initial_job_idx=self.job_idx)
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM inside a trial's training
            self._interrupted(study, [t for t, _ in batch])
            raise
        self.job_idx += len(returns)
        for (trial, _), ret in zip(batch, returns, strict=True):
            self._tell(study, trial, ret)

    def _interrupted(self, study: optuna.Study, trials: list[optuna.trial.Trial]) -> None:
        """A batch stopped by Ctrl-C or SIGTERM: its running trials are failed as stopped (not counted) and
        their parameters queued again, so the same sweep command continues the study and reruns them."""
        s, stopped = self.settings, []
        since = time.strftime("%Y-%m-%d %H:%M:%S")
        for trial in trials:
            frozen = self.storage.get_trial(trial_id(trial))
            reason = "worker stopped: interrupted (Ctrl-C or SIGTERM)"
            if frozen.state == TrialState.RUNNING and release_trial(
                study, self.storage, frozen, reason, since
            ):
                stopped.append(trial.number)
        print(
            f"[navexp] sweep interrupted: trial(s) {stopped} stopped, their parameters queued to run again; "
            f"continue the study {s.study_name} with the same sweep command (sweep.study_name={s.study_name} "
            f"sweep.storage={describe(s.storage)})",
            flush=True,
        )

    def _trial_extras(
        self, trial: optuna.trial.Trial, user_keys: set[str], subdir: str, device: str | None
    ) -> list[str]:
        """Per-trial overrides: its run directory, ids, W&B names, size, device, and the study's settings
        under navexp's names, whichever name gave them (so the trial's config.yaml says what ran)."""
        log.info(f"trial {trial.number}: run dir {subdir}" + (f", device {device}" if device else ""))
        s = self.settings
        extras = [
            f"hydra.sweep.subdir={subdir}",
            f"sweep.trial_id={trial_id(trial)}",
            f"sweep.trial_number={trial.number}",
            f"sweep.study_name={s.study_name}",
            f"sweep.storage='{s.storage}'",
            f"sweep.n_trials={s.n_trials}",
            f"sweep.n_jobs={s.n_jobs}",
            f"sweep.max_failure_rate={s.max_failure_rate}",
            f"sweep.sampler_seed={s.sampler_seed}",
        ]
        if "logger.group" not in user_keys:
            extras.append(f"logger.group={s.study_name}")
        if "logger.name" not in user_keys:
            extras.append(f"logger.name=trial_{trial.number}")
        extras += [o for o in s.trial_overrides if o.split("=", 1)[0] not in user_keys]
        if device is not None:
            extras.append(f"env.device={device}")
        return extras

    def _tell(self, study: optuna.Study, trial: optuna.trial.Trial, ret: Any) -> None:
        try:
            value = ret.return_value  # re-raises the trial's exception
        except optuna.TrialPruned:
            self._safe_tell(study, trial, state=TrialState.PRUNED)
            self._progress(study, f"pruned (trial {trial.number})")
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
        n_objectives = len(self.settings.objectives)
        if len(values) != n_objectives:
            self._fail(study, trial, f"{len(values)} objective values for {n_objectives} objectives")
        elif not all(math.isfinite(v) for v in values):
            self._fail(study, trial, f"non-finite objective {values}")
        else:
            self._safe_tell(study, trial, values=values)
            shown = ", ".join(f"{o} = {v:.4g}" for o, v in zip(self.settings.objectives, values, strict=True))
            self._progress(study, f"done: {shown}")

    def _progress(self, study: optuna.Study, outcome: str) -> None:
        """The line a finished trial prints: ``trial k/N done: success_rate = 0.75 (best so far 0.8,
        trial 1)``; k counts the study's finished trials (every worker's), N is ``n_trials``."""
        trials = study.get_trials(deepcopy=False)  # the storage's: other workers' trials included
        done = sum(counts_as_finished(t) for t in trials)
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        best = ""
        if complete and len(self.settings.objectives) == 1:
            top = study.best_trial
            best = f" (best so far {top.value:.4g}, trial {top.number})"
        elif complete:
            best = f" (Pareto front so far: trials {', '.join(str(t.number) for t in study.best_trials)})"
        print(f"trial {done}/{self.settings.n_trials} {outcome}{best}", flush=True)

    def _safe_tell(self, study: optuna.Study, trial: optuna.trial.Trial, **kwargs) -> None:
        state = self.storage.get_trial(trial_id(trial)).state  # the storage's, not this worker's cache
        if state.is_finished():
            # Another worker saw no heartbeat (e.g. a storage outage) and failed it; its parameters
            # were enqueued again, so this result is dropped rather than overwriting that verdict.
            log.warning(
                f"trial {trial.number} was already {state.name} (set by another worker); result dropped"
            )
            return
        study.tell(trial, **kwargs)

    def _fail(self, study: optuna.Study, trial: optuna.trial.Trial, reason: str) -> None:
        log.warning(f"trial {trial.number} failed: {reason}")
        try:
            self.storage.set_trial_user_attr(trial_id(trial), "fail_reason", reason[:2000])
        except RuntimeError:  # already finished by another worker; _safe_tell says so
            pass
        self._safe_tell(study, trial, state=TrialState.FAIL)
        self._progress(study, f"failed (trial {trial.number}: {reason.splitlines()[0][:120]})")

    def _check_failure_rate(self, study: optuna.Study) -> None:
        done = [t for t in study.get_trials(deepcopy=False) if counts_as_finished(t)]
        failed = sum(t.state == TrialState.FAIL for t in done)
        s = self.settings
        if len(done) >= 3 and failed / len(done) > s.max_failure_rate:
            try:  # the message points to the report: write it first
                self._finish()
            except Exception as e:
                log.warning(f"could not write the study report: {type(e).__name__}: {e}")
            raise RuntimeError(
                f"study {s.study_name}: {failed} of {len(done)} finished trials failed, more than "
                f"max_failure_rate={s.max_failure_rate} (sweep.max_failure_rate or "
                f"hydra.sweeper.max_failure_rate); see each trial's fail_reason in the report "
                f"{s.report_dir / 'report.md'}"
            )

    def _write_study_info(self) -> None:
        s = self.settings
        info = {
            "study_name": s.study_name,
            "storage": s.storage,
            "objectives": list(s.objectives),
            "directions": list(s.directions),
            "n_trials": s.n_trials,
            "sampler": type(self.sampler.inner).__name__,
            "space": self.space_expressions,
        }
        s.sweep_dir.mkdir(parents=True, exist_ok=True)
        (s.sweep_dir / "study.json").write_text(json.dumps(info, indent=2))

    def _finish(self) -> None:
        # A fresh load: the sweeper's cached trials miss the metrics the trials stored themselves.
        s = self.settings
        fresh = optuna.load_study(study_name=s.study_name, storage=open_storage(s.storage))
        out = write_report(fresh, s.report_dir, objectives=list(s.objectives))
        summary = json.loads((out / "summary.json").read_text())
        (s.sweep_dir / "optimization_results.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(summary)))
        log.info(f"Study report: {out / 'report.md'}")
        lg = self.config.logger
        if lg.type == "wandb":  # the study as one W&B run beside its trials' runs
            folder = log_study_run(
                fresh,
                out,
                list(s.objectives),
                str(lg.project),
                str(lg.mode),
                lg.entity,
                lg.group or s.study_name,
            )
            if folder is not None:
                log.info(f"W&B study run: {folder}")
