"""The LiDAR realism model (navexp.sim.lidar.LidarRealism): each option with hand-checkable numbers,
today's scan bit for bit with the default settings, and the env wiring (clean critic scan, latency
across resets, no host sync, bad values named)."""

from __future__ import annotations

import pytest
import torch
from conftest import build_env
from scipy import stats

from navexp import compose_config
from navexp.analysis.sync_audit import SyncAudit
from navexp.config.validation import validate_env_cfg
from navexp.sim.lidar import OFF, LidarRealism, RealismSpec, beam_spacing_deg, clamp_ranges

MAX_R = 6.0


def realism(n: int = 4, beams: int = 72, fov: float = 360.0, seed: int = 0, **options) -> LidarRealism:
    """A model with every option off except ``options`` (CPU, seeded generator)."""
    spec = RealismSpec(**{**OFF.as_dict(), **options})
    return LidarRealism(spec, n, beams, fov, MAX_R, torch.Generator().manual_seed(seed), "cpu")


def todays_scan(clean: torch.Tensor, std: float, generator: torch.Generator) -> torch.Tensor:
    """A copy of NavEnv._read_scan before the realism model (the reference for bit-identity)."""
    eps = torch.randn(clean.shape, generator=generator, device=clean.device)
    return (clean + std * eps).clamp(0.0, MAX_R)


def test_all_off_returns_the_clean_scan_itself():
    """Every option off: the policy's scan is the clean tensor, not even a copy."""
    clean = torch.rand(4, 72) * MAX_R
    assert realism()(clean) is clean


def test_default_noise_is_bit_identical_to_todays_formula():
    """Defaults (noise 0.01 m only): the same generator draws and arithmetic as before, bit for bit,
    over several scans from one generator."""
    model = LidarRealism(RealismSpec(), 8, 72, 360.0, MAX_R, torch.Generator().manual_seed(3), "cpu")
    reference = torch.Generator().manual_seed(3)
    for k in range(5):
        clean = torch.rand(8, 72, generator=torch.Generator().manual_seed(100 + k)) * MAX_R
        assert torch.equal(model(clean), todays_scan(clean, 0.01, reference))


def test_env_scan_with_defaults_is_todays_scan(scenario_file):
    """In the env (default range_noise_std_m 0.01): each step's scan equals today's formula drawn
    from the env generator's state just before the step."""
    from test_lidar import SCENE

    env = build_env(
        "env.sim.backend=mujoco",
        "env.num_envs=4",
        f"env.scenarios={scenario_file(SCENE)}",
        "env.lidar.range_noise_std_m=0.01",
    )
    for _ in range(3):
        before = torch.Generator().set_state(env.generator.get_state())
        env.step(torch.full((4, 3), 0.3))
        assert torch.equal(env.state.scan, todays_scan(env.state.scan_clean, 0.01, before))


def test_dropout_rate_inside_its_binomial_interval():
    """p = 0.1 over 64 worlds x 72 beams x 10 scans = 46080 beams: the dropped count lies inside the
    99.9 % binomial interval (about 4608 +- 210), and a dropped beam reads max range (6.00 m)."""
    model = realism(n=64, dropout_prob=0.1)
    clean = torch.full((64, 72), 2.0)
    dropped = sum(int((model(clean) == MAX_R).sum()) for _ in range(10))
    lo, hi = stats.binom.interval(0.999, 46080, 0.1)
    assert lo <= dropped <= hi, (dropped, lo, hi)
    out = model(clean)
    assert set(out.unique().tolist()) == {2.0, MAX_R}


def test_bias_and_scale_arithmetic():
    """r * 1.02 + 0.05: 2.00 -> 2.09, 0.50 -> 0.56; 5.90 -> 6.068 is clipped to max range 6.00."""
    out = realism(range_scale=1.02, range_bias_m=0.05)(torch.tensor([[2.0, 0.5, 5.9]]))
    assert torch.allclose(out, torch.tensor([[2.09, 0.56, 6.0]]), atol=1e-6)


def test_min_range_reads_max_range_and_quantisation_rounds():
    """min_range 0.25 m: 0.10 -> 6.00 (no return), 0.30 stays. Resolution 0.05 m: 2.012 -> 2.00,
    2.026 -> 2.05 (40.52 -> 41 steps), 1.337 -> 1.35 (26.74 -> 27 steps)."""
    out = realism(min_range_m=0.25)(torch.tensor([[0.10, 0.30, 2.0]]))
    assert torch.allclose(out, torch.tensor([[MAX_R, 0.30, 2.0]]))
    out = realism(resolution_m=0.05)(torch.tensor([[2.012, 2.026, 1.337]]))
    assert torch.allclose(out, torch.tensor([[2.00, 2.05, 1.35]]), atol=1e-6)


def test_jitter_stays_between_neighbours_and_is_bounded():
    """A 90 deg fan of 10 beams (spacing 10 deg) over a ramp r_b = 1 + 0.1 b: jitter 5 deg moves a
    beam at most half a spacing, so r_b +- 0.05 m; it reaches both ends of that bound over many scans
    and is zero on average. At full jitter (10 deg) a reading stays between its neighbours' ranges."""
    assert beam_spacing_deg(10, 90.0) == 10.0
    ramp = (1.0 + 0.1 * torch.arange(10.0)).expand(512, 10)
    offset = realism(n=512, beams=10, fov=90.0, jitter_deg=5.0)(ramp) - ramp
    assert offset.abs().max().item() <= 0.05 + 1e-6
    assert offset.max().item() > 0.045 and offset.min().item() < -0.045
    assert abs(offset.mean().item()) < 0.002
    # Full circle, random scan, full spacing: between min and max of the beam and its two neighbours.
    clean = torch.rand(64, 72, generator=torch.Generator().manual_seed(1)) * MAX_R
    out = realism(n=64, jitter_deg=5.0)(clean)
    window = torch.stack((clean.roll(1, 1), clean, clean.roll(-1, 1)))
    assert (out >= window.min(0).values - 1e-6).all() and (out <= window.max(0).values + 1e-6).all()
    assert not torch.equal(out, clean)


def test_latency_returns_exactly_the_scan_of_k_steps_before():
    """latency 2: scan t reads clean scan t-2; the first two read the scan the buffer started with."""
    model = realism(latency_steps=2)
    scans = [torch.full((4, 72), float(t)) for t in range(6)]
    start = torch.ones(4, dtype=torch.bool)
    assert torch.equal(model(scans[0], restart=start, advance=False), scans[0])
    outs = [model(scans[t]) for t in range(1, 6)]
    assert torch.equal(outs[0], scans[0])  # step 1: two steps back is before the start: the start scan
    for t in range(2, 6):
        assert torch.equal(outs[t - 1], scans[t - 2])


def test_a_reset_world_restarts_its_latency_buffer(scenario_file):
    """Env with latency 1 and no noise, robots driving: each step's policy scan is the clean scan of
    the step before; env.reset(world 1) gives world 1 its new clean scan at once (and again after the
    next step), while world 0 keeps the scan it had."""
    from test_lidar import SCENE

    env = build_env(
        "env.sim.backend=mujoco",
        "env.num_envs=4",
        f"env.scenarios={scenario_file(SCENE)}",
        "env.lidar.latency_steps=1",
        "env.auto_reset=false",
    )
    s = env.state
    assert torch.equal(s.scan, s.scan_clean)  # a fresh episode has no past
    drive = torch.tensor([0.5, 0.0, 0.5]).repeat(4, 1)
    for _ in range(3):
        previous = s.scan_clean.clone()
        env.step(drive)
        assert torch.equal(s.scan, previous)
        assert not torch.equal(s.scan, s.scan_clean)  # the robots moved: the delay is visible
    world0_scan = s.scan[0].clone()
    env.reset(torch.tensor([1]))
    assert torch.equal(s.scan[1], s.scan_clean[1])
    assert torch.equal(s.scan[0], world0_scan)
    restart_scan = s.scan_clean[1].clone()
    env.step(drive)
    assert torch.equal(s.scan[1], restart_scan)


def test_critic_keeps_the_clean_scan_and_min_scan_reads_it(scenario_file):
    """With every option on, truth_scan_clean and min_scan come from the clean scan; the lidar term
    reads the realistic one."""
    from test_lidar import SCENE

    env = build_env(
        "env.sim.backend=mujoco",
        "env.num_envs=4",
        f"env.scenarios={scenario_file(SCENE)}",
        "obs=asymmetric",
        "obs.terms.lidar.params.encoding=linear",  # range / 6 m, so the columns compare to the scans
        *ALL_ON,
    )
    env.step(torch.zeros(4, 3))
    s, obs = env.state, env.get_observations()
    layout = env.obs_manager.layout()
    assert layout["policy"][0] == ("lidar", 72)
    assert torch.equal(obs["policy"][:, :72], s.scan / 6.0)
    names = [name for name, _ in layout["privileged"]]
    start = sum(w for _, w in layout["privileged"][: names.index("truth_scan_clean")])
    assert torch.equal(obs["privileged"][:, start : start + 72], s.scan_clean / 6.0)
    assert torch.equal(s.min_scan, s.scan_clean.min(dim=1).values)
    assert not torch.equal(s.scan, s.scan_clean)


ALL_ON = [
    "env.lidar.range_noise_std_m=0.02",
    "env.lidar.dropout_prob=0.05",
    "env.lidar.jitter_deg=2.0",
    "env.lidar.range_bias_m=0.03",
    "env.lidar.range_scale=1.01",
    "env.lidar.min_range_m=0.1",
    "env.lidar.resolution_m=0.01",
    "env.lidar.latency_steps=2",
]


def test_warp_step_with_every_option_on_makes_no_host_sync():
    """30 steps of 16 worlds with resets every 10 steps and every realism option on: zero syncs."""
    env = build_env(
        "env.sim.backend=warp", "env.num_envs=16", "env.episode_length_s=1.0", "env.check_every=1000", *ALL_ON
    )
    actions = torch.rand(16, 3, generator=torch.Generator().manual_seed(0)) * 2 - 1
    with SyncAudit() as audit:
        for _ in range(30):
            env.step(actions)
    assert audit.num_syncs == 0, dict(audit.syncs)


def test_clamp_ranges_maps_every_non_return_to_max_range():
    """-1 (miss), 7.5 (beyond 6 m), inf and NaN read 6.0; 0.0 and 2.5 stay (torch and numpy input)."""
    raw = torch.tensor([-1.0, 7.5, float("inf"), float("nan"), 0.0, 2.5])
    expected = torch.tensor([6.0, 6.0, 6.0, 6.0, 0.0, 2.5])
    assert torch.equal(clamp_ranges(raw, 6.0), expected)
    assert torch.equal(clamp_ranges(raw.double().numpy(), 6.0).float(), expected)


@pytest.mark.parametrize(
    "key, value, allowed",
    [
        ("dropout_prob", 1.0, "0 <= dropout_prob < 1"),
        ("jitter_deg", 6.0, "beam spacing \\(5 deg"),
        ("range_bias_m", -6.0, "max_range_m"),
        ("range_scale", 0.0, "0 < range_scale"),
        ("min_range_m", 6.0, "< max_range_m"),
        ("resolution_m", -0.01, "0 <= value"),
        ("latency_steps", -1, "integer >= 0"),
        ("range_noise_std_m", -0.1, ">= 0"),
    ],
)
def test_an_invalid_realism_value_names_the_key(key, value, allowed):
    """Each key out of range fails validation naming lidar.<key>, the value and what is allowed."""
    cfg = compose_config(["env.device=cpu", f"env.lidar.{key}={value}"])
    with pytest.raises(ValueError, match=rf"lidar\.{key}={value!r} is invalid; allowed: .*{allowed}"):
        validate_env_cfg(cfg.env)


def test_train_with_realism_then_evaluate_with_and_without_it(tmp_path):
    """A tiny run trained with dropout 0.05 and latency 1: its evaluation env uses those settings,
    `env.lidar.dropout_prob=0 env.lidar.latency_steps=0` on the evaluate command line turns them off
    (the evaluation runs and counts its episodes), and the export metadata records them."""
    from conftest import TINY

    from navexp import evaluate
    from navexp.config.run_config import load_run_config
    from navexp.deploy.export import metadata
    from navexp.learn.checkpoint import load_checkpoint
    from navexp.train import run

    overrides = [
        *TINY, "ppo.save_interval=1", "eval.enabled=false", "size=none",
        "env.lidar.dropout_prob=0.05", "env.lidar.latency_steps=1",
    ]  # fmt: skip
    run(compose_config(overrides), tmp_path / "run", overrides, quiet=True)
    ckpt = load_checkpoint(str(tmp_path / "run"))
    trained = RealismSpec.from_lidar_cfg(load_run_config(ckpt, []).env.lidar)
    assert (trained.dropout_prob, trained.latency_steps) == (0.05, 1)
    clean_eval = ["env.lidar.dropout_prob=0", "env.lidar.latency_steps=0"]
    off = RealismSpec.from_lidar_cfg(load_run_config(ckpt, clean_eval).env.lidar)
    assert (off.dropout_prob, off.latency_steps, off.range_noise_std_m) == (0.0, 0, 0.01)  # noise kept
    metrics = evaluate.main(
        [f"checkpoint={tmp_path / 'run'}", "eval.num_episodes=3", f"out={tmp_path / 'e.json'}", *clean_eval]
    )
    assert metrics["num_episodes"] == 3 and metrics["overrides"][1:] == clean_eval
    meta = metadata(ckpt, load_run_config(ckpt, []))
    assert meta["lidar"]["training_realism"]["dropout_prob"] == 0.05
    assert meta["lidar"]["training_realism"]["latency_steps"] == 1
