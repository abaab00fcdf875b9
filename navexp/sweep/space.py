"""Search spaces: named ones (``sweeps/<name>.yaml``), Hydra's sweep syntax turned into optuna
distributions, and the check that every key exists in the config.

The syntax and its meaning are hydra-optuna-sweeper's, so its users' spaces mean the same here:
``choice(a, b)`` categorical; ``range(a, b[, step])`` integers (floats with a float bound or step)
from a to b, b included; ``interval(a, b)`` uniform (integers when both bounds are); ``tag(log,
interval(a, b))`` log-uniform; ``shuffle(range(...))`` categorical; a plain ``key=value`` is fixed.
A key's old name (``ppo.clip_param``: ``navexp.config.aliases``) is read as today's, in a space file,
``hydra.sweeper.params`` and on the command line alike.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, Transformer
from hydra.errors import CompactHydraException
from omegaconf import DictConfig, OmegaConf
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from navexp.config.aliases import translate_key, translate_overrides
from navexp.paths import SWEEPS_DIR

_NOT_FOUND = object()


class SpaceError(CompactHydraException, ValueError):
    """A search space that cannot be searched (a key not in the config, reversed bounds, a log scale from 0,
    a key both fixed and searched on the command line): Hydra prints this one line and exits 1, before
    any trial."""


def available_spaces() -> list[str]:
    return sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml"))


def load_space(name: str) -> dict[str, str]:
    """The search space ``sweeps/<name>.yaml`` (or a YAML path) as {config key: sweep expression}."""
    path = Path(name)
    if not path.is_file():
        path = SWEEPS_DIR / f"{name}.yaml"
    if not path.is_file():
        raise SpaceError(
            f"Error: sweep.space={name!r}: no such search space; available: {available_spaces()}"
        )
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise SpaceError(f"Error: search space {path} is not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict) or not data:
        raise SpaceError(
            f"Error: search space {path} must be a non-empty mapping of config keys to sweep expressions"
        )
    return {translate_key(str(k)): str(v) for k, v in data.items()}


def _leaf_keys(cfg: DictConfig) -> list[str]:
    flat = OmegaConf.to_container(cfg, resolve=False)
    out = []

    def walk(node, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}.{k}" if prefix else str(k))
        else:
            out.append(prefix)

    walk(flat, "")
    return out


def check_keys(keys: list[str], cfg: DictConfig, where: str) -> None:
    """Raise SpaceError for keys that are not in the composed config, with the closest existing keys."""
    task = OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"]) if "hydra" in cfg else cfg
    missing = [k for k in keys if OmegaConf.select(task, k, default=_NOT_FOUND) is _NOT_FOUND]
    if missing:
        leaves = _leaf_keys(task)
        hints = {k: difflib.get_close_matches(k, leaves, n=3, cutoff=0.6) for k in missing}
        raise SpaceError(
            f"Error: {where}: {len(missing)} key(s) not in the config: {hints} (key: closest existing keys)"
        )


def _choices(override: Override) -> CategoricalDistribution:
    values = list(override.sweep_iterator(transformer=Transformer.encode))
    bad = [v for v in values if not isinstance(v, (str, int, float, bool, type(None)))]
    if bad:
        raise ValueError(f"{override.input_line}: choices must be str, int, float, bool or null, got {bad}")
    return CategoricalDistribution(values)


def distribution(override: Override) -> BaseDistribution | str:
    """The optuna distribution of one parsed override; its value as a string when it is not a sweep."""
    if not override.is_sweep_override():
        return override.get_value_element_as_str()
    value = override.value()
    if override.is_choice_sweep():
        return _choices(override)
    if override.is_range_sweep():
        if value.shuffle:
            return _choices(override)
        _check_bounds(override, value.start, value.stop, log=False)
        if value.step <= 0:
            raise SpaceError(f"Error: {override.input_line}: the step {value.step} must be above 0")
        if any(isinstance(x, float) for x in (value.start, value.stop, value.step)):
            return FloatDistribution(value.start, value.stop, step=value.step)
        return IntDistribution(int(value.start), int(value.stop), step=int(value.step))
    if override.is_interval_sweep():
        log = "log" in value.tags
        _check_bounds(override, value.start, value.end, log=log)
        if isinstance(value.start, int) and isinstance(value.end, int):
            return IntDistribution(value.start, value.end, log=log)
        return FloatDistribution(float(value.start), float(value.end), log=log)
    raise SpaceError(
        f"Error: {override.input_line}: this sweep is not supported; use choice, range or interval"
    )


def _check_bounds(override: Override, low: float, high: float, log: bool) -> None:
    """Refuse bounds optuna would refuse with a traceback: reversed ones, and a log scale from 0 or below."""
    line = override.input_line
    if low > high:
        raise SpaceError(
            f"Error: {line}: the lower bound {low} is above the upper bound {high}; give the lower first"
        )
    if log and low <= 0:
        raise SpaceError(
            f"Error: {line}: a log scale (tag(log, ...)) needs a lower bound above 0, got {low}; "
            f"e.g. tag(log, interval({high / 100:g}, {high:g}))"
        )


def distributions(
    arguments: list[str], where: str | None = None
) -> tuple[dict[str, BaseDistribution], dict[str, str]]:
    """({key: distribution} of the sweep overrides, {key: value} of the fixed ones); a later entry of a
    key replaces an earlier one. ``where`` (e.g. "the command line"): these overrides come from one
    place, so a key given twice there, once as a search, is refused naming it (one search would be dropped;
    a plain value given twice is Hydra's: the last one counts)."""
    searched, fixed, lines = {}, {}, {}
    for override in OverridesParser.create().parse_overrides(translate_overrides(arguments)):
        d = distribution(override)
        key = override.get_key_element()
        twice = key in lines and lines[key] != override.input_line
        if where is not None and twice and (key in searched or isinstance(d, BaseDistribution)):
            raise SpaceError(
                f"Error: {key} is given twice on {where}: {lines[key]} and {override.input_line}; "
                f"give it once (a value fixes it, an expression searches it)"
            )
        lines[key] = override.input_line
        searched.pop(key, None)
        fixed.pop(key, None)
        if isinstance(d, BaseDistribution):
            searched[key] = d
        else:
            fixed[key] = d
    return searched, fixed


def distributions_from_config(search_space: Mapping[str, Mapping[str, Any]]) -> dict[str, BaseDistribution]:
    """hydra-optuna-sweeper's deprecated ``search_space`` form:
    {key: {type, low, high, log, step, choices}}."""
    out = {}
    for name, spec in search_space.items():
        key, spec = translate_key(str(name)), dict(spec)
        kind = str(spec.get("type"))
        if kind == "categorical":
            out[str(key)] = CategoricalDistribution(list(spec["choices"]))
        elif kind in ("int", "float"):
            cast = int if kind == "int" else float
            step = spec.get("step")
            out[str(key)] = (IntDistribution if kind == "int" else FloatDistribution)(
                cast(spec["low"]),
                cast(spec["high"]),
                log=bool(spec.get("log", False)),
                step=(cast(step) if step is not None else (1 if kind == "int" else None)),
            )
        else:
            raise ValueError(
                f"hydra.sweeper.search_space.{key}.type={kind!r} is invalid; allowed: int, float, categorical"
            )
    return out
