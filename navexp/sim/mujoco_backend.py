"""Classic MuJoCo backend for the CPU: the same scene, layouts and tensor contract as WarpSim.

One MjModel copy and one MjData per world (per-world obstacle sizes live in the world's model), the
engine's own contacts (``d.ncon`` after every substep and at the final pose) and the engine's own ray
casting (``mj_multiRay``, once per control step). Measured on a 2-core CPU this is several times
faster per env step than MuJoCo Warp's CPU device (see BENCHMARKS.md); ``sim.backend=auto`` picks it
whenever the device is the CPU.

The torch tensors (float32, like Warp's) are the state of record between control steps: ``step()``
copies them into each MjData, steps in float64, and copies the result back, so writes to
``sim.qpos``/``sim.qvel``/``sim.ctrl`` behave exactly as with WarpSim.
"""

from __future__ import annotations

import copy

import mujoco
import numpy as np
import torch

from navexp.sim.layout import Layout
from navexp.sim.scene import PARK_Z_M, SceneSpec, build_model

_WARNINGS = {
    mujoco.mjtWarning.mjWARN_CONTACTFULL: "contact buffer full",
    mujoco.mjtWarning.mjWARN_CNSTRFULL: "constraint buffer full",
}
_UNSTABLE = (
    mujoco.mjtWarning.mjWARN_BADQPOS,
    mujoco.mjtWarning.mjWARN_BADQVEL,
    mujoco.mjtWarning.mjWARN_BADQACC,
    mujoco.mjtWarning.mjWARN_BADCTRL,
)
"""MuJoCo resets a world's data when its state turns NaN/inf; we report NaN instead of a silent reset."""


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
        self.mjm: mujoco.MjModel = build_model(spec)
        name2id = mujoco.mj_name2id
        self.robot_body = name2id(self.mjm, mujoco.mjtObj.mjOBJ_BODY, "robot")
        names = [f"cyl{i}" for i in range(spec.cylinder_slots)] + [f"box{i}" for i in range(spec.box_slots)]
        self._slot_geoms = np.array(
            [name2id(self.mjm, mujoco.mjtObj.mjOBJ_GEOM, n) for n in names], dtype=int
        )
        bodies = [name2id(self.mjm, mujoco.mjtObj.mjOBJ_BODY, n) for n in names]
        self._slot_mocap = np.array([self.mjm.body_mocapid[b] for b in bodies], dtype=int)
        # Ray casting culls with each body's bounding-volume hierarchy, compiled for the placeholder
        # sizes; a slot body holds one geom, so its single BVH node is that geom's AABB.
        assert all(self.mjm.body_bvhnum[b] == 1 for b in bodies)
        self._slot_bvh = np.array([self.mjm.body_bvhadr[b] for b in bodies], dtype=int)
        # One model per world: obstacle sizes differ per world and episode.
        self.models = [copy.copy(self.mjm) for _ in range(num_worlds)]
        self.datas = [mujoco.MjData(m) for m in self.models]
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
        s, hz = self.spec, self.spec.obstacle_height_m / 2
        c = s.cylinder_slots
        lay = {k: v.detach().cpu().numpy() for k, v in vars(layout).items()}
        ids = world_ids.cpu().numpy()
        self.qpos[world_ids] = torch.cat((layout.robot_xy, layout.robot_yaw[:, None]), dim=1).cpu().float()
        self.qvel[world_ids] = 0.0
        self.ctrl[world_ids] = 0.0
        for k, w in enumerate(ids):
            m, d = self.models[w], self.datas[w]
            mujoco.mj_resetData(m, d)  # clears velocities, warmstart, contacts of the last episode
            xy = np.concatenate((lay["cyl_xy"][k], lay["box_xy"][k]))
            active = np.concatenate((lay["cyl_active"][k], lay["box_active"][k]))
            pos = np.column_stack((xy, np.where(active, hz, PARK_Z_M)))
            quat = np.zeros((len(xy), 4))
            quat[:, 0] = 1.0
            quat[c:, 0] = np.cos(lay["box_yaw"][k] / 2)
            quat[c:, 3] = np.sin(lay["box_yaw"][k] / 2)
            d.mocap_pos[self._slot_mocap] = pos
            d.mocap_quat[self._slot_mocap] = quat
            size = np.zeros((len(xy), 3))
            size[:c, 0], size[:c, 1] = lay["cyl_r"][k], hz
            size[c:, :2], size[c:, 2] = lay["box_half"][k], hz
            half = size.copy()
            half[:c, 1], half[:c, 2] = lay["cyl_r"][k], hz
            g = self._slot_geoms
            m.geom_size[g] = size
            m.geom_rbound[g] = np.linalg.norm(half, axis=1)
            m.geom_aabb[g, :3] = 0.0
            m.geom_aabb[g, 3:] = half
            m.bvh_aabb[self._slot_bvh, :3] = 0.0
            m.bvh_aabb[self._slot_bvh, 3:] = half
            d.qpos[:] = self.qpos[w].numpy()

    # -- stepping ---------------------------------------------------------------------------
    def step_physics(self) -> None:
        """``decimation`` physics steps per world; contact flag over the substeps and the final pose."""
        q, v, c = self.qpos.numpy(), self.qvel.numpy(), self.ctrl.numpy()
        contact, over = self.contact.numpy(), self.overflow.numpy()
        over[:] = 0
        step, dec = mujoco.mj_step, self.decimation
        for w, (m, d) in enumerate(zip(self.models, self.datas, strict=True)):
            d.qpos[:], d.qvel[:], d.ctrl[:] = q[w], v[w], c[w]
            hit = False
            for _ in range(dec):
                step(m, d)
                hit = hit or d.ncon > 0
            # mj_step leaves kinematics and contacts at the pre-integration pose: move both to the end.
            mujoco.mj_kinematics(m, d)
            mujoco.mj_collision(m, d)
            contact[w] = hit or d.ncon > 0
            q[w], v[w] = d.qpos, d.qvel
            warning = d.warning
            if any(warning[i].number for i in _UNSTABLE):
                q[w] = v[w] = np.nan  # the env's finite check then names this world
            if any(warning[i].number for i in _WARNINGS):
                over[w] = 1

    def cast_lidar(self, world_ids: np.ndarray | None = None) -> None:
        """mj_multiRay from the robot centre at the LiDAR height; misses read max range."""
        ranges = self.ranges.numpy()
        z, angles, nb = self.spec.robot_z, self.beam_angles_rad, self.beam_angles_rad.size
        ids = range(self.num_worlds) if world_ids is None else world_ids
        vec = self._vec.reshape(nb, 3)
        for w in ids:
            m, d = self.models[w], self.datas[w]
            x, y, yaw = d.qpos
            a = yaw + angles
            vec[:, 0], vec[:, 1] = np.cos(a), np.sin(a)
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
                self.max_range_m,
            )
            dist = self._dist
            ranges[w] = np.where((dist < 0) | (dist > self.max_range_m), self.max_range_m, dist)

    def step(self) -> None:
        """Advance every world one control step and recast the LiDAR at the final pose."""
        self.step_physics()
        self.cast_lidar()

    def refresh(self, world_ids: torch.Tensor | None = None) -> None:
        """Kinematics and LiDAR of ``world_ids`` (all when None) after their layouts were written."""
        ids = np.arange(self.num_worlds) if world_ids is None else world_ids.cpu().numpy()
        q = self.qpos.numpy()
        for w in ids:
            d = self.datas[w]
            d.qpos[:] = q[w]
            mujoco.mj_kinematics(self.models[w], d)
        self.cast_lidar(ids)

    def synchronize(self) -> None:
        """Nothing is queued on the CPU."""

    def overflow_message(self) -> str | None:
        """Describe MuJoCo warnings of the last step (None when there were none)."""
        bad = torch.nonzero(self.overflow).flatten()
        if bad.numel() == 0:
            return None
        d = self.datas[int(bad[0])]
        what = [v for k, v in _WARNINGS.items() if d.warning[k].number]
        return f"MuJoCo warnings in worlds {bad.tolist()[:10]}: {', '.join(what)}"
