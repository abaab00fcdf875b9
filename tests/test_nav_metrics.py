"""Navigation metrics on hand-built episodes (no simulation): SPL, the BARN score, Wilson intervals
over distinct cases, per-family rates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from navexp.analysis.nav_metrics import (
    EpisodeTable,
    barn_scores,
    path_length,
    spl_terms,
    summarize,
    wilson_interval,
)
from navexp.task.maps import FAMILIES
from navexp.task.state import COLLISION, OUT_OF_BOUNDS, SUCCESS, TIME_OUT


def table(reasons, shortest, paths, times=None, families=None, cases=None) -> EpisodeTable:
    n = len(reasons)
    return EpisodeTable(
        reason=np.array(reasons),
        time_s=np.array(times if times is not None else [1.0] * n, dtype=float),
        path_m=np.array(paths, dtype=float),
        family=np.array(families if families is not None else [0] * n),
        shortest_m=np.array(shortest, dtype=float),
        case=np.array(cases if cases is not None else [str(i) for i in range(n)]),
        scenario=np.full(n, -1),
    )


def test_spl_by_hand_on_a_straight_path():
    """Start (0, 0), goal (4, 0): l = 4 m. A straight run stops 0.3 m short (goal radius): p = 3.7 <= l,
    term 4 / max(3.7, 4) = 1. A run out to x = 2, back to x = 1, then on to 3.7: p = 2 + 1 + 2.7 = 5.7,
    term 4 / 5.7 = 0.70175. A failure: 0. SPL = (1 + 0.70175 + 0) / 3 = 0.56725."""
    straight = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [3.7, 0.0]])
    wiggle = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 0.0], [3.7, 0.0]])
    p = [path_length(straight), path_length(wiggle), path_length(straight)]
    assert p[0] == pytest.approx(3.7) and p[1] == pytest.approx(5.7)
    terms = spl_terms(np.array([True, True, False]), np.array([4.0, 4.0, 4.0]), np.array(p))
    assert terms == pytest.approx([1.0, 4 / 5.7, 0.0])
    m = summarize(table([SUCCESS, SUCCESS, COLLISION], [4.0] * 3, p), 1.5, FAMILIES, None)
    assert m["spl"] == pytest.approx((1 + 4 / 5.7) / 3) and abs(m["spl"] - 0.56725) < 1e-5
    assert m["spl_num_episodes"] == 3 and m["spl_excluded_episodes"] == 0


def test_spl_by_hand_on_an_l_shaped_path():
    """A wall forces the L (0, 0) -> (3, 0) -> (3, 3): l = 6 m. Driving the L to 0.3 m before the goal:
    p = 3 + 2.7 = 5.7, term 1. Overshooting the corner to x = 4 and cutting back: (0, 0) -> (4, 0) ->
    (4, 3) -> (3.3, 3), p = 4 + 3 + 0.7 = 7.7, term 6 / 7.7 = 0.77922. Had l been the straight line
    (4.2426 m) the wall blocks, the same L would score 4.2426 / 5.7 = 0.74432: l must be the map's."""
    tight = np.array([[0.0, 0.0], [3.0, 0.0], [3.0, 2.7]])
    wide = np.array([[0.0, 0.0], [4.0, 0.0], [4.0, 3.0], [3.3, 3.0]])
    p = np.array([path_length(tight), path_length(wide)])
    assert p == pytest.approx([5.7, 7.7])
    assert spl_terms(np.array([True, True]), np.array([6.0, 6.0]), p) == pytest.approx([1.0, 6 / 7.7])
    assert spl_terms(np.array([True]), np.array([math.hypot(3, 3)]), p[:1]) == pytest.approx([0.74432], 1e-4)


def test_barn_score_by_hand():
    """l = 3 m, v_max = 1.5 m/s: OT = 2 s, so AT is clipped to [8 s, 16 s]. AT 6 s -> 2 / 8 = 0.25;
    AT 10 s -> 2 / 10 = 0.2; AT 20 s -> 2 / 16 = 0.125; a collision after 3 s -> 0. Mean 0.14375."""
    s = barn_scores(np.array([1, 1, 1, 0]), np.full(4, 3.0), np.array([6.0, 10.0, 20.0, 3.0]), 1.5)
    assert s == pytest.approx([0.25, 0.2, 0.125, 0.0])
    m = summarize(
        table([SUCCESS] * 3 + [COLLISION], [3.0] * 4, [3.0] * 4, times=[6.0, 10.0, 20.0, 3.0]),
        1.5,
        FAMILIES,
        None,
    )
    assert m["barn_score"] == pytest.approx(0.14375)
    with pytest.raises(ValueError, match=r"max_speed_mps=0 is invalid; allowed: a speed > 0"):
        barn_scores(np.array([1]), np.array([3.0]), np.array([6.0]), 0)


def test_episodes_without_a_shortest_path_are_left_out_and_counted():
    """l = -1 (path check off) and inf (no path) are excluded from SPL and BARN: of 3 successes only the
    third (l = 4, p = 5) counts, SPL 0.8, and the 2 others are reported as excluded."""
    m = summarize(table([SUCCESS] * 3, [-1.0, math.inf, 4.0], [5.0] * 3), 1.5, FAMILIES, None)
    assert m["spl"] == pytest.approx(0.8)
    assert m["spl_num_episodes"] == 1 and m["spl_excluded_episodes"] == 2
    none = summarize(table([SUCCESS], [-1.0], [5.0]), 1.5, FAMILIES, None)
    assert none["spl"] is None and none["barn_score"] is None and none["spl_excluded_episodes"] == 1


def test_wilson_interval_from_scipy_matches_the_hand_computed_one():
    """8 of 10 (z = 1.96): [0.4902, 0.9433]; 0 of 0: [0, 1]; 5 of 5: [0.5655, 1]."""
    assert wilson_interval(8, 10) == pytest.approx([0.4902, 0.9433], abs=1e-4)
    assert wilson_interval(0, 0) == [0.0, 1.0]
    assert wilson_interval(5, 5) == pytest.approx([0.5655, 1.0], abs=1e-4)


def test_intervals_count_distinct_cases_not_repeats():
    """6 time-outs on 2 cases (each played 3 times): the interval is that of 2 of 2, [0.3424, 1]
    (centre (1 + z^2/4) / (1 + z^2/2) = 0.6712, half 0.3288), not 6 of 6 ([0.6097, 1])."""
    m = summarize(
        table([TIME_OUT] * 6, [-1.0] * 6, [0.0] * 6, cases=list("abab" + "ab")), 1.5, FAMILIES, None
    )
    assert m["num_episodes"] == 6 and m["num_distinct_cases"] == 2 and m["ci95_counts"] == "distinct cases"
    assert m["ci95"]["timeout_rate"] == pytest.approx([0.3424, 1.0], abs=1e-4)
    distinct = summarize(table([TIME_OUT] * 6, [-1.0] * 6, [0.0] * 6), 1.5, FAMILIES, None)
    assert distinct["ci95"]["timeout_rate"] == pytest.approx([0.6097, 1.0], abs=1e-4)


def test_per_family_rates_sum_to_one_per_family():
    """Families random (2 episodes: success, collision), corridor (3: time-out, success, out of bounds)
    and grid (1: success): each family's four rates sum to 1 (1/2 + 1/2; 1/3 + 1/3 + 1/3; 1) and the
    episode counts add up to 6."""
    reasons = [SUCCESS, COLLISION, TIME_OUT, SUCCESS, OUT_OF_BOUNDS, SUCCESS]
    fams = [0, 0, 1, 1, 1, 5]
    m = summarize(table(reasons, [4.0] * 6, [4.0] * 6, families=fams), 1.5, FAMILIES, None)
    by = m["by_family"]
    assert list(by) == ["random", "corridor", "grid"]
    assert [by[f]["num_episodes"] for f in by] == [2, 3, 1]
    rates = ("success_rate", "collision_rate", "timeout_rate", "out_of_bounds_rate")
    for f, fm in by.items():
        assert sum(fm[r] for r in rates) == pytest.approx(1.0), f
    assert by["corridor"]["success_rate"] == pytest.approx(1 / 3) and by["grid"]["spl"] == 1.0
