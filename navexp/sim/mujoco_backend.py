"""Classic MuJoCo backend for the CPU: the same scene, layouts and tensor contract as WarpSim.

Physics runs in ``mujoco.rollout`` (a persistent C++ thread pool over all cores, no Python loop over
worlds or substeps): one MjModel copy per world (per-world obstacle sizes), the robot pose and
velocity as the rollout state, servo targets and obstacle mocap poses as its control, and a contact
sensor read after every substep for the contact flag. Then, per world, one pass at the final pose
runs kinematics, the engine's collision check and ``mj_multiRay`` for the LiDAR. Measured on a
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

from navexp.sim.layout import Layout
from navexp.sim.scene import PARK_Z_M, SceneSpec, build_model

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


class MujocoSim:
    """``num_worlds`` copies of the scene stepped by classic MuJoCo on the CPU (same API as WarpSim)."""

    def __init__(
        self,
        spec: SceneSpec,
        num_worlds: int,
        device: str,
        beam_angles: torch.Tensor,
        max_range_m: float,
        decimation: int,
        nconmax_per_world: int = 0,
        njmax_per_world: int = 0,
        cuda_graph: bool = False,
    ) -> None:
        if device != "cpu":
            raise ValueError(
                f"env.sim.backend=mujoco runs on the CPU, not env.device={device!r}; "
                f"use env.device=cpu or env.sim.backend=warp"
            )
        self.spec, self.num_worlds, self.decimation = spec, num_worlds, decimation
        self.device = torch.device("cpu")
        self.max_range_m = max_range_m
        self.mjm: mujoco.MjModel = build_model(spec, contact_sensor=True)
        m = self.mjm
        self.robot_body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "robot")
        names = [f"cyl{i}" for i in range(spec.cylinder_slots)] + [f"box{i}" for i in range(spec.box_slots)]
        bodies = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n) for n in names]
        self._slot_geoms = np.array(
            [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, n) for n in names], dtype=int
        )
        mocap = np.array([m.body_mocapid[b] for b in bodies], dtype=int)
        # Ray casting culls with each body's bounding-volume hierarchy, compiled for the placeholder
        # sizes; a slot body holds one geom, so its single BVH node is that geom's AABB.
        assert all(m.body_bvhnum[b] == 1 for b in bodies)
        self._slot_bvh = np.array([m.body_bvhadr[b] for b in bodies], dtype=int)
        # Column indices of each slot's mocap pose inside the rollout control vector.
        nu, nmocap = m.nu, m.nmocap
        self._mocap_pos_cols = nu + 3 * mocap[:, None] + np.arange(3)
        self._mocap_quat_cols = nu + 3 * nmocap + 4 * mocap[:, None] + np.arange(4)
        self.models = [copy.copy(m) for _ in range(num_worlds)]  # one per world: sizes differ
        nthread = max(1, min(os.cpu_count() or 1, num_worlds))
        self._thread_data = [mujoco.MjData(m) for _ in range(nthread)]
        self._rollout = rollout.Rollout(nthread=nthread)
        self._scratch = mujoco.MjData(m)  # the final-pose pass, one world at a time
        nstate, ncontrol = mujoco.mj_stateSize(m, STATE), mujoco.mj_stateSize(m, CONTROL)
        self._state = np.zeros((num_worlds, nstate))
        self._control = np.zeros((num_worlds, decimation, ncontrol))
        self._out = np.zeros((num_worlds, decimation, nstate))
        self._sensors = np.zeros((num_worlds, decimation, m.nsensordata))
        self._warnings = self._warning_counts()
        self.beam_angles_rad = beam_angles.to(torch.float64).cpu().numpy()
        nb = self.beam_angles_rad.size
        self.qpos = torch.zeros(num_worlds, 3)
        self.qvel = torch.zeros(num_worlds, 3)
        self.ctrl = torch.zeros(num_worlds, 3)
        self.contact = torch.zeros(num_worlds, dtype=torch.int32)
        self.overflow = torch.zeros(num_worlds, dtype=torch.int32)
        self.ranges = torch.full((num_worlds, nb), max_range_m)
        self._dist = np.zeros(nb)
        self._geomid = np.zeros(nb, dtype=np.int32)
        self._vec = np.zeros(3 * nb)
        self.write_layouts(
            torch.arange(num_worlds), Layout.empty(num_worlds, spec.cylinder_slots, spec.box_slots, "cpu")
        )

    # -- per-world layout -------------------------------------------------------------------
    def write_layouts(self, world_ids: torch.Tensor, layout: Layout) -> None:
        """Pose obstacles, robot and state of the worlds ``world_ids``; other worlds are untouched."""
        s, hz, c = self.spec, self.spec.obstacle_height_m / 2, self.spec.cylinder_slots
        lay = {k: v.detach().cpu().numpy() for k, v in vars(layout).items()}
        ids = world_ids.cpu().numpy()
        n = len(ids)
        self.qpos[world_ids] = torch.cat((layout.robot_xy, layout.robot_yaw[:, None]), dim=1).cpu().float()
        self.qvel[world_ids] = 0.0
        self.ctrl[world_ids] = 0.0
        xy = np.concatenate((lay["cyl_xy"], lay["box_xy"]), axis=1)  # [n, slots, 2]
        active = np.concatenate((lay["cyl_active"], lay["box_active"]), axis=1)
        pos = np.concatenate((xy, np.where(active, hz, PARK_Z_M)[..., None]), axis=2)
        quat = np.zeros((n, s.num_obstacles, 4))
        quat[..., 0] = 1.0
        quat[:, c:, 0] = np.cos(lay["box_yaw"] / 2)
        quat[:, c:, 3] = np.sin(lay["box_yaw"] / 2)
        ctrl_rows = self._control[ids]
        ctrl_rows[:, :, self._mocap_pos_cols.ravel()] = pos.reshape(n, 1, -1)
        ctrl_rows[:, :, self._mocap_quat_cols.ravel()] = quat.reshape(n, 1, -1)
        self._control[ids] = ctrl_rows
        size = np.zeros((n, s.num_obstacles, 3))
        size[:, :c, 0], size[:, :c, 1] = lay["cyl_r"], hz
        size[:, c:, :2], size[:, c:, 2] = lay["box_half"], hz
        half = size.copy()
        half[:, :c, 1], half[:, :c, 2] = lay["cyl_r"], hz
        g, bvh = self._slot_geoms, self._slot_bvh
        for k, w in enumerate(ids):
            m = self.models[w]
            m.geom_size[g] = size[k]
            m.geom_rbound[g] = np.linalg.norm(half[k], axis=1)
            m.geom_aabb[g, :3] = 0.0
            m.geom_aabb[g, 3:] = half[k]
            m.bvh_aabb[bvh, :3] = 0.0
            m.bvh_aabb[bvh, 3:] = half[k]

    # -- stepping ---------------------------------------------------------------------------
    def _warning_counts(self) -> np.ndarray:
        return np.array([[d.warning[i].number for i in (*_UNSTABLE, *_FULL)] for d in self._thread_data])

    def _rollout_physics(self) -> np.ndarray:
        """All worlds, ``decimation`` substeps, in the thread pool; returns the per-world contact flag."""
        q, v, u = self.qpos.numpy(), self.qvel.numpy(), self.ctrl.numpy()
        st = self._state
        st[:, 0] = 0.0
        st[:, 1:4], st[:, 4:7] = q, v
        self._control[:, :, :3] = u[:, None, :]
        bad_input = ~(np.isfinite(st).all(1) & np.isfinite(u).all(1))
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
        q[:], v[:] = st[:, 1:4], st[:, 4:7]
        # MuJoCo silently resets a world whose state turns NaN/inf: report NaN so the env names it.
        q[bad_input] = v[bad_input] = np.nan
        counts = self._warning_counts()
        new = counts - self._warnings
        self._warnings = counts
        self.overflow[:] = 0
        if new[:, : len(_UNSTABLE)].any() and not bad_input.any():
            raise FloatingPointError("MuJoCo reset an unstable world during the rollout (bad qpos/qvel/qacc)")
        if new[:, len(_UNSTABLE) :].any():
            self.overflow[:] = 1
        return (self._sensors[:, :, 0] > 0).any(axis=1)

    def _final_pose(self, ids, collide: bool, cast: bool) -> None:
        """Per world at its final pose: kinematics, then contacts and/or the LiDAR."""
        d, contact, ranges = self._scratch, self.contact.numpy(), self.ranges.numpy()
        z, angles, nb = self.spec.robot_z, self.beam_angles_rad, self.beam_angles_rad.size
        vec = self._vec.reshape(nb, 3)
        for w in ids:
            m = self.models[w]
            mujoco.mj_setState(m, d, self._state[w], STATE)
            mujoco.mj_setState(m, d, self._control[w, 0], CONTROL)
            mujoco.mj_kinematics(m, d)
            if collide:
                mujoco.mj_collision(m, d)
                contact[w] = contact[w] or d.ncon > 0
            if cast:
                x, y, yaw = d.qpos
                a = yaw + angles
                vec[:, 0], vec[:, 1] = np.cos(a), np.sin(a)
                # No cutoff: we clip to max range below (the cutoff culls by bounding volumes).
                mujoco.mj_multiRay(
                    m,
                    d,
                    np.array([x, y, z]),
                    self._vec,
                    None,
                    1,
                    self.robot_body,
                    self._geomid,
                    self._dist,
                    None,
                    nb,
                    mujoco.mjMAXVAL,
                )
                dist = self._dist
                ranges[w] = np.where((dist < 0) | (dist > self.max_range_m), self.max_range_m, dist)

    def step_physics(self) -> None:
        """Physics only (rollout + contacts at the final pose), no LiDAR: for benchmarks."""
        self.contact[:] = torch.from_numpy(self._rollout_physics())
        self._final_pose(range(self.num_worlds), collide=True, cast=False)

    def cast_lidar(self) -> None:
        """LiDAR only, at the current poses: for benchmarks."""
        self._final_pose(range(self.num_worlds), collide=False, cast=True)

    def step(self) -> None:
        """Advance every world one control step; contacts and LiDAR at the final pose in one pass."""
        self.contact[:] = torch.from_numpy(self._rollout_physics())
        self._final_pose(range(self.num_worlds), collide=True, cast=True)

    def refresh(self, world_ids: torch.Tensor | None = None) -> None:
        """Kinematics and LiDAR of ``world_ids`` (all when None) after their layouts were written."""
        ids = np.arange(self.num_worlds) if world_ids is None else world_ids.cpu().numpy()
        self._state[ids, 0] = 0.0
        self._state[ids, 1:4] = self.qpos.numpy()[ids]
        self._state[ids, 4:7] = self.qvel.numpy()[ids]
        self._final_pose(ids, collide=False, cast=True)

    def synchronize(self) -> None:
        """Nothing is queued on the CPU."""

    def overflow_message(self) -> str | None:
        """Describe MuJoCo buffer warnings of the last step (None when there were none)."""
        if not bool(self.overflow.any()):
            return None
        return "MuJoCo contact/constraint buffer full in the last step (raise the model's memory)"
