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
from dataclasses import replace
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


# -- row 2: a jitter that can never be satisfied ----------------------------------------------------

BOX_WALLS = [
    "{kind: wall, x: 2.0, y: 0.7, half_x: 0.8, half_y: 0.1}",
    "{kind: wall, x: 2.0, y: -0.7, half_x: 0.8, half_y: 0.1}",
    "{kind: wall, x: 1.3, y: 0.0, half_x: 0.1, half_y: 0.8}",
    "{kind: wall, x: 2.7, y: 0.0, half_x: 0.1, half_y: 0.8}",
]
"""Four walls closing a 1.2 m x 1.2 m box (inside x in [1.4, 2.6], y in [-0.6, 0.6]) around the goal
(2, 0); the last one is its right side."""


def _boxed(tmp_path: Path, walls: list[str], cases: int) -> Path:
    """One entry: start (-2, 0) +- 0.5 m in the open room, goal (2, 0) +- 0.2 m inside the box (every goal
    keeps 0.4 m >= 0.35 m from the walls: clear), ``cases`` cases."""
    path = tmp_path / "boxed.yaml"
    path.write_text(
        "scenarios:\n  - name: boxed\n    robot: {x: -2.0, y: 0.0}\n    goal: {x: 2.0, y: 0.0}\n"
        f"    obstacles: [{', '.join(walls)}]\n"
        f"    jitter: {{xy_m: 0.5, goal_xy_m: 0.2, cases: {cases}, seed: 0}}\n"
    )
    return path


def test_a_boxed_in_goal_is_refused_before_any_case_is_drawn(tmp_path, monkeypatch):
    """Goal region inside a closed box, cases=4096: refused in one line naming the file, the entry and
    both regions, before a single case's free path is checked (the spy on the jitter's shortest_paths
    must not run; before: 32 rounds of 4096 path checks, past 5 minutes, silently). The same box with a
    door is not refused: its cases load."""
    from conftest import ROOM_SPEC

    from navexp.task.maps import scenario_jitter
    from navexp.task.maps.families import MapSpec
    from navexp.task.maps.scenario_files import load_scenario_file

    def spy(*args, **kwargs):
        raise AssertionError("a case's free path was checked: impossibility was not decided first")

    monkeypatch.setattr(scenario_jitter, "shortest_paths", spy)
    path = _boxed(tmp_path, BOX_WALLS, 4096)
    with pytest.raises(ValueError) as e:
        load_scenario_file(path, replace(ROOM_SPEC, wall_slots=4), MapSpec())
    msg = str(e.value)
    assert msg.startswith(f"{path} scenario 0 (boxed): jitter can never give a valid case: "), msg
    assert (
        "no goal within goal_xy_m=0.2 m of (2, 0) can be reached from any start within xy_m=0.5 m of " in msg
    )
    assert "before drawing any of the cases=4096" in msg and "\n" not in msg

    # The box without its right wall (a 1.2 m door on the far side) passes the check and its 4 cases
    # load, each path longer than its straight line by over 1 m (around the box).
    monkeypatch.undo()
    lay = load_scenario_file(_boxed(tmp_path, BOX_WALLS[:3], 4), replace(ROOM_SPEC, wall_slots=4), MapSpec())
    assert lay.num_worlds == 4
    straight = (lay.robot_xy - lay.goal_xy).norm(dim=1)
    assert bool((lay.shortest_path_m > straight + 1.0).all()), (lay.shortest_path_m, straight)


def test_a_long_jitter_draw_prints_its_progress(tmp_path, monkeypatch, capsys):
    """A draw past ``PROGRESS_AFTER_S`` (set to -1 here: from the first round) prints one line a round:
    a start region with no clear point (the start 0.25 m from a wall, xy_m=0.01) finds 0 of 4 cases in
    each of the 32 rounds, so 32 progress lines come before the error."""
    from conftest import ROOM_SPEC

    from navexp.task.maps import scenario_jitter
    from navexp.task.maps.families import MapSpec
    from navexp.task.maps.scenario_files import load_scenario_file

    monkeypatch.setattr(scenario_jitter, "PROGRESS_AFTER_S", -1.0)
    path = tmp_path / "tight.yaml"
    path.write_text(
        "scenarios:\n  - name: tight\n    robot: {x: -3.75, y: 0.0}\n    goal: {x: 2.0, y: 0.0}\n"
        "    jitter: {xy_m: 0.01, cases: 4}\n"
    )
    with pytest.raises(ValueError, match="jitter found 0 of cases=4 valid cases in 128 draws"):
        load_scenario_file(path, ROOM_SPEC, MapSpec())
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "jitter:" in ln]
    assert len(lines) == 32, lines
    assert lines[0].startswith(
        f"[navexp] {path} scenario 0 (tight): jitter: 0 of cases=4 valid cases after round 1 of 32"
    )


# -- rows 12 and 13: 16-bit and garbage PGM maps ----------------------------------------------------

MAP_KEYS = (
    "image: m.pgm\nresolution: 0.5\norigin: [0.0, 0.0, 0.0]\noccupied_thresh: 0.65\nfree_thresh: 0.196\n"
)
"""A map of 0.5 m pixels at the origin with map_saver's thresholds."""


def _pgm_map(tmp_path: Path, pgm: bytes) -> Path:
    """``m.yaml`` (``MAP_KEYS``, 4 sampled pairs) beside the raw PGM bytes ``m.pgm``."""
    (tmp_path / "m.pgm").write_bytes(pgm)
    path = tmp_path / "m.yaml"
    path.write_text(MAP_KEYS + "num_pairs: 4\n")
    return path


def test_a_16_bit_pgm_is_read_at_its_own_depth(tmp_path):
    """A 2 x 2 PGM of maxval 65535 (big-endian 16-bit values): 65279 is p = 256 / 65535 = 0.0039 (free,
    below free_thresh 0.196), 52685 is p = 12850 / 65535 = 0.19608 (unknown: between 0.196 and 0.65),
    0 is p = 1 (occupied), 26214 is p = 39321 / 65535 = 0.6 (unknown). Blocked: all but the free pixel;
    occupied: only 0. (Before: clamped to 8 bits, every value above 255 read 255, free: 52685 and 26214
    read as free space.)"""
    import numpy as np
    import yaml

    from navexp.task.maps.ros_map import read_blocked, read_map_header, read_occupancy

    values = np.array([[65279, 52685], [0, 26214]], dtype=">u2")  # row 0 is the top of the image
    path = _pgm_map(tmp_path, b"P5\n2 2\n65535\n" + values.tobytes())
    header = read_map_header(path, yaml.safe_load(path.read_text()))
    # Rows flip: row 0 of the grid is the lowest y, the image's bottom row (0, 26214).
    assert read_blocked(path, header).tolist() == [[True, True], [False, True]]
    assert read_occupancy(path, header).tolist() == [[True, False], [False, False]]


def test_a_pgm_with_a_garbage_header_fails_naming_the_file(tmp_path):
    """``P5 abc def``: the entry-name reader and the loader each fail in one ValueError line naming the map
    YAML and its image (before: "invalid literal for int() with base 10: b'abc'", naming no file)."""
    from conftest import ROOM_SPEC

    from navexp.task.maps.families import MapSpec
    from navexp.task.maps.scenario_files import load_scenario_file, scenario_entry_names

    path = _pgm_map(tmp_path, b"P5 abc def\n255\n" + bytes(4))
    for read in (lambda: scenario_entry_names(path), lambda: load_scenario_file(path, ROOM_SPEC, MapSpec())):
        with pytest.raises(ValueError) as e:
            read()
        msg = str(e.value)
        assert msg.startswith(f"{path}: image 'm.pgm' is not a readable PGM/PNG image ("), msg
        assert "\n" not in msg
