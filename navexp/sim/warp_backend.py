"""MuJoCo Warp backend: all worlds in one Model/Data, LiDAR by mjw.rays, contacts from the engine.

Every buffer the env reads is a torch view of a Warp array (zero-copy, on the sim device). On CUDA
the control step (substeps, contact flag, kinematics, LiDAR) is captured once in a CUDA graph;
afterwards only in-place writes reach it, which is why every input lives in a preallocated array.
"""

from __future__ import annotations

import mujoco
import mujoco_warp as mjw
import torch
import warp as wp

from navexp.sim.layout import Layout
from navexp.sim.scene import PARK_Z_M, SceneSpec, build_model

OVERFLOW_NAMES = {
    1: "nefc > njmax (raise env.sim.njmax_per_world)",
    2: "njmax_nnz",
    4: "broadphase (raise env.sim.nconmax_per_world)",
    8: "narrowphase/contact (raise env.sim.nconmax_per_world)",
    16: "ccd",
}


@wp.kernel
def _flag_contacts(nacon: wp.array(dtype=int), worldid: wp.array(dtype=int), flag: wp.array(dtype=int)):
    """flag[w] = 1 for every world w with an active contact (every contact involves the robot)."""
    i = wp.tid()
    if i < nacon[0]:
        flag[worldid[i]] = 1


@wp.kernel
def _lidar_rays(
    qpos: wp.array2d(dtype=float),
    angles: wp.array(dtype=float),
    z: float,
    pnt: wp.array2d(dtype=wp.vec3),
    vec: wp.array2d(dtype=wp.vec3),
):
    """Beam b of world w starts at the robot centre and points at yaw + angles[b] in the plane."""
    w, b = wp.tid()
    a = qpos[w, 2] + angles[b]
    pnt[w, b] = wp.vec3(qpos[w, 0], qpos[w, 1], z)
    vec[w, b] = wp.vec3(wp.cos(a), wp.sin(a), 0.0)


class WarpSim:
    """``num_worlds`` copies of the scene stepped together by MuJoCo Warp.

    Tensors (torch views, [N, ...] with N = num_worlds, world frame):
        qpos [N, 3]: x (m), y (m), yaw (rad, unwrapped).  qvel [N, 3]: vx, vy (m/s), wz (rad/s).
        ctrl [N, 3]: velocity servo targets in the world frame.  contact [N]: int, 1 if the robot
        touched anything during the last step().  ranges [N, B]: LiDAR ranges (m), misses and
        hits beyond max range read max_range_m.
    """

    def __init__(
        self,
        spec: SceneSpec,
        num_worlds: int,
        device: str,
        beam_angles: torch.Tensor,
        max_range_m: float,
        decimation: int,
        nconmax_per_world: int,
        njmax_per_world: int,
        cuda_graph: bool = True,
    ) -> None:
        self.spec, self.num_worlds, self.decimation = spec, num_worlds, decimation
        self.device = torch.device(device)
        self.max_range_m = max_range_m
        self.mjm: mujoco.MjModel = build_model(spec)
        self.robot_body = mujoco.mj_name2id(self.mjm, mujoco.mjtObj.mjOBJ_BODY, "robot")
        cyl = [
            mujoco.mj_name2id(self.mjm, mujoco.mjtObj.mjOBJ_GEOM, f"cyl{i}")
            for i in range(spec.cylinder_slots)
        ]
        box = [
            mujoco.mj_name2id(self.mjm, mujoco.mjtObj.mjOBJ_GEOM, f"box{i}") for i in range(spec.box_slots)
        ]
        self.cyl_geoms = torch.tensor(cyl, dtype=torch.long, device=self.device)
        self.box_geoms = torch.tensor(box, dtype=torch.long, device=self.device)
        # mocap ids follow body order: cylinders first, then boxes (see scene._obstacles).
        with wp.ScopedDevice(device):
            # Obstacle sizes differ per world: batch geom_size and the bounds derived from it.
            batched = {"geom_size": num_worlds, "geom_rbound": num_worlds, "geom_aabb": num_worlds}
            self.m = mjw.put_model(self.mjm, batch_sizes=batched)
            self.d = mjw.make_data(
                self.mjm, nworld=num_worlds, nconmax=nconmax_per_world, njmax=njmax_per_world
            )
            nb = beam_angles.numel()
            self._angles = wp.from_torch(beam_angles.to(self.device, torch.float32).contiguous())
            self._pnt = wp.zeros((num_worlds, nb), dtype=wp.vec3)
            self._vec = wp.zeros((num_worlds, nb), dtype=wp.vec3)
            self._dist = wp.zeros((num_worlds, nb), dtype=float)
            self._geomid = wp.zeros((num_worlds, nb), dtype=int)
            self._normal = wp.zeros((num_worlds, nb), dtype=wp.vec3)
            self._exclude = wp.array([self.robot_body] * nb, dtype=int)
            self._contact = wp.zeros(num_worlds, dtype=int)
        t = wp.to_torch
        self.qpos, self.qvel, self.ctrl = t(self.d.qpos), t(self.d.qvel), t(self.d.ctrl)
        self._qacc_warmstart = t(self.d.qacc_warmstart)
        self._mocap_pos, self._mocap_quat = t(self.d.mocap_pos), t(self.d.mocap_quat)
        self._geom_size, self._geom_rbound = t(self.m.geom_size), t(self.m.geom_rbound)
        self._geom_aabb = t(self.m.geom_aabb)
        self.contact = t(self._contact)
        self.overflow = t(self.d.overflow)
        self.nacon = t(self.d.nacon)
        self._dist_t, self._geomid_t = t(self._dist), t(self._geomid)
        self.ranges = torch.full((num_worlds, nb), max_range_m, device=self.device)
        self.graph_enabled = cuda_graph and self.device.type == "cuda"
        self._step_graph = self._refresh_graph = self._physics_graph = self._lidar_graph = None
        self.write_layouts(
            torch.arange(num_worlds, device=self.device),
            Layout.empty(num_worlds, spec.cylinder_slots, spec.box_slots, self.device),
        )

    # -- per-world layout -------------------------------------------------------------------
    def write_layouts(self, world_ids: torch.Tensor, layout: Layout) -> None:
        """Pose obstacles, robot and state of the worlds ``world_ids``; other worlds are untouched."""
        ids, s = world_ids, self.spec
        hz = s.obstacle_height_m / 2
        c, b = s.cylinder_slots, s.box_slots
        # State: robot at its start pose, at rest; stale warmstart from the last episode cleared.
        self.qpos[ids] = torch.cat((layout.robot_xy, layout.robot_yaw[:, None]), dim=1)
        self.qvel[ids] = 0.0
        self.ctrl[ids] = 0.0
        self._qacc_warmstart[ids] = 0.0
        # Obstacles: active slots at their centre (z mid-height), inactive ones parked below.
        n = ids.numel()
        pos = torch.zeros(n, c + b, 3, device=self.device)
        pos[:, :c, :2], pos[:, c:, :2] = layout.cyl_xy, layout.box_xy
        active = torch.cat((layout.cyl_active, layout.box_active), dim=1)
        pos[..., 2] = torch.where(active, hz, PARK_Z_M)
        quat = torch.zeros(n, c + b, 4, device=self.device)
        quat[..., 0] = 1.0
        quat[:, c:, 0] = torch.cos(layout.box_yaw / 2)
        quat[:, c:, 3] = torch.sin(layout.box_yaw / 2)
        self._mocap_pos[ids] = pos
        self._mocap_quat[ids] = quat
        # Sizes, bounding spheres and local AABBs (centre 0, half-extents) of the slot geoms.
        size = torch.zeros(n, c + b, 3, device=self.device)
        size[:, :c, 0], size[:, :c, 1] = layout.cyl_r, hz
        size[:, c:, :2], size[:, c:, 2] = layout.box_half, hz
        half = size.clone()
        half[:, :c, 1] = layout.cyl_r
        half[:, :c, 2] = hz
        geoms = torch.cat((self.cyl_geoms, self.box_geoms))
        rows = ids[:, None]
        self._geom_size[rows, geoms] = size
        self._geom_rbound[rows, geoms] = half.norm(dim=-1)
        self._geom_aabb[rows, geoms, 0] = 0.0
        self._geom_aabb[rows, geoms, 1] = half

    # -- stepping ---------------------------------------------------------------------------
    def _physics_kernels(self) -> None:
        self._contact.zero_()
        self.d.overflow.zero_()
        for _ in range(self.decimation):
            mjw.step(self.m, self.d)
            self._flag_contacts()
        # step() leaves kinematics and contacts at the pre-integration pose: bring both to the final
        # pose of this control step (the LiDAR is cast from it).
        mjw.kinematics(self.m, self.d)
        mjw.collision(self.m, self.d)
        self._flag_contacts()

    def _step_kernels(self) -> None:
        self._physics_kernels()
        self._cast()

    def _refresh_kernels(self) -> None:
        mjw.kinematics(self.m, self.d)
        self._cast()

    def _flag_contacts(self) -> None:
        wp.launch(
            _flag_contacts,
            dim=self.d.naconmax,
            inputs=[self.d.nacon, self.d.contact.worldid],
            outputs=[self._contact],
        )

    def _cast(self) -> None:
        wp.launch(
            _lidar_rays,
            dim=(self.num_worlds, self._angles.shape[0]),
            inputs=[self.d.qpos, self._angles, float(self.spec.robot_z)],
            outputs=[self._pnt, self._vec],
        )
        geomgroup = wp.types.vector(length=6, dtype=wp.uint8)(*([255] * 6))
        mjw.rays(
            self.m,
            self.d,
            self._pnt,
            self._vec,
            geomgroup,
            True,
            self._exclude,
            self._dist,
            self._geomid,
            self._normal,
        )

    def _run(self, name: str, fn) -> None:
        if not self.graph_enabled:
            with wp.ScopedDevice(str(self.device)):
                fn()
            return
        graph = getattr(self, name)
        if graph is None:
            with wp.ScopedDevice(str(self.device)):
                fn()  # warm up: compile and load every kernel before capture
                with wp.ScopedCapture() as cap:
                    fn()
            setattr(self, name, cap.graph)
            graph = cap.graph
        wp.capture_launch(graph)

    def step(self) -> None:
        """Advance every world one control step (``decimation`` physics steps) and recast the LiDAR."""
        self._run("_step_graph", self._step_kernels)
        self._read_ranges()

    def step_physics(self) -> None:
        """Physics only (substeps, contacts, final kinematics), no LiDAR: for benchmarks."""
        self._run("_physics_graph", self._physics_kernels)

    def cast_lidar(self) -> None:
        """LiDAR only, at the current kinematics: for benchmarks."""
        self._run("_lidar_graph", self._cast)
        self._read_ranges()

    def synchronize(self) -> None:
        """Wait for queued device work (timing on CUDA)."""
        wp.synchronize_device(str(self.device))

    def refresh(self, world_ids: torch.Tensor | None = None) -> None:
        """Recompute kinematics and the LiDAR at the current poses (after writing layouts).

        All worlds are recomputed (one launch covers every world); ``world_ids`` is accepted for the
        shared interface."""
        self._run("_refresh_graph", self._refresh_kernels)
        self._read_ranges()

    def _read_ranges(self) -> None:
        # Misses (-1) and hits beyond max range read max range, so a policy never sees -1 or inf.
        d = self._dist_t
        miss = (d < 0) | (d > self.max_range_m) | ~torch.isfinite(d)
        self.ranges.copy_(d.masked_fill(miss, self.max_range_m))

    def overflow_message(self) -> str | None:
        """Describe buffer overflows of the last step (None when there were none)."""
        flags = self.overflow
        bad = torch.nonzero(flags).flatten()
        if bad.numel() == 0:
            return None
        bits = int(flags[bad[0]].item())
        what = [v for k, v in OVERFLOW_NAMES.items() if bits & k] or [f"bitmask {bits}"]
        return f"mujoco_warp buffer overflow in worlds {bad.tolist()[:10]}: {', '.join(what)}"
