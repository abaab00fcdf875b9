"""Map families, the free-path check and shortest path, layout ids and the held-out split, ROS maps.

Geometry is checked on hand-made cases: the default room is 8 m x 8 m (half 4 m), the robot radius
0.2 m, spawn clearance 0.15 m, walls 0.1 m half-thick.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from conftest import build_env
from scipy import stats

from navexp import compose_config
from navexp.config.validation import validate_env_cfg
from navexp.sim.layout import Layout, obstacle_distance
from navexp.task.maps import FAMILIES, MapSpec, generate_layouts
from navexp.task.maps.grid_path import shortest_paths
from navexp.task.maps.pool import LayoutPool
from navexp.task.maps.random_family import LayoutSpec
from navexp.task.maps.random_source import SPLIT_BITS, seed_split
from navexp.task.maps.rectangles import merge_rectangles
from navexp.task.maps.scenario_files import load_scenario_file

SPEC = LayoutSpec.from_env_cfg(compose_config(["env=families"]).env)
"""8 m room, 14 cylinder slots, 4 box slots, 16 wall slots."""
IDS = torch.arange(64)


def _walls(lay: Layout, k: int) -> list[tuple[float, float, float, float]]:
    """Active walls of layout k as (x0, x1, y0, y1)."""
    out = []
    for (x, y), (hx, hy), on in zip(lay.wall_xy[k], lay.wall_half[k], lay.wall_active[k], strict=True):
        if on:
            out.append((float(x - hx), float(x + hx), float(y - hy), float(y + hy)))
    return out


def _along(wall, vertical: bool) -> tuple[float, float]:
    return (wall[2], wall[3]) if vertical else (wall[0], wall[1])


def _is_vertical(walls) -> bool:
    """Whether the walls run along y (layouts are mirrored and transposed at random): the longest
    extent of any wall piece is its length."""
    w = max(walls, key=lambda w: max(w[1] - w[0], w[3] - w[2]))
    return w[1] - w[0] < w[3] - w[2]


def test_corridor_walls_have_one_door_of_the_drawn_width_with_start_and_goal_on_opposite_sides():
    """corridor.walls=[1, 1], gap 1.0 m: each layout has one cross wall (two segments, or one when the
    door touches a side) spanning the 8 m room except exactly a 1.0 m door: segment lengths sum to
    8 - 1.0 = 7.0 m; start and goal lie on opposite sides of the wall."""
    maps = MapSpec().with_cfg(corridor={"walls": [1, 1]}, gap_m=[1.0, 1.0])
    lay, ok = generate_layouts(maps, SPEC, "corridor", IDS)
    assert ok.all()
    for k in range(len(IDS)):
        walls = _walls(lay, k)
        assert 1 <= len(walls) <= 2
        vertical = _is_vertical(walls)
        spans = sorted(_along(w, vertical) for w in walls)
        assert sum(b - a for a, b in spans) == pytest.approx(7.0, abs=1e-4)
        axis = 0 if vertical else 1
        wall_at = (walls[0][2 * axis] + walls[0][2 * axis + 1]) / 2
        side_start = float(lay.robot_xy[k, axis]) - wall_at
        side_goal = float(lay.goal_xy[k, axis]) - wall_at
        assert side_start * side_goal < 0, (k, side_start, side_goal)


def test_staggered_walls_leave_their_doors_at_alternating_ends():
    """staggered.walls=[3, 3], gap 1.2 m: 3 parallel walls, each 8 - 1.2 = 6.8 m long, touching one side
    of the room; consecutive walls leave their door at opposite ends (a slalom)."""
    maps = MapSpec().with_cfg(staggered={"walls": [3, 3]}, gap_m=[1.2, 1.2])
    lay, ok = generate_layouts(maps, SPEC, "staggered", IDS)
    assert ok.all()
    for k in range(len(IDS)):
        walls = _walls(lay, k)
        assert len(walls) == 3
        vertical = _is_vertical(walls)
        spans = [_along(w, vertical) for w in sorted(walls, key=lambda w: w[0] if vertical else w[2])]
        assert all(b - a == pytest.approx(6.8, abs=1e-4) for a, b in spans)
        touches_low = [a == pytest.approx(-4.0, abs=1e-4) for a, _ in spans]
        assert touches_low[0] != touches_low[1] and touches_low[1] != touches_low[2]


def test_cul_de_sac_puts_a_u_between_start_and_goal_opening_towards_the_start():
    """3 walls (back wall and two arms); the straight line from start to goal crosses the back wall
    and no arm: the robot heading straight for the goal runs into the U."""
    lay, ok = generate_layouts(MapSpec(), SPEC, "cul_de_sac", IDS)
    assert ok.all()
    t = torch.linspace(0, 1, 200)
    for k in range(len(IDS)):
        assert int(lay.wall_active[k].sum()) == 3
        line = lay.robot_xy[k] + t[:, None] * (lay.goal_xy[k] - lay.robot_xy[k])
        one = lay.index(torch.tensor([k]))
        hit_back = _inside(line, one, slot=0)
        assert (
            hit_back.any() and not _inside(line, one, slot=1).any() and not _inside(line, one, slot=2).any()
        )


def _inside(points: torch.Tensor, lay: Layout, slot: int) -> torch.Tensor:
    c, h = lay.wall_xy[0, slot], lay.wall_half[0, slot]
    return ((points - c).abs() <= h).all(-1)


def test_cluttered_places_the_configured_number_of_small_cylinders():
    """cluttered.count=[8, 14], radius [0.1, 0.25]: 8-14 active cylinders, radii in range, no boxes."""
    lay, ok = generate_layouts(MapSpec(), SPEC, "cluttered", IDS)
    n = lay.cyl_active.sum(1)
    assert ok.all() and n.min() >= 8 and n.max() <= 14
    r = lay.cyl_r[lay.cyl_active]
    assert r.min() >= 0.1 and r.max() <= 0.25
    assert not lay.box_active.any()


def test_merge_rectangles_covers_exactly_the_occupied_cells_of_a_hand_drawn_grid():
    """Rows from y = 0 up, 1 m cells:
    row 0: # # . . #     -> rectangle x 0-2, y 0-2 (the 2x2 block in rows 0-1)
    row 1: # # . . #        rectangle x 4-5, y 0-3 (the column stack in rows 0-2)
    row 2: . # # . #        rectangle x 1-3, y 2-3 (the run in row 2)
    and a grid needing 3 rectangles does not fit 2 slots (count 3 reported)."""
    occ = torch.tensor([[[1, 1, 0, 0, 1], [1, 1, 0, 0, 1], [0, 1, 1, 0, 1]]], dtype=torch.bool)
    centre, half, active, count = merge_rectangles(occ, (0.0, 0.0), (1.0, 1.0), 4)
    assert count.tolist() == [3] and active.tolist() == [[True, True, True, False]]
    got = sorted(
        (
            round(float(c[0] - h[0]), 6),
            round(float(c[0] + h[0]), 6),
            round(float(c[1] - h[1]), 6),
            round(float(c[1] + h[1]), 6),
        )
        for c, h in zip(centre[0, :3], half[0, :3], strict=True)
    )
    assert got == [(0.0, 2.0, 0.0, 2.0), (1.0, 3.0, 2.0, 3.0), (4.0, 5.0, 0.0, 3.0)]
    assert merge_rectangles(occ, (0.0, 0.0), (1.0, 1.0), 2)[3].tolist() == [3]


def test_grid_maps_fit_the_wall_slots_and_stay_inside_the_room():
    """Cellular-automaton grids: every valid layout uses at most the 16 wall slots, every wall lies in
    the room, and start and goal keep the clearance (0.35 m) from every wall."""
    lay, ok = generate_layouts(MapSpec(), SPEC, "grid", IDS)
    assert ok.float().mean() > 0.5
    v = lay.index(ok)
    assert v.wall_active.sum(1).max() <= 16 and v.wall_active.sum(1).float().mean() > 3
    lo, hi = v.wall_xy - v.wall_half, v.wall_xy + v.wall_half
    assert (lo[v.wall_active] >= -4 - 1e-5).all() and (hi[v.wall_active] <= 4 + 1e-5).all()
    d = obstacle_distance(torch.stack((v.robot_xy, v.goal_xy), 1), v, 4.0, 4.0)
    assert d.min() >= 0.35 - 1e-5


def _one_wall_room(start, goal, wall_y: tuple[float, float] | None) -> Layout:
    """An empty 8 m room with one wall x in [-0.1, 0.1], y in ``wall_y`` (None: no wall)."""
    lay = Layout.empty(1, 0, 0, "cpu", 1)
    lay.robot_xy[0], lay.goal_xy[0] = torch.tensor(start), torch.tensor(goal)
    if wall_y is not None:
        lay.wall_xy[0, 0] = torch.tensor([0.0, (wall_y[0] + wall_y[1]) / 2])
        lay.wall_half[0, 0] = torch.tensor([0.1, (wall_y[1] - wall_y[0]) / 2])
        lay.wall_active[0, 0] = True
    return lay


@pytest.mark.parametrize("cell", [0.1, 0.2])
def test_shortest_path_matches_the_hand_computed_length_within_a_cell(cell):
    """Straight: (-3, 0) -> (3, 0) in an empty room is 6.0 m. Around a wall x in [-0.1, 0.1],
    y in [-4, 2] for a disc of radius r = 0.2: the path hugs the wall's top corners c1 = (-0.1, 2),
    c2 = (0.1, 2) at distance r: tangent from the start to the circle around c1,
    sqrt(|P c1|^2 - r^2) = sqrt(2.9^2 + 2^2 - 0.04) = 3.5171, an arc turning from the tangent's
    heading atan2(2, 2.9) + asin(r / |P c1|) = 0.6605 rad to level (0.6605 * 0.2 = 0.1321 m), 0.2 m
    across the top, and the mirror image: 2 * (3.5171 + 0.1321) + 0.2 = 7.498 m."""
    straight = shortest_paths(_one_wall_room((-3.0, 0.0), (3.0, 0.0), None), 4, 4, 0.2, cell)
    assert straight.item() == pytest.approx(6.0, abs=cell)
    d = math.hypot(2.9, 2.0)
    hand = 2 * (math.sqrt(d * d - 0.04) + 0.2 * (math.atan2(2.0, 2.9) + math.asin(0.2 / d))) + 0.2
    around = shortest_paths(_one_wall_room((-3.0, 0.0), (3.0, 0.0), (-4.0, 2.0)), 4, 4, 0.2, cell)
    assert hand == pytest.approx(7.498, abs=1e-3)
    assert around.item() == pytest.approx(hand, abs=cell)


def test_a_blocked_corridor_has_no_path_and_is_rejected():
    """A wall across the whole room (y in [-4, 4]) leaves no path: inf. Doors of 0.3 m are narrower than
    the robot (0.4 m): with the path check every corridor layout is invalid, without it all are valid
    (start and goal themselves are free)."""
    blocked = shortest_paths(_one_wall_room((-3.0, 0.0), (3.0, 0.0), (-4.0, 4.0)), 4, 4, 0.2, 0.2)
    assert math.isinf(blocked.item())
    narrow = MapSpec().with_cfg(corridor={"walls": [1, 1]}, gap_m=[0.3, 0.3])
    _, unchecked = generate_layouts(narrow, SPEC, "corridor", IDS[:16])
    _, checked = generate_layouts(replace(narrow, check_path=True), SPEC, "corridor", IDS[:16])
    assert unchecked.all() and not checked.any()


def test_layout_ids_regenerate_the_layout_and_the_splits_never_share_a_seed():
    """env=families (hashed ids): every pool layout is regenerated bit for bit from (family, seed);
    training seeds lie below 2**40 and the evaluation config's at or above it, so no id is shared
    whatever the run seeds."""
    from navexp.config.run_config import eval_env_cfg

    cfg = compose_config(["env=families", "env.device=cpu"])
    spec, maps = LayoutSpec.from_env_cfg(cfg.env), MapSpec.from_env_cfg(cfg.env)
    train = LayoutPool(spec, 64, torch.Generator().manual_seed(42), "cpu", maps=maps)
    lay = train.take(torch.ones(128, dtype=torch.bool))
    assert (seed_split(lay.seed) == 0).all() and (lay.seed < 2**SPLIT_BITS).all()
    for f in lay.family.unique().tolist():
        rows = lay.family == f
        again, valid = generate_layouts(maps, spec, FAMILIES[f], lay.seed[rows])
        assert valid.all()
        for name in ("wall_xy", "wall_active", "cyl_xy", "box_xy", "robot_xy", "goal_xy", "shortest_path_m"):
            assert torch.equal(getattr(again, name), getattr(lay.index(rows), name)), (FAMILIES[f], name)
    ecfg = eval_env_cfg(cfg)
    eval_maps = MapSpec.from_env_cfg(ecfg.env)
    assert eval_maps.cfg.split == "eval"
    held_out = LayoutPool(spec, 64, torch.Generator().manual_seed(42), "cpu", maps=eval_maps)
    ev = held_out.take(torch.ones(128, dtype=torch.bool))
    assert (seed_split(ev.seed) == 1).all()
    train_ids = set(zip(lay.family.tolist(), lay.seed.tolist(), strict=True))
    eval_ids = set(zip(ev.family.tolist(), ev.seed.tolist(), strict=True))
    assert not train_ids & eval_ids


def test_family_weights_are_honoured():
    """Weights random 0.5, corridor 0.25, staggered 0.25 over 400 layouts taken from the pool: each
    family's count lies inside the 99.9 % binomial interval of n = 400, p = its weight (the pool splits
    each batch by the weights exactly and shuffles, so the counts are tighter than binomial)."""
    cfg = compose_config(
        ["env=families", "env.maps.weights.cul_de_sac=0", "env.maps.weights.cluttered=0",
         "env.maps.weights.grid=0", "env.maps.weights.random=0.5", "env.maps.weights.corridor=0.25",
         "env.maps.weights.staggered=0.25", "env.maps.check_path=false"]
    )  # fmt: skip
    pool = LayoutPool(
        LayoutSpec.from_env_cfg(cfg.env), 400, torch.Generator().manual_seed(0), "cpu",
        maps=MapSpec.from_env_cfg(cfg.env),
    )  # fmt: skip
    fam = pool.take(torch.ones(400, dtype=torch.bool)).family
    for name, p in (("random", 0.5), ("corridor", 0.25), ("staggered", 0.25)):
        lo, hi = stats.binom.interval(0.999, 400, p)
        count = int((fam == FAMILIES.index(name)).sum())
        assert lo <= count <= hi, (name, count, lo, hi)


DEFAULT_DIGEST = "1de4ecfd89c7a3e6ce068869603a38e74ca9e1ebb6d6e78c767500ea0dd6a7ac"
"""sha256 of the first 240 layouts of the default config's pool (seed 42, reserve 64), recorded with
navexp a32e64d, before map families: the default config must keep drawing exactly these."""


def test_the_default_config_still_draws_the_layouts_of_before_map_families():
    """Default env: random family only, one generator stream, no wall slots, no path check. Six takes
    of 40 layouts (crossing a refill) hash to the digest recorded before map families existed; no
    id (seed -1) and no shortest path (-1) are recorded."""
    cfg = compose_config(["env.device=cpu"])
    assert cfg.env.obstacles.wall_slots == 0 and cfg.env.maps.rng == "stream"
    pool = LayoutPool(
        LayoutSpec.from_env_cfg(cfg.env), 64, torch.Generator().manual_seed(42), "cpu",
        maps=MapSpec.from_env_cfg(cfg.env),
    )  # fmt: skip
    h = hashlib.sha256()
    names = ("cyl_xy", "cyl_r", "cyl_active", "box_xy", "box_half", "box_yaw", "box_active")
    for _ in range(6):
        lay = pool.take(torch.ones(40, dtype=torch.bool))
        for name in (*names, "robot_xy", "robot_yaw", "goal_xy"):
            h.update(getattr(lay, name).contiguous().numpy().tobytes())
        if bool(pool.low()):
            pool.refill()
    assert h.hexdigest() == DEFAULT_DIGEST
    assert (lay.seed == -1).all() and (lay.shortest_path_m == -1).all() and (lay.family == 0).all()


def _write_map(tmp_path, pixels: np.ndarray, extra: str) -> str:
    from PIL import Image

    Image.fromarray(pixels).save(tmp_path / "tiny.pgm")
    (tmp_path / "tiny.yaml").write_text(
        "image: tiny.pgm\nresolution: 0.5\norigin: [10.0, 20.0, 0.0]\noccupied_thresh: 0.65\n"
        "free_thresh: 0.196\nnegate: 0\n" + extra
    )
    return str(tmp_path / "tiny.yaml")


def test_ros_map_loads_into_known_wall_rectangles(tmp_path):
    """A 10 x 8 pixel map of 0.5 m cells (5 m x 4 m, origin (10, 20) in the map frame) with a wall in
    image row 2 (the third from the top: map y 2.5-3.0) over columns 0-5 (x 0-3 m) and a 2 x 2 pixel
    block at rows 6-7, columns 8-9 (y 0-1, x 4-5). Centred on the room (shift -(10 + 2.5, 20 + 2),
    i.e. map (x, y) -> world (x - 2.5, y - 2) relative to the origin): the wall spans x in [-2.5, 0.5],
    y in [0.5, 1.0]; the block x in [1.5, 2.5], y in [-2, -1]. The given start (10.5, 20.5) maps to
    (-2, -1.5)."""
    px = np.full((8, 10), 254, dtype=np.uint8)
    px[2, 0:6] = 0
    px[6:8, 8:10] = 0
    pairs = "starts_goals:\n  - {robot: {x: 10.5, y: 20.5}, goal: {x: 14.5, y: 23.5}}\n"
    spec = replace(SPEC, wall_slots=6)
    lay = load_scenario_file(_write_map(tmp_path, px, pairs), spec, MapSpec())
    rects = sorted(
        tuple(round(float(v), 6) for v in (c[0] - h[0], c[0] + h[0], c[1] - h[1], c[1] + h[1]))
        for c, h, on in zip(lay.wall_xy[0], lay.wall_half[0], lay.wall_active[0], strict=True)
        if on
    )
    # The two walls, and the room beyond the map (x beyond +-2.5, y beyond +-2) walled off.
    assert rects == [
        (-4.0, -2.5, -4.0, 4.0),
        (-2.5, 0.5, 0.5, 1.0),
        (-2.5, 2.5, -4.0, -2.0),
        (-2.5, 2.5, 2.0, 4.0),
        (1.5, 2.5, -2.0, -1.0),
        (2.5, 4.0, -4.0, 4.0),
    ]
    assert lay.robot_xy[0].tolist() == pytest.approx([-2.0, -1.5])
    assert lay.goal_xy[0].tolist() == pytest.approx([2.0, 1.5])
    assert math.isfinite(lay.shortest_path_m[0])


def test_ros_map_that_needs_more_rectangles_than_slots_names_the_count(tmp_path):
    """A checkerboard row of 5 separate occupied pixels needs 5 rectangles: with 4 wall slots the error
    names 5 and env.obstacles.wall_slots; sampled pairs (num_pairs: 3) land in free space."""
    px = np.full((8, 10), 254, dtype=np.uint8)
    px[4, 0:10:2] = 0
    path = _write_map(tmp_path, px, "num_pairs: 3\n")
    with pytest.raises(ValueError, match=r"merge into 5 rectangles.*env.obstacles.wall_slots=4"):
        load_scenario_file(path, replace(SPEC, wall_slots=4), MapSpec())
    lay = load_scenario_file(path, replace(SPEC, wall_slots=9), MapSpec())  # 5 + 4 beyond the map
    assert lay.num_worlds == 3 and torch.isfinite(lay.shortest_path_m).all()
    d = obstacle_distance(torch.stack((lay.robot_xy, lay.goal_xy), 1), lay, 4.0, 4.0)
    assert d.min() >= 0.35 - 1e-5


def test_a_wall_ahead_is_seen_by_the_lidar_on_both_backends(backend, scenario_file):
    """A scenario wall (kind: wall) at x = 1.5 with half-thickness 0.1 in front of a robot at the
    origin facing +x: beam 0 reads 1.5 - 0.1 = 1.4 m; the env records the layout's shortest path."""
    path = scenario_file(
        """
        scenarios:
          - name: wall
            robot: {x: 0.0, y: 0.0, yaw_deg: 0.0}
            goal: {x: 3.0, y: 3.0}
            obstacles:
              - {kind: wall, x: 1.5, y: 0.0, half_x: 0.1, half_y: 1.0}
        """
    )
    env = build_env(backend, "env.num_envs=2", f"env.scenarios={path}", "env.obstacles.wall_slots=2")
    assert env.state.scan_clean[:, 0].tolist() == pytest.approx([1.4, 1.4], abs=1e-3)
    assert torch.isfinite(env.layout.shortest_path_m).all()


def test_bad_map_config_names_the_key_and_the_choices():
    """An unknown family lists the families; too few wall slots for corridor names the need (2 walls x
    2 segments = 4); doors narrower than the robot are refused."""
    with pytest.raises(ValueError, match=r"maps.weights.maze.*random \| corridor"):
        validate_env_cfg(compose_config(["+env.maps.weights.maze=1"]).env)
    with pytest.raises(ValueError, match=r"obstacles.wall_slots=0.*>= 4 for map family corridor"):
        validate_env_cfg(compose_config(["env.maps.weights.corridor=1"]).env)
    with pytest.raises(ValueError, match=r"maps.gap_m"):
        validate_env_cfg(compose_config(["env=families", "env.maps.gap_m=[0.3,0.5]"]).env)


def test_a_checkpoint_config_from_before_map_families_still_builds_and_evaluates():
    """A stored training config without env.maps and env.obstacles.wall_slots (checkpoints written
    before map families) gives the random family only, no wall slots, and the evaluation config."""
    from omegaconf import OmegaConf

    from navexp.config.run_config import eval_env_cfg

    stored = OmegaConf.to_container(compose_config(["env.num_envs=2"]))
    del stored["env"]["maps"], stored["env"]["obstacles"]["wall_slots"]
    cfg = eval_env_cfg(OmegaConf.create(stored))
    validate_env_cfg(cfg.env)
    assert MapSpec.from_env_cfg(cfg.env) == MapSpec()
    assert LayoutSpec.from_env_cfg(cfg.env).wall_slots == 0


def test_the_shipped_map_loads_into_four_walls_and_32_solvable_pairs():
    """configs/scenarios/maze_small (40 x 40 pixels of 0.2 m): two long walls, a pillar and a stub are 4
    rectangles; its 32 sampled start/goal pairs all have a free path."""
    from navexp.task.maps.scenario_files import resolve_scenario_path

    lay = load_scenario_file(resolve_scenario_path("maze_small"), SPEC, MapSpec())
    assert lay.num_worlds == 32 and lay.wall_active.sum(1).tolist() == [4] * 32
    assert torch.isfinite(lay.shortest_path_m).all()


@pytest.mark.parametrize("reward", ["bcppo", "path"])
def test_warp_step_with_map_families_makes_no_host_sync(reward):
    """env=families on the warp backend: 20 steps of 16 worlds with 1 s episodes (resets every 10
    steps take family layouts with walls from the pool) make no host sync between fault checks; with
    reward=path the resets also take each layout's goal distance field and the step reads it."""
    from navexp.analysis.sync_audit import SyncAudit

    env = build_env(
        f"reward={reward}",
        "env=families",
        "env.sim.backend=warp",
        "env.num_envs=16",
        "env.episode_length_s=1.0",
        "env.check_every=50",
    )
    actions = torch.zeros(16, 3)
    before = env.episode_count.sum().item()
    with SyncAudit() as audit:
        for _ in range(20):
            env.step(actions)
    assert env.episode_count.sum().item() - before >= 16
    assert audit.num_syncs == 0, dict(audit.syncs)
    assert env.needs_path == (reward == "path")


def test_family_registry_order_schema_and_duplicates():
    """The built-in families keep their layout indices (random 0 ... grid 5), added ones follow (rooms
    6); env.maps has one key group per family with keys and a weight per family (random 1, the rest 0);
    a second family of an existing name is refused naming it."""
    from navexp.task.maps.families import REGISTRY, MapsCfg, register_family

    assert FAMILIES == ("random", "corridor", "staggered", "cul_de_sac", "cluttered", "grid", "rooms")
    cfg = MapsCfg()
    assert cfg.weights == {
        "random": 1.0,
        "corridor": 0.0,
        "staggered": 0.0,
        "cul_de_sac": 0.0,
        "cluttered": 0.0,
        "grid": 0.0,
        "rooms": 0.0,
    }
    assert [n for n, f in REGISTRY.items() if f.cfg] == [
        "corridor",
        "staggered",
        "cul_de_sac",
        "cluttered",
        "grid",
        "rooms",
    ]
    assert cfg.corridor.walls == [1, 2] and cfg.grid.cell_m == 0.6
    maps = MapSpec().with_cfg(corridor={"walls": [1, 3]})
    assert maps.cfg.corridor.walls == [1, 3] and MapSpec().cfg.corridor.walls == [1, 2]  # a copy
    with pytest.raises(ValueError, match="map family 'grid' is already registered"):
        register_family("grid")(lambda maps, spec, k, src: None)


def test_a_composed_config_pickles_with_its_typed_maps():
    """joblib hands trials their config pickled: env.maps comes back as the registry's MapsCfg (a
    class built at import, published as navexp.task.maps.families.MapsCfg) with its values."""
    import pickle

    from omegaconf import OmegaConf

    from navexp.task.maps.families import MapsCfg

    cfg = compose_config(["env=families"])
    back = pickle.loads(pickle.dumps(cfg))
    assert OmegaConf.get_type(back.env.maps) is MapsCfg
    assert back.env.maps.weights == cfg.env.maps.weights and back.env.maps.grid.fill == [0.35, 0.5]
