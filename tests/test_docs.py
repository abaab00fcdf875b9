"""README.md and docs/ stay true: every command they show composes or parses as the tool would take
it, every module path and Python name they mention exists, every relative link resolves."""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from navexp import compose_config
from navexp.config import cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOOLS = ("train", "evaluate", "play", "export", "bench", "bench_dist", "sweep_report", "compare")
HYDRA_FLAGS = ("--help", "--hydra-help", "--cfg", "-sc", "--info")


class ParsedOnly(Exception):
    """Raised by the patched parser: the command line parsed, nothing else needs to run."""


def _text(doc: Path) -> str:
    return re.sub(r"\\\n\s*", " ", doc.read_text())  # join continued command lines


def _clean(token: str) -> str | None:
    """A documented argument as a user would type one: ``[episodes=16]`` -> ``episodes=16``;
    alternatives ``suite=default|families`` -> the first; a ``<run>`` placeholder -> ``x``; an argument
    of ``...`` left out."""
    if token.startswith("["):  # an argument never starts with "[": an optional one does
        token = token[1:]
    if token.endswith("]") and token.count("]") > token.count("["):
        token = token[:-1]
    if "..." in token or token in ("[", "]"):
        return None
    token = re.sub(r"<[^<>]*>", "x", token)
    key, sep, value = token.partition("=")
    if sep and "|" in value and "(" not in value:
        value = value.split("|")[0]
    return f"{key}{sep}{value}"


def documented_commands() -> list[tuple[str, str, list[str]]]:
    """(doc, tool, arguments) of every ``python -m navexp.<tool>`` command in README.md and docs/."""
    found = []
    for doc in DOCS:
        for line in _text(doc).splitlines():
            for m in re.finditer(r"python -m navexp\.(\w+)([^`#\n]*)", line):
                tool, rest = m.group(1), m.group(2)
                args = [a for t in shlex.split(rest) if (a := _clean(t)) is not None]
                if any(a.startswith(HYDRA_FLAGS) for a in args):
                    continue  # Hydra's own flags: nothing of navexp's to check
                if not args and tool in ("evaluate", "play", "export", "sweep_report", "compare"):
                    continue  # the tool named in prose, not a command line
                found.append((doc.name, tool, args))
    return found


COMMANDS = documented_commands()


def test_readme_is_short_and_every_document_is_linked_from_it():
    """README.md stays a door (<= 300 lines) and names every file of docs/."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    for doc in DOCS[1:]:
        assert f"docs/{doc.name}" in readme, doc.name


def test_the_commands_were_found():
    """The extraction sees the documented commands (a regex that matched nothing would pass anything)."""
    tools = {tool for _, tool, _ in COMMANDS}
    assert set(TOOLS) <= tools
    assert sum(tool == "train" for _, tool, _ in COMMANDS) >= 20


@pytest.mark.parametrize(("doc", "args"), [(d, a) for d, t, a in COMMANDS if t == "train"])
def test_documented_train_commands_compose(doc, args):
    """Every `python -m navexp.train ...`: Hydra's parser takes it; without its sweep arguments and the
    hydra/ selections, the app's config composes with it (misspelled keys and groups fail here)."""
    multirun = "-m" in args
    args = [a for a in args if a != "-m"]
    overrides = OverridesParser.create().parse_overrides(args)
    plain = [
        o.input_line
        for o in overrides
        if not o.is_sweep_override() and not o.key_or_group.startswith("hydra")
    ]
    cfg = compose_config(plain)
    assert cfg.env.num_envs >= 1, (doc, args, multirun)


@pytest.mark.parametrize(
    ("doc", "tool", "args"),
    [(d, t, a) for d, t, a in COMMANDS if t not in ("train", "sweep_report", "compare")],
)
def test_documented_tool_commands_parse(doc, tool, args, monkeypatch):
    """Every `python -m navexp.<tool> ...` (evaluate, play, export, bench, bench_dist): the tool's own
    parser accepts each option and override; the overrides compose on the app's config."""
    module = importlib.import_module(f"navexp.{tool}")
    if tool == "export":
        module = importlib.import_module("navexp.deploy.export")
    seen = []

    def parse(argv, *a, **kw):
        seen.append(cli.parse_command_line(argv, *a, **kw))
        raise ParsedOnly

    monkeypatch.setattr(module, "parse_command_line", parse)
    with pytest.raises(ParsedOnly):
        module.main(list(args))
    (parsed,) = seen
    compose_config(parsed.overrides)


@pytest.mark.parametrize("args", [a for _, t, a in COMMANDS if t == "sweep_report"])
def test_documented_sweep_report_commands_parse(args, monkeypatch):
    """`python -m navexp.sweep_report <target> ...` parses with the report's own arguments."""
    from navexp.sweep import report

    def resolve(target, study_name):
        assert target == args[0]
        raise ParsedOnly

    monkeypatch.setattr(report, "_resolve", resolve)
    with pytest.raises(ParsedOnly):
        report.main(list(args))


@pytest.mark.parametrize("args", [a for _, t, a in COMMANDS if t == "compare"])
def test_documented_compare_commands_parse(args, monkeypatch):
    """`python -m navexp.compare DIR ... [by=...] [out=...] [eval=...] [entry=...]` gets past its own
    argument check."""
    from navexp import compare

    def parsed(dirs, by, evaluation="eval.json", entry=None):
        assert dirs and all("=" not in d for d in dirs)
        raise ParsedOnly

    monkeypatch.setattr(compare, "compare", parsed)
    with pytest.raises(ParsedOnly):
        compare.main(list(args))


def _mentions(pattern: str) -> list[tuple[str, str]]:
    return sorted({(doc.name, m.group(0)) for doc in DOCS for m in re.finditer(pattern, doc.read_text())})


@pytest.mark.parametrize(("doc", "path"), _mentions(r"\bnavexp/[\w/]+(?:\.py|/)"))
def test_every_module_path_exists(doc, path):
    """`navexp/task/env.py`, `navexp/task/maps/` ... are files and folders of this tree."""
    assert (ROOT / path).exists(), f"{doc} names {path}, which does not exist"


def _resolve_name(dotted: str) -> object:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


@pytest.mark.parametrize(("doc", "name"), _mentions(r"(?<![\w/.-])navexp(?:\.[A-Za-z_]\w*)+(?=[`(:\s,;])"))
def test_every_python_name_exists(doc, name):
    """`navexp.analysis.plots.redraw_from_npz`, `navexp.deploy.NumpyPolicy` ... import and resolve."""
    if name.removeprefix("navexp.") in TOOLS:
        return  # `python -m navexp.<tool>` (the tools are importable too, checked above)
    try:
        _resolve_name(name)
    except (ImportError, AttributeError) as e:
        pytest.fail(f"{doc} names {name}: {e!r}")


@pytest.mark.parametrize(("doc", "target"), _mentions(r"\]\(((?!https?:|#)[^)#\s]+)"))
def test_every_relative_link_resolves(doc, target):
    """Markdown links between README.md, docs/ and BENCHMARKS.md point at files that exist."""
    base = ROOT if doc == "README.md" else ROOT / "docs"
    link = target.removeprefix("](")
    assert (base / link).exists(), f"{doc} links to {link}"
