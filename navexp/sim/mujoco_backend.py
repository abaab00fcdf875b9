"""Classic MuJoCo backend for the CPU: the same scene, layouts and tensor contract as WarpSim.

Everything per world runs in ``mujoco.rollout``'s persistent C++ thread pool over all cores (or the
process's share of them, ``set_pool_threads``); Python never loops over worlds or substeps while
stepping. One control step is two threaded rollouts:

1. physics: ``decimation`` substeps of every world (state = time, qpos, qvel; control = servo
   targets and obstacle mocap poses), with a contact sensor read after every substep;
2. sensing: one more rollout step from the final states, on a copy of the scene that also carries
   the LiDAR as one rangefinder per beam. A step evaluates its sensors at the state it starts from,
   so this reads the contact flag and the engine's own ray casting at the final pose; its integrated
   state is discarded.

Each world has its own MjModel copy (per-world obstacle sizes, written on reset). Measured on a
2-core CPU this is several times faster per env step than MuJoCo Warp's CPU device (BENCHMARKS.md);
``sim.backend=auto`` picks it whenever the device is the CPU.

The torch tensors (float32, like Warp's) are the state of record between control steps, so writes
to ``sim.qpos``/``sim.qvel``/``sim.ctrl`` behave exactly as with WarpSim.
"""

from __future__ import annotations

import copy
import os

import mujoco
import numpy as np
import torch
from mujoco import rollout

from navexp.sim.base import SimSpec
from navexp.sim.layout import POSE_FIELDS, Layout, slot_poses, slot_sizes
from navexp.sim.lidar import clamp_ranges
from navexp.sim.scene import PARK_Z_M, build_model, slot_names

STATE = mujoco.mjtState.mjSTATE_FULLPHYSICS
"""Rollout state: time, qpos (x, y, yaw), qvel."""
CONTROL = (
    mujoco.mjtState.mjSTATE_CTRL | mujoco.mjtState.mjSTATE_MOCAP_POS | mujoco.mjtState.mjSTATE_MOCAP_QUAT
)
"""Rollout control per substep: servo targets, then every mocap position, then every mocap quaternion."""
_UNSTABLE = (
    mujoco.mjtWarning.mjWARN_BADQPOS,
    mujoco.mjtWarning.mjWARN_BADQVEL,
    mujoco.mjtWarning.mjWARN_BADQACC,
    mujoco.mjtWarning.mjWARN_BADCTRL,
)
_FULL = (mujoco.mjtWarning.mjWARN_CONTACTFULL, mujoco.mjtWarning.mjWARN_CNSTRFULL)

_POOL_THREADS: int | None = None
"""Worker threads of this process's rollout pools (``set_pool_threads``); None: ``os.cpu_count()``."""


def set_pool_threads(threads: int | None) -> None:
    """Size every rollout pool of this process to ``threads`` (its share of the cores): a sim built
    without ``nthread`` takes it when built and, if it changes, from its next step on. None: new sims
    take ``os.cpu_count()`` and built ones keep their size."""
    global _POOL_THREADS
    _POOL_THREADS = None if threads is None else max(1, int(threads))


class MujocoSim:
    """``num_worlds`` copies of the scene stepped by classic MuJoCo on the CPU (same API as WarpSim)."""

    DEVICE_TYPES = ("cpu",)

    def __init__(self, sim_spec: SimSpec) -> None:
        spec = sim_spec.scene
        num_worlds, decimation = sim_spec.num_worlds, sim_spec.decimation
        self.sim_spec = sim_spec
        self.spec, self.num_worlds, self.decimation = spec, num_worlds, decimation
        self.device = torch.device("cpu")
        self.max_range_m = sim_spec.max_range_m
        angles = np.array(sim_spec.beam_angles_rad, dtype=np.float64)
        self.mjm: mujoco.MjModel = build_model(spec, contact_sensor=True)
        self.sense_mjm: mujoco.MjModel = build_model(spec, contact_sensor=True, beam_angles_rad=angles)
        self.robot_body = mujoco.mj_name2id(self.mjm, mujoco.mjtObj.mjOBJ_BODY, "robot")
        self._index_slots()
        # One model copy per world and per pass (sizes differ between worlds).
        self.models = [copy.copy(self.mjm) for _ in range(num_worlds)]
        self.sense_models = [copy.copy(self.sense_mjm) for _ in range(num_worlds)]
        self.nthread = 0
        self._rollout: rollout.Rollout | None = None
        self._build_pool(sim_spec.nthread or _POOL_THREADS or os.cpu_count() or 1)
        self._alloc_rollout_buffers()
        self.qpos = torch.zeros(num_worlds, 3)
        self.qvel = torch.zeros(num_worlds, 3)
        self.ctrl = torch.zeros(num_worlds, self.mjm.nu)  # the robot's servo targets
        self.contact = torch.zeros(num_worlds, dtype=torch.int32)
        self.moving_contact = torch.zeros(num_worlds, dtype=torch.int32)
        self.overflow = torch.zeros(num_worlds, dtype=torch.int32)
        self.ranges = torch.full((num_worlds, angles.size), self.max_range_m)
        self.write_layouts(
            torch.ones(num_worlds, dtype=torch.bool),
            Layout.empty(
                num_worlds,
                spec.cylinder_slots,
                spec.box_slots,
                "cpu",
                spec.wall_slots,
                moving_slots=(spec.moving_cylinder_slots, spec.moving_box_slots),
            ),
        )

    def _index_slots(self) -> None:
        """Each obstacle slot's geom, body, BVH node, collision and ray settings, and its mocap pose's
        columns in the rollout control vector."""
        m = self.mjm
        names = slot_names(self.spec)
        bodies = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n) for n in names]
        self._slot_geoms = np.array(
            [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, n) for n in names], dtype=int
        )
        mocap = np.array([m.body_mocapid[b] for b in bodies], dtype=int)
        # Ray casting culls with each body's bounding-volume hierarchy, compiled for the placeholder
        # sizes; a slot body holds one geom, so its single BVH node is that geom's AABB. The beam
        # sites add no geoms, so slot geoms, bodies and BVH nodes have the same ids in both models.
        assert all(m.body_bvhnum[b] == 1 for b in bodies)
        assert self.sense_mjm.ngeom == m.ngeom and self.sense_mjm.nmocap == m.nmocap
        self._slot_bvh = np.array([m.body_bvhadr[b] for b in bodies], dtype=int)
        # A parked slot leaves the collision and ray passes of its world: conaffinity 0 on its geom and
        # body keeps it out of the broadphase, alpha 0 out of ray casting (mj_ray skips invisible
        # geoms). Parked 50 m under the floor it could touch nothing anyway, but a trap map parks most
        # of its 34 slots and each one cost broadphase and ray time (BENCHMARKS.md, "Parked slots leave
        # classic MuJoCo's passes").
        self._slot_bodies = np.array(bodies, dtype=int)
        self._slot_conaffinity = m.geom_conaffinity[self._slot_geoms].copy()
        self._slot_alpha = m.geom_rgba[self._slot_geoms, 3].copy()
        # Column indices of each slot's mocap pose inside the rollout control vector.
        nu, nmocap = m.nu, m.nmocap
        self._mocap_pos_cols = nu + 3 * mocap[:, None] + np.arange(3)
        self._mocap_quat_cols = nu + 3 * nmocap + 4 * mocap[:, None] + np.arange(4)
        # The moving slots' x, y columns (the last M slots); sensordata[1:1 + M] flags their contacts.
        self._moving = self.spec.moving_slots
        self._moving_xy_cols = self._mocap_pos_cols[len(names) - self._moving :, :2].ravel()
        self._substep_frac = (
            torch.arange(1, self.decimation + 1, dtype=torch.float64) / self.decimation
        ).view(1, -1, 1, 1)
        """[1, D, 1, 1] how far through the control step each substep ends (k + 1) / D, made once."""

    def _alloc_rollout_buffers(self) -> None:
        """The rollouts' inputs and outputs per world: state, the control of every substep, the states
        and sensor values after it, and the sensing pass's one step."""
        m, n, decimation = self.mjm, self.num_worlds, self.decimation
        nstate, ncontrol = mujoco.mj_stateSize(m, STATE), mujoco.mj_stateSize(m, CONTROL)
        self._state = np.zeros((n, nstate))
        self._control = np.zeros((n, decimation, ncontrol))
        self._out = np.zeros((n, decimation, nstate))
        self._sensors = np.zeros((n, decimation, m.nsensordata))
        self._sense_out = np.zeros((n, 1, nstate))
        self._sense_sensors = np.zeros((n, 1, self.sense_mjm.nsensordata))

    # -- per-world layout -------------------------------------------------------------------
    def write_layouts(self, mask: torch.Tensor, layout: Layout) -> None:
        """Pose obstacles, robot and state of the worlds where ``mask`` [N] is set from the rows of
        ``layout`` (N rows); other worlds are untouched."""
        assert mask.dtype == torch.bool and mask.shape == (self.num_worlds,), "a [N] bool mask"
        ids_t = mask.nonzero().flatten()  # the CPU: finding the worlds costs no device sync
        ids = ids_t.numpy()
        if ids.size == 0:
            return
        sub = layout.index(ids_t, POSE_FIELDS)  # the fields posing and sizing the slots read
        hz = self.spec.obstacle_height_m / 2
        self.qpos[ids_t] = torch.cat((sub.robot_xy, sub.robot_yaw[:, None]), dim=1).float()
        self.qvel[ids_t] = 0.0
        self.ctrl[ids_t] = 0.0
        pos, quat = (x.double().numpy() for x in slot_poses(sub, hz, PARK_Z_M))
        n = ids.size
        ctrl_rows = self._control[ids]
        ctrl_rows[:, :, self._mocap_pos_cols.ravel()] = pos.reshape(n, 1, -1)
        ctrl_rows[:, :, self._mocap_quat_cols.ravel()] = quat.reshape(n, 1, -1)
        self._control[ids] = ctrl_rows
        size, half = (x.double().numpy() for x in slot_sizes(sub, hz))
        rbound = np.linalg.norm(half, axis=2)
        active = pos[:, :, 2] > PARK_Z_M / 2  # the slots standing in each world (no extra host read)
        conaffinity = np.where(active, self._slot_conaffinity, 0)
        alpha = np.where(active, self._slot_alpha, 0.0)
        g, b, bvh = self._slot_geoms, self._slot_bodies, self._slot_bvh
        # Sizes live in each world's MjModel: a short loop over the worlds being reset only.
        for k, w in enumerate(ids):
            for m in (self.models[w], self.sense_models[w]):
                m.geom_size[g] = size[k]
                m.geom_rbound[g] = rbound[k]
                m.geom_aabb[g, :3] = 0.0
                m.geom_aabb[g, 3:] = half[k]
                m.bvh_aabb[bvh, :3] = 0.0
                m.bvh_aabb[bvh, 3:] = half[k]
                m.geom_conaffinity[g] = conaffinity[k]
                m.body_conaffinity[b] = conaffinity[k]
            self.sense_models[w].geom_rgba[g, 3] = alpha[k]

    def move_obstacles(self, start: torch.Tensor, end: torch.Tensor) -> None:
        """The moving slots go from ``start`` to ``end`` [N, M, 2] over the next ``step()``: substep k of
        D sees them at ``start + (k + 1) / D * (end - start)`` (their mocap controls)."""
        if not self._moving:
            return
        a, b = start.double()[:, None], end.double()[:, None]
        xy = a + self._substep_frac * (b - a)  # [N, D, M, 2]
        self._control[:, :, self._moving_xy_cols] = xy.reshape(self.num_worlds, self.decimation, -1).numpy()

    # -- stepping ---------------------------------------------------------------------------
    def _build_pool(self, nthread: int) -> None:
        """``nthread`` threads step the worlds (at most one per world), each with its own MjData per pass;
        the rollout sets every world's state itself, so nothing carries over from an old pool. One thread
        is the calling one: a pool of 1 worker would only hand it each rollout and wait (two wake-ups per
        control step, each needing a core that may be busy with another process)."""
        nthread = max(1, min(nthread, self.num_worlds))
        if nthread == self.nthread:
            return
        if self._rollout is not None:
            self._rollout.close()  # joins its workers
        self.nthread = nthread
        self._thread_data = [mujoco.MjData(self.mjm) for _ in range(nthread)]
        self._sense_data = [mujoco.MjData(self.sense_mjm) for _ in range(nthread)]
        self._rollout = rollout.Rollout(nthread=0 if nthread == 1 else nthread)  # 0: on the calling thread
        self._warnings = self._warning_counts()

    def _follow_share(self) -> None:
        """Resize the pool to the process's share (``set_pool_threads``) unless ``nthread`` was configured:
        a training that gave up a core to an evaluation must not keep a worker on it."""
        if self.sim_spec.nthread is None and _POOL_THREADS is not None:
            self._build_pool(_POOL_THREADS)

    def _warning_counts(self) -> np.ndarray:
        data = (*self._thread_data, *self._sense_data)
        return np.array([[d.warning[i].number for i in (*_UNSTABLE, *_FULL)] for d in data])

    def _load_state(self, ids: np.ndarray | None = None) -> None:
        """Copy the torch state of record (all worlds, or ``ids``) into the rollout's state rows."""
        q, v = self.qpos.numpy(), self.qvel.numpy()
        rows = slice(None) if ids is None else ids
        self._state[rows, 0] = 0.0
        self._state[rows, 1:4] = q[rows]
        self._state[rows, 4:7] = v[rows]

    def _rollout_physics(self) -> np.ndarray:
        """All worlds, ``decimation`` substeps, in the thread pool; returns the per-world contact flag."""
        self._follow_share()
        self._load_state()
        st, u = self._state, self.ctrl.numpy()
        self._control[:, :, : u.shape[1]] = u[:, None, :]
        self._bad_input = ~(np.isfinite(st).all(1) & np.isfinite(u).all(1))
        self._rollout.rollout(
            self.models,
            self._thread_data,
            st,
            self._control,
            control_spec=CONTROL,
            nstep=self.decimation,
            state=self._out,
            sensordata=self._sensors,
            skip_checks=True,
        )
        st[:] = self._out[:, -1]
        q, v = self.qpos.numpy(), self.qvel.numpy()
        q[:], v[:] = st[:, 1:4], st[:, 4:7]
        self._moving_hit = (self._sensors[:, :, 1 : 1 + self._moving] > 0).any(axis=(1, 2))
        return (self._sensors[:, :, 0] > 0).any(axis=1)

    def _sense(self, ids: np.ndarray | None = None) -> np.ndarray:
        """Contact flag and LiDAR at the current states of all worlds (or ``ids``), in the pool.

        Returns the contact flag of those worlds; writes their ranges (misses and hits beyond max
        range read max range)."""
        # The controls of the last substep: the moving slots where this control step left them.
        if ids is None:
            models, st, ctrl = self.sense_models, self._state, np.ascontiguousarray(self._control[:, -1:])
            out, sensors = self._sense_out, self._sense_sensors
        else:
            models = [self.sense_models[w] for w in ids]
            st, ctrl = self._state[ids], self._control[ids, -1:]
            out, sensors = self._sense_out[: len(ids)], self._sense_sensors[: len(ids)]
        self._rollout.rollout(
            models,
            self._sense_data,
            st,
            ctrl,
            control_spec=CONTROL,
            nstep=1,
            state=out,
            sensordata=sensors,
            skip_checks=True,
        )
        self._moving_sensed = sensors[:, 0, 1 : 1 + self._moving].any(axis=1)
        ranges = clamp_ranges(sensors[:, 0, 1 + self._moving :], self.max_range_m)
        if ids is None:
            self.ranges.copy_(ranges)
        else:
            self.ranges.index_copy_(0, torch.from_numpy(ids), ranges.to(self.ranges.dtype))
        return sensors[:, 0, 0] > 0

    def _check_warnings(self) -> None:
        """Raise on an unstable world, flag buffer overflows, report NaN for a NaN input."""
        bad = self._bad_input
        # MuJoCo silently resets a world whose state turns NaN/inf: report NaN so the env names it.
        q, v = self.qpos.numpy(), self.qvel.numpy()
        q[bad] = v[bad] = np.nan
        counts = self._warning_counts()
        new = counts - self._warnings
        self._warnings = counts
        self.overflow[:] = 0
        if new[:, : len(_UNSTABLE)].any() and not bad.any():
            raise FloatingPointError("MuJoCo reset an unstable world during the rollout (bad qpos/qvel/qacc)")
        if new[:, len(_UNSTABLE) :].any():
            self.overflow[:] = 1

    def step_physics(self) -> None:
        """Physics only (substeps with their contacts), no final-pose pass: for the benchmark."""
        self.contact[:] = torch.from_numpy(self._rollout_physics())
        self.moving_contact[:] = torch.from_numpy(self._moving_hit)
        self._check_warnings()

    def step(self) -> None:
        """Advance every world one control step; ``contact`` flags a contact in any substep or at the
        final pose. The final-pose pass also casts the LiDAR, so ``sense`` recasts only the worlds
        written since."""
        contact = self._rollout_physics()
        contact |= self._sense()
        self.contact[:] = torch.from_numpy(contact)
        self.moving_contact[:] = torch.from_numpy(self._moving_hit | self._moving_sensed)
        self._check_warnings()

    def sense(self, changed: torch.Tensor | None = None) -> None:
        """LiDAR at the current poses of the worlds in ``changed`` [N] bool (all when None); the
        others were cast at the end of ``step``."""
        ids = None if changed is None else changed.nonzero().flatten().numpy()
        if ids is not None and ids.size == 0:
            return
        self._follow_share()
        self._load_state(ids)
        self._sense(ids)

    def synchronize(self) -> None:
        """Nothing is queued on the CPU."""

    @staticmethod
    def overflow_reason(bits: int) -> str:
        """Name the buffers behind a non-zero ``overflow`` flag."""
        return "MuJoCo contact/constraint buffer full (raise the model's memory)"
