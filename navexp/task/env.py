"""NavEnv: the rsl_rl VecEnv that wires the simulator, the terms and the episode bookkeeping.

One ``step(actions)``: clip the body-frame action, let the robot (``navexp.task.robots``) turn it into
servo targets -> ``decimation`` physics steps -> state -> terminations -> rewards -> masked
auto-reset of finished worlds -> one LiDAR pass for every world -> observations. Worlds that finish
with ``auto_reset=False`` are held (zero command, termination reason latched, zero reward) until
``reset()``. The step never reads a device value on the host (no sync): resets are fixed-shape masked
writes, and faults are device flags raised every ``check_every`` steps (``check_faults``).
"""

from __future__ import annotations

import dataclasses

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from navexp.sim import make_sim
from navexp.sim.layout import Layout, LayoutRows, nearest_obstacle, rotate_xy, rotation_matrices
from navexp.sim.lidar import OFF as LIDAR_OFF
from navexp.sim.motion import Motion, bounding_radius, time_to_contact
from navexp.task.env_parts import POOL_TOP_UP_STEPS, build_env_parts
from navexp.task.episode_stats import EpisodeStats
from navexp.task.faults import SOURCES, FaultFlags
from navexp.task.maps import MapSpec
from navexp.task.maps.grid_path import grid_shape, path_distance
from navexp.task.maps.random_family import LayoutSpec
from navexp.task.rewards.terminations import Terminations
from navexp.task.state import NavState
from navexp.task.step_graph import StepGraph
from navexp.task.validation import validate_env_cfg


class NavEnv(VecEnv):
    """LiDAR navigation in ``num_envs`` parallel MuJoCo Warp worlds (rsl_rl VecEnv contract)."""

    OUTCOME_WINDOW = 1000
    """Episodes kept for the rolling success rate."""
    POOL_TOP_UP_STEPS = POOL_TOP_UP_STEPS
    """Most control steps between layout-pool top-ups (``navexp.task.env_parts.POOL_TOP_UP_STEPS``)."""

    def __init__(self, cfg, validated: bool = False) -> None:
        """Build from an experiment config with groups ``env``, ``obs``, ``reward`` and a ``seed``.

        The env config is validated first unless the caller did (``validated``: a training validates
        its whole config once, in ``navexp.config.validation.validate_run_cfg``). Each attribute taken
        from the built parts is described on ``navexp.task.env_parts.EnvParts``."""
        if not validated:
            validate_env_cfg(cfg.env)  # before anything is built
        self.cfg, self.env_cfg = cfg, cfg.env
        parts = build_env_parts(cfg)  # terms and layouts before the simulator: no compile on a bad config
        self.num_envs, self.device = parts.num_envs, parts.device
        self.robot, self.num_actions, self.dims = parts.robot, parts.robot.num_actions, parts.dims
        self.control_dt, self.max_episode_length = parts.control_dt, parts.max_episode_length
        self.half_x, self.half_y = parts.dims.room_half_x_m, parts.dims.room_half_y_m
        self.obs_manager, self.reward_manager = parts.obs_manager, parts.reward_manager
        self.needs_clearance, self.needs_path = parts.needs_clearance, parts.needs_path
        self.needs_moving_ttc = parts.needs_moving_ttc
        self.layout_spec, self.map_spec = parts.layout_spec, parts.map_spec
        self.scenarios, self.scenario_entries = parts.scenarios, parts.scenario_entries
        self.check_every, self.pool_every = parts.check_every, parts.pool_every
        self.generator, self.layout_pool = parts.generator, parts.layout_pool
        self.seed(parts.layout_seed)  # draws the pool: a layout that cannot be drawn fails before the sim
        self.backend = parts.backend
        self.sim = make_sim(parts.backend, parts.sim_spec)
        self.lidar_realism, self.safety_filter = parts.lidar_realism, parts.safety_filter
        self.step_graph = self._make_step_graph()
        # Config scalars the step reads, resolved once (an OmegaConf read costs tens of microseconds).
        self.auto_reset = bool(self.env_cfg.auto_reset)
        self.check_finite = bool(self.env_cfg.check_finite)
        self.goal_radius_m = float(self.env_cfg.goal_radius_m)
        self.max_lin_vel_mps = self.robot.max_lin_vel_mps
        self.max_ang_vel_radps = self.robot.max_ang_vel_radps
        self._init_buffers()
        self._bind_state()
        self.reset()

    def _init_buffers(self) -> None:
        """The state terms read, the layout each world plays, and the episode bookkeeping (all zero)."""
        n, dev = self.num_envs, self.device
        self.state = NavState.zeros(n, self.dims, dev)
        if not self.needs_clearance:  # never computed: NaN, so an undeclared read cannot pass silently
            self.state.clearance.fill_(float("nan"))
            self.state.nearest_dir_body.fill_(float("nan"))
        if not self.needs_moving_ttc:
            self.state.moving_ttc.fill_(float("nan"))
        if not self.needs_path:
            self.state.path_dist.fill_(float("nan"))
            self.state.prev_path_dist.fill_(float("nan"))
        self._init_layouts()
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=dev)
        self.episode_count = torch.zeros(n, dtype=torch.long, device=dev)
        self.held = torch.zeros(n, dtype=torch.bool, device=dev)
        """[N] worlds whose episode ended with auto_reset off (frozen until reset())."""
        self._world_ids = torch.arange(n, device=dev)
        self._no_change = torch.zeros(n, dtype=torch.bool, device=dev)
        self._path_read = torch.ones(n, dtype=torch.bool, device=dev)
        """[N] the last path-distance read gave a value (needs_path)."""
        self.stats = EpisodeStats([t.name for t in self.reward_manager.terms], self.OUTCOME_WINDOW, dev)
        self.faults = FaultFlags(n, dev)
        self.steps_taken = 0
        """Control steps since construction (host counter)."""
        self._step_count = torch.zeros((), dtype=torch.long, device=dev)
        """The same count on the device: it stamps faults, so a captured step needs no host value."""
        self._steps_since_check = 0
        self._steps_since_top_up = 0
        self._obs = self.obs_manager.zeros()
        self.terminations = Terminations(
            self.max_episode_length,
            self.goal_radius_m,
            self.half_x,
            self.half_y,
            dev,
            moving=self.motion is not None,
        )
        self._events = torch.zeros(n, 4, dtype=torch.bool, device=dev)
        """[N, 4] this step's episode ends in ``terminations.PRIORITY`` order (the state's flags view it)."""
        self._all_ok = torch.ones(n, dtype=torch.bool, device=dev)
        self._no_overflow = torch.zeros(n, dtype=torch.int32, device=dev)

    def _init_layouts(self) -> None:
        """The layouts the worlds play, packed one row of bytes per world, and the moving obstacles'
        motion (all empty until the first reset)."""
        n, dev = self.num_envs, self.device
        obst = self.env_cfg.obstacles
        field_shape = (0, 0)
        if self.needs_path:
            field_shape = grid_shape(self.half_x, self.half_y, self._path_cell_m)[:2]
        moving = self.layout_spec.moving
        moving_slots = (moving.cylinder_slots, moving.box_slots) if moving is not None else (0, 0)
        empty = Layout.empty(
            n,
            obst.cylinder_slots,
            obst.box_slots,
            dev,
            self.layout_spec.wall_slots,
            field_shape,
            moving_slots,
        )
        self._layout_rows = LayoutRows(empty)
        self._layout_buf = self._layout_rows.pack(empty)
        """[N, width] uint8: the layouts of the worlds, packed (a reset writes them in one op)."""
        self.layout = self._layout_rows.unpack(self._layout_buf)
        """[N] the layout each world plays (its map family, seed and shortest path included); every
        field a view into the packed rows."""
        if self.scenarios is not None:
            self._scenario_rows = self._layout_rows.pack(self.scenarios)
        self._pool_rows_checked: LayoutRows | None = None
        self.motion = None
        """The moving obstacles' motion (``env.dynamic``); None without moving slots."""
        if moving is not None:
            modes = moving.modes | self._scenario_modes()
            self.motion = Motion(
                n, moving.slots, self.half_x, self.half_y, self.control_dt, dev, modes, moving.compile_motion
            )
            self.motion.yield_to(moving.yield_m, self.dims.robot_radius_m)
            self._mov_vel = torch.zeros(n, moving.slots, 2, device=dev)
            """[N, M, 2] the moving obstacles' velocities over the last control step (``moving_ttc``)."""

    def _bind_state(self) -> None:
        """Point the state fields that are the simulator's or the layout's values at those buffers, and
        the rest at buffers of their own, once: a step writes every field in place (a fixed set of
        tensors a captured step can replay into) and reads the simulator without copying."""
        s, sim, n = self.state, self.sim, self.num_envs
        s.pos_xy, s.yaw = sim.qpos[:, :2], sim.qpos[:, 2]
        s.vel_world, s.omega = sim.qvel[:, :2], sim.qvel[:, 2]
        s.goal_xy = self.layout.goal_xy
        s.scan_clean = sim.ranges
        if self.lidar_realism.spec == LIDAR_OFF and not s.scan_history.shape[1]:
            # No realism option on: the robot's scan is the clean one. With a scan history ``scan``
            # keeps a buffer of its own: it holds the last step's scan until the new one is read.
            s.scan = s.scan_clean
        if self.needs_path:
            s.goal_field = self.layout.goal_field  # a view: the resets write the layout in place
        self._body = torch.zeros(n, 2, 2, device=self.device)
        """[N, 2, 2] body-frame velocity and goal offset (rows), written by each pose read."""
        s.vel_body = self._body[:, 0]
        s.collision, s.out_of_bounds, s.success, s.time_out = self._events.unbind(dim=1)

    # -- VecEnv -----------------------------------------------------------------------------
    def seed(self, seed: int) -> None:
        """Seed the layout and noise generator (python/numpy/torch are seeded by the app) and draw the
        layout pool anew (here, not inside a later step: sampling checks its yield on the host)."""
        self.generator.manual_seed(seed)
        self.layout_pool.clear()
        if self.scenarios is None:
            self.layout_pool.refill()

    def get_observations(self) -> TensorDict:
        """The observation groups of the current state (policy [, privileged])."""
        return self._obs

    def reset(self, env_ids: torch.Tensor | None = None) -> TensorDict:
        """Start new episodes in ``env_ids`` (all worlds when None) and return the observations."""
        mask = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        if env_ids is not None:
            mask.zero_()
            mask[env_ids.to(self.device)] = True
        self._reset_where(mask)
        self.sim.sense(mask)
        self._read_pose()
        self._restart_history(mask)
        self._read_scan(mask, advance=False)
        self._obs = self.obs_manager.compute(self.state, reset_mask=mask)
        # Stamped with the steps taken before this reset; the last step's overflow was recorded then.
        self._record_faults(self._no_overflow, self._all_ok, self._obs, None)
        self.check_faults()  # not the step path: report a bad start at once
        return self._obs

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Apply body-frame actions [N, A] in [-1, 1] (A and meaning: ``self.robot``) for one control step.

        Never waits for the device: resets are masked writes, faults are flagged on the device and
        raised every ``check_every`` steps. Rewards read the scan the action was chosen on (the
        LiDAR is cast once per step, after the resets, for every world). With a captured step
        (``step_graph``, a GPU) the device work replays as one CUDA graph."""
        self._check_actions(actions)
        out = self.step_graph(actions) if self.step_graph is not None else self._step_device(actions)
        self._end_step()
        return out

    def _step_device(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """The device work of one step (what a step graph captures): no host value read or written."""
        s = self.state
        active = ~self.held
        action_ok = self._process_actions(actions, active)
        self._write_ctrl(s.action)
        if self.motion is not None:
            before, after = self.motion.advance(active, self.layout, s.pos_xy)
            self.sim.move_obstacles(before, after)
            if self.needs_moving_ttc:
                torch.sub(after, before, out=self._mov_vel).div_(self.control_dt)
        self.sim.step()
        s.prev_goal_dist.copy_(s.goal_dist)
        if self.needs_path:
            s.prev_path_dist.copy_(s.path_dist)
        self._read_pose()
        s.pos_window.copy_(torch.cat((s.pos_window[:, 1:], s.pos_xy.unsqueeze(1)), dim=1))
        self.episode_length_buf += active
        s.step += active
        dones = self.terminations(s, active, self.episode_length_buf, out=self._events)
        rewards = self.reward_manager.compute(s, active)
        extras = {"time_outs": s.time_out.clone()}
        self.stats.record(
            dones, self.reward_manager.episode_sums, s.reason, self.episode_length_buf * self.control_dt
        )
        self.reward_manager.clear_finished(dones)
        reset_mask = None
        if self.auto_reset:
            reset_mask = dones
            self._reset_where(dones)
            self._read_pose()  # the reset worlds' new start; the others read the same values again
            self._restart_history(dones)
        else:
            self.held |= dones
        self.sim.sense(dones if self.auto_reset else self._no_change)
        self._read_scan(reset_mask)
        self._obs = self.obs_manager.compute(s, reset_mask=reset_mask)
        self._step_count += 1
        self._record_faults(self.sim.overflow, action_ok, self._obs, rewards)
        return self._obs, rewards, dones.long(), extras

    def check_faults(self) -> None:
        """Raise for faults flagged since the last check, naming the worlds and the first step; top up
        the layout pool when it runs low. One host sync."""
        self._steps_since_check = self._steps_since_top_up = 0
        faulty, pool_low = torch.stack((self.faults.any(), self.layout_pool.low())).tolist()
        if pool_low and self.scenarios is None:
            self.layout_pool.refill()
        if faulty:
            self.faults.raise_flagged(self._overflow_reason, self.check_every)

    def pop_episode_log(self) -> dict[str, torch.Tensor]:
        """Means over the episodes finished since the last call, under the dashboard tags."""
        return self.stats.pop()

    def recent_success_rate(self) -> float:
        """Success fraction of the last OUTCOME_WINDOW finished episodes (nan before the first)."""
        return self.stats.recent_success_rate()

    def finished_episodes(self) -> int:
        """Episodes finished since construction (all worlds); reads one device value."""
        return int(self.stats.outcomes.count)

    def set_layout_specs(self, layout_spec: LayoutSpec, map_spec: MapSpec) -> None:
        """Draw every layout from now on from these specs (a curriculum level): the pool is refilled
        at once, so the next resets take them; episodes in progress keep theirs. The slot counts must
        stay those the simulator was built with. Waits for the device: call between iterations."""
        ours = (self.layout_spec.cylinder_slots, self.layout_spec.box_slots, self.layout_spec.wall_slots)
        theirs = (layout_spec.cylinder_slots, layout_spec.box_slots, layout_spec.wall_slots)
        assert theirs == ours, f"slots (cylinders, boxes, walls) {theirs} differ from the model's {ours}"
        map_spec = dataclasses.replace(map_spec, keep_fields=self.needs_path)
        self.layout_spec, self.map_spec = layout_spec, map_spec
        self.layout_pool.spec, self.layout_pool.maps = layout_spec, map_spec
        if self.scenarios is None:
            self.layout_pool.refill()

    # -- internals --------------------------------------------------------------------------
    def _make_step_graph(self) -> StepGraph | None:
        """The whole step as one CUDA graph where the simulator captures its own (warp on a GPU, with
        ``env.sim.capture_step``); the simulator then runs its kernels inside that graph."""
        wanted = bool(self.env_cfg.sim.get("capture_step", True))
        if not (wanted and getattr(self.sim, "graph_enabled", False)):
            return None
        self.sim.graph_enabled = False  # its kernels are recorded by the step's graph

        def simulator_graphs() -> None:
            self.sim.graph_enabled = True

        shape = (self.num_envs, self.num_actions)
        generation = lambda: self.layout_pool.generation  # noqa: E731
        return StepGraph(
            self._step_device, shape, self.device, generation, (self.generator,), simulator_graphs
        )

    def _scenario_modes(self) -> frozenset[int]:
        """The motion codes a scenario file's moving entries use (none without a file)."""
        if self.scenarios is None:
            return frozenset()
        return frozenset(int(c) for c in self.scenarios.mov_mode.unique().tolist() if c > 0)

    @property
    def _path_cell_m(self) -> float:
        """Cell of the occupancy grid the path check and the goal distance fields use."""
        return float(self.map_spec.cfg.path_cell_m)

    def _check_actions(self, actions) -> None:
        """Refuse actions of another type or shape (before anything changes)."""
        if not isinstance(actions, torch.Tensor) or actions.shape != (self.num_envs, self.num_actions):
            shape = tuple(actions.shape) if isinstance(actions, torch.Tensor) else type(actions).__name__
            raise ValueError(
                f"actions must be a tensor of shape ({self.num_envs}, {self.num_actions}); got {shape}"
            )

    def _process_actions(self, actions: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
        """Move this step's action into ``state.action`` (the last one into ``prev_action``): clipped
        to [-1, 1], zero in held worlds and in rows with a NaN/inf; return the [N] bool of finite rows."""
        s = self.state
        if actions.requires_grad:  # a check on the host, not an op: rsl_rl acts without gradients
            actions = actions.detach()
        actions = actions.to(self.device, torch.float32)
        finite = torch.isfinite(actions).all(dim=1) if self.check_finite else self._all_ok
        s.prev_action.copy_(s.action)
        torch.clamp(actions, -1.0, 1.0, out=s.action)
        s.action.masked_fill_(~(finite & active).unsqueeze(-1), 0.0)  # NaN rows too: a fill, not a product
        return finite

    def _write_ctrl(self, a: torch.Tensor) -> None:
        """Servo targets for the clipped actions [N, A] (through the safety filter, on the scan the
        action was chosen on, where it is on), mapped by the robot at the current poses."""
        if self.safety_filter is not None:
            a = self.safety_filter(a, self.state.scan)
        self.robot.write_ctrl(a, self.sim.qpos, self.sim.ctrl)

    def _reset_where(self, mask: torch.Tensor) -> None:
        """New layouts and episode state for the worlds where ``mask`` [N] is set (masked writes)."""
        if self.scenarios is not None:
            row = (self._world_ids + self.episode_count * self.num_envs) % self.scenarios.num_worlds
            rows = self._scenario_rows[row]
        else:
            rows = self.layout_pool.take_rows(mask)
            if self.layout_pool.rows is not self._pool_rows_checked:  # once per refill
                assert self.layout_pool.rows.format == self._layout_rows.format, (
                    "pool layouts of another shape"
                )
                self._pool_rows_checked = self.layout_pool.rows
        torch.where(mask.unsqueeze(-1), rows, self._layout_buf, out=self._layout_buf)
        self.sim.write_layouts(mask, self.layout)  # the masked worlds' rows are the new layouts now
        if self.motion is not None:
            self.motion.reset(mask, self.layout)
        s, m1 = self.state, mask.unsqueeze(-1)
        self.episode_length_buf.masked_fill_(mask, 0)
        self.episode_count += mask
        self.held &= ~mask
        s.step.masked_fill_(mask, 0)
        s.action.masked_fill_(m1, 0.0)
        s.prev_action.masked_fill_(m1, 0.0)
        s.reason.masked_fill_(mask, 0)
        self._events.masked_fill_(m1, False)  # success, collision, out_of_bounds, time_out

    def _read_pose(self) -> None:
        """State fields that follow from the simulator's pose, velocity and contact and the goal."""
        s, sim = self.state, self.sim  # pos_xy, yaw, vel_world, omega, goal_xy: views (_bind_state)
        to_goal = s.goal_xy - s.pos_xy
        torch.linalg.vector_norm(to_goal, dim=-1, out=s.goal_dist)
        # Both world-frame vectors into the body frame at once: row @ R(yaw) = R(-yaw) row.
        world = torch.stack((s.vel_world, to_goal), dim=1)  # [N, 2 vectors, 2]
        # world @ R(yaw) as a product and a sum (a batched 2x2 matmul costs more dispatch on the CPU).
        rot = rotation_matrices(s.yaw).unsqueeze(1)  # [N, 1, 2, 2]
        torch.sum(world.unsqueeze(-1) * rot, dim=-2, out=self._body)  # vel_body is row 0
        goal_body = self._body[:, 1]
        torch.atan2(goal_body[:, 1], goal_body[:, 0], out=s.goal_bearing)  # in [-pi, pi]
        torch.ne(sim.contact, 0, out=s.contact)
        if self.motion is not None:
            torch.ne(sim.moving_contact, 0, out=s.moving_contact)
        if self.needs_clearance:
            dist, closest = nearest_obstacle(s.pos_xy.unsqueeze(1), self.layout, self.half_x, self.half_y)
            direction = closest.squeeze(1) - s.pos_xy
            direction = direction / direction.norm(dim=-1, keepdim=True).clamp_min(1e-9)
            s.clearance.copy_(dist.squeeze(1))
            s.nearest_dir_body.copy_(rotate_xy(direction, -s.yaw))
        if self.needs_moving_ttc and self.motion is not None:
            ttc = time_to_contact(
                s.pos_xy,
                s.vel_world,
                self.dims.robot_radius_m,
                self.motion.pos,
                self._mov_vel,
                bounding_radius(self.layout),
                self.layout.mov_mode != 0,
            )
            s.moving_ttc.copy_(ttc)
        if self.needs_path:
            d = path_distance(self.layout.goal_field, s.pos_xy, self.half_x, self.half_y)
            self._path_read.copy_(torch.isfinite(d))
            torch.where(self._path_read, d, s.path_dist, out=s.path_dist)

    def _restart_history(self, mask: torch.Tensor) -> None:
        """A new episode in the worlds ``mask`` has no past: its window holds the start position, no
        progress, no contact."""
        s = self.state
        torch.where(mask[:, None, None], s.pos_xy.unsqueeze(1), s.pos_window, out=s.pos_window)
        torch.where(mask, s.goal_dist, s.prev_goal_dist, out=s.prev_goal_dist)
        if self.needs_path:
            # A start the field gives no value for (a hand-made map whose goal cannot be reached) starts
            # from its shortest path or the straight line, never the previous episode's value.
            path = self.layout.shortest_path_m
            start = torch.where(torch.isfinite(path) & (path >= 0), path, s.goal_dist)
            torch.where(mask & ~self._path_read, start, s.path_dist, out=s.path_dist)
            torch.where(mask, s.path_dist, s.prev_path_dist, out=s.prev_path_dist)
        s.contact.masked_fill_(mask, False)
        if self.motion is not None:
            s.moving_contact.masked_fill_(mask, False)

    def _read_scan(self, restart: torch.Tensor | None, advance: bool = True) -> None:
        """The clean scan of every world and the policy's realistic one (random draws once per call);
        ``restart`` [N] marks worlds that begin an episode with this scan, ``advance`` a control step."""
        s = self.state  # scan_clean is the simulator's range buffer (_bind_state)
        history = s.scan_history.shape[1] > 0
        if history and advance:  # one step on: the scan before this one is the most recent earlier
            # scan (``s.scan`` still holds it: its own buffer where there is a history, _bind_state)
            s.scan_history.copy_(torch.cat((s.scan.unsqueeze(1), s.scan_history[:, :-1]), dim=1))
        torch.amin(s.scan_clean, dim=1, out=s.min_scan)
        scan = self.lidar_realism(s.scan_clean, restart, advance)
        if scan is not s.scan:
            s.scan.copy_(scan)
        if history and restart is not None:  # a new episode has no past: its first scan fills it
            fill = s.scan.unsqueeze(1).expand_as(s.scan_history)
            torch.where(restart[:, None, None], fill, s.scan_history, out=s.scan_history)

    def _overflow_reason(self, bits: int) -> str:
        """The simulator's account of an overflow, with where its buffer sizes are configured."""
        return f"{self.sim.overflow_reason(bits)} (buffer sizes: env.sim.nconmax_per_world, njmax_per_world)"

    def _record_faults(
        self,
        overflow: torch.Tensor,
        action_ok: torch.Tensor,
        obs: TensorDict,
        rewards: torch.Tensor | None,
    ) -> None:
        """Flag this step's faults in one call (columns in ``faults.SOURCES`` order): the simulator's
        overflow bits [N], and with ``check_finite`` the NaN/inf rows of actions, state, observations and
        rewards; the device step count is stamped on the kinds first seen now."""
        ok = [overflow == 0, action_ok]
        if self.check_finite:
            ok.append(torch.isfinite(torch.cat((self.sim.qpos, self.sim.qvel), dim=1)).all(dim=1))
            groups = [torch.isfinite(obs[g]).all(dim=1) for g in obs.keys()]
            ok.append(groups[0] if len(groups) == 1 else torch.stack(groups, dim=1).all(dim=1))
            ok.append(self._all_ok if rewards is None else torch.isfinite(rewards))
        else:
            ok += [self._all_ok] * 3
        assert len(ok) == len(SOURCES)
        self.faults.record_step(~torch.stack(ok, dim=1), overflow, self._step_count)

    def _end_step(self) -> None:
        self.steps_taken += 1
        self._steps_since_check += 1
        self._steps_since_top_up += 1
        if self._steps_since_check >= self.check_every:
            self.check_faults()
        elif self._steps_since_top_up >= self.pool_every:
            self._top_up_pool()

    def _top_up_pool(self) -> None:
        """Refill the layout pool when it runs low, between fault checks rarer than POOL_TOP_UP_STEPS
        (one host sync; faults stay flagged until the next check)."""
        self._steps_since_top_up = 0
        if bool(self.layout_pool.low()):
            self.layout_pool.refill()
