"""Faults in scenario files and ROS maps: unknown map cells and the room beyond a map are no free space,
a malformed entry or an unknown key fails in one line naming the file and the entry, and a start within
the goal radius is refused (a fixed entry) or redrawn (sampled and jittered cases).

Every test reads the loaders directly (no env, no episode); maps are a few pixels of 0.5 m.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from conftest import ROOM_SPEC
from PIL import Image

from navexp.sim.layout import obstacle_distance
from navexp.task.maps.families import MapSpec
from navexp.task.maps.ros_map import read_blocked, read_map_header, read_occupancy
from navexp.task.maps.scenario_files import load_scenario_file, scenario_entry_names

SPEC = replace(ROOM_SPEC, wall_slots=8)
"""The default 8 m x 8 m room, robot radius 0.2 m, spawn clearance 0.15 m (draws keep 0.35 m), 8 wall
slots."""

FREE, UNKNOWN, OCCUPIED = 254, 205, 0
"""Pixel values of map_saver's trinary maps: p = (255 - v) / 255 = 0.004 (free, below free_thresh 0.196),
0.19608 (unknown: between free_thresh 0.196 and occupied_thresh 0.65) and 1.0 (occupied)."""


def _map(tmp_path: Path, px: np.ndarray, extra: str, keys: str | None = None) -> Path:
    """A map of 0.5 m pixels with origin (0, 0): ``px`` row 0 is the top of the image (the highest y)."""
    Image.fromarray(px.astype(np.uint8)).save(tmp_path / "m.pgm")
    base = (
        "image: m.pgm\nresolution: 0.5\norigin: [0.0, 0.0, 0.0]\noccupied_thresh: 0.65\nfree_thresh: 0.196\n"
    )
    path = tmp_path / "m.yaml"
    path.write_text((base if keys is None else keys) + extra)
    return path


def _scenario(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def _fails(path: Path, message: str, **kw) -> None:
    """Loading fails with a ValueError naming the file and containing ``message``; so does reading the
    entry names (what evaluation suites and the rollout read first)."""
    for read in (lambda: load_scenario_file(path, SPEC, MapSpec(), **kw), lambda: scenario_entry_names(path)):
        with pytest.raises(ValueError) as e:
            read()
        assert str(path) in str(e.value) and message in str(e.value), str(e.value)
        assert "\n" not in str(e.value)


# -- 1. unknown cells and the room beyond the map are blocked ---------------------------------------


def test_unknown_pixels_are_blocked_and_sampled_pairs_land_in_the_free_square(tmp_path):
    """An 8 x 8 pixel map (4 m x 4 m) in a 4 m room, all unknown (205) but a free 4 x 4 pixel square
    (rows and columns 2-5): 0 occupied, 64 - 16 = 48 blocked cells. Centred, the square is x, y in
    [-1, 1]; with 0.35 m clearance every sampled start and goal lies in [-0.65, 0.65] (before: 11 of 16
    starts and 10 of 16 goals in unknown space, outside the square)."""
    px = np.full((8, 8), UNKNOWN)
    px[2:6, 2:6] = FREE
    path = _map(tmp_path, px, "num_pairs: 16\npairs_seed: 3\n")
    spec = replace(SPEC, half_x=2.0, half_y=2.0, min_start_goal_dist_m=0.5)
    lay = load_scenario_file(path, spec, MapSpec())
    assert lay.num_worlds == 16
    for xy in (lay.robot_xy, lay.goal_xy):
        assert float(xy.abs().max()) <= 0.65 + 1e-6
    header = read_map_header(path, yaml.safe_load(path.read_text()))
    assert int(read_occupancy(path, header).sum()) == 0 and int(read_blocked(path, header).sum()) == 48


def test_a_map_without_free_thresh_reads_unknown_grey_as_blocked(tmp_path):
    """free_thresh left out: the default 0.196 (map_saver's) holds, so 205 (p = 0.19608) is blocked,
    254 free: 1 free pixel of 4."""
    keys = "image: m.pgm\nresolution: 0.5\norigin: [0.0, 0.0, 0.0]\n"
    path = _map(tmp_path, np.array([[FREE, UNKNOWN], [UNKNOWN, UNKNOWN]]), "num_pairs: 1\n", keys)
    header = read_map_header(path, yaml.safe_load(path.read_text()))
    assert header.free_thresh == 0.196
    assert read_blocked(path, header).tolist() == [[True, True], [False, True]]  # row 0 = lowest y


def test_the_room_beyond_a_map_is_walled_off_so_a_split_map_has_no_path_around(tmp_path):
    """A free 8 x 8 pixel map (4 m x 4 m) with a full-height wall in column 4 (map x 2.0-2.5), centred in
    the 8 m room: map (x, y) -> world (x - 2, y - 2). Walls: the column, x in [0, 0.5], y in [-2, 2]
    (centre (0.25, 0), half (0.25, 2)); left/right strips x in [-4, -2] and [2, 4] over the room's
    height (centres (-+3, 0), half (1, 4)); bottom/top strips y in [-4, -2] and [2, 4] over the map's
    width (centres (0, -+3), half (2, 1)). Start (1, 2) and goal (3.5, 2) lie on either side of the
    wall: no path (before: a finite path round the map's edge)."""
    px = np.full((8, 8), FREE)
    px[:, 4] = OCCUPIED
    path = _map(tmp_path, px, "starts_goals:\n  - {robot: {x: 1.0, y: 2.0}, goal: {x: 3.5, y: 2.0}}\n")
    lay = load_scenario_file(path, SPEC, MapSpec())
    walls = sorted(
        (*c.tolist(), *h.tolist())
        for c, h, on in zip(lay.wall_xy[0], lay.wall_half[0], lay.wall_active[0], strict=True)
        if on
    )
    assert walls == [
        (-3.0, 0.0, 1.0, 4.0),
        (0.0, -3.0, 2.0, 1.0),
        (0.0, 3.0, 2.0, 1.0),
        (0.25, 0.0, 0.25, 2.0),
        (3.0, 0.0, 1.0, 4.0),
    ]
    assert lay.shortest_path_m[0] == float("inf")
    with pytest.raises(ValueError, match="merge into 1 rectangles and the room beyond the map takes 4 more"):
        load_scenario_file(path, replace(SPEC, wall_slots=4), MapSpec())


def test_a_pair_outside_the_map_is_refused_naming_the_pair_and_the_extent(tmp_path):
    """Robot x = -1.5 in a free map covering x, y in [0, 4] (map frame): refused naming starts_goals[0]
    and the extent (before: accepted, the robot placed in the room beyond the map)."""
    path = _map(
        tmp_path,
        np.full((8, 8), FREE),
        "starts_goals:\n  - {robot: {x: -1.5, y: 2.0}, goal: {x: 3.5, y: 2.0}}\n",
    )
    with pytest.raises(ValueError) as e:
        load_scenario_file(path, SPEC, MapSpec())
    assert (
        f"{path} starts_goals[0]: the robot (-1.5, 2.0) is outside the map, which covers x in [0, 4], "
        "y in [0, 4] (map frame)" in str(e.value)
    )


# -- 2. malformed entries and 3. unknown keys ------------------------------------------------------

ENTRY = "  - name: a\n    robot: {x: -3.0, y: 0.0, yaw_deg: 0.0}\n    goal: {x: 3.0, y: 0.0}\n"
"""A valid entry; the cases below append to it or replace it."""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected a top-level 'scenarios:' list with at least one entry"),
        ("scenarios:\n", "expected a top-level 'scenarios:' list"),
        ("foo: 1\n", "expected a top-level 'scenarios:' list"),
        ("scenarios: [foo]\n", "scenario 0: entry='foo' is invalid; entry must be a mapping {name, robot:"),
        (
            "scenarios:\n" + ENTRY + "    obstacles: [foo]\n",
            "scenario 0 (a) obstacle 0: obstacle='foo' is invalid",
        ),
        (
            "scenarios:\n" + ENTRY + "    obstacles: {kind: box}\n",
            "scenario 0 (a): obstacles={'kind': 'box'} is invalid; obstacles must be a list of mappings",
        ),
        (
            "scenarios:\n  - {name: a, robot: 5, goal: {x: 3.0, y: 0.0}}\n",
            "scenario 0 (a): robot=5 is invalid; robot must be a mapping {x, y, yaw_deg}",
        ),
    ],
)
def test_a_malformed_scenario_file_fails_in_one_line_naming_the_entry_and_the_shape(tmp_path, text, message):
    """An empty file, a null or missing ``scenarios``, a string entry, a string obstacle, an obstacles
    mapping and a number for robot (before: TypeError, KeyError or AttributeError tracebacks)."""
    _fails(_scenario(tmp_path, text), message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            ENTRY + "    obstacle:\n      - {kind: wall, x: 0.0, y: 0.0, half_x: 0.1, half_y: 4.0}\n",
            "scenario 0 (a): entry key(s) ['obstacle'] unknown; allowed: "
            "['goal', 'jitter', 'name', 'obstacles', 'robot']",
        ),
        (
            ENTRY.replace("yaw_deg: 0.0", "yaw: 90"),
            "scenario 0 (a): robot key(s) ['yaw'] unknown; allowed: ['x', 'y', 'yaw_deg']",
        ),
        (
            ENTRY + "    obstacles:\n      - {kind: cylinder, x: 0.0, y: 2.0, radius: 0.3, yaw_deg: 5}\n",
            "scenario 0 (a) obstacle 0: cylinder key(s) ['yaw_deg'] unknown; "
            "allowed: ['kind', 'radius', 'x', 'y']",
        ),
        (ENTRY + "extra: 1\n", "top-level key(s) ['extra'] unknown; allowed: ['scenarios']"),
    ],
)
def test_an_unknown_scenario_key_is_refused_listing_the_allowed_keys(tmp_path, text, message):
    """``obstacle:`` (a typo that dropped a full-height wall), ``yaw`` (dropped: the key is yaw_deg), a
    cylinder's yaw_deg and a top-level key beside ``scenarios`` each fail naming the key and the choices."""
    _fails(_scenario(tmp_path, "scenarios:\n" + text), message)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("starts_goals: [foo]\n", "starts_goals[0]: pair='foo' is invalid; pair must be a mapping {robot:"),
        (
            "starts_goals: [{robot: [0.5, 0.5], goal: {x: 3.5, y: 3.5}}]\n",
            "starts_goals[0]: robot=[0.5, 0.5] is invalid; robot must be a mapping {x, y, yaw_deg}",
        ),
        (
            "starts_goals: [{robot: 5, goal: {x: 3.5, y: 3.5}}]\n",
            "starts_goals[0]: robot=5 is invalid; robot must be a mapping {x, y, yaw_deg}",
        ),
        (
            "starts_goals: [{robot: {x: 0.5, y: 0.5, yaw: 1}, goal: {x: 3.5, y: 3.5}}]\n",
            "starts_goals[0]: robot key(s) ['yaw'] unknown; allowed: ['x', 'y', 'yaw_deg']",
        ),
        (
            "start_goals: [{robot: {x: 0.5, y: 0.5}, goal: {x: 3.5, y: 3.5}}]\nnum_pairs: 2\n",
            "map key(s) ['start_goals'] unknown; allowed: [",
        ),
        ("num_pairs: 2\nmode: raw\n", "mode='raw' is invalid; mode must be trinary | scale"),
    ],
)
def test_a_malformed_map_pair_or_unknown_map_key_fails_naming_it(tmp_path, extra, message):
    """A string pair, a list or a number for robot (before: AttributeError), a robot ``yaw``, the typo
    ``start_goals`` (before: silently num_pairs sampled pairs) and mode raw (occupancy read as given,
    not supported)."""
    _fails(_map(tmp_path, np.full((8, 8), FREE), extra), message)


def test_a_ros2_map_with_mode_trinary_loads(tmp_path):
    """``mode: trinary`` (nav2's map_saver writes it) is a known key: 1 sampled pair loads."""
    path = _map(tmp_path, np.full((8, 8), FREE), "num_pairs: 1\nmode: trinary\n")
    assert load_scenario_file(path, SPEC, MapSpec()).num_worlds == 1


# -- 4. a start within the goal radius -------------------------------------------------------------


@pytest.mark.parametrize(("goal_x", "shown"), [(-3.0, "0.000"), (-2.9, "0.100"), (-2.7, "0.300")])
def test_a_fixed_start_within_the_goal_radius_is_refused_naming_the_distance(tmp_path, goal_x, shown):
    """Robot (-3, 0), goal 0, 0.1 and 0.3 m away: within goal_radius_m 0.3 (success is a centre distance
    below it; 0.3 itself is refused too), refused naming the entry and the distance (before: loaded, and
    robot == goal scored success_rate 1.0)."""
    path = _scenario(tmp_path, "scenarios:\n" + ENTRY.replace("x: 3.0", f"x: {goal_x}"))
    with pytest.raises(ValueError) as e:
        load_scenario_file(path, SPEC, MapSpec())  # the default radius, 0.3 m
    msg = str(e.value)
    assert (
        f"{path} scenario 0 (a): the robot starts {shown} m from the goal, within goal_radius_m=0.3 m" in msg
    )


def test_a_fixed_start_just_outside_the_goal_radius_loads(tmp_path):
    """Goal 0.31 m from the start with goal_radius_m 0.3 loads; with goal_radius_m 0.5 it is refused:
    the check reads the radius it is given (the env's goal_radius_m)."""
    path = _scenario(tmp_path, "scenarios:\n" + ENTRY.replace("x: 3.0", "x: -2.69"))
    assert load_scenario_file(path, SPEC, MapSpec(), goal_radius_m=0.3).num_worlds == 1
    with pytest.raises(ValueError, match="0.310 m from the goal, within goal_radius_m=0.5 m"):
        load_scenario_file(path, SPEC, MapSpec(), goal_radius_m=0.5)


def test_a_listed_map_pair_within_the_goal_radius_is_refused(tmp_path):
    """A map pair with robot (1, 1) and goal (1.2, 1): 0.2 m apart, refused naming starts_goals[0]."""
    path = _map(
        tmp_path, np.full((8, 8), FREE), "starts_goals: [{robot: {x: 1.0, y: 1.0}, goal: {x: 1.2, y: 1.0}}]\n"
    )
    with pytest.raises(ValueError, match=r"starts_goals\[0\]: the robot starts 0.200 m from the goal"):
        load_scenario_file(path, SPEC, MapSpec())


def test_jittered_cases_within_the_goal_radius_are_redrawn(tmp_path):
    """Robot (0, 0), goal (0.1, 0), starts within +-0.5 m in x and y, 64 cases, seed 0: every case starts
    more than 0.3 m from its goal (before: 18 of 64 started within it, each a success at once), all in
    the start square and clear of the room's walls."""
    text = (
        "scenarios:\n  - name: near\n    robot: {x: 0.0, y: 0.0}\n    goal: {x: 0.1, y: 0.0}\n"
        "    jitter: {xy_m: 0.5, cases: 64, seed: 0}\n"
    )
    lay = load_scenario_file(_scenario(tmp_path, text), SPEC, MapSpec())  # the default radius, 0.3 m
    assert lay.num_worlds == 64 and len({tuple(s.tolist()) for s in lay.robot_xy}) == 64
    assert float((lay.robot_xy - lay.goal_xy).norm(dim=1).min()) > 0.3
    assert float(lay.robot_xy.abs().max()) <= 0.5 and torch.isfinite(lay.shortest_path_m).all()


def test_jitter_that_cannot_leave_the_goal_radius_fails_with_the_count(tmp_path):
    """Robot at the goal, starts within +-0.1 m: every start is at most sqrt(2) * 0.1 = 0.141 m from the
    goal, within 0.3, so 0 of 32 rounds x 4 draws = 128 are kept: the jitter error names the count."""
    text = (
        "scenarios:\n  - name: at_goal\n    robot: {x: 0.0, y: 0.0}\n    goal: {x: 0.0, y: 0.0}\n"
        "    jitter: {xy_m: 0.1, cases: 4}\n"
    )
    path = _scenario(tmp_path, text)
    with pytest.raises(ValueError) as e:
        load_scenario_file(path, SPEC, MapSpec(), goal_radius_m=0.3)
    assert "jitter found 0 of cases=4 valid cases in 128 draws: 128 starts and 128 goals" in str(e.value)
    assert "128 draws both, 0 of those started more than goal_radius_m=0.3 m from the goal" in str(e.value)


def test_sampled_map_pairs_start_outside_the_goal_radius(tmp_path):
    """min_start_goal_dist_m 0 on a free 4 m map in a 4 m room (candidates in [-1.65, 1.65]): all 32
    sampled pairs still start more than goal_radius_m 1.0 from their goal, clear of every wall."""
    path = _map(tmp_path, np.full((8, 8), FREE), "num_pairs: 32\n")
    spec = replace(SPEC, half_x=2.0, half_y=2.0, min_start_goal_dist_m=0.0)
    lay = load_scenario_file(path, spec, MapSpec(), goal_radius_m=1.0)
    assert float((lay.robot_xy - lay.goal_xy).norm(dim=1).min()) > 1.0
    d = obstacle_distance(torch.stack((lay.robot_xy, lay.goal_xy), 1), lay, 2.0, 2.0)
    assert float(d.min()) >= 0.35 - 1e-5
