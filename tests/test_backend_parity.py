"""MuJoCo Warp (Warp's CPU device) and classic MuJoCo agree on the same scenario and action sequence."""

from __future__ import annotations

import math

import torch

from navexp import compose_config, make_env

STEPS = 64
"""The last of the 3 worlds ends at step 52 (collisions at steps 10, 13, 52); without auto-reset an
ended world stands still, so later steps would compare nothing new."""


def rollout(backend: str, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor, dict]:
    """64 control steps of smooth, world-specific commands in the shipped cluttered scenario (3 worlds)."""
    env = make_env(
        compose_config(
            [
                f"env.device={device}",
                f"env.sim.backend={backend}",
                "env.num_envs=3",
                "env.scenarios=cluttered",
                "env.lidar.range_noise_std_m=0",
                "env.auto_reset=false",
                "env.episode_length_s=40",
            ]
        )
    )
    poses, scans, ends = [], [], {}
    for k in range(STEPS):
        a = torch.tensor(
            [
                [0.8 * math.cos(0.05 * k + i), 0.4 * math.sin(0.07 * k + i), 0.5 * math.sin(0.03 * k + 2 * i)]
                for i in range(3)
            ],
            device=env.device,
        )
        _, _, done, _ = env.step(a)
        for w in done.nonzero().flatten().tolist():
            ends[w] = (k, int(env.state.reason[w]))
        poses.append(env.state.pos_xy.cpu().clone())  # the step rewrites the state in place
        scans.append(env.state.scan_clean.cpu().clone())
    return torch.stack(poses), torch.stack(scans), ends


def test_backends_agree_on_poses_scans_and_terminations():
    """Documented tolerances: identical episode ends; until each world's last step, poses within 1e-4 m
    and every LiDAR range within 1e-3 m. At a collision the backends part on purpose: warp holds the
    robot where it touched (it steps without contact forces), mujoco's contact lets it slide on."""
    p_warp, s_warp, e_warp = rollout("warp")
    p_mj, s_mj, e_mj = rollout("mujoco")
    assert e_warp == e_mj and len(e_warp) == 3  # the same worlds end at the same steps for the same reason
    for w, (end, _) in e_warp.items():
        assert (p_warp[:end, w] - p_mj[:end, w]).norm(dim=-1).max() < 1e-4
        assert (s_warp[:end, w] - s_mj[:end, w]).abs().max() < 1e-3  # [end - 1]: what the last action saw
    # The worlds really moved (the comparison is not of robots standing still).
    assert (p_warp[-1] - p_warp[0]).norm(dim=-1).min() > 0.3
