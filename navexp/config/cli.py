"""One command-line parser for navexp's tools: their own ``name=value`` options apart from Hydra overrides.

    python -m navexp.play checkpoint=outputs/navexp/<run> episodes=8 env=dense eval.layout_seed_offset=7
                          '------------ own options -----------' '------- Hydra overrides ---------'

An argument whose name is one of the tool's options is that option; anything that names the config
(a dotted key, a top-level key or a config group, ``+``/``~``/``hydra`` forms) is a Hydra override,
kept in command-line order; anything else (``episode=8``) is an error that lists the tool's options.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields

from hydra.errors import HydraException

from navexp.config.aliases import translate_overrides
from navexp.config.keys import check_overrides
from navexp.config.schemas import ExperimentCfg
from navexp.paths import CONFIG_DIR


@dataclass(frozen=True)
class CommandLine:
    """A parsed command line."""

    options: dict[str, str]
    """Every option of the tool: its value on the command line, else its default (an option without a
    default that was not given is absent)."""
    overrides: list[str]
    """Hydra overrides, in command-line order (old key names translated: ``navexp.config.aliases``)."""


def override_keys(overrides: list[str]) -> set[str]:
    """Config keys (or groups) named by Hydra overrides: ``+a.b=1`` -> ``a.b``, ``~a.b`` -> ``a.b``."""
    return {o.split("=", 1)[0].lstrip("+~") for o in overrides}


def group_package(group: str) -> str:
    """Where a config group's choice lands in the composed config: its options' ``# @package`` line
    (``robot`` -> ``env.robot``), else the group's own name."""
    for option in sorted((CONFIG_DIR / group).glob("*.yaml")):
        first = option.read_text().splitlines()[:1]
        if first and first[0].startswith("# @package "):
            return first[0].removeprefix("# @package ").strip()
    return group


def config_names() -> set[str]:
    """Top-level config keys and config groups: the first part of any valid override's key."""
    groups = {p.name for p in CONFIG_DIR.iterdir() if p.is_dir()}
    return {f.name for f in fields(ExperimentCfg)} | groups | {"hydra"}


def is_override(arg: str) -> bool:
    """Whether ``arg`` addresses the config (``env=dense``, ``ppo.algorithm.clip_param=0.1``, ``+x=1``,
    ``~a.b``)."""
    if arg.startswith(("+", "~")):
        return True
    key, sep, _ = arg.partition("=")
    if not sep:
        return False
    root = key.replace("/", ".").split(".", 1)[0]
    return root in config_names()


HELP_FLAGS = ("-h", "--help")


def help_text(
    options: dict[str, str | None], usage: str, required: tuple[str, ...], overrides: bool, about: str = ""
) -> str:
    """What ``--help`` prints: the usage, what the tool does, its options with their defaults."""
    lines = [f"usage: {usage}", ""]
    if about:
        lines += [about.strip(), ""]
    lines.append("options:")
    for name, default in options.items():
        if name in required:
            note = "required"
        else:
            note = "no default" if default is None else f"default: {default}"
        lines.append(f"  {name}=  ({note})")
    if overrides:
        lines += ["", "Hydra overrides of the run's config mix in: env=dense, eval.num_episodes=500."]
    return "\n".join(lines)


def parse_command_line(
    argv: list[str],
    options: dict[str, str | None],
    usage: str,
    required: tuple[str, ...] = (),
    overrides: bool = True,
    about: str = "",
) -> CommandLine:
    """Split ``argv`` into the tool's ``options`` (name -> default, None: no default) and Hydra overrides.

    ``-h``/``--help`` prints ``help_text`` (with ``about``, the tool's description) and exits 0.
    Raises ValueError naming the argument and the valid options for an unknown option (or any override
    when ``overrides`` is False), an option given without a value, a missing ``required`` option, or an
    override whose key or group option the schemas do not know (``navexp.config.keys``).
    """
    if any(arg in HELP_FLAGS for arg in argv):
        print(help_text(options, usage, required, overrides, about))
        raise SystemExit(0)
    values = {k: v for k, v in options.items() if v is not None}
    rest = []
    valid = ", ".join(f"{k}=" for k in options)
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key in options:
            if not value:
                raise ValueError(f"option {arg!r} has no value; usage: {usage}")
            values[key] = value
        elif overrides and is_override(arg):
            rest.append(arg)
        else:
            also = " or config overrides (env=dense, eval.num_episodes=500, ...)" if overrides else ""
            raise ValueError(f"unknown option {arg!r}; options: {valid}{also}; usage: {usage}")
    missing = [k for k in required if k not in values]
    if missing:
        raise ValueError(f"missing {', '.join(f'{k}=' for k in missing)}; usage: {usage}")
    rest = translate_overrides(rest)
    check_overrides(rest)  # a misspelled key (with or without +) or group option, before anything runs
    return CommandLine(values, rest)


USER_ERRORS = (ValueError, KeyError, FileNotFoundError, FileExistsError, NotADirectoryError, ConnectionError)
"""What bad input raises in navexp: a tool prints its message on one line instead of a traceback
(ConnectionError: a sweep storage that cannot be opened, named with its URL)."""


def run_tool(main: Callable[[], object]) -> None:
    """Run a tool's ``main``; bad input ends it with ``error: <message>`` on stderr and exit status 2.

    Ctrl-C ends it with one line and exit status 130, as the shell's for SIGINT (the tools write their
    files after the last episode: an interrupted one has written none). ``NAVEXP_TRACEBACK=1`` lets the
    exception through, with its traceback.
    """
    try:
        main()
    except KeyboardInterrupt:
        if os.environ.get("NAVEXP_TRACEBACK") == "1":
            raise
        print("[navexp] interrupted (Ctrl-C): stopped before writing any file", file=sys.stderr)
        raise SystemExit(130) from None
    except (*USER_ERRORS, HydraException) as e:
        if os.environ.get("NAVEXP_TRACEBACK") == "1":
            raise
        message = e.args[0] if isinstance(e, KeyError) and e.args else e
        if isinstance(e, HydraException):  # a config override the tool's composition refused
            message = one_line(e)
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2) from None


def one_line(error: BaseException) -> str:
    """Hydra's (multi-line) composition error, and the OmegaConf error behind it, on one line, without
    OmegaConf's key/type report lines and Hydra's config search path."""
    report = ("full_key:", "object_type=", "reference_type=")
    parts = [str(error)] + ([str(error.__cause__)] if error.__cause__ is not None else [])
    lines = [ln.strip() for part in parts for ln in part.split("Config search path")[0].splitlines()]
    return " ".join(dict.fromkeys(ln for ln in lines if ln and not ln.startswith(report)))
