"""Size presets: the Hydra config group ``size`` (``configs/size/<preset>.yaml``) and ``size=auto``.

A preset is an ordinary config group (package ``_global_``) placed after the groups whose keys it
sets, so the composed config *is* the run's config (``.hydra/config.yaml`` equals the run's
``config.yaml``) and a key set on the command line still wins over the preset. ``auto`` is not a
file: ``python -m navexp.train`` turns it into ``gpu`` or ``cpu`` before Hydra composes, from
``env.device`` on the command line and whether CUDA is present (``size_override_argv``), so it works
the same for a run, a sweep (every trial inherits the resolved choice) and every torchrun rank.
"""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from navexp.config.cli import override_keys
from navexp.paths import CONFIG_DIR

SIZE_DIR = CONFIG_DIR / "size"
AUTO = "auto"
APP_DEFAULT = AUTO
"""What ``python -m navexp.train`` uses when the command line names no size."""

# Flags of Hydra's command line that take the next argument as their value (not an override).
_VALUE_FLAGS = {
    "--cfg",
    "-c",
    "--package",
    "-p",
    "--config-path",
    "-cp",
    "--config-name",
    "-cn",
    "--config-dir",
    "-cd",
    "--experimental-rerun",
    "--info",
    "-i",
}


def size_options() -> list[str]:
    """Every accepted ``size`` value: ``auto`` plus one per YAML in ``configs/size/``."""
    return [AUTO, *sorted(p.stem for p in SIZE_DIR.glob("*.yaml"))]


def check_size(size: str) -> str:
    """``size`` itself when it is an accepted value; else ValueError naming it and the valid options."""
    if size not in size_options():
        raise ValueError(f"size={size!r} is invalid; allowed: {' | '.join(size_options())}")
    return size


def auto_size(device: str, cuda_available: bool | None = None) -> str:
    """``gpu`` when ``env.device`` is (or ``auto`` resolves to) a CUDA device, else ``cpu``.

    ``cuda``/``cuda:N`` choose ``gpu`` even without CUDA, so that the run fails on the device (naming
    ``env.device``), not on a preset chosen for a device the user did not ask for.
    """
    if device == "cpu":
        return "cpu"
    if device.startswith("cuda"):
        return "gpu"
    if cuda_available is None:
        cuda_available = torch.cuda.is_available()
    return "gpu" if cuda_available else "cpu"


def resolve_size_overrides(
    overrides: list[str], default: str | None = None, cuda_available: bool | None = None
) -> list[str]:
    """Hydra overrides with ``size=auto`` replaced by ``size=gpu|cpu``; ``default`` is used when no
    ``size=`` is given (None: leave the config's own default, ``none``). Values are checked."""
    out, given = list(overrides), False
    for i, o in enumerate(out):
        key, sep, value = o.partition("=")
        if sep and key == "size":  # a multirun may sweep it: size=cpu,none
            given = True
            auto = auto_size(_device(out), cuda_available) if AUTO in value.split(",") else None
            out[i] = "size=" + ",".join(auto if check_size(v) == AUTO else v for v in value.split(","))
    if not given and default is not None:
        size = check_size(default)
        out.append(f"size={auto_size(_device(out), cuda_available) if size == AUTO else size}")
    return out


def size_override_argv(argv: list[str], cuda_available: bool | None = None) -> list[str]:
    """``sys.argv`` of ``python -m navexp.train`` with ``size=auto`` (also when absent) resolved.

    Hydra's parser takes the overrides as one run of positional arguments, so a new ``size=`` goes
    right after the last existing override (or first, when there is none), never after a flag.
    """
    prog, args = argv[:1], list(argv[1:])
    positions = override_positions(args)
    resolved = resolve_size_overrides([args[i] for i in positions], APP_DEFAULT, cuda_available)
    for i, o in zip(positions, resolved, strict=False):
        args[i] = o
    if len(resolved) > len(positions):
        args.insert(positions[-1] + 1 if positions else 0, resolved[-1])
    return prog + args


def add_overrides(argv: list[str], extra: list[str]) -> list[str]:
    """``argv`` with ``extra`` overrides placed right after its last override (see above)."""
    prog, args = argv[:1], list(argv[1:])
    positions = override_positions(args)
    at = positions[-1] + 1 if positions else 0
    return prog + args[:at] + extra + args[at:]


def override_value(argv: list[str], key: str) -> str | None:
    """The value of ``key=...`` (or ``+key=`` / ``++key=``) among the overrides, unquoted; None if absent."""
    args = argv[1:]
    for i in override_positions(args):
        k, _, v = args[i].lstrip("+").partition("=")
        if k == key:
            return v[1:-1] if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"" else v
    return None


def preset_values(size: str) -> dict[str, Any]:
    """The keys a preset sets, as ``{"env.num_envs": 256, ...}`` (``size`` itself left out)."""
    node = OmegaConf.to_container(OmegaConf.load(SIZE_DIR / f"{check_size(size)}.yaml"))
    flat: dict[str, Any] = {}

    def walk(value: Any, prefix: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{prefix}.{k}" if prefix else str(k))
        else:
            flat[prefix] = value

    walk(node, "")
    flat.pop("size", None)
    return flat


def applied_preset(size: str, overrides: list[str], cfg: DictConfig) -> dict[str, Any]:
    """What the preset set in this run: its keys the command line (or a sweep) left alone and the
    composed ``cfg`` holds at the preset's value (a ``recipe``, composed after it, may set others)."""
    if size == AUTO:
        return {}
    user = override_keys(overrides)
    return {k: v for k, v in preset_values(size).items() if k not in user and OmegaConf.select(cfg, k) == v}


def _device(overrides: list[str]) -> str:
    """``env.device`` as the command line sets it (``auto`` when it does not)."""
    for o in reversed(overrides):
        key, sep, value = o.partition("=")
        if sep and key.lstrip("+") == "env.device":
            return value.strip().strip("'\"")
    return "auto"


def override_positions(args: list[str]) -> list[int]:
    """Indices of the Hydra overrides among command-line arguments (not flags, not a flag's value)."""
    positions = []
    for i, a in enumerate(args):
        if a.startswith("-") or (i > 0 and args[i - 1] in _VALUE_FLAGS):
            continue
        if "=" in a or a.startswith("~"):
            positions.append(i)
    return positions
