"""README.md, docs/, BENCHMARKS.md and the experiment log docs/experiments/ stay true: every command they
show composes or parses as the tool would take it, every module path and Python name they mention exists,
every relative link resolves, and every anchor of a link between them names a heading."""

from __future__ import annotations

import importlib
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser

from navexp import compose_config
from navexp.config import cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
"""The user's pages: README.md and docs/*.md, each linked from the README."""
BENCHMARKS = ROOT / "BENCHMARKS.md"
LOG = ROOT / "docs" / "experiments"
PAGES = [*DOCS, BENCHMARKS, *sorted(LOG.glob("*.md"))]
"""Every page checked: the user's pages, the measured figures and the experiment log behind them."""
TOOLS = ("train", "evaluate", "play", "export", "bench", "bench_dist", "sweep_report", "compare")
HYDRA_FLAGS = ("--help", "--hydra-help", "--cfg", "-sc", "--info")


class ParsedOnly(Exception):
    """Raised by the patched parser: the command line parsed, nothing else needs to run."""


def _name(doc: Path) -> str:
    return doc.relative_to(ROOT).as_posix()  # docs/experiments/README.md, not README.md


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


def _first_of_each(found: list[tuple]) -> list[tuple]:
    """Each command once, under the first page that shows it (BENCHMARKS.md repeats some of the log's)."""
    seen, unique = set(), []
    for doc, *command in found:
        if repr(command) not in seen:
            seen.add(repr(command))
            unique.append((doc, *command))
    return unique


def documented_commands() -> list[tuple[str, str, list[str]]]:
    """(doc, tool, arguments) of every ``python -m navexp.<tool>`` command of the checked pages."""
    found = []
    for doc in PAGES:
        for line in _text(doc).splitlines():
            for m in re.finditer(r"python -m navexp\.(\w+)([^`#\n]*)", line):
                tool, rest = m.group(1), m.group(2)
                args = [a for t in shlex.split(rest) if (a := _clean(t)) is not None]
                if any(a.startswith(HYDRA_FLAGS) for a in args):
                    continue  # Hydra's own flags: nothing of navexp's to check
                if not args and tool in ("evaluate", "play", "export", "sweep_report", "compare"):
                    continue  # the tool named in prose, not a command line
                found.append((_name(doc), tool, args))
    return _first_of_each(found)


COMMANDS = documented_commands()


def _recipe_overrides(recipe: str) -> list[str]:
    """One word of RECIPES split as scripts/learning_seeds.sh splits it: at the commas outside [...],
    {...} and (...)."""
    words, word, depth = [], "", 0
    for c in recipe:
        depth += (c in "[{(") - (c in "]})")
        if c == "," and depth == 0:
            words.append(word)
            word = ""
        else:
            word += c
    return [*words, word]


SCRIPT = re.compile(r'((?:\b[A-Z_]+=(?:"[^"]*"|\S+)\s+)*)bash scripts/learning_seeds\.sh([^`#\n]*)')
"""``[VAR=value ...] bash scripts/learning_seeds.sh ARGS``: the environment words, then the arguments."""


def learning_seeds_commands() -> list[tuple[str, list[str]]]:
    """(doc, overrides of one training) for every recipe of every ``[RECIPES=...] bash
    scripts/learning_seeds.sh OUT_DIR [overrides]`` of the checked pages, in the script's order:
    ``eval.suite=<FINAL_SUITE>`` (families by default), the overrides after OUT_DIR, the recipe's,
    ``seed=``."""
    found = []
    for doc in PAGES:
        for line in _text(doc).splitlines():
            for m in SCRIPT.finditer(line):
                env = dict(a.split("=", 1) for a in shlex.split(m.group(1)))
                rest = re.sub(r"\[[A-Za-z][^]=,]* [^]=,]*\]", "", m.group(2))  # "[training overrides]"
                args = [a for t in shlex.split(rest) if (a := _clean(t)) is not None]
                if not args:
                    continue  # the script named in prose
                for recipe in env.get("RECIPES", "ppo.model=mlp ppo.model=rnn").split():
                    seed = env.get("SEEDS", "1").split()[0]
                    suite = f"eval.suite={env.get('FINAL_SUITE', 'families')}"
                    overrides = [suite, *args[1:], *_recipe_overrides(recipe), f"seed={seed}"]
                    found.append((_name(doc), overrides))
    return _first_of_each(found)


SCRIPT_RUNS = learning_seeds_commands()


def test_readme_is_short_and_every_document_is_linked_from_it():
    """README.md stays a door (<= 300 lines) and names every file of docs/ and the experiment log's
    index."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    for doc in DOCS[1:]:
        assert f"docs/{doc.name}" in readme, doc.name
    assert "](docs/experiments/README.md)" in readme


def test_benchmarks_is_a_short_reference_and_points_at_the_log():
    """BENCHMARKS.md holds today's figures (<= 250 lines) and links the experiment log's index."""
    text = BENCHMARKS.read_text()
    assert len(text.splitlines()) <= 250
    assert "](docs/experiments/README.md)" in text


def test_every_log_entry_is_linked_from_the_index_and_back():
    """docs/experiments/README.md links every file of docs/experiments/, and each links back to it."""
    index = (LOG / "README.md").read_text()
    entries = sorted(p for p in LOG.glob("*.md") if p.name != "README.md")
    assert entries
    for entry in entries:
        assert f"]({entry.name})" in index or f"]({entry.name}#" in index, entry.name
        assert "[Back to the index](README.md)" in entry.read_text(), entry.name


def test_the_commands_were_found():
    """The extraction sees the documented commands (a regex that matched nothing would pass anything)."""
    tools = {tool for _, tool, _ in COMMANDS}
    assert set(TOOLS) <= tools
    assert sum(tool == "train" for _, tool, _ in COMMANDS) >= 20
    pages = {doc for doc, _, _ in COMMANDS} | {doc for doc, _ in SCRIPT_RUNS}
    assert {"BENCHMARKS.md", "docs/experiments/2026-12-07-trap-recipe-10-seeds.md"} <= pages
    assert len(SCRIPT_RUNS) >= 30


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


def _placeholder_resume(args: list[str]) -> bool:
    return any(a.startswith("resume=") for a in args)  # outputs/navexp/<run>: no such run here


@pytest.mark.parametrize(
    ("doc", "args"), [(d, a) for d, t, a in COMMANDS if t == "train" and not _placeholder_resume(a)]
)
def test_documented_train_commands_pass_the_apps_front_door(doc, args, monkeypatch, capsys):
    """Every `python -m navexp.train ...` as typed goes through the app's own command line (old names
    translated, every key and group option checked, size=auto resolved): a single run then composes
    through Hydra's main with `--cfg job` (the config it would train), a sweep's command line passes
    the same checks."""
    from navexp import train

    if "-m" in args:
        assert train.app_argv(["navexp-train", *args])[1 : 1 + len(args)]  # raises SystemExit on a bad one
        return
    monkeypatch.setattr(sys, "argv", ["navexp-train", *args, "--cfg", "job"])
    train.cli()
    job = yaml.safe_load(capsys.readouterr().out)
    assert job["env"]["num_envs"] >= 1 and job["size"] in ("cpu", "gpu", "tiny", "none"), (doc, args)


@pytest.mark.parametrize(("doc", "overrides"), SCRIPT_RUNS)
def test_documented_learning_seeds_commands_compose(doc, overrides):
    """Every `RECIPES="..." bash scripts/learning_seeds.sh OUT_DIR [overrides]`: each recipe's training,
    as the script composes it (its overrides, the recipe's, a seed), composes on the app's config."""
    cfg = compose_config(overrides)
    assert cfg.env.num_envs >= 1, (doc, overrides)


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
    return sorted({(_name(doc), m.group(0)) for doc in PAGES for m in re.finditer(pattern, doc.read_text())})


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
    """Markdown links between README.md, docs/, BENCHMARKS.md and docs/experiments/ point at files that
    exist."""
    link = target.removeprefix("](")
    assert ((ROOT / doc).parent / link).exists(), f"{doc} links to {link}"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation removed (word characters, hyphens and spaces
    kept), each space a hyphen: "The run's policy (`recipe=traps`)" -> "the-runs-policy-recipetraps"."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    """The anchors of a page's headings; a repeated heading's get -1, -2 ... as on GitHub."""
    found: set[str] = set()
    for line in doc.read_text().splitlines():
        if m := re.match(r"#{1,6} +(.+?)\s*$", line):
            base = anchor = _slug(m.group(1))
            n = 0
            while anchor in found:
                n += 1
                anchor = f"{base}-{n}"
            found.add(anchor)
    return found


def test_anchors_follow_githubs_rules(tmp_path):
    """Lowercase, punctuation dropped, spaces to hyphens, a repeated heading numbered: "In Weights &
    Biases" -> "in-weights--biases" (the "&" goes, its two spaces stay)."""
    page = tmp_path / "page.md"
    page.write_text("# In Weights & Biases\n## The run's policy (`recipe=traps`), CPU\n## Notes\n## Notes\n")
    assert _anchors(page) == {"in-weights--biases", "the-runs-policy-recipetraps-cpu", "notes", "notes-1"}


@pytest.mark.parametrize(("doc", "link"), _mentions(r"\]\(((?!https?:)[^)#\s]*\.md)?#[^)\s]+\)"))
def test_every_link_anchor_names_a_heading(doc, link):
    """A link with an anchor (`BENCHMARKS.md#the-trap-recipe-...`, `#size-presets`) names a heading of
    the page it points at, by GitHub's anchor rules."""
    target, _, anchor = link.removeprefix("](").removesuffix(")").partition("#")
    page = (ROOT / doc).parent / target if target else ROOT / doc
    assert anchor in _anchors(page), f"{doc} links to {target or doc}#{anchor}, which has no such heading"
