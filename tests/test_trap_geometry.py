"""Trap geometry (issue 23): the families at the ends of their widened ranges on hand-checkable cases
(a room-deep dead end, a hairpin lane of the minimum width between the thickest walls, narrow
doors), each with a free path; the traps mix and the trap ends of the ranges it draws from; and the
held-out geometry suite (suite=ood), whose ranges lie outside the training ranges by construction.

The room is 8 m x 8 m (half 4 m), the robot radius 0.2 m (diameter 0.4 m), wall_half_thickness_m
0.1 m scaled per layout by wall_thickness_scale.
"""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from navexp import compose_config
from navexp.config.suites import load_suite
from navexp.config.validation import validate_env_cfg
from navexp.task.maps import MapSpec, generate_layouts
from navexp.task.maps.random_family import LayoutSpec

SPEC = LayoutSpec.from_env_cfg(compose_config(["env=families"]).env)
IDS = torch.arange(48)


def walls_of(lay, k: int) -> list[tuple[float, float, float, float]]:
    """Active walls of layout k as (x0, x1, y0, y1)."""
    out = []
    for c, h, on in zip(lay.wall_xy[k], lay.wall_half[k], lay.wall_active[k], strict=True):
        if on:
            out.append((float(c[0] - h[0]), float(c[0] + h[0]), float(c[1] - h[1]), float(c[1] + h[1])))
    return out


def thickness(w) -> float:
    """A wall's thickness: its smaller extent."""
    return min(w[1] - w[0], w[3] - w[2])


def lanes_of(lay, k: int) -> list[float]:
    """The gaps between consecutive parallel walls of layout k (the lanes of a slalom)."""
    walls = walls_of(lay, k)
    vertical = walls[0][1] - walls[0][0] < walls[0][3] - walls[0][2]
    faces = sorted((w[0], w[1]) if vertical else (w[2], w[3]) for w in walls)
    return [b[0] - a[1] for a, b in zip(faces, faces[1:], strict=False)]


def test_a_room_deep_dead_end_at_the_range_end_has_a_free_path_around_it():
    """cul_de_sac width 3.5 m, depth 3.5 m (the training maxima; almost half the 8 m room), walls 0.2 m
    thick: the two arms are 3.5 - 0.1 = 3.4 m long (mouth to the back wall's inner face), their inner faces
    3.5 m apart, and every layout still has a finite shortest path, longer than the straight line."""
    maps = MapSpec(check_path=True).with_cfg(
        cul_de_sac={"width_m": [3.5, 3.5], "depth_m": [3.5, 3.5]}, wall_thickness_scale=[1.0, 1.0]
    )
    lay, ok = generate_layouts(maps, SPEC, "cul_de_sac", IDS)
    assert ok.all()
    straight = (lay.goal_xy - lay.robot_xy).norm(dim=-1)
    assert torch.isfinite(lay.shortest_path_m).all() and (lay.shortest_path_m > straight + 0.5).all()
    for k in range(len(IDS)):
        back, upper, lower = walls_of(lay, k)
        assert thickness(back) == pytest.approx(0.2, abs=1e-4)
        lengths = sorted(max(w[1] - w[0], w[3] - w[2]) for w in (upper, lower))
        assert lengths == pytest.approx([3.4, 3.4], abs=1e-4)
        across = (2, 3) if upper[1] - upper[0] > upper[3] - upper[2] else (0, 1)  # the arms' other axis
        (_, a1), (b0, _) = sorted((w[across[0]], w[across[1]]) for w in (upper, lower))
        assert b0 - a1 == pytest.approx(3.5, abs=1e-4)  # inner faces 3.5 m apart


def test_a_hairpin_lane_of_the_minimum_width_between_the_thickest_walls_is_passable():
    """staggered 3 walls, spacing 1.0 m (the minimum), walls 0.4 m thick (scale 2.0, the maximum): the
    lanes between consecutive walls are 1.0 - 0.4 = 0.6 m wide, 1.5 robot diameters; the slalom has a
    free path in every layout."""
    maps = MapSpec(check_path=True).with_cfg(
        staggered={"walls": [3, 3], "spacing_m": [1.0, 1.0]}, wall_thickness_scale=[2.0, 2.0]
    )
    lay, ok = generate_layouts(maps, SPEC, "staggered", IDS)
    assert ok.float().mean() > 0.5  # the free-path check may reject a few draws
    assert torch.isfinite(lay.shortest_path_m[ok]).all()
    for k in ok.nonzero().flatten().tolist():
        walls = walls_of(lay, k)
        assert len(walls) == 3 and all(thickness(w) == pytest.approx(0.4, abs=1e-4) for w in walls)
        assert lanes_of(lay, k) == pytest.approx([0.6, 0.6], abs=1e-4)


def test_wall_thickness_is_drawn_per_layout_in_its_range():
    """Corridor walls with the default scale [0.5, 2.0] of 0.1 m half thickness: 0.1-0.4 m thick, both
    thin and thick ones occur, one thickness per layout."""
    lay, ok = generate_layouts(MapSpec(), SPEC, "corridor", torch.arange(200))
    per_layout = []
    for k in range(200):
        long = [w for w in walls_of(lay, k) if max(w[1] - w[0], w[3] - w[2]) > 0.5]  # not a door-side stub
        t = {round(thickness(w), 4) for w in long}
        assert len(t) == 1
        per_layout.append(t.pop())
    assert min(per_layout) >= 0.1 - 1e-4 and max(per_layout) <= 0.4 + 1e-4
    assert min(per_layout) < 0.15 and max(per_layout) > 0.35


def test_spacing_below_a_passable_lane_is_refused_naming_the_key():
    """spacing 0.7 m with walls up to 0.4 m thick leaves 0.3 m, less than the 0.4 m robot: refused."""
    cfg = compose_config(["env=families", "env.maps.staggered.spacing_m=[0.7,1.0]"])
    with pytest.raises(ValueError, match=r"maps.staggered.spacing_m=\[0.7, 1.0\] is invalid; allowed: "):
        validate_env_cfg(cfg.env)


def test_traps_mix_makes_dead_ends_and_slaloms_half_of_training():
    """env=traps: cul_de_sac and staggered weigh 0.25 each (env=families: 0.15 each); it validates."""
    env = compose_config(["env=traps"]).env
    validate_env_cfg(env)
    w = dict(env.maps.weights)
    assert w["cul_de_sac"] + w["staggered"] == pytest.approx(0.5) and sum(w.values()) == pytest.approx(1.0)


def narrowest_lanes(env_name: str, n: int = 400) -> torch.Tensor:
    """[n] the narrowest lane of each of ``n`` staggered layouts drawn with ``env_name``'s ranges."""
    env = compose_config([env_name]).env
    lay, _ = generate_layouts(
        MapSpec.from_env_cfg(env), LayoutSpec.from_env_cfg(env), "staggered", torch.arange(n)
    )
    return torch.tensor([min(lanes_of(lay, k)) for k in range(n)])


def test_traps_draws_slaloms_and_dead_ends_from_the_trap_ends_of_the_ranges():
    """env=traps: walls 1.0-1.6 m apart, 0.1-0.4 m thick, leave lanes of 0.6-1.5 m (env=families: up to
    2.6 m), a lane under 0.8 m about twice as often (the spacing is drawn from 0.6 m of range instead
    of 1.7 m); dead ends 2.0-3.5 m wide inside; both still inside the families' ranges."""
    traps, families = narrowest_lanes("env=traps"), narrowest_lanes("env=families")
    assert traps.min() >= 0.6 - 1e-4 and traps.max() <= 1.5 + 1e-4
    assert families.max() > 2.0
    assert (traps < 0.8).float().mean() > 1.5 * (families < 0.8).float().mean() > 0
    env = compose_config(["env=traps"]).env
    lay, ok = generate_layouts(MapSpec.from_env_cfg(env), LayoutSpec.from_env_cfg(env), "cul_de_sac", IDS)
    for k in ok.nonzero().flatten().tolist():
        _, upper, lower = walls_of(lay, k)
        across = (2, 3) if upper[1] - upper[0] > upper[3] - upper[2] else (0, 1)
        (_, a1), (b0, _) = sorted((w[across[0]], w[across[1]]) for w in (upper, lower))
        assert 2.0 - 1e-4 <= b0 - a1 <= 3.5 + 1e-4
    full = compose_config(["env=families"]).env.maps
    for key in ("staggered.spacing_m", "cul_de_sac.width_m", "cul_de_sac.depth_m"):
        lo, hi = OmegaConf.select(env.maps, key)
        assert OmegaConf.select(full, key)[0] <= lo and hi <= OmegaConf.select(full, key)[1], key


# -- the held-out geometry suite ---------------------------------------------------------------------
OOD_KEYS = {
    "dead_end_xl": ["maps.cul_de_sac.width_m", "maps.cul_de_sac.depth_m"],
    "hairpin_tight": ["maps.staggered.spacing_m", "maps.wall_thickness_scale"],
    "doors_narrow": ["maps.gap_m", "maps.corridor.walls"],
    "big_cylinders": ["obstacles.cylinder_radius_m"],
}
"""For each entry of suite=ood, the keys whose ranges lie wholly outside training's."""


def disjoint(a: list[float], b: list[float]) -> bool:
    return a[1] < b[0] or a[0] > b[1]


@pytest.mark.parametrize("training", ["env=families", "env=traps", "env=room"])
def test_every_ood_entry_lies_outside_the_training_ranges(training):
    """Each suite=ood entry, composed on top of a training config, has its listed ranges disjoint from
    that training config's (and the entry validates): extrapolation by construction."""
    train_env = compose_config([training]).env
    suite = load_suite("ood")
    assert [e.name for e in suite.entries] == list(OOD_KEYS)
    for entry in suite.entries:
        env = compose_config(["env=families"]).env
        OmegaConf.set_struct(env, False)
        for key, value in entry.overrides.items():
            OmegaConf.update(env, key.removeprefix("env."), value, merge=False)
        validate_env_cfg(env)
        for key in OOD_KEYS[entry.name]:
            ours, theirs = list(OmegaConf.select(env, key)), list(OmegaConf.select(train_env, key))
            assert disjoint(ours, theirs), (entry.name, key, ours, theirs)


def test_ood_entries_have_free_paths():
    """Every suite=ood family draws layouts with a free path (the pool keeps only those)."""
    suite = load_suite("ood")
    for entry in suite.entries:
        env = compose_config(["env=families"]).env
        OmegaConf.set_struct(env, False)
        for key, value in entry.overrides.items():
            OmegaConf.update(env, key.removeprefix("env."), value, merge=False)
        spec, maps = LayoutSpec.from_env_cfg(env), MapSpec.from_env_cfg(env)
        ((family, _),) = maps.active_families
        lay, ok = generate_layouts(maps, spec, family, IDS)
        assert ok.float().mean() > 0.25, entry.name
        assert torch.isfinite(lay.shortest_path_m[ok]).all()
