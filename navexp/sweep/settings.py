"""A sweep's settings under one name each: ``StudySettings``, built once by ``study_settings`` from the
sweeper plugin's config and navexp's ``sweep.*``. The study loop (navexp/sweep/sweeper.py) reads its
settings from this object and from nowhere else.

navexp's names are ``sweep.*``. The plugin keeps hydra-optuna-sweeper 1.3.0's keys
(``hydra.sweeper.n_trials``, ``storage``, ``params``, ...) so that sweep configs written for that plugin
run unchanged; they are a compatibility layer, translated here:

- six settings have both names (``SHARED_KEYS``). A ``hydra.sweeper`` key left null (its default) takes
  the ``sweep`` value. When both names carry different values, the one given on the command line wins
  over the other, set in a config file (Hydra's rule: the command line overrides config files); both on
  the command line, or both in config files, are refused in one line naming both keys, as nothing says
  which one was meant. A ``sweep`` key at its schema default counts as not set.
- ``hydra.sweeper.direction`` follows from ``sweep.objectives``: left null, or equal, or refused.
- ``hydra.sweeper.params``, ``search_space``, ``custom_search_space`` and ``sampler`` have no ``sweep``
  twin and are taken as they are (except the sampler's ``seed``: ``sweep.sampler_seed``'s other name).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.errors import CompactHydraException
from omegaconf import DictConfig, OmegaConf

from navexp.config.aliases import translate_overrides
from navexp.config.schemas import SweepCfg
from navexp.sweep.parallel import sweep_devices
from navexp.sweep.report import report_dir


class SweepSettingsError(CompactHydraException, ValueError):
    """A sweep setting that is invalid, or given under both its names with two values: Hydra prints this
    one line (no traceback) and exits 1, before any trial."""


DIRECTIONS = {
    "success_rate": "maximize",
    "collision_rate": "minimize",
    "timeout_rate": "minimize",
    "mean_time_to_goal_s": "minimize",
    "mean_path_length_m": "minimize",
}

SHARED_KEYS = {  # hydra.sweeper.<key> (the plugin's name): sweep.<key> (navexp's name), one setting
    "n_trials": "n_trials",
    "n_jobs": "n_jobs",
    "study_name": "study_name",
    "storage": "storage",
    "max_failure_rate": "max_failure_rate",
    "sampler.seed": "sampler_seed",
}

_DEFAULTS = SweepCfg()


@dataclass(frozen=True)
class StudySettings:
    """What one sweep runs with, each setting under navexp's name (docs/sweeps.md: the keys)."""

    study_name: str
    """sweep.study_name (hydra.sweeper.study_name); default ``<experiment_name>_<space>``."""
    storage: str
    """The storage URL: sweep.storage (hydra.sweeper.storage); default
    ``sqlite:///<hydra.sweep.dir>/<study_name>.db`` when the command line gives ``hydra.sweep.dir``, else
    ``sqlite:///outputs/studies/<study_name>.db`` (one file that re-runs of the same command continue)."""
    report_dir: Path
    """Where the sweep writes the study's report (and its W&B study run): ``<sweep dir>/report``."""
    n_trials: int
    """Finished trials the study should reach: sweep.n_trials (hydra.sweeper.n_trials); default 50 on a
    GPU, 10 on a CPU; capped at the number of points of a grid or brute-force space."""
    n_jobs: int
    """Trials per batch: sweep.n_jobs (hydra.sweeper.n_jobs)."""
    max_failure_rate: float
    """sweep.max_failure_rate (hydra.sweeper.max_failure_rate), in [0, 1]."""
    sampler_seed: int
    """sweep.sampler_seed (hydra.sweeper.sampler.seed): seeds the sampler per trial."""
    objectives: tuple[str, ...]
    """sweep.objectives, e.g. ("success_rate",)."""
    directions: tuple[str, ...]
    """maximize | minimize per objective (DIRECTIONS)."""
    sampler: Mapping[str, Any]
    """The hydra/sweeper/sampler config (``_target_`` and options, its seed aside), rebuilt per trial."""
    sampler_label: str | None
    """The hydra/sweeper/sampler option (tpe, gp, ...), for messages."""
    space: str
    """sweep.space: a name under sweeps/ or a path."""
    params: Mapping[str, str]
    """hydra.sweeper.params: {config key: sweep expression}, added to the space."""
    search_space: Mapping[str, Any] | None
    """hydra.sweeper.search_space (deprecated in hydra-optuna-sweeper): {key: {type, low, high, ...}}."""
    custom_search_space: str | None
    """hydra.sweeper.custom_search_space: dotted path of ``f(cfg, trial)``."""
    heartbeat_s: int
    """sweep.heartbeat_interval_s: running trials beat this often (seconds)."""
    devices: tuple[str, ...]
    """sweep.devices resolved: the devices parallel trials rotate over, () to keep env.device."""
    trial_overrides: tuple[str, ...]
    """sweep.trial_overrides_gpu on a GPU, else sweep.trial_overrides_cpu."""
    sweep_dir: Path
    """hydra.sweep.dir: the sweep's directory (trial_<n>/, study.json)."""

    def __post_init__(self) -> None:
        checks = (
            ("n_trials", self.n_trials, self.n_trials >= 1, ">= 1"),
            ("n_jobs", self.n_jobs, self.n_jobs >= 1, ">= 1"),
            ("max_failure_rate", self.max_failure_rate, 0.0 <= self.max_failure_rate <= 1.0, "in [0, 1]"),
            ("heartbeat_interval_s", self.heartbeat_s, self.heartbeat_s >= 1, ">= 1 (seconds)"),
        )
        bad = [
            f"sweep.{key}={value}{_OTHER_NAME.get(key, '')} must be {rule}"
            for key, value, ok, rule in checks
            if not ok
        ]
        if bad:
            raise SweepSettingsError("Error: " + "; ".join(bad))


_OTHER_NAME = {skey: f" (or hydra.sweeper.{hkey})" for hkey, skey in SHARED_KEYS.items()}


def study_settings(
    plugin: Mapping[str, Any], config: DictConfig, env_device: str, gpu_count: int
) -> StudySettings:
    """The sweep's settings from ``plugin`` (the plugin's config as Hydra passes it to the sweeper:
    ``hydra.sweeper``'s keys) and ``config`` (the composed config: ``sweep.*``, and the command line in
    ``hydra.overrides``). ``env_device``: env.device resolved; ``gpu_count``: the visible GPUs."""
    sw = config.sweep
    given = command_line_keys([*config.hydra.overrides.task, *config.hydra.overrides.hydra])
    shared = {
        skey: one_value(hkey, _plugin_value(plugin, hkey), skey, sw[skey], given)
        for hkey, skey in SHARED_KEYS.items()
    }
    on_gpu = env_device.startswith("cuda")
    sweep_dir = Path(str(config.hydra.sweep.dir))
    home = sweep_dir if "hydra.sweep.dir" in given else None  # the user chose where the sweep's files go
    name, storage, _ = _study_paths(
        shared["study_name"], shared["storage"], str(config.experiment_name), str(sw.space), home
    )
    objectives = tuple(str(o) for o in sw.objectives)
    sampler = dict(_plain(plugin.get("sampler")) or {})
    sampler.pop("seed", None)  # sampler_seed's other name, taken above
    extender = plugin.get("custom_search_space")
    return StudySettings(
        study_name=name,
        storage=storage,
        report_dir=sweep_dir / "report",
        n_trials=int(shared["n_trials"]) if shared["n_trials"] is not None else (50 if on_gpu else 10),
        n_jobs=int(shared["n_jobs"]),
        max_failure_rate=float(shared["max_failure_rate"]),
        sampler_seed=int(shared["sampler_seed"]),
        objectives=objectives,
        directions=tuple(directions(list(objectives), _plain(plugin.get("direction")))),
        sampler=sampler,
        sampler_label=OmegaConf.select(config, "hydra.runtime.choices.hydra/sweeper/sampler"),
        space=str(sw.space),
        params={str(k): str(v) for k, v in (plugin.get("params") or {}).items()},
        search_space=_plain(plugin.get("search_space")) or None,
        custom_search_space=str(extender) if extender else None,
        heartbeat_s=int(sw.heartbeat_interval_s),
        devices=tuple(sweep_devices(_plain(sw.devices), env_device, gpu_count)),
        trial_overrides=tuple(  # old ppo names (ppo.num_mini_batches=4) read as today's
            translate_overrides(
                [str(o) for o in (sw.trial_overrides_gpu if on_gpu else sw.trial_overrides_cpu)]
            )
        ),
        sweep_dir=sweep_dir,
    )


def one_value(hkey: str, hval: Any, skey: str, sval: Any, given: set[str]) -> Any:
    """The value of one setting named ``hydra.sweeper.<hkey>`` and ``sweep.<skey>`` (the module
    docstring says which wins); ``given``: the keys the command line sets."""
    if hval is None or hval == sval:
        return sval
    plugin_given, sweep_given = f"hydra.sweeper.{hkey}" in given, f"sweep.{skey}" in given
    if plugin_given != sweep_given:  # the command line overrides a config file, whichever name it uses
        return hval if plugin_given else sval
    if not sweep_given and sval == getattr(_DEFAULTS, skey):
        return hval  # sweep.<skey> at its default was not set: the plugin's key was
    where = "on the command line" if sweep_given else "in config files"
    raise SweepSettingsError(
        f"Error: hydra.sweeper.{hkey}={hval} and sweep.{skey}={sval} are one setting, both given {where}; "
        f"give one of them (sweep.{skey} is navexp's name)"
    )


def directions(objectives: list[str], direction: Any) -> list[str]:
    """The directions of ``sweep.objectives``; ``hydra.sweeper.direction``, if set, must agree."""
    unknown = [o for o in objectives if o not in DIRECTIONS]
    if not objectives or unknown:
        raise SweepSettingsError(
            f"Error: sweep.objectives={objectives} is invalid; allowed: {sorted(DIRECTIONS)}"
        )
    fixed = [DIRECTIONS[o] for o in objectives]
    if direction is not None:
        given = [str(d) for d in (direction if isinstance(direction, (list, tuple)) else [direction])]
        if given != fixed:
            raise SweepSettingsError(
                f"Error: hydra.sweeper.direction={given} disagrees with sweep.objectives={objectives}, "
                f"whose directions are {fixed}; leave hydra.sweeper.direction unset (navexp's objectives "
                f"fix it)"
            )
    return fixed


def study_paths(cfg: DictConfig) -> tuple[str, str, Path]:
    """(study name, storage URL, report directory) of a config's ``sweep.study_name`` and ``storage``."""
    sw = cfg.sweep
    return _study_paths(sw.study_name, sw.storage, str(cfg.experiment_name), str(sw.space))


def _study_paths(
    study_name: str | None, storage: str | None, experiment_name: str, space: str, home: Path | None = None
) -> tuple[str, str, Path]:
    """(study name, storage URL, report folder of the storage file); the default storage is
    ``<home>/<study_name>.db`` (``home``: a ``hydra.sweep.dir`` given on the command line), else
    ``outputs/studies/<study_name>.db``."""
    name = str(study_name or f"{experiment_name}_{Path(space).stem}")
    root = (home or Path("outputs/studies")).resolve()
    url = str(storage or f"sqlite:///{root / (name + '.db')}")
    return name, url, report_dir(url, name, root / name)  # report_dir refuses a name with '/' or '..'


def command_line_keys(overrides: list[str]) -> set[str]:
    """The keys a list of overrides sets (``+key=``, ``++key=`` and ``~key`` as ``key``)."""
    return {str(o).split("=", 1)[0].lstrip("+~") for o in overrides}


def _plugin_value(plugin: Mapping[str, Any], key: str) -> Any:
    """``plugin[key]``, where a dotted key (``sampler.seed``) reads into a nested node."""
    head, _, tail = key.partition(".")
    value = plugin.get(head)
    return value.get(tail) if tail and value is not None else value


def _plain(value: Any) -> Any:
    """A config node (DictConfig, ListConfig) as plain dicts and lists; any other value as it is."""
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
