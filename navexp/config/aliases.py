"""Old names of config keys, still accepted wherever a key is typed: command lines, search spaces,
``navexp.compare by=``.

The ``ppo`` group took rsl_rl's shape (``navexp.learn.ppo_schema``): PPO's settings moved into
``ppo.algorithm`` and the networks' into ``ppo.policy``. Commands written before keep working:

    python -m navexp.train reward=bcppo ppo.desired_kl=0.01
    [navexp] ppo.desired_kl is now ppo.algorithm.desired_kl (the old name keeps working)

Every place that takes overrides translates them with ``translate_overrides`` before Hydra composes
(the train app's command line, the tools' ``parse_command_line``, ``compose_config``, the sweeper's
search space); each old name is announced once per process, on stderr (so ``--cfg job`` stays plain
YAML). Stored runs are migrated where they are read (``navexp.learn.checkpoint.stored_config``).
"""

from __future__ import annotations

import sys
from dataclasses import fields

from navexp.learn.ppo_schema import SECTIONS

RENAMED_KEYS: dict[str, str] = {
    f"ppo.{f.name}": f"ppo.{section}.{f.name}" for section, cls in SECTIONS.items() for f in fields(cls)
}
"""Old name -> new name: every key of a ``ppo`` section, which sat under ``ppo`` itself before
(``ppo.clip_param`` -> ``ppo.algorithm.clip_param``, ``ppo.model`` -> ``ppo.policy.model``)."""

_ANNOUNCED: set[str] = set()
"""Old names this process has announced."""


def translate_key(key: str, announce: bool = True) -> str:
    """Today's name of a config key (``ppo.hidden_dims`` -> ``ppo.policy.hidden_dims``, also below it:
    ``ppo.hidden_dims.0``); other keys come back unchanged. An old name the user typed is announced once
    (``announce``; a run's own record is translated silently)."""
    old = next((o for o in RENAMED_KEYS if key == o or key.startswith(o + ".")), None)
    if old is None:
        return key
    if announce and old not in _ANNOUNCED:
        _ANNOUNCED.add(old)
        print(f"[navexp] {old} is now {RENAMED_KEYS[old]} (the old name keeps working)", file=sys.stderr)
    return RENAMED_KEYS[old] + key[len(old) :]


def translate_override(arg: str, announce: bool = True) -> str:
    """One Hydra override (``key=value``, ``+key=value``, ``++key=value``, ``~key[=value]``) with its key
    translated; anything else (``-m``, ``--cfg``, a group choice) unchanged."""
    prefix = arg[: len(arg) - len(arg.lstrip("+~"))]
    key, sep, value = arg[len(prefix) :].partition("=")
    if not sep and not prefix.startswith("~"):
        return arg
    return f"{prefix}{translate_key(key, announce)}{sep}{value}"


def translate_overrides(args: list[str], announce: bool = True) -> list[str]:
    """Hydra overrides with every old key name replaced by today's (see ``translate_override``)."""
    return [translate_override(a, announce) for a in args]


def translate_argv(argv: list[str]) -> list[str]:
    """A command line (the program first) with its overrides translated."""
    return argv[:1] + translate_overrides(argv[1:])
