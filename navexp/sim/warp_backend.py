"""MuJoCo Warp backend: all worlds in one Model/Data, LiDAR by mjw.rays, contacts from the engine.

Every buffer the env reads is a torch view of a Warp array (zero-copy, on the sim device). On CUDA
the physics (substeps, contact flags, final-pose contacts) and the sensing pass (kinematics, LiDAR)
are each captured once as a CUDA graph; afterwards only in-place writes reach them, which is why
every input lives in a preallocated array and layouts are written with masked, fixed-shape ops.
Nothing here reads a device value on the host.
"""

from __future__ import annotations

import dataclasses
import gc
import time
import warnings

import mujoco
import mujoco_warp as mjw
import torch
import warp as wp

from navexp.sim import kernel_cache
from navexp.sim.base import SimSpec
from navexp.sim.layout import Layout, slot_poses, slot_sizes
from navexp.sim.lidar import clamp_ranges
from navexp.sim.scene import PARK_Z_M, build_model, moving_names, slot_names

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
def _hold_on_contact(
    flag: wp.array(dtype=int),
    qpos_before: wp.array2d(dtype=float),
    qpos: wp.array2d(dtype=float),
    qvel: wp.array2d(dtype=float),
):
    """A world with a contact in this control step goes back to the pose the substep started from
    (where the contact was found) and stops: no contact force pushes it out (see ``contact_free``)."""
    w, j = wp.tid()
    if flag[w] != 0:
        qpos[w, j] = qpos_before[w, j]
        qvel[w, j] = 0.0


@wp.kernel
def _flag_moving(
    nacon: wp.array(dtype=int),
    worldid: wp.array(dtype=int),
    geom: wp.array(dtype=wp.vec2i),
    first: int,
    end: int,
    flag: wp.array(dtype=int),
):
    """flag[w] = 1 for every world w with a contact involving a geom in [first, end) (moving slots)."""
    i = wp.tid()
    if i < nacon[0]:
        g = geom[i]
        if (g[0] >= first and g[0] < end) or (g[1] >= first and g[1] < end):
            flag[worldid[i]] = 1


@wp.kernel
def _place_moving(
    start: wp.array3d(dtype=float),
    end: wp.array3d(dtype=float),
    frac: float,
    first: int,
    mocap_pos: wp.array2d(dtype=wp.vec3),
):
    """Moving slot j of world w at ``start + frac * (end - start)`` in the plane (mocap ``first + j``;
    its height kept: a parked slot stays parked)."""
    w, j = wp.tid()
    z = mocap_pos[w, first + j][2]
    x = start[w, j, 0] + frac * (end[w, j, 0] - start[w, j, 0])
    y = start[w, j, 1] + frac * (end[w, j, 1] - start[w, j, 1])
    mocap_pos[w, first + j] = wp.vec3(x, y, z)


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
        self._cold_since = self._announce_cold_compile(device)
        self.mjm: mujoco.MjModel = build_model(spec)
        self.robot_body = mujoco.mj_name2id(self.mjm, mujoco.mjtObj.mjOBJ_BODY, "robot")
        self._slot_cols = self._slot_columns()
        self._slot_views: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        self._moving_geoms = self._moving_range()
        # mocap ids follow body order: cylinders, boxes, walls (see scene._obstacles).
        with wp.ScopedDevice(device):
            # Obstacle sizes differ per world: batch geom_size and the bounds derived from it.
            batched = {"geom_size": num_worlds, "geom_rbound": num_worlds, "geom_aabb": num_worlds}
            self._m_contacts = mjw.put_model(self.mjm, batch_sizes=batched)
            self.m = contact_free(self._m_contacts)
            # No constraint rows (njmax=0): mujoco_warp then skips its solver and copies the
            # smooth acceleration.
            self.d = mjw.make_data(self.mjm, nworld=num_worlds, nconmax=sim_spec.nconmax_per_world, njmax=0)
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
            Layout.empty(
                num_worlds,
                spec.cylinder_slots,
                spec.box_slots,
                self.device,
                spec.wall_slots,
                moving_slots=(spec.moving_cylinder_slots, spec.moving_box_slots),
            ),
        )

    @staticmethod
    def _announce_cold_compile(device: str) -> float | None:
        """Print what is about to happen when the kernel cache is cold; the start time, else None."""
        notice = kernel_cache.cold_notice(device)
        if notice is None:
            return None
        print(notice, flush=True)
        return time.perf_counter()

    def _slot_columns(self) -> slice | torch.Tensor:
        """Slot columns of the batched geom arrays: a slice (a view) when the ids are consecutive."""
        geoms = [mujoco.mj_name2id(self.mjm, mujoco.mjtObj.mjOBJ_GEOM, n) for n in slot_names(self.spec)]
        contiguous = geoms == list(range(geoms[0], geoms[0] + len(geoms))) if geoms else True
        if geoms and contiguous:
            return slice(geoms[0], geoms[0] + len(geoms))
        return torch.tensor(geoms, dtype=torch.long, device=self.device)

    def _moving_range(self) -> tuple[int, int]:
        """[first, end) geom ids of the moving slots (consecutive: their bodies come last)."""
        geoms = [mujoco.mj_name2id(self.mjm, mujoco.mjtObj.mjOBJ_GEOM, n) for n in moving_names(self.spec)]
        assert geoms == list(range(geoms[0], geoms[0] + len(geoms))) if geoms else True
        return (geoms[0], geoms[-1] + 1) if geoms else (0, 0)

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
        self._qpos_before = wp.zeros((n, self.mjm.nq), dtype=float)
        self._moving_contact = wp.zeros(n, dtype=int)
        m = self.spec.moving_slots
        self._move_start, self._move_end = wp.zeros((n, m, 2), dtype=float), wp.zeros((n, m, 2), dtype=float)

    def _torch_views(self) -> None:
        """Zero-copy torch views of the Warp arrays the env and the layout writes touch."""
        t = wp.to_torch
        self.qpos, self.qvel, self.ctrl = t(self.d.qpos), t(self.d.qvel), t(self.d.ctrl)
        self._qacc_warmstart = t(self.d.qacc_warmstart)
        self._mocap_pos, self._mocap_quat = t(self.d.mocap_pos), t(self.d.mocap_quat)
        self._geom_size, self._geom_rbound = t(self.m.geom_size), t(self.m.geom_rbound)
        self._geom_aabb = t(self.m.geom_aabb)
        self.contact = t(self._contact)
        self.moving_contact = t(self._moving_contact)
        self._move_start_t, self._move_end_t = t(self._move_start), t(self._move_end)
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
        if self.spec.moving_slots:  # the next step moves them from their start
            mov_start = layout.mov_start
            torch.where(m2, mov_start, self._move_start_t, out=self._move_start_t)
            torch.where(m2, mov_start, self._move_end_t, out=self._move_end_t)
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

    def move_obstacles(self, start: torch.Tensor, end: torch.Tensor) -> None:
        """The moving slots go from ``start`` to ``end`` [N, M, 2] over the next ``step()`` (linearly,
        at ``end`` after its last substep). Two device copies into the captured step's inputs."""
        self._move_start_t.copy_(start)
        self._move_end_t.copy_(end)

    # -- stepping ---------------------------------------------------------------------------
    def _physics_kernels(self) -> None:
        self._contact.zero_()
        self._moving_contact.zero_()
        self.d.overflow.zero_()
        for k in range(self.decimation):
            self._place_moving((k + 1) / self.decimation)
            wp.copy(self._qpos_before, self.d.qpos)
            self._substep()
            # The kinematics are still those of the pose this substep started from: its contacts.
            mjw.collision(self._m_contacts, self.d)
            self._flag_contacts()
            wp.launch(
                _hold_on_contact,
                dim=self._qpos_before.shape,
                inputs=[self._contact, self._qpos_before],
                outputs=[self.d.qpos, self.d.qvel],
            )
        # Contacts at the final pose of this control step (they end the episode too).
        mjw.kinematics(self.m, self.d)
        mjw.collision(self._m_contacts, self.d)
        self._flag_contacts()

    def _substep(self) -> None:
        """``mjw.step`` without constraints: forward dynamics (no collision, no constraint rows, no
        solver: njmax=0), then the scene's implicitfast integration. The integrator reads M @ qacc
        from ``efc.Ma``, which the solver leaves there; without one it is the smooth force itself
        (qacc = qacc_smooth = M^-1 qfrc_smooth)."""
        mjw.forward(self.m, self.d)
        wp.copy(self.d.efc.Ma, self.d.qfrc_smooth)
        mjw.implicit(self.m, self.d)

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
        if self.spec.moving_slots:
            first, end = self._moving_geoms
            wp.launch(
                _flag_moving,
                dim=self.d.naconmax,
                inputs=[self.d.nacon, self.d.contact.worldid, self.d.contact.geom, first, end],
                outputs=[self._moving_contact],
            )

    def _place_moving(self, frac: float) -> None:
        """Moving slots at ``frac`` of their way through this control step (mocap positions)."""
        m = self.spec.moving_slots
        if m:
            first = self.spec.num_obstacles - m  # mocap ids follow body order; moving bodies come last
            wp.launch(
                _place_moving,
                dim=(self.num_worlds, m),
                inputs=[self._move_start, self._move_end, frac, first],
                outputs=[self.d.mocap_pos],
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
        exactly once (the captured graph is launched right after capture). Warp compiles and loads
        each module as its first kernel is recorded (CUDA drivers >= 12.3 load modules during a
        capture; graphs need 12.4 here anyway): forcing every module to load before the capture
        would compile all of mujoco_warp's modules (51 against the 18 this scene launches, measured
        on the CPU), minutes of a cold compile on a GPU. The garbage collector is paused while
        capturing: a Warp object finalised mid-capture would record its free into the graph.
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
                    with wp.ScopedCapture(force_module_load=False) as cap:
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
        if self._cold_since is not None:  # build and first step have compiled every kernel
            kernel_cache.mark_warm(str(self.device), time.perf_counter() - self._cold_since)
            self._cold_since = None

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


def contact_free(m: mjw.Model) -> mjw.Model:
    """The model ``m`` (the same arrays) stepping without constraints: no contact forces, no solver.

    The first contact ends an episode, so the robot never needs a contact force; mujoco_warp then
    neither builds constraint rows nor runs (or compiles) its solver, and ``collision`` is called
    on ``m`` itself after each substep. Up to the first contact the motion is the same: the robot's
    joints have no limits or friction loss, so contacts are the scene's only constraints. At the
    first contact the robot is held where it touched (``_hold_on_contact``) instead of being pushed
    back by a contact force; the episode ends at that control step either way.
    """
    flags = m.opt.disableflags | mjw.DisableBit.CONSTRAINT
    return dataclasses.replace(m, opt=dataclasses.replace(m.opt, disableflags=flags))


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
