"""The rooms map family (floor plans, issue 51): its geometry by hand, solvable plans, determinism,
rings and chains, and the held-out suite=floorplans.

The default room is 8 m x 8 m (half 4 m), the robot radius 0.2 m, spawn clearance 0.15 m.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from navexp import compose_config
from navexp.config.validation import validate_env_cfg
from navexp.task.maps import MapSpec, generate_layouts
from navexp.task.maps.families.rooms import RoomsCfg, room_grids
from navexp.task.maps.grid_path import path_distance, paths_and_fields, shortest_paths
from navexp.task.maps.random_family import LayoutSpec
from navexp.task.maps.random_source import StreamSource

SPEC = LayoutSpec.from_env_cfg(compose_config(["env=families"]).env)
"""8 m room, 14 cylinder slots, 4 box slots, 16 wall slots."""
BARE = {"furniture_boxes": [0, 0], "furniture_cylinders": [0, 0]}


def _pieces(lay, k: int) -> list[tuple[float, float, float, float]]:
    """Active wall pieces of layout k as (x0, x1, y0, y1). A piece runs along its longer side: each is
    at least 2 t + 0.15 m long (its wall's end, t past the crossing wall, to a door 0.15 m beyond)."""
    out = []
    for (x, y), (hx, hy), on in zip(lay.wall_xy[k], lay.wall_half[k], lay.wall_active[k], strict=True):
        if on:
            out.append((float(x - hx), float(x + hx), float(y - hy), float(y + hy)))
    return out


@pytest.mark.parametrize("cell", [0.1, 0.2])
def test_a_two_room_plan_has_one_0_9_m_door_and_the_way_through_it_has_the_hand_computed_length(cell):
    """rooms=[2, 2], doors 0.9 m, walls 0.2 m thick (t = 0.1), no furniture: one shared wall in two
    pieces along the whole 8 m side (+ t past each end), 0.9 m apart: 8 + 0.2 - 0.9 = 7.3 m of wall.

    Start and goal 1.5 m from the wall's faces and 1.0 m beside the door's jamb (on its side away
    from the door), mirrored across the wall: the way for a disc of r = 0.2 hugs the jamb's two
    corners c1, c2 (2 t apart): tangent sqrt(D^2 - r^2) with D = hypot(1.5, 1.0) = 1.8028 -> 1.7916,
    an arc r (atan2(1.0, 1.5) + asin(r / D)) = 0.2 (0.5880 + 0.1112) = 0.1398, twice, plus 2 t across
    the jamb: 2 (1.7916 + 0.1398) + 0.2 = 4.063 m; the straight line (3.2 m) crosses the wall. The grid
    reads it within a cell plus 2.7 %."""
    maps = MapSpec(check_path=True).with_cfg(rooms={"rooms": [2, 2], "door_m": [0.9, 0.9], **BARE})
    maps = maps.with_cfg(wall_thickness_scale=[1.0, 1.0])
    lay, ok = generate_layouts(maps, SPEC, "rooms", torch.arange(8))
    k = int(ok.nonzero()[0])
    pieces = _pieces(lay, k)
    assert len(pieces) == 2
    vertical = pieces[0][1] - pieces[0][0] == pytest.approx(0.2, abs=1e-5)
    if not vertical:  # work in the frame where the wall runs along y
        pieces = [(y0, y1, x0, x1) for x0, x1, y0, y1 in pieces]
    (lo, hi) = sorted((p[2], p[3]) for p in pieces)
    assert hi[0] - lo[1] == pytest.approx(0.9, abs=1e-5)  # the door
    assert (lo[1] - lo[0]) + (hi[1] - hi[0]) == pytest.approx(7.3, abs=1e-5)
    wall_x, jamb = (pieces[0][0] + pieces[0][1]) / 2, lo[1]
    sign = 1.0
    if jamb - 1.0 < -3.5:  # no room below the lower jamb: pass the upper one from above
        jamb, sign = hi[0], -1.0
    start = (wall_x - 1.6, jamb - sign * 1.0)
    goal = (wall_x + 1.6, jamb - sign * 1.0)
    if not vertical:
        start, goal = start[::-1], goal[::-1]
    one = lay.index(torch.tensor([k]))
    one.robot_xy, one.goal_xy = torch.tensor([start]), torch.tensor([goal])
    d = math.hypot(1.5, 1.0)
    hand = 2 * (math.sqrt(d * d - 0.04) + 0.2 * (math.atan2(1.0, 1.5) + math.asin(0.2 / d))) + 0.2
    assert hand == pytest.approx(4.063, abs=1e-3)
    # The grid's documented accuracy: a cell plus at most 2.7 % (navexp/task/maps/grid_path.py).
    assert shortest_paths(one, 4, 4, 0.2, cell).item() == pytest.approx(hand, abs=cell + 0.027 * hand)


def _rooms_of(lay, k: int, points: torch.Tensor) -> list[int]:
    """Index of the room (the region between walls) of each point: its cell among the walls' lines."""
    xs = sorted({round((p[0] + p[1]) / 2, 4) for p in _pieces(lay, k) if p[1] - p[0] < p[3] - p[2]})
    ys = sorted({round((p[2] + p[3]) / 2, 4) for p in _pieces(lay, k) if p[3] - p[2] < p[1] - p[0]})
    return [sum(float(x) > v for v in xs) + 10 * sum(float(y) > v for v in ys) for x, y in points.tolist()]


def test_every_sampled_plan_is_solvable_with_every_room_reachable_and_a_detour():
    """96 seeds of the default rooms (2-6 rooms, furniture): most draws are valid (>= 50 %); in every
    valid plan start and goal lie in different rooms, the shortest path for the robot's radius is finite
    and at least 1.5 x the straight line, and every room has a free cell the goal can be reached from
    (the doors join all rooms)."""
    maps = MapSpec(check_path=True)
    lay, ok = generate_layouts(maps, SPEC, "rooms", torch.arange(96))
    assert ok.float().mean() >= 0.5
    lay = lay.index(ok)
    straight = (lay.robot_xy - lay.goal_xy).norm(dim=-1)
    assert torch.isfinite(lay.shortest_path_m).all()
    assert (lay.shortest_path_m >= 1.5 * straight - 0.2).all()  # the field's read and the check: a cell
    _, field = paths_and_fields(lay, 4, 4, 0.2, 0.2, fields=True)
    for k in range(lay.num_worlds):
        pair = _rooms_of(lay, k, torch.stack((lay.robot_xy[k], lay.goal_xy[k])))
        assert pair[0] != pair[1]
        xs = sorted({(p[0] + p[1]) / 2 for p in _pieces(lay, k) if p[1] - p[0] < p[3] - p[2]})
        ys = sorted({(p[2] + p[3]) / 2 for p in _pieces(lay, k) if p[3] - p[2] < p[1] - p[0]})
        bx, by = [-4.0, *xs, 4.0], [-4.0, *ys, 4.0]
        for i in range(len(bx) - 1):
            for j in range(len(by) - 1):  # every free cell centre of the room reads a finite field?
                cx = torch.arange(bx[i] + 0.5, bx[i + 1] - 0.45, 0.25)
                cy = torch.arange(by[j] + 0.5, by[j + 1] - 0.45, 0.25)
                pts = torch.cartesian_prod(cx, cy)
                reads = path_distance(field[k : k + 1].expand(len(pts), -1, -1), pts, 4, 4)
                assert torch.isfinite(reads).any(), (k, i, j)


def _doors_and_rooms(lay, k: int) -> tuple[int, int]:
    """(doors, rooms) of plan k: a door is an uncovered gap of 0.8-1.2 m on a wall line (pieces of one
    line share their thickness; a closed wall's pieces touch, and neighbouring walls overlap)."""
    pieces = _pieces(lay, k)
    lines: dict[tuple, list[tuple[float, float]]] = {}
    for x0, x1, y0, y1 in pieces:
        vertical = x1 - x0 < y1 - y0
        key = (vertical, round(x0, 3), round(x1, 3)) if vertical else (vertical, round(y0, 3), round(y1, 3))
        lines.setdefault(key, []).append((y0, y1) if vertical else (x0, x1))
    doors = 0
    for spans in lines.values():
        reach = -math.inf
        for lo, hi in sorted(spans):
            doors += 0.79 < lo - reach < 1.21
            reach = max(reach, hi)
    xs = {key[1] for key in lines if key[0]}
    ys = {key[1] for key in lines if not key[0]}
    return doors, (len(xs) + 1) * (len(ys) + 1)


def test_chains_and_rings_both_occur_and_loop_prob_sets_which():
    """A plan of n rooms whose doors form a spanning tree has n - 1 doors (a chain: one route); more
    doors close a ring (two routes). 2 x 2 and 2 x 3 plans: with loop_prob 0 every plan has n - 1
    doors, with 1 every shared wall has one (2 x 2: 4 walls, 2 x 3: 7), and with the default 0.5 both
    kinds occur."""
    seeds = torch.arange(48)
    for prob, check in ((0.0, lambda d, n: d == n - 1), (1.0, lambda d, n: d == {4: 4, 6: 7}[n])):
        maps = MapSpec().with_cfg(rooms={"rooms": [4, 6], "loop_prob": prob, **BARE})
        lay, _ = generate_layouts(maps, SPEC, "rooms", seeds)
        assert all(check(*_doors_and_rooms(lay, k)) for k in range(48)), prob
    maps = MapSpec().with_cfg(rooms={"rooms": [4, 6], **BARE})
    lay, _ = generate_layouts(maps, SPEC, "rooms", seeds)
    kinds = [_doors_and_rooms(lay, k) for k in range(48)]
    assert any(d == n - 1 for d, n in kinds) and any(d > n - 1 for d, n in kinds)


def test_a_plan_is_the_same_for_its_seed_in_any_batch_and_from_the_same_stream():
    """Hashed ids: seeds 5..9 drawn alone give the rows they have in a batch of 0..15, bit for bit (walls,
    furniture, start, goal, path); two stream sources seeded alike draw the same plans."""
    maps = MapSpec(check_path=True)
    big, ok_big = generate_layouts(maps, SPEC, "rooms", torch.arange(16))
    small, ok_small = generate_layouts(maps, SPEC, "rooms", torch.arange(5, 10))
    for name in ("wall_xy", "wall_half", "wall_active", "box_xy", "cyl_xy", "robot_xy", "goal_xy"):
        assert torch.equal(getattr(big, name)[5:10], getattr(small, name)), name
    assert torch.equal(big.shortest_path_m[5:10], small.shortest_path_m) and torch.equal(
        ok_big[5:10], ok_small
    )
    from navexp.task.maps.families import generate

    a, b = (
        generate(maps, SPEC, "rooms", 8, StreamSource(torch.Generator().manual_seed(3), "cpu")) for _ in "ab"
    )
    assert torch.equal(a[0].wall_xy, b[0].wall_xy) and torch.equal(a[0].robot_xy, b[0].robot_xy)


def test_grids_keep_the_least_room_side_and_the_room_count():
    """In the 8 m room with rooms of >= 2.5 m: 2-6 rooms are 1 x 2, 1 x 3, 2 x 1, 2 x 2, 2 x 3, 3 x 1,
    3 x 2 (rows x columns; 3 x 3 needs max 9); every drawn room is >= 2.5 m a side."""
    assert room_grids(RoomsCfg(), 8.0, 8.0) == [(1, 2), (1, 3), (2, 1), (2, 2), (2, 3), (3, 1), (3, 2)]
    assert room_grids(RoomsCfg(rooms=[9, 9]), 8.0, 8.0) == [(3, 3)]
    assert room_grids(RoomsCfg(rooms=[9, 9]), 7.0, 8.0) == []  # 3 x 2.5 m > 7 m
    maps = MapSpec().with_cfg(rooms=BARE)
    lay, _ = generate_layouts(maps, SPEC, "rooms", torch.arange(32))
    for k in range(32):
        for lines in (
            sorted({(p[0] + p[1]) / 2 for p in _pieces(lay, k) if p[1] - p[0] < p[3] - p[2]}),
            sorted({(p[2] + p[3]) / 2 for p in _pieces(lay, k) if p[3] - p[2] < p[1] - p[0]}),
        ):
            edges = [-4.0, *lines, 4.0]
            assert min(b - a for a, b in zip(edges[:-1], edges[1:], strict=True)) >= 2.5 - 1e-4


def test_bad_rooms_keys_are_refused_naming_the_key_and_what_is_allowed():
    """Doors narrower than the robot, a room count no grid of >= 2.5 m rooms gives in 8 m, furniture
    beyond its slots: each a one-line ValueError naming the key, only while the family has weight."""
    base = ["env=families", "env.maps.weights.rooms=1"]
    for bad, match in (
        (
            "env.maps.rooms.door_m=[0.3,0.9]",
            r"maps.rooms.door_m=\[0.3, 0.9\] is invalid; allowed: \[min, max\]",
        ),
        ("env.maps.rooms.rooms=[7,8]", r"maps.rooms.rooms=\[7, 8\] is invalid; allowed: a count of rows x"),
        ("env.maps.rooms.furniture_boxes=[0,9]", r"maps.rooms.furniture_boxes=\[0, 9\] .*box_slots \(4\)"),
    ):
        with pytest.raises(ValueError, match=match):
            validate_env_cfg(compose_config([*base, bad]).env)
    validate_env_cfg(
        compose_config(["env=families", "env.maps.rooms.door_m=[0.3,0.9]"]).env
    )  # off: unchecked


def test_floorplans_suite_is_beyond_training_and_its_plans_are_solvable():
    """env=floorplans trains on 2-6 rooms, doors 0.8-1.2 m, detours >= 1.5; suite=floorplans holds out
    9 rooms, doors 0.65-0.78 m and detours >= 2.5, one change per entry, each with valid solvable plans."""
    from navexp.config.suites import entry_config, load_suite

    train = compose_config(["env=floorplans"])
    validate_env_cfg(train.env)
    assert train.env.maps.weights.rooms == 0.3 and sum(train.env.maps.weights.values()) == pytest.approx(1.0)
    tr = train.env.maps.rooms
    suite = load_suite("floorplans")
    assert [e.name for e in suite.entries] == ["many_rooms", "narrow_doors", "long_detours"]
    for entry in suite.entries:
        cfg = entry_config(train, entry)
        validate_env_cfg(cfg.env)
        r = cfg.env.maps.rooms
        beyond = [r.rooms[0] > tr.rooms[1], r.door_m[1] < tr.door_m[0], r.min_detour > tr.min_detour]
        assert sum(beyond) == 1, entry.name
        spec = LayoutSpec.from_env_cfg(cfg.env)
        maps = replace(MapSpec.from_env_cfg(cfg.env), check_path=True)
        lay, ok = generate_layouts(maps, spec, "rooms", torch.arange(16) + (1 << 40))
        assert ok.any() and torch.isfinite(lay.shortest_path_m[ok]).all(), entry.name
