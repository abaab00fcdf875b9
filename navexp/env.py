"""NavEnv: the rsl_rl VecEnv that wires the simulator, the terms and the episode bookkeeping.

One ``step(actions)``: clip the body-frame action, scale it to the servo ranges and rotate it into
the world frame -> ``decimation`` physics steps -> state -> terminations -> rewards -> auto-reset of
finished worlds -> observations. Worlds that finish with ``auto_reset=False`` are held (zero
command, termination reason latched, zero reward) until ``reset()``.
"""

from __future__ import annotations

import math

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from navexp.obs.manager import ObservationManager
from navexp.rewards.manager import RewardManager
from navexp.rewards.terminations import compute_terminations
from navexp.sim import beam_angles, make_sim, resolve_backend, resolve_device
from navexp.sim.layout import Layout, LayoutPool, LayoutSpec, _rotate, nearest_obstacle
from navexp.sim.scenarios import load_scenarios
from navexp.sim.scene import SceneSpec
from navexp.state import REASONS, SUCCESS, EnvDims, NavState
from navexp.validation import validate_env_cfg


class NavEnv(VecEnv):
    """LiDAR navigation in ``num_envs`` parallel MuJoCo Warp worlds (rsl_rl VecEnv contract)."""

    OUTCOME_WINDOW = 1000
    """Episodes kept for the rolling success rate."""

    def __init__(self, cfg) -> None:
        """Build from an experiment config with groups ``env``, ``obs``, ``reward`` and a ``seed``."""
        env_cfg = cfg.env
        validate_env_cfg(env_cfg)  # before anything is built
        self.cfg = cfg
        self.env_cfg = env_cfg
        self.device = torch.device(resolve_device(str(env_cfg.device)))
        self.num_envs = int(env_cfg.num_envs)
        self.num_actions = 3
        self.control_dt = env_cfg.sim.timestep_s * env_cfg.sim.decimation
        self.max_episode_length = int(math.ceil(env_cfg.episode_length_s / self.control_dt - 1e-9))
        self.auto_reset = bool(env_cfg.auto_reset)
        self.half_x, self.half_y = env_cfg.room.size_x_m / 2, env_cfg.room.size_y_m / 2
        robot = env_cfg.robot
        self.dims = EnvDims(
            num_beams=env_cfg.lidar.num_beams,
            max_range_m=env_cfg.lidar.max_range_m,
            max_lin_vel_mps=robot.max_lin_vel_mps,
            max_ang_vel_radps=robot.max_ang_vel_radps,
            num_actions=self.num_actions,
            position_window=env_cfg.position_window,
            room_half_x_m=self.half_x,
            room_half_y_m=self.half_y,
        )
        n, dev = self.num_envs, self.device
        # Terms are resolved before the simulator: a config error costs no kernel compile.
        self.obs_manager = ObservationManager(cfg.obs, self.dims, n, dev)
        self.reward_manager = RewardManager(cfg.reward, env_cfg.position_window, n, dev)
        # The analytic nearest-surface query runs only while an active term reads its result.
        self.needs_clearance = bool(self.obs_manager.reads | self.reward_manager.reads)
        self.layout_spec = LayoutSpec.from_env_cfg(env_cfg)
        self.scenarios: Layout | None = None
        if env_cfg.scenarios:
            fixed = load_scenarios(
                env_cfg.scenarios,
                env_cfg.obstacles.cylinder_slots,
                env_cfg.obstacles.box_slots,
                self.half_x,
                self.half_y,
                robot.radius_m,
            )
            self.scenarios = Layout(**{k: v.to(dev) for k, v in vars(fixed).items()})
        self.generator = torch.Generator(device=dev)
        # Random layouts come in batches of at least 256 (one sampling call serves many resets).
        self.layout_pool = LayoutPool(self.layout_spec, max(n, 256), self.generator, dev)
        self.seed(int(cfg.seed) + int(env_cfg.layout_seed_offset))

        self.backend = resolve_backend(str(env_cfg.sim.backend), str(self.device))
        self.sim = make_sim(
            self.backend,
            SceneSpec.from_env_cfg(env_cfg),
            n,
            str(dev),
            beam_angles(env_cfg.lidar.num_beams, env_cfg.lidar.fov_deg),
            env_cfg.lidar.max_range_m,
            env_cfg.sim.decimation,
            env_cfg.sim.nconmax_per_world,
            env_cfg.sim.njmax_per_world,
            env_cfg.sim.cuda_graph,
        )
        self.state = NavState.zeros(n, self.dims, dev)
        if not self.needs_clearance:  # never computed: NaN, so an undeclared read cannot pass silently
            self.state.clearance.fill_(float("nan"))
            self.state.nearest_dir_body.fill_(float("nan"))
        self.layout = Layout.empty(n, env_cfg.obstacles.cylinder_slots, env_cfg.obstacles.box_slots, dev)
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=dev)
        self.episode_count = torch.zeros(n, dtype=torch.long, device=dev)
        self.held = torch.zeros(n, dtype=torch.bool, device=dev)
        """[N] worlds whose episode ended with auto_reset off (frozen until reset())."""
        self._outcomes = torch.zeros(self.OUTCOME_WINDOW, device=dev)
        self._outcome_count = 0
        self._obs = self.obs_manager.zeros()
        self.reset()

    # -- VecEnv -----------------------------------------------------------------------------
    def seed(self, seed: int) -> None:
        """Seed the layout and noise generator (python/numpy/torch are seeded by the app)."""
        self.generator.manual_seed(seed)
        self.layout_pool.clear()

    def get_observations(self) -> TensorDict:
        """The observation groups of the current state (policy [, privileged])."""
        return self._obs

    def reset(self, env_ids: torch.Tensor | None = None) -> TensorDict:
        """Start new episodes in ``env_ids`` (all worlds when None) and return the observations."""
        ids = torch.arange(self.num_envs, device=self.device) if env_ids is None else env_ids.to(self.device)
        self._reset_worlds(ids)
        self.sim.refresh(ids)
        self._read_sim(reset_ids=ids)
        self._obs = self.obs_manager.compute(self.state, reset_ids=ids)
        self._check_finite(self._obs, None)
        return self._obs

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Apply body-frame actions [N, 3] in [-1, 1] for one control step."""
        s = self.state
        active = ~self.held
        s.prev_action = s.action
        s.action = self._process_actions(actions) * active.unsqueeze(-1)
        self._write_ctrl(s.action)
        self.sim.step()
        msg = self.sim.overflow_message()
        if msg is not None:
            raise RuntimeError(msg)
        s.prev_goal_dist = s.goal_dist.clone()
        self._read_sim()
        self.episode_length_buf += active.long()
        s.step += active.long()
        compute_terminations(
            s,
            active,
            self.episode_length_buf,
            self.max_episode_length,
            self.env_cfg.goal_radius_m,
            self.half_x,
            self.half_y,
        )
        rewards = self.reward_manager.compute(s, active.float())
        dones = s.success | s.collision | s.out_of_bounds | s.time_out
        extras: dict = {"time_outs": s.time_out.clone(), "log": {}}
        ended = dones.nonzero().flatten()
        reset_ids = None
        if ended.numel() > 0:
            extras["log"] = self._episode_log(ended)
            if self.auto_reset:
                reset_ids = ended
                self._reset_worlds(ended)
                self.sim.refresh(ended)
                self._read_sim(reset_ids=ended)
            else:
                self.held[ended] = True
        self._obs = self.obs_manager.compute(s, reset_ids=reset_ids)
        self._check_finite(self._obs, rewards)
        return self._obs, rewards, dones.long(), extras

    # -- internals --------------------------------------------------------------------------
    def _process_actions(self, actions: torch.Tensor) -> torch.Tensor:
        if not isinstance(actions, torch.Tensor) or actions.shape != (self.num_envs, self.num_actions):
            shape = tuple(actions.shape) if isinstance(actions, torch.Tensor) else type(actions).__name__
            raise ValueError(
                f"actions must be a tensor of shape ({self.num_envs}, {self.num_actions}); got {shape}"
            )
        actions = actions.to(self.device, torch.float32)
        finite = torch.isfinite(actions).all(dim=1)
        if not bool(finite.all()):
            bad = (~finite).nonzero().flatten().tolist()
            raise ValueError(
                f"actions contain NaN/inf in worlds {bad[:10]} (values {actions[bad[0]].tolist()})"
            )
        return actions.clamp(-1.0, 1.0)

    def _write_ctrl(self, a: torch.Tensor) -> None:
        # Body-frame command -> world-frame servo targets: v_world = R(yaw) * (a_xy * v_max).
        r = self.env_cfg.robot
        v_world = _rotate(a[:, :2] * r.max_lin_vel_mps, self.sim.qpos[:, 2])
        self.sim.ctrl[:, :2] = v_world
        self.sim.ctrl[:, 2] = a[:, 2] * r.max_ang_vel_radps

    def _reset_worlds(self, ids: torch.Tensor) -> None:
        if self.scenarios is not None:
            k = self.scenarios.num_worlds
            entry = (ids + self.episode_count[ids] * self.num_envs) % k
            layout = self.scenarios.index(entry)
        else:
            layout = self.layout_pool.take(ids.numel())
        self.layout.assign(ids, layout)
        self.sim.write_layouts(ids, layout)
        s = self.state
        self.episode_length_buf[ids] = 0
        self.episode_count[ids] += 1
        self.held[ids] = False
        s.step[ids] = 0
        s.action[ids] = 0.0
        s.prev_action[ids] = 0.0
        s.reason[ids] = 0
        for flag in (s.success, s.collision, s.out_of_bounds, s.time_out):
            flag[ids] = False

    def _sim_fields(self, ids: torch.Tensor | slice) -> dict[str, torch.Tensor]:
        """State fields of the worlds ``ids`` computed from the simulator's tensors and the layouts."""
        sim, lay = self.sim, self.layout
        pos, yaw = sim.qpos[ids, :2].clone(), sim.qpos[ids, 2].clone()
        vel = sim.qvel[ids, :2].clone()
        goal = lay.goal_xy[ids].clone()
        to_goal = goal - pos
        bearing = torch.atan2(to_goal[:, 1], to_goal[:, 0]) - yaw
        clean = sim.ranges[ids].clone()
        noise = self.env_cfg.lidar.range_noise_std_m
        scan = clean.clone()
        if noise > 0:
            eps = torch.randn(clean.shape, generator=self.generator, device=self.device)
            scan = (clean + noise * eps).clamp(0.0, self.dims.max_range_m)
        fields = {
            "pos_xy": pos,
            "yaw": yaw,
            "vel_world": vel,
            "vel_body": _rotate(vel, -yaw),
            "omega": sim.qvel[ids, 2].clone(),
            "goal_xy": goal,
            "goal_dist": to_goal.norm(dim=-1),
            "goal_bearing": torch.atan2(torch.sin(bearing), torch.cos(bearing)),  # wrap to [-pi, pi]
            "scan_clean": clean,
            "scan": scan,
            "min_scan": clean.min(dim=1).values,
            "contact": sim.contact[ids].bool(),
        }
        if self.needs_clearance:
            sub = lay if isinstance(ids, slice) else lay.index(ids)
            dist, closest = nearest_obstacle(pos.unsqueeze(1), sub, self.half_x, self.half_y)
            direction = closest.squeeze(1) - pos
            direction = direction / direction.norm(dim=-1, keepdim=True).clamp_min(1e-9)
            fields["clearance"] = dist.squeeze(1)
            fields["nearest_dir_body"] = _rotate(direction, -yaw)
        return fields

    def _read_sim(self, reset_ids: torch.Tensor | None = None) -> None:
        """Fill the state from the simulator: every world after a control step (the position window
        advances one entry), or only the worlds ``reset_ids`` at the start of their new episode (no
        history, no progress, no contact); the other worlds' state is left exactly as it is."""
        s = self.state
        if reset_ids is None:
            for name, value in self._sim_fields(slice(None)).items():
                setattr(s, name, value)
            s.pos_window = torch.cat((s.pos_window[:, 1:], s.pos_xy.unsqueeze(1)), dim=1)
            return
        for name, value in self._sim_fields(reset_ids).items():
            getattr(s, name)[reset_ids] = value
        s.pos_window[reset_ids] = s.pos_xy[reset_ids].unsqueeze(1)
        s.prev_goal_dist[reset_ids] = s.goal_dist[reset_ids]
        s.contact[reset_ids] = False

    def _episode_log(self, ended: torch.Tensor) -> dict[str, torch.Tensor]:
        """Per-episode values of the worlds that just ended; rsl_rl averages them per iteration."""
        log: dict[str, torch.Tensor] = {}
        for name, sums in self.reward_manager.pop_episode_sums(ended).items():
            log[f"Episode_Reward/{name}"] = sums
        reason = self.state.reason[ended]
        for code, name in enumerate(REASONS):
            if code:
                log[f"Episode_Termination/{name}"] = (reason == code).float()
        success = (reason == SUCCESS).float()
        log["Metrics/success_rate"] = success
        self._record_outcomes(success)
        log["Metrics/episode_length_s"] = self.episode_length_buf[ended].float() * self.control_dt
        return log

    def _record_outcomes(self, success: torch.Tensor) -> None:
        k = min(success.numel(), self.OUTCOME_WINDOW)
        idx = (self._outcome_count + torch.arange(k, device=self.device)) % self.OUTCOME_WINDOW
        self._outcomes[idx] = success[-k:]
        self._outcome_count += k

    def recent_success_rate(self) -> float:
        """Success fraction of the last OUTCOME_WINDOW finished episodes (nan before the first)."""
        n = min(self._outcome_count, self.OUTCOME_WINDOW)
        return float(self._outcomes[:n].mean()) if n else float("nan")

    def _check_finite(self, obs: TensorDict, rewards: torch.Tensor | None) -> None:
        if not self.env_cfg.check_finite:
            return
        sources = {
            "simulator state": torch.isfinite(self.sim.qpos).all(1) & torch.isfinite(self.sim.qvel).all(1)
        }
        for g in obs.keys():
            sources[f"observation group '{g}'"] = torch.isfinite(obs[g]).all(1)
        if rewards is not None:
            sources["rewards"] = torch.isfinite(rewards)
        if bool(torch.stack(list(sources.values())).all()):  # one device sync when all is well
            return
        for what, ok in sources.items():
            if not bool(ok.all()):
                worlds = (~ok).nonzero().flatten().tolist()
                raise FloatingPointError(
                    f"NaN/inf in {what} in worlds {worlds[:10]} ({len(worlds)} worlds); stopping rather than "
                    f"training on garbage (env.check_finite=false disables this check)"
                )
