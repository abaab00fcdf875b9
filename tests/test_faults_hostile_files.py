"""Hostile scenario and map files (issue 49): an alias bomb, an impossible jitter, 16-bit and garbage PGM
maps. Each is refused in one line naming the file, or read the way ROS map_server reads it.

The loaders are called directly (no env, no episode), except the alias bomb, which runs in a child
process with its address space limited (RLIMIT_AS), so a loader that expands the bomb fails the test
with a MemoryError instead of taking the machine's memory.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _chain(indent: str = "", item: str = "") -> str:
    """The nine anchors of a YAML alias bomb, one a line: ``a`` is 9 strings and each next anchor 9
    aliases of the one before, so ``i`` expands to 9^9 = 387,420,489 strings."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [
        f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]"
        for prev, cur in zip("abcdefgh", "bcdefghi", strict=True)
    ]
    return "".join(f"{indent}{item}{line}\n" for line in lines)


ENTRY = "robot: {x: 0, y: 0}\n    goal: {x: 2, y: 0}\n"
"""The rest of a scenario entry (its robot and goal), at the entry's indentation."""

FLOW_CHAIN = (
    "["
    + ", ".join(
        ['&a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        + [
            f"&{cur} [" + ",".join([f"*{prev}"] * 9) + "]"
            for prev, cur in zip("abcdefgh", "bcdefghi", strict=True)
        ]
    )
    + "]"
)
"""The same nine anchors as one flow list (its last item expands to 9^9 strings)."""


def _bomb_files(tmp_path: Path) -> dict[str, Path]:
    """Five files of 300-500 bytes, each a nine-level bomb where a loader shows or walks a value."""
    texts = {
        "top": _chain(),  # no scenarios key: the message's "got <the file>"
        "name": f"scenarios:\n  - {ENTRY}    jitter:\n{_chain('      ')}    name: *i\n",  # every location
        "obstacles": f"scenarios:\n  - {ENTRY}    obstacles:\n{_chain('      ')}",  # "obstacles=<value>"
        "jitter": f"scenarios:\n  - {ENTRY}    jitter: {FLOW_CHAIN}\n",  # "jitter=<value>"
        "origin": f"image: m.pgm\nresolution: 0.5\norigin:\n{_chain('  ', '- ')}",  # "origin=<value>"
    }
    out = {}
    for key, text in texts.items():
        out[key] = tmp_path / f"{key}.yaml"
        out[key].write_text(text)
    return out


CHILD = textwrap.dedent(
    """
    import resource, sys
    from navexp.task.maps.families import MapSpec
    from navexp.task.maps.scenario_files import load_scenario_file, scenario_entry_names
    from navexp.task.validation import check_scenario_file
    sys.path.insert(0, "tests")
    from conftest import ROOM_SPEC
    limit = 1_500_000_000  # 1.5 GB of address space: torch takes about 0.6 GB, the bomb's text many GB
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    for path in sys.argv[1:]:
        for read in (check_scenario_file, scenario_entry_names,
                     lambda p: load_scenario_file(p, ROOM_SPEC, MapSpec())):
            try:
                read(path)
                print("LOADED", path)
            except ValueError as e:
                print("REFUSED", str(e).replace("\\n", "<NL>"))
    """
)


def test_alias_bombs_are_refused_in_one_line_with_bounded_memory(tmp_path):
    """Five nine-level alias bombs (top level, an entry's name, the entries list, a jitter, a map's
    origin; each 9^9 strings expanded) are each refused by the config check, the entry-name reader and
    the loader with one ValueError line naming the file and the expansion limit, in a process limited
    to 1.5 GB of address space (before: 80-96 s and 3 GB, then a MemoryError traceback)."""
    files = _bomb_files(tmp_path)
    for path in files.values():
        assert len(path.read_bytes()) < 600
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, *map(str, files.values())],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 3 * len(files), proc.stdout  # one line per reader and file: no LOADED, no crash
    for line, path in zip(lines, [p for p in files.values() for _ in range(3)], strict=True):
        assert line.startswith(f"REFUSED {path}: the YAML expands to more than 1000000 values"), line
        assert "<NL>" not in line and len(line) < 300, line


@pytest.mark.parametrize(
    "text, message",
    [
        ("scenarios:\n  - {name: [a, b], robot: {x: 0, y: 0}, goal: {x: 1, y: 1}}\n", "name=['a', 'b'] is "),
        ("scenarios:\n  - {name: " + "n" * 5000 + ", robot: [0, 0]}\n", "robot=[0, 0] is invalid"),
    ],
)
def test_entry_names_and_values_are_cut_in_messages(tmp_path, text, message):
    """An entry whose name is a list is refused naming it; a 5000-character name is cut in the location
    of every message (the line stays under 300 characters)."""
    from conftest import ROOM_SPEC

    from navexp.task.maps.families import MapSpec
    from navexp.task.maps.scenario_files import load_scenario_file

    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as e:
        load_scenario_file(path, ROOM_SPEC, MapSpec())
    assert str(path) in str(e.value) and message in str(e.value), str(e.value)
    assert len(str(e.value)) < 300 + len(str(path)), len(str(e.value))
