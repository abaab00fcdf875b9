"""Each reward term on hand-set states, with the arithmetic written out."""

from __future__ import annotations

import math

import pytest
import torch
from omegaconf import OmegaConf

from navexp.task.rewards import terms as R
from navexp.task.rewards.manager import RewardManager
from navexp.task.rewards.terminations import compute_terminations
from navexp.task.state import COLLISION, SUCCESS, TIME_OUT, EnvDims, NavState

DIMS = EnvDims(
    num_beams=4,
    max_range_m=6.0,
    max_lin_vel_mps=1.5,
    max_ang_vel_radps=2.0,
    num_actions=3,
    position_window=25,
    room_half_x_m=4.0,
    room_half_y_m=4.0,
)


def state(n: int = 2) -> NavState:
    return NavState.zeros(n, DIMS, "cpu")


def test_progress_positive_when_approaching():
    """d: 3.0 -> 2.5 gives +0.5; 2.0 -> 2.2 gives -0.2; gamma 0.99 adds 0.01 * d_t = +0.025 at d_t 2.5."""
    s = state()
    s.prev_goal_dist = torch.tensor([3.0, 2.0])
    s.goal_dist = torch.tensor([2.5, 2.2])
    assert torch.allclose(R.progress(s), torch.tensor([0.5, -0.2]))
    assert torch.allclose(R.progress(s, gamma=0.99), torch.tensor([0.5 + 0.025, -0.2 + 0.022]))


def test_face_goal_zero_when_standing_still():
    """Goal dead ahead (cos 0 = 1): 0 at rest, 0.5 at 0.75 m/s (0.75/1.5);
    unweighted it is cos(60 deg) = 0.5."""
    s = state()
    s.goal_bearing = torch.tensor([0.0, math.pi / 3])
    assert torch.allclose(R.face_goal(s), torch.zeros(2))
    s.vel_body = torch.tensor([[0.75, 0.0], [-0.75, 0.0]])
    assert torch.allclose(R.face_goal(s), torch.tensor([0.5, 0.5 * 0.5]))
    assert torch.allclose(R.face_goal(s, motion_weighted=False), torch.tensor([1.0, 0.5]))


def test_near_obstacle_ramps_inside_safe_dist():
    """safe 0.25: min_scan 0.30 -> 0; 0.20 -> (0.25-0.20)/0.25 = 0.2; 0.0 -> 1 (clipped at 1)."""
    s = state(3)
    s.min_scan = torch.tensor([0.30, 0.20, 0.0])
    assert torch.allclose(R.near_obstacle(s), torch.tensor([0.0, 0.2, 1.0]))


def test_closing_speed_counts_only_motion_towards_a_near_surface():
    """4 beams: ahead, left, behind, right; robot radius 0.2, zone 0.3 m beyond its edge.
    World 0: a wall 0.35 m ahead (gap 0.15 -> nearness 1 - 0.15/0.3 = 0.5), driving at 1.5 m/s into
    it: (1.5/1.5)^2 * 0.5 = 0.5. World 1: the same wall, 0.75 m/s along it (left): 0. World 2: the
    wall, 0.75 m/s half ahead, half left (0.6, 0.45): only the ahead beam is near, (0.6/1.5)^2 * 0.5
    = 0.08. World 3: 1.5 m/s ahead, the wall 0.6 m away (gap 0.4 > zone): 0. World 4: backing away at
    1.5 m/s from a wall 0.25 m behind (nearness 1 - 0.05/0.3): 0."""
    s = state(5)
    far = 6.0
    wall_ahead = [0.35, far, far, far]
    s.scan_clean = torch.tensor(
        [wall_ahead, wall_ahead, wall_ahead, [0.6, far, far, far], [far, far, 0.25, far]]
    )
    s.vel_body = torch.tensor([[1.5, 0.0], [0.0, 0.75], [0.6, 0.45], [1.5, 0.0], [1.5, 0.0]])
    assert torch.allclose(R.closing_speed(s), torch.tensor([0.5, 0.0, 0.08, 0.0, 0.0]), atol=1e-6)
    s.vel_body[4] = torch.tensor([-0.75, 0.0])  # now towards it: (0.75/1.5)^2 * (1 - 0.05/0.3) = 0.2083
    assert R.closing_speed(s)[4].item() == pytest.approx(0.25 * (1 - 0.05 / 0.3), abs=1e-6)
    assert R.closing_speed(s, zone_m=0.1)[0].item() == 0.0  # gap 0.15 lies outside a 0.1 m zone


def test_action_smooth_and_backward():
    """a_t - a_{t-1} = (0.5, -0.5, 1) -> 0.25 + 0.25 + 1 = 1.5;
    backward: -0.05 - (-0.45) = 0.4, and 0 forward."""
    s = state()
    s.action = torch.tensor([[0.5, -0.5, 1.0], [-0.45, 0.0, 0.0]])
    s.prev_action = torch.tensor([[0.0, 0.0, 0.0], [-0.45, 0.0, 0.0]])
    assert torch.allclose(R.action_smooth(s), torch.tensor([1.5, 0.0]))
    s.action = torch.tensor([[0.5, 0.0, 0.0], [-0.45, 0.0, 0.0]])
    assert torch.allclose(R.backward(s), torch.tensor([0.0, 0.4]))


def test_stuck_fires_only_after_the_window():
    """Net move 0.1 m over 25 steps: stuck once step >= 25, not at step 24; a 0.5 m move is never stuck."""
    s = state()
    s.pos_window = torch.zeros(2, 26, 2)
    s.pos_window[0, -1] = torch.tensor([0.1, 0.0])
    s.pos_window[1, -1] = torch.tensor([0.3, 0.4])  # |(0.3, 0.4)| = 0.5 m
    s.step = torch.tensor([24, 30])
    assert R.stuck(s).tolist() == [0.0, 0.0]
    s.step = torch.tensor([25, 30])
    assert R.stuck(s).tolist() == [1.0, 0.0]


def test_event_terms_read_the_termination_flags():
    """goal, collision, timeout and out_of_bounds are the 0/1 flags; time is 1 every step."""
    s = state()
    s.success = torch.tensor([True, False])
    s.collision = torch.tensor([False, True])
    s.time_out = torch.tensor([False, False])
    s.out_of_bounds = torch.tensor([False, False])
    assert R.goal(s).tolist() == [1.0, 0.0]
    assert R.collision(s).tolist() == [0.0, 1.0]
    assert R.timeout(s).tolist() == [0.0, 0.0]
    assert R.time(s).tolist() == [1.0, 1.0]


def test_weighted_sum_and_episode_sums():
    """bcppo weights: goal 15 + time -0.02 + progress 2 * 0.5 = 15.98
    for a success step with 0.5 m progress."""
    cfg = OmegaConf.create(
        {
            "terms": {
                "goal": {"weight": 15.0, "params": {}},
                "time": {"weight": -0.02, "params": {}},
                "progress": {"weight": 2.0, "params": {}},
                "collision": {"weight": 0.0, "params": {}},
            }
        }
    )
    m = RewardManager(cfg, position_window=25, num_envs=2, device="cpu")
    assert [t.name for t in m.terms] == ["goal", "time", "progress"]  # weight 0 is skipped
    s = state()
    s.success = torch.tensor([True, False])
    s.prev_goal_dist, s.goal_dist = torch.tensor([1.0, 1.0]), torch.tensor([0.5, 1.0])
    r = m.compute(s)
    assert torch.allclose(r, torch.tensor([15.98, -0.02]))
    sums = m.take_episode_sums(torch.tensor([True, False]))  # columns: goal, time, progress
    assert sums[0, 0].item() == 15.0 and abs(sums[0, 1].item() + 0.02) < 1e-7
    assert sums[0, 2].item() == 1.0  # 2 * 0.5 m
    assert m.episode_sums[0].tolist() == [0.0, 0.0, 0.0]  # the finished world starts over
    assert abs(m.episode_sums[1, 1].item() + 0.02) < 1e-7  # the running one keeps its sums


def test_unknown_terms_and_params_fail_with_the_options():
    """A misspelled term lists the available ones; a bad param shows the signature; stuck checks history."""

    def cfg(terms):
        return OmegaConf.create({"terms": terms})

    with pytest.raises(KeyError, match="unknown reward term 'colision'.*available: .*'collision'"):
        RewardManager(cfg({"colision": {"weight": 1.0, "params": {}}}), 25, 1, "cpu")
    with pytest.raises(TypeError, match=r"no parameter\(s\) \['safe'\]; signature: near_obstacle\(safe_dist"):
        RewardManager(cfg({"near_obstacle": {"weight": 1.0, "params": {"safe": 1}}}), 25, 1, "cpu")
    with pytest.raises(ValueError, match="env.position_window>=40"):
        RewardManager(cfg({"stuck": {"weight": -1.0, "params": {"window": 40}}}), 25, 1, "cpu")


def test_collision_beats_success_in_the_same_step():
    """Contact and goal distance < radius in one step: reason collision, no success;
    timeout only otherwise."""
    s = state(3)
    s.contact = torch.tensor([True, False, False])
    s.goal_dist = torch.tensor([0.1, 0.1, 2.0])
    length = torch.tensor([10, 10, 250])
    compute_terminations(s, torch.ones(3, dtype=torch.bool), length, 250, 0.3, 4.0, 4.0)
    assert s.collision.tolist() == [True, False, False]
    assert s.success.tolist() == [False, True, False]
    assert s.time_out.tolist() == [False, False, True]
    assert s.reason.tolist() == [COLLISION, SUCCESS, TIME_OUT]
    # A terminal event on the last step is a termination, not a truncation.
    s.contact = torch.tensor([False, False, True])
    compute_terminations(s, torch.ones(3, dtype=torch.bool), length, 250, 0.3, 4.0, 4.0)
    assert s.time_out.tolist() == [False, False, False] and s.reason[2].item() == COLLISION
