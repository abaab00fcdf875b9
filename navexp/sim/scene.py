"""One scene builder for every backend: a walled room, the planar robot and fixed obstacle slots.

The robot base is the same for every robot (slide x, slide y, hinge z, a sphere collider); its
actuators come from the robot (``navexp.task.robots``) through ``SceneSpec.actuators_mjcf``.

Frames and units: world frame, metres, radians. The room is centred on the origin; the robot moves
in the plane z = ``robot_z`` (the LiDAR plane). Collision filtering is by contype/conaffinity: only
the robot collides (robot contype=1/conaffinity=0, walls and obstacles contype=0/conaffinity=1), so
obstacles overlapping each other or a wall cost nothing and every contact involves the robot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mujoco

from navexp.sim.lidar import rangefinder_sensors, rangefinder_sites

PARK_Z_M = -50.0
"""Unused obstacle slots are parked this far below the floor: no ray or contact reaches them."""


CONTACT_SENSOR = '    <contact name="robot_contacts" geom1="robot" data="found"/>'
"""Counts the robot's contacts (sensordata[0] of a model built with ``contact_sensor``)."""


@dataclass(frozen=True)
class SceneSpec:
    """Geometry and actuation of the scene; plain values (the robot's actuators as MJCF) so the sim layer
    needs no RL config."""

    size_x_m: float
    size_y_m: float
    wall_thickness_m: float
    wall_height_m: float
    cylinder_slots: int
    box_slots: int
    obstacle_height_m: float
    robot_radius_m: float
    robot_half_height_m: float
    robot_mass_kg: float
    timestep_s: float
    actuators_mjcf: str
    """The robot's ``<actuator>`` children (``navexp.task.robots``: one per ctrl column)."""
    robot_sites_mjcf: str = ""
    """Extra elements inside the robot body (the sites of site-transmission actuators)."""
    coupled_inertia: bool = False
    """Give the robot body a negligible product of inertia (see ``build_mjcf``)."""
    wall_slots: int = 0
    """Wall segments: box geoms in slots of their own (``wall{i}``), after the box slots."""
    moving_cylinder_slots: int = 0
    """Moving cylinders (``mcyl{i}``, people), after the walls: mocap bodies posed every control step."""
    moving_box_slots: int = 0
    """Moving boxes (``mbox{i}``, carts), after the moving cylinders."""

    @property
    def robot_z(self) -> float:
        """Height of the robot centre and of the LiDAR plane."""
        return self.robot_half_height_m

    @property
    def num_obstacles(self) -> int:
        return self.cylinder_slots + self.box_slots + self.wall_slots + self.moving_slots

    @property
    def moving_slots(self) -> int:
        return self.moving_cylinder_slots + self.moving_box_slots

    @classmethod
    def from_env_cfg(cls, env_cfg, robot) -> SceneSpec:
        """Take the scene values out of an env config (any object with the EnvCfg attributes); the
        actuators come from ``robot`` (any object with ``actuators_mjcf()``, ``sites_mjcf()`` and
        ``coupled_inertia``: the task's ``Robot``)."""
        room, obst = env_cfg.room, env_cfg.obstacles
        robot_cfg = env_cfg.robot
        dyn = getattr(env_cfg, "dynamic", None)  # absent in configs of before moving obstacles
        return cls(
            size_x_m=room.size_x_m,
            size_y_m=room.size_y_m,
            wall_thickness_m=room.wall_thickness_m,
            wall_height_m=room.wall_height_m,
            cylinder_slots=obst.cylinder_slots,
            box_slots=obst.box_slots,
            obstacle_height_m=obst.height_m,
            robot_radius_m=robot_cfg.radius_m,
            robot_half_height_m=robot_cfg.half_height_m,
            robot_mass_kg=robot_cfg.mass_kg,
            timestep_s=env_cfg.sim.timestep_s,
            actuators_mjcf=robot.actuators_mjcf(),
            robot_sites_mjcf=robot.sites_mjcf(),
            coupled_inertia=robot.coupled_inertia,
            wall_slots=getattr(obst, "wall_slots", 0),  # absent in configs of before walls
            moving_cylinder_slots=dyn.cylinder_slots if dyn is not None else 0,
            moving_box_slots=dyn.box_slots if dyn is not None else 0,
        )


def slot_names(s: SceneSpec) -> list[str]:
    """Body and geom names of the obstacle slots in slot order: cylinders, boxes, walls, moving
    cylinders, moving boxes (the order of ``slot_poses``/``slot_sizes`` and of the mocap bodies)."""
    return (
        [f"cyl{i}" for i in range(s.cylinder_slots)]
        + [f"box{i}" for i in range(s.box_slots)]
        + [f"wall{i}" for i in range(s.wall_slots)]
        + moving_names(s)
    )


def moving_names(s: SceneSpec) -> list[str]:
    """Body and geom names of the moving obstacle slots: moving cylinders, then moving boxes."""
    return [f"mcyl{i}" for i in range(s.moving_cylinder_slots)] + [
        f"mbox{i}" for i in range(s.moving_box_slots)
    ]


def _walls(s: SceneSpec) -> str:
    hx, hy, t, hz = s.size_x_m / 2, s.size_y_m / 2, s.wall_thickness_m / 2, s.wall_height_m / 2
    # Each wall's inner face lies exactly on x = +-hx or y = +-hy; the long walls cover the corners.
    walls = [
        ("wall_px", (hx + t, 0.0), (t, hy + 2 * t)),
        ("wall_nx", (-hx - t, 0.0), (t, hy + 2 * t)),
        ("wall_py", (0.0, hy + t), (hx, t)),
        ("wall_ny", (0.0, -hy - t), (hx, t)),
    ]
    return "\n".join(
        f'    <geom name="{n}" type="box" pos="{x} {y} {hz}" size="{sx} {sy} {hz}" '
        f'contype="0" conaffinity="1" rgba=".6 .6 .6 1"/>'
        for n, (x, y), (sx, sy) in walls
    )


def _obstacles(s: SceneSpec) -> str:
    hz = s.obstacle_height_m / 2
    lines = []
    # Placeholder sizes: the per-world sizes are written into the batched geom_size at every reset.
    for i in range(s.cylinder_slots):
        lines.append(
            f'    <body name="cyl{i}" mocap="true" pos="0 0 {PARK_Z_M}">'
            f'<geom name="cyl{i}" type="cylinder" size="0.3 {hz}" contype="0" conaffinity="1" '
            f'rgba=".8 .4 .2 1"/></body>'
        )
    for i in range(s.box_slots):
        lines.append(
            f'    <body name="box{i}" mocap="true" pos="0 0 {PARK_Z_M}">'
            f'<geom name="box{i}" type="box" size="0.3 0.3 {hz}" contype="0" conaffinity="1" '
            f'rgba=".2 .4 .8 1"/></body>'
        )
    for i in range(s.wall_slots):
        lines.append(
            f'    <body name="wall{i}" mocap="true" pos="0 0 {PARK_Z_M}">'
            f'<geom name="wall{i}" type="box" size="0.3 0.3 {hz}" contype="0" conaffinity="1" '
            f'rgba=".5 .5 .5 1"/></body>'
        )
    for name in moving_names(s):
        shape = 'cylinder" size="0.3 ' if name.startswith("mcyl") else 'box" size="0.3 0.3 '
        lines.append(
            f'    <body name="{name}" mocap="true" pos="0 0 {PARK_Z_M}">'
            f'<geom name="{name}" type="{shape}{hz}" contype="0" conaffinity="1" rgba=".9 .1 .5 1"/></body>'
        )
    return "\n".join(lines)


def _sensors(contact_sensor: bool, beams: int, moving: list[str]) -> str:
    lines = [CONTACT_SENSOR] if contact_sensor else []
    if contact_sensor:  # one per moving slot after the robot's: sensordata[1:1 + M] (moving contacts)
        lines += [f'    <contact name="hit_{n}" geom1="robot" geom2="{n}" data="found"/>' for n in moving]
    lines += rangefinder_sensors(beams)
    return "  <sensor>\n" + "\n".join(lines) + "\n  </sensor>\n" if lines else ""


def build_mjcf(
    s: SceneSpec, contact_sensor: bool = False, beam_angles_rad: Sequence[float] | None = None
) -> str:
    """Return the MJCF of the scene (robot at the origin, every obstacle slot parked).

    Optional sensors for the classic MuJoCo backend, evaluated inside its threaded rollout; neither
    changes any physics:
    - ``contact_sensor``: sensordata[0] counts the robot's contacts, sensordata[1 + j] its contacts
      with moving slot j;
    - ``beam_angles_rad``: the LiDAR as one rangefinder per beam (sensordata after the contact
      sensors), on a site at the robot centre whose z axis points at that body-frame angle. A
      rangefinder ignores its own body (the robot) and reads -1 on a miss.
    """
    angles = [] if beam_angles_rad is None else [float(a) for a in beam_angles_rad]
    r, m = s.robot_radius_m, s.robot_mass_kg
    # Inertia of the reference solid cylinder (radius r, half-height h): the sphere proxy only
    # replaces the collision shape, the dynamics stay those of the reference robot.
    h = s.robot_half_height_m
    izz = 0.5 * m * r * r
    ixx = m * (3 * r * r + (2 * h) ** 2) / 12
    inertia = f'diaginertia="{ixx} {ixx} {izz}"'
    sites = "\n" + s.robot_sites_mjcf if s.robot_sites_mjcf else ""
    if s.coupled_inertia:
        # MuJoCo flags a body whose mass matrix is diagonal as "simple" and then stores the implicit
        # velocity derivative without off-diagonal terms: a servo along a body-frame direction at
        # yaw != 0 (it couples the x and y slides) would be integrated as if it pushed along x and y
        # separately. A product of inertia Ixz of 1e-9 kg m^2 makes the body non-simple; the planar
        # dynamics are unchanged (only roll/pitch, which have no joints, see Ixz).
        inertia = f'fullinertia="{ixx} {ixx} {izz} 0 1e-09 0"'
    return f"""<mujoco model="navexp">
  <option timestep="{s.timestep_s}" integrator="implicitfast" gravity="0 0 0"/>
  <worldbody>
{_walls(s)}
    <body name="robot" pos="0 0 {s.robot_z}">
      <joint name="jx" type="slide" axis="1 0 0" damping="0"/>
      <joint name="jy" type="slide" axis="0 1 0" damping="0"/>
      <joint name="jz" type="hinge" axis="0 0 1" damping="0"/>
      <inertial pos="0 0 0" mass="{m}" {inertia}/>
      <geom name="robot" type="sphere" size="{r}" contype="1" conaffinity="0" rgba=".1 .8 .1 1"/>
{rangefinder_sites(angles)}{sites}
    </body>
{_obstacles(s)}
  </worldbody>
  <actuator>
{s.actuators_mjcf}
  </actuator>
{_sensors(contact_sensor, len(angles), moving_names(s))}</mujoco>
"""


def build_model(
    s: SceneSpec, contact_sensor: bool = False, beam_angles_rad: Sequence[float] | None = None
) -> mujoco.MjModel:
    """Compile the scene with classic MuJoCo (the host model every backend starts from)."""
    return mujoco.MjModel.from_xml_string(build_mjcf(s, contact_sensor, beam_angles_rad))
