"""Observation groups, config composition and validation."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path

import pytest
import torch
from conftest import build_env
from hydra.errors import ConfigCompositionException

from navexp import compose_config, make_env
from navexp.learn.ppo_cfg import check_ppo_cfg
from navexp.learn.rl_cfg import build_train_cfg
from navexp.paths import CONFIG_DIR
from navexp.task.obs.manager import ObservationManager
from navexp.task.state import EnvDims


def variants(group: str) -> list[str]:
    return sorted(p.stem for p in (Path(CONFIG_DIR) / group).glob("*.yaml"))


def test_default_widths_policy_78_privileged_76():
    """nav: policy 72 + 3 + 2 + 1 = 78. asymmetric adds privileged 1 + 72 + 1 + 2 = 76."""
    env = build_env("env.num_envs=2", "obs=asymmetric")
    obs = env.get_observations()
    assert obs["policy"].shape == (2, 78) and obs["privileged"].shape == (2, 76)
    assert env.obs_manager.layout()["policy"] == [
        ("lidar", 72),
        ("goal_polar", 3),
        ("vel_body", 2),
        ("omega", 1),
    ]
    assert build_train_cfg(env.cfg)["obs_groups"] == {"actor": ["policy"], "critic": ["policy", "privileged"]}
    sym = build_env("env.num_envs=2")
    assert set(sym.get_observations().keys()) == {"policy"}


def test_groups_are_zeros_of_declared_width_before_any_step():
    """A fresh manager (history 2, action_prev on) returns zeros of (78 + 3) * 2 = 162 columns."""
    cfg = compose_config(["obs.history_length=2", "obs.terms.action_prev.enabled=true"])
    env_dims = EnvDims(72, 6.0, 1.5, 2.0, 3, 25, 4.0, 4.0)
    m = ObservationManager(cfg.obs, env_dims, 3, torch.device("cpu"))
    z = m.zeros()
    assert z["policy"].shape == (3, 162) and not z["policy"].any()


def test_history_stacks_frames_and_restarts_on_reset():
    """history 3: the policy group is 3 x 78 wide; right after reset all three frames are the same."""
    env = build_env("env.num_envs=2", "obs.history_length=3")
    obs = env.get_observations()["policy"].view(2, 3, 78)
    assert torch.equal(obs[:, 0], obs[:, 2])
    env.step(torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))
    obs2 = env.get_observations()["policy"].view(2, 3, 78)
    assert torch.equal(obs2[:, 1], obs[:, 2])  # the previous newest frame moved back one slot
    assert not torch.equal(obs2[:, 2], obs2[:, 1])  # moving changed the newest frame (velocity)


def test_a_term_returning_the_wrong_width_is_an_error():
    """A silent extra column must fail, not broadcast: declared 71 but lidar returns 72."""
    env = build_env("env.num_envs=2")
    env.obs_manager.groups["policy"][0].width = 71
    with pytest.raises(RuntimeError, match=r"'lidar' returned shape \(2, 72\), declared \(2, 71\)"):
        env.step(torch.zeros(2, 3))


def test_sim_only_group_in_the_actor_is_a_hard_error():
    cfg = compose_config(["obs=asymmetric", "ppo.actor_obs_groups=[policy,privileged]"])
    with pytest.raises(ValueError, match=r"actor may only read deployable groups \['policy'\]"):
        check_ppo_cfg(cfg)


def test_yaml_cannot_move_a_term_to_another_group():
    """ObsTermCfg has only enabled and params: a 'group' key fails at compose time, and forced in with '+'
    it fails when the env is built."""
    with pytest.raises(ConfigCompositionException):
        compose_config(["obs.terms.lidar.group=privileged"])
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['group'\].*follows from its provenance"):
        make_env(compose_config(["+obs.terms.lidar.group=privileged"]))


def pairwise_variants() -> list[tuple[str, str, str]]:
    """(env, obs, reward) triples in which every pair of variants of two groups occurs at least once.

    Every (env, reward) pair, with the obs variant cycling on the sum of their indices: for a fixed env
    (or reward) the sum runs over at least as many consecutive values as there are obs variants, so
    every (env, obs) and (obs, reward) pair occurs too. The groups meet pairwise (an obs term or a
    reward term reads the env's maps); the full product costs three times as many builds."""
    envs, obs, rewards = variants("env"), variants("obs"), variants("reward")
    assert len(envs) >= len(obs) and len(rewards) >= len(obs)
    return [
        (e, obs[(i + j) % len(obs)], r)
        for (i, e), (j, r) in itertools.product(enumerate(envs), enumerate(rewards))
    ]


def test_the_variant_triples_cover_every_pair():
    triples = pairwise_variants()
    groups = [variants("env"), variants("obs"), variants("reward")]
    for a, b in itertools.combinations(range(3), 2):
        assert {(t[a], t[b]) for t in triples} == set(itertools.product(groups[a], groups[b]))


@pytest.mark.parametrize("env_v,obs_v,reward_v", pairwise_variants())
def test_every_variant_composes_and_builds(env_v, obs_v, reward_v):
    """Every env, obs and reward variant builds a NavEnv beside every variant of the other groups and
    takes one finite step."""
    env = make_env(
        compose_config(
            [f"env={env_v}", f"obs={obs_v}", f"reward={reward_v}", "env.num_envs=2", "env.device=cpu"]
        )
    )
    obs, rew, done, extras = env.step(torch.zeros(2, 3))
    width = 78 + 3 * 72 if obs_v == "dynamic" else 78  # obs=dynamic adds 3 earlier scans
    assert obs["policy"].shape == (2, width) and torch.isfinite(rew).all()


def test_bcppo_is_the_design_table():
    """reward=bcppo: the shared design table, weights and params exactly."""
    t = compose_config(["reward=bcppo"]).reward.terms
    weights = {k: v.weight for k, v in t.items()}
    assert weights == {
        "goal": 15.0,
        "progress": 2.0,
        "face_goal": 0.05,
        "time": -0.02,
        "near_obstacle": -0.08,
        "action_smooth": -0.02,
        "backward": -0.05,
        "stuck": -0.03,
        "collision": -12.0,
        "timeout": -4.0,
        "out_of_bounds": 0.0,
        "path_progress": 0.0,  # every registered term is in every variant; off in the design table
        "closing_speed": 0.0,
        "moving_ttc": 0.0,
    }
    assert t.near_obstacle.params.safe_dist == 0.25 and t.backward.params.thresh == -0.05
    assert t.stuck.params.window == 25 and t.stuck.params.min_move == 0.30


@pytest.mark.parametrize("override", ["env.num_env=4", "reward.terms.collision.wieght=-5", "ppo.clip=0.1"])
def test_misspelled_keys_fail_at_compose_time(override):
    with pytest.raises(ConfigCompositionException):
        compose_config([override])


def test_misspelled_group_option_lists_the_valid_ones():
    with pytest.raises(ConfigCompositionException, match="(?s)bcpo.*bcppo"):
        compose_config(["reward=bcpo"])


@pytest.mark.parametrize(
    "override,message",
    [
        ("env.num_envs=0", "num_envs=0 is invalid; allowed: an integer >= 1"),
        ("env.room.size_x_m=-1", "room.size_x_m=-1.0 is invalid"),
        ("env.obstacles.cylinder_count=[2,9]", "max <= obstacles.cylinder_slots"),
        ("env.goal_radius_m=5.0", "goal_radius_m=5.0 is invalid"),
        ("env.lidar.num_beams=0", "lidar.num_beams=0 is invalid"),
        ("env.device=tpu", "device='tpu' is invalid; allowed: auto | cpu | cuda | cuda:N"),
        ("env.obstacles.box_half_size_m=[0.5,0.1]", "box_half_size_m=\\[0.5, 0.1\\] is invalid"),
    ],
)
def test_impossible_env_config_fails_before_the_sim_is_built(override, message):
    with pytest.raises(ValueError, match=message):
        make_env(compose_config([override]))


def test_unknown_obs_term_lists_the_available_ones():
    """On the command line a misspelled term fails at compose time; in code it lists the registry."""
    with pytest.raises(ConfigCompositionException):
        compose_config(["obs.terms.lidarr.enabled=true"])
    from omegaconf import OmegaConf

    from navexp.task.state import EnvDims

    cfg = OmegaConf.create(
        {"terms": {"lidarr": {"enabled": True}}, "privileged_enabled": False, "history_length": 1}
    )
    with pytest.raises(KeyError, match="unknown observation term 'lidarr'.*'lidar'"):
        ObservationManager(cfg, EnvDims(72, 6.0, 1.5, 2.0, 3, 25, 4.0, 4.0), 1, torch.device("cpu"))


def test_any_registered_term_can_be_weighted_from_the_command_line():
    """reward=sparse has no near_obstacle weight, but every registered term is addressable."""
    cfg = compose_config(
        ["reward=sparse", "reward.terms.near_obstacle.weight=-0.1", "reward.terms.stuck.params.window=10"]
    )
    assert cfg.reward.terms.near_obstacle.weight == -0.1 and cfg.reward.terms.stuck.params.window == 10
    assert cfg.reward.terms.progress.weight == 0.0


def test_timeouts_appear_only_in_time_outs(scenario_file):
    """0.5 s episodes (5 steps of 0.1 s): the standing world times out at step 5;
    the moving one collides first."""
    path = scenario_file("""
    scenarios:
      - {name: stand, robot: {x: 0.0, y: 0.0}, goal: {x: 3.0, y: 3.0}}
      - name: crash
        robot: {x: 0.0, y: 0.0}
        goal: {x: -3.0, y: 3.0}
        obstacles: [{kind: cylinder, x: 0.75, y: 0.0, radius: 0.3}]
    """)
    env = build_env(
        "env.num_envs=2", f"env.scenarios={path}", "env.episode_length_s=0.5", "env.auto_reset=false"
    )
    assert env.max_episode_length == 5
    act = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    outs = [env.step(act) for _ in range(5)]
    dones = torch.stack([o[2] for o in outs])
    time_outs = torch.stack([o[3]["time_outs"] for o in outs])
    assert dones[:, 0].tolist() == [0, 0, 0, 0, 1] and time_outs[:, 0].tolist() == [0, 0, 0, 0, 1]
    assert dones[:, 1].sum() == 1 and time_outs[:, 1].sum() == 0  # the collision is a termination
    assert env.state.reason.tolist() == [4, 2]
    # Held worlds keep their final pose and reason until reset.
    pose = env.state.pos_xy.clone()
    _, rew, done, _ = env.step(torch.ones(2, 3))
    assert torch.allclose(env.state.pos_xy, pose, atol=1e-4) and env.state.reason.tolist() == [4, 2]
    assert rew.tolist() == [0.0, 0.0] and done.tolist() == [0, 0]
    env.reset()
    assert env.state.reason.tolist() == [0, 0]


def test_analytic_clearance_is_computed_only_when_a_term_reads_it(scenario_file):
    """Robot at (1, -2.5) in the empty 8 m room: nearest surface is the wall y = -4, 1.50 m away, and
    it lies straight to the robot's right (body frame (0, -1)). Without a term that reads it, the
    field is NaN and a reward term declaring reads=("clearance",) switches it on."""
    scene = """
    scenarios:
      - name: off_centre
        robot: {x: 1.0, y: -2.5, yaw_deg: 0.0}
        goal: {x: -3.0, y: 3.0}
    """
    path = scenario_file(scene)
    plain = build_env("env.num_envs=1", f"env.scenarios={path}")
    assert not plain.needs_clearance and plain.state.clearance.isnan().all()
    plain.step(torch.zeros(1, 3))
    assert plain.state.clearance.isnan().all()
    env = build_env("env.num_envs=1", f"env.scenarios={path}", "obs=asymmetric")
    assert env.needs_clearance
    assert abs(env.state.clearance[0].item() - 1.50) < 1e-5
    assert torch.allclose(env.state.nearest_dir_body[0], torch.tensor([0.0, -1.0]), atol=1e-5)
    from navexp.task.rewards.terms import REWARD_TERMS, reward_term

    assert REWARD_TERMS.get("near_obstacle").meta["reads"] == ()  # reads the LiDAR, not the truth

    @reward_term("test_clearance_bonus", reads=("clearance",))
    def clearance_bonus(s):
        return s.clearance

    shaped = build_env(
        "env.num_envs=1", f"env.scenarios={path}", "+reward.terms.test_clearance_bonus={weight: 1.0}"
    )
    assert shaped.needs_clearance and abs(shaped.state.clearance[0].item() - 1.50) < 1e-5
    allowed = r"allowed: \['clearance', 'nearest_dir_body', 'path_dist', 'goal_field', 'moving_ttc'\]"
    with pytest.raises(ValueError, match=r"reads=\['clerance'\]; " + allowed):
        reward_term("wall_hugging", reads=("clerance",))


@pytest.mark.parametrize(
    ("encoding", "expected"),
    [
        # linear: range / 6 m -> 2/6, 4/6, 6/6
        ("linear", [2 / 6, 4 / 6, 1.0]),
        # log: log(r / 0.1) / log(6 / 0.1) -> log(20)/log(60) = 0.7317, log(40)/log(60) = 0.9010, 1.0
        ("log", [0.7317, 0.9010, 1.0]),
    ],
)
def test_lidar_encoding_reads_hand_checked_walls(scenario_file, encoding, expected):
    """A robot at (2, 0) facing +x in the 8 m room: the wall ahead is 2.00 m away, the one to its left
    4.00 m, the one behind 6 m (the max range). Beam 0 forward, 18 left, 36 behind."""
    path = scenario_file("""
    scenarios:
      - {name: open, robot: {x: 2.0, y: 0.0}, goal: {x: -2.0, y: 2.0}}
    """)
    env = build_env("env.num_envs=1", f"env.scenarios={path}", f"obs.terms.lidar.params.encoding={encoding}")
    obs, *_ = env.step(torch.zeros(1, 3))
    beams = obs["policy"][0, [0, 18, 36]]
    assert torch.allclose(beams, torch.tensor(expected), atol=2e-3), beams


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "obs.terms.lidar.params.encoding=sqrt",
            r"encoding='sqrt' is not an encoding; allowed: \['linear', 'lo",
        ),
        (
            "obs.terms.lidar.params.log_min_m=6.0",
            r"log_min_m=6.0 must lie in \(0, env.lidar.max_range_m=6.0\)",
        ),
        ("obs.terms.lidar.params.log_min_m=0", r"log_min_m=0 must lie in"),
    ],
)
def test_bad_lidar_encoding_fails_naming_the_param(override, message):
    """An unknown encoding or a log floor outside (0, max range) fails before the simulator is built."""
    with pytest.raises(ValueError, match=message):
        make_env(compose_config([override]))


def test_a_term_error_fails_before_the_simulator_is_built(monkeypatch):
    """A bad term param fails while NavEnv's parts are built (navexp.task.env_parts): the simulator,
    and with it any kernel compile, is never reached."""
    import navexp.task.env as env_module

    def no_sim(*args, **kwargs):
        raise AssertionError("the simulator was built before the config error")

    monkeypatch.setattr(env_module, "make_sim", no_sim)
    with pytest.raises(ValueError, match=r"log_min_m=0 must lie in"):
        make_env(compose_config(["obs.terms.lidar.params.log_min_m=0"]))


def test_a_run_stored_before_the_encoding_param_still_reads_a_linear_scan(scenario_file):
    """Today's default scan is log-encoded. A run trained before ``encoding`` existed stored
    ``lidar: {params: {}}``; loading it gives the term exactly those params, so it reads the linear
    scan it was trained on (the wall 2.00 m ahead reads 2/6 = 0.333, not log's 0.732), while a run that
    stored ``log`` keeps it and a command-line override still wins."""
    from conftest import BASE
    from omegaconf import OmegaConf

    from navexp.config.run_config import load_run_config

    path = scenario_file("""
    scenarios:
      - {name: open, robot: {x: 2.0, y: 0.0}, goal: {x: -2.0, y: 2.0}}
    """)
    stored = OmegaConf.to_container(compose_config([*BASE, "env.num_envs=1", f"env.scenarios={path}"]))
    assert stored["obs"]["terms"]["lidar"]["params"] == {"encoding": "log", "log_min_m": 0.1}
    before = copy.deepcopy(stored)
    before["obs"]["terms"]["lidar"] = {"enabled": True, "params": {}}  # what such a run stored
    old = {"infos": {"config": before}}
    cfg = load_run_config(old, [])
    assert dict(cfg.obs.terms.lidar.params) == {}
    obs, *_ = make_env(cfg).step(torch.zeros(1, 3))
    assert torch.allclose(obs["policy"][0, [0, 18, 36]], torch.tensor([2 / 6, 4 / 6, 1.0]), atol=2e-3)

    assert load_run_config({"infos": {"config": stored}}, []).obs.terms.lidar.params.encoding == "log"
    forced = load_run_config(old, ["obs.terms.lidar.params.encoding=log"])
    assert forced.obs.terms.lidar.params.encoding == "log"
