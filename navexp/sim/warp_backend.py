"""MuJoCo Warp backend: all worlds in one Model/Data, LiDAR by mjw.rays, contacts from the engine.

Every buffer the env reads is a torch view of a Warp array (zero-copy, on the sim device). On CUDA
the physics (substeps, contact flags, final-pose contacts) and the sensing pass (kinematics, LiDAR)
are each captured once as a CUDA graph; afterwards only in-place writes reach them, which is why
every input lives in a preallocated array and layouts are written with masked, fixed-shape ops.
Nothing here reads a device value on the host.
"""

from __future__ import annotations

import gc
import warnings

import mujoco
import mujoco_warp as mjw
import torch
import warp as wp

from navexp.sim.base import SimSpec
from navexp.sim.layout import Layout, slot_poses, slot_sizes
from navexp.sim.lidar import clamp_ranges
from navexp.sim.scene import PARK_Z_M, build_model, slot_names

GRAPH_MIN_DRIVER = (12, 4)
"""Oldest CUDA driver whose graphs hold conditional nodes (mujoco_warp's solver loops)."""

OVERFLOW_NAMES = {
    1: "nefc > njmax (raise njmax_per_world)",
    2: "njmax_nnz",
    4: "broadphase (raise nconmax_per_world)",
    8: "narrowphase/contact (raise nconmax_per_world)",
    16: "ccd",
    32: "hfield",
    64: "contact match",
    128: "nvmax",
    256: "epa horizon",
}
"""mujoco_warp's OverflowType bits that mean a full buffer (results are wrong). Bits 512 and 1024
(solver and line-search iteration limits reached) are not faults and are masked off."""
BUFFER_OVERFLOW_MASK = sum(OVERFLOW_NAMES)


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
        ctrl [N, nu]: the robot's servo targets (navexp.task.robots).  contact [N]: int, 1 if the robot
        touched anything during the last step().  overflow [N]: mujoco_warp's overflow bitmask of the
        last step.  ranges [N, B]: LiDAR ranges (m) as of the last sense(), misses and hits beyond
        max range read max_range_m.
    """

    DEVICE_TYPES = ("cpu", "cuda")

    def __init__(self, sim_spec: SimSpec) -> None:
        spec, num_worlds, device = sim_spec.scene, sim_spec.num_worlds, sim_spec.device
        self.sim_spec = sim_spec
        self.spec, self.num_worlds, self.decimation = spec, num_worlds, sim_spec.decimation
        self.device = torch.device(device)
        self.max_range_m = sim_spec.max_range_m
        self.mjm: mujoco.MjModel = build_model(spec)
        self.robot_body = mujoco.mj_name2id(self.mjm, mujoco.mjtObj.mjOBJ_BODY, "robot")
        self._slot_cols = self._slot_columns()
        self._slot_views: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        # mocap ids follow body order: cylinders, boxes, walls (see scene._obstacles).
        with wp.ScopedDevice(device):
            # Obstacle sizes differ per world: batch geom_size and the bounds derived from it.
            batched = {"geom_size": num_worlds, "geom_rbound": num_worlds, "geom_aabb": num_worlds}
            self.m = mjw.put_model(self.mjm, batch_sizes=batched)
            self.d = mjw.make_data(
                self.mjm,
                nworld=num_worlds,
                nconmax=sim_spec.nconmax_per_world,
                njmax=sim_spec.njmax_per_world,
            )
            self._alloc_lidar()
        self._torch_views()
        self.ranges = torch.full((num_worlds, sim_spec.num_beams), self.max_range_m, device=self.device)
        self._robot_z = float(spec.robot_z)
        self._geomgroup = wp.types.vector(length=6, dtype=wp.uint8)(*([255] * 6))
        self._graphs: dict[str, wp.Graph] = {}
        self.graph_enabled = False
        if sim_spec.cuda_graph and self.device.type == "cuda":
            why_not = graph_support(self.device)
            self.graph_enabled = why_not is None
            if why_not is not None:
                warnings.warn(f"CUDA graphs disabled ({why_not}); the simulator runs eagerly", stacklevel=2)
        self.write_layouts(
            torch.ones(num_worlds, dtype=torch.bool, device=self.device),
            Layout.empty(num_worlds, spec.cylinder_slots, spec.box_slots, self.device, spec.wall_slots),
        )

    def _slot_columns(self) -> slice | torch.Tensor:
        """Slot columns of the batched geom arrays: a slice (a view) when the ids are consecutive."""
        geoms = [mujoco.mj_name2id(self.mjm, mujoco.mjtObj.mjOBJ_GEOM, n) for n in slot_names(self.spec)]
        contiguous = geoms == list(range(geoms[0], geoms[0] + len(geoms))) if geoms else True
        if geoms and contiguous:
            return slice(geoms[0], geoms[0] + len(geoms))
        return torch.tensor(geoms, dtype=torch.long, device=self.device)

    def _alloc_lidar(self) -> None:
        """The LiDAR's ray buffers [N, B] (origins, directions, hits) and the contact flags [N], on the
        current Warp device."""
        n, nb = self.num_worlds, self.sim_spec.num_beams
        angles = torch.tensor(self.sim_spec.beam_angles_rad, dtype=torch.float32, device=self.device)
        self._angles = wp.from_torch(angles)
        self._pnt = wp.zeros((n, nb), dtype=wp.vec3)
        self._vec = wp.zeros((n, nb), dtype=wp.vec3)
        self._dist = wp.zeros((n, nb), dtype=float)
        self._geomid = wp.zeros((n, nb), dtype=int)
        self._normal = wp.zeros((n, nb), dtype=wp.vec3)
        self._exclude = wp.array([self.robot_body] * nb, dtype=int)
        self._contact = wp.zeros(n, dtype=int)

    def _torch_views(self) -> None:
        """Zero-copy torch views of the Warp arrays the env and the layout writes touch."""
        t = wp.to_torch
        self.qpos, self.qvel, self.ctrl = t(self.d.qpos), t(self.d.qvel), t(self.d.ctrl)
        self._qacc_warmstart = t(self.d.qacc_warmstart)
        self._mocap_pos, self._mocap_quat = t(self.d.mocap_pos), t(self.d.mocap_quat)
        self._geom_size, self._geom_rbound = t(self.m.geom_size), t(self.m.geom_rbound)
        self._geom_aabb = t(self.m.geom_aabb)
        self.contact = t(self._contact)
        self._overflow_raw = t(self.d.overflow)
        self.nacon = t(self.d.nacon)
        self._dist_t, self._geomid_t = t(self._dist), t(self._geomid)

    # -- per-world layout -------------------------------------------------------------------
    def write_layouts(self, mask: torch.Tensor, layout: Layout) -> None:
        """Pose obstacles, robot and state of the worlds where ``mask`` [N] is set from the rows of
        ``layout`` (N rows); other worlds keep every bit. Fixed-shape masked writes, no host sync."""
        assert mask.dtype == torch.bool and mask.shape == (self.num_worlds,), "a [N] bool mask"
        hz = self.spec.obstacle_height_m / 2
        m1 = mask.unsqueeze(-1)
        m2 = m1.unsqueeze(-1)
        # State: robot at its start pose, at rest; stale warmstart from the last episode cleared.
        start = torch.cat((layout.robot_xy, layout.robot_yaw.unsqueeze(-1)), dim=1)
        torch.where(m1, start, self.qpos, out=self.qpos)
        self.qvel.masked_fill_(m1, 0.0)
        self.ctrl.masked_fill_(m1, 0.0)
        self._qacc_warmstart.masked_fill_(m1, 0.0)
        # Obstacles: active slots at their centre (z mid-height), inactive ones parked below.
        pos, quat = slot_poses(layout, hz, PARK_Z_M)
        torch.where(m2, pos, self._mocap_pos, out=self._mocap_pos)
        torch.where(m2, quat, self._mocap_quat, out=self._mocap_quat)
        # Sizes, bounding spheres and local AABBs (centre 0, half-extents) of the slot geoms.
        size, half = slot_sizes(layout, hz)
        size_t, rbound_t, aabb_t = self._slot_geoms
        torch.where(m2, size, size_t, out=size_t)
        torch.where(m1, half.norm(dim=-1), rbound_t, out=rbound_t)
        aabb = torch.stack((torch.zeros_like(half), half), dim=2)
        torch.where(m2.unsqueeze(-1), aabb, aabb_t, out=aabb_t)
        if not isinstance(self._slot_cols, slice):  # an index gives copies: write them back
            g = self._slot_cols
            self._geom_size[:, g], self._geom_rbound[:, g], self._geom_aabb[:, g] = size_t, rbound_t, aabb_t

    @property
    def _slot_geoms(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The slot geoms' sizes [N, S, 3], bounding radii [N, S] and local AABBs [N, S, 2, 3]: views of
        the batched model arrays where the slot geoms are consecutive (made once), else copies."""
        g = self._slot_cols
        if isinstance(g, slice) and self._slot_views is not None:
            return self._slot_views
        views = self._geom_size[:, g], self._geom_rbound[:, g], self._geom_aabb[:, g]
        if isinstance(g, slice):
            self._slot_views = views
        return views

    # -- stepping ---------------------------------------------------------------------------
    def _physics_kernels(self) -> None:
        self._contact.zero_()
        self.d.overflow.zero_()
        for _ in range(self.decimation):
            mjw.step(self.m, self.d)
            self._flag_contacts()
        # step() leaves kinematics and contacts at the pre-integration pose: bring both to the final
        # pose of this control step (contacts there end the episode).
        mjw.kinematics(self.m, self.d)
        mjw.collision(self.m, self.d)
        self._flag_contacts()

    def _sense_kernels(self) -> None:
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
            inputs=[self.d.qpos, self._angles, self._robot_z],
            outputs=[self._pnt, self._vec],
        )
        mjw.rays(
            self.m,
            self.d,
            self._pnt,
            self._vec,
            self._geomgroup,
            True,
            self._exclude,
            self._dist,
            self._geomid,
            self._normal,
        )

    def _run(self, name: str, fn) -> None:
        """Run ``fn``'s kernels: eagerly, or as a CUDA graph captured on first use.

        Capture records kernels without running them, so the first call advances the simulation
        exactly once (the captured graph is launched right after capture); Warp loads every module
        before capture. The garbage collector is paused while capturing: a Warp object finalised
        mid-capture would record its free into the graph.
        """
        with wp.ScopedDevice(str(self.device)):
            if not self.graph_enabled:
                fn()
                return
            graph = self._graphs.get(name)
            if graph is None:
                enabled = gc.isenabled()
                gc.disable()
                try:
                    with wp.ScopedCapture(force_module_load=True) as cap:
                        fn()
                finally:
                    if enabled:
                        gc.enable()
                graph = self._graphs[name] = cap.graph
            wp.capture_launch(graph)

    def step(self) -> None:
        """Advance every world one control step (``decimation`` physics steps); ``contact`` flags a
        contact in any substep or at the final pose. The LiDAR is cast by ``sense``."""
        self._run("physics", self._physics_kernels)

    def sense(self, changed: torch.Tensor | None = None) -> None:
        """Kinematics and LiDAR of every world at its current pose: one pass covers all worlds,
        those in ``changed`` (written since the last step) included."""
        self._run("sense", self._sense_kernels)
        clamp_ranges(self._dist_t, self.max_range_m, out=self.ranges)

    @property
    def overflow(self) -> torch.Tensor:
        """[N] buffer-overflow bits of the last step (iteration-limit bits masked off)."""
        return self._overflow_raw & BUFFER_OVERFLOW_MASK

    def synchronize(self) -> None:
        """Wait for queued device work (timing on CUDA)."""
        wp.synchronize_device(str(self.device))

    @staticmethod
    def overflow_reason(bits: int) -> str:
        """Name the buffers behind an overflow bitmask (OR of ``overflow`` over worlds and steps)."""
        what = [v for k, v in OVERFLOW_NAMES.items() if bits & k] or [f"bitmask {bits}"]
        return f"mujoco_warp buffer overflow: {', '.join(what)}"


def graph_support(device: torch.device) -> str | None:
    """Why a CUDA graph cannot be captured on ``device`` (None when it can).

    mujoco_warp's solver loops are conditional graph nodes (driver >= 12.4), and allocations made
    during capture need Warp's stream-ordered memory pool."""
    if device.type != "cuda":
        return f"device {device} is not CUDA"
    wdev = wp.get_device(str(device))
    driver = wp.get_cuda_driver_version()
    if driver is None:
        return "the CUDA driver version is unavailable"
    if tuple(driver) < GRAPH_MIN_DRIVER:
        return f"CUDA driver {driver[0]}.{driver[1]} < {GRAPH_MIN_DRIVER[0]}.{GRAPH_MIN_DRIVER[1]}"
    if not wp.is_mempool_enabled(wdev):
        if not wp.is_mempool_supported(wdev):
            return "the device has no stream-ordered memory pool"
        wp.set_mempool_enabled(wdev, True)
    return None
