"""The contract every simulator backend implements, what it is built from, and the backend registry.

A backend steps ``num_worlds`` copies of one scene and exposes its state as torch tensors on its
device (world frame, metres, radians). The env talks to it only through ``Simulator``; a backend
never reads the experiment config (``SimSpec`` holds plain values) and its errors name values, not
config keys.

Adding a backend is one module: a class that satisfies ``Simulator`` (tests/test_sim_protocol.py
checks every method's signature) and has a ``SimSpec`` constructor. Select it by its import path,
``env.sim.backend=my_package.my_module:MySim`` (the class declares ``DEVICE_TYPES``), or give it a
short name with one ``register_backend`` call below.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

import torch

if TYPE_CHECKING:
    from navexp.sim.layout import Layout
    from navexp.sim.scene import SceneSpec


@dataclass(frozen=True)
class SimSpec:
    """Everything a backend is built from (plain values; no experiment config)."""

    scene: SceneSpec
    num_worlds: int
    device: str
    """A resolved torch device string: ``cpu`` or ``cuda:N``."""
    beam_angles_rad: tuple[float, ...]
    """LiDAR beam directions in the body frame (navexp.sim.lidar.beam_angles)."""
    max_range_m: float
    """Misses and hits beyond this read max range (navexp.sim.lidar.clamp_ranges)."""
    decimation: int
    """Physics steps per ``step()``."""
    nconmax_per_world: int = 8
    """Contact buffer per world (backends with fixed buffers)."""
    njmax_per_world: int = 32
    """Constraint rows per world (backends with fixed buffers)."""
    cuda_graph: bool = True
    """Capture the step as a CUDA graph where the backend and the device support it."""
    nthread: int | None = None
    """Worker threads of a CPU backend; None: every core the process may use."""

    @property
    def num_beams(self) -> int:
        return len(self.beam_angles_rad)


@runtime_checkable
class Simulator(Protocol):
    """``num_worlds`` copies of the scene; tensors [N, ...] on ``device``, the state of record.

    qpos [N, 3]: x (m), y (m), yaw (rad, unwrapped). qvel [N, 3]: vx, vy (m/s), wz (rad/s), world
    frame. ctrl [N, nu]: actuator controls (the robot module maps actions to them). contact [N] int:
    1 if the robot touched anything during the last ``step()`` (any substep or the final pose).
    moving_contact [N] int: 1 if one of those contacts was with a moving obstacle slot.
    overflow [N] int: a backend-specific bitmask of full buffers in the last step (0: none).
    ranges [N, B]: LiDAR ranges (m) as of the last ``sense()``; misses read ``max_range_m``.
    """

    DEVICE_TYPES: ClassVar[tuple[str, ...]]
    """Torch device types the backend runs on, e.g. ("cpu",) or ("cpu", "cuda")."""
    num_worlds: int
    device: torch.device
    qpos: torch.Tensor
    qvel: torch.Tensor
    ctrl: torch.Tensor
    contact: torch.Tensor
    moving_contact: torch.Tensor
    overflow: torch.Tensor
    ranges: torch.Tensor

    def write_layouts(self, mask: torch.Tensor, layout: Layout) -> None:
        """Worlds where the [N] bool ``mask`` is set take their row of the N-row ``layout``: robot at
        its start pose and at rest, controls zero, obstacles posed and sized; other worlds keep every
        bit. Must not wait for the device."""
        ...

    def move_obstacles(self, start: torch.Tensor, end: torch.Tensor) -> None:
        """The scene's moving obstacle slots go from ``start`` to ``end`` [N, M, 2] (world x, y) during
        the next ``step()``, linearly over its substeps (``navexp.sim.motion``); ``write_layouts`` puts
        them at their start. Must not wait for the device."""
        ...

    def step(self) -> None:
        """Advance every world ``decimation`` physics steps with the current ``ctrl``."""
        ...

    def sense(self, changed: torch.Tensor | None = None) -> None:
        """Bring ``ranges`` up to date at the current poses; ``changed`` [N] bool marks the worlds
        written since the last ``step()`` (None: all)."""
        ...

    def synchronize(self) -> None:
        """Wait for queued device work (for timing)."""
        ...

    def overflow_reason(self, bits: int) -> str:
        """Name the buffers behind an ``overflow`` bitmask."""
        ...


@dataclass(frozen=True)
class BackendEntry:
    target: str
    """``module:Class``, imported when the backend is built."""
    device_types: tuple[str, ...]
    """Device types it runs on (checked before the import)."""
    default_on: tuple[str, ...] = ()
    """Device types on which ``auto`` picks it."""


BACKENDS: dict[str, BackendEntry] = {}
"""Backends by short name."""


def register_backend(
    name: str, target: str, device_types: tuple[str, ...], default_on: tuple[str, ...] = ()
) -> None:
    """Make ``name`` select the class at ``target`` (``module:Class``, imported on first build)."""
    if name == "auto" or ":" in name:
        raise ValueError(f"backend name {name!r} is reserved; use a plain name")
    BACKENDS[name] = BackendEntry(target, tuple(device_types), tuple(default_on))


register_backend("warp", "navexp.sim.warp_backend:WarpSim", ("cpu", "cuda"), default_on=("cuda",))
register_backend("mujoco", "navexp.sim.mujoco_backend:MujocoSim", ("cpu",), default_on=("cpu",))


def backend_choices() -> str:
    return " | ".join(["auto", *BACKENDS, "<module>:<Class>"])


def _import(target: str) -> type:
    module, _, attr = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"simulator backend {target!r} cannot be imported: {e}") from e
    return cls


def resolve_backend(name: str, device: str) -> str:
    """``auto`` -> the registered backend for the device type (warp on CUDA, mujoco on the CPU);
    raise when ``name`` is unknown or does not run on ``device``. Returns a name or ``module:Class``."""
    kind = torch.device(device).type
    if name == "auto":
        for candidate, entry in BACKENDS.items():
            if kind in entry.default_on:
                return candidate
        raise ValueError(f"no simulator backend is registered as the default on {kind!r} devices")
    if name in BACKENDS:
        types = BACKENDS[name].device_types
    elif ":" in name:
        types = tuple(getattr(_import(name), "DEVICE_TYPES", ()))
    else:
        raise ValueError(f"simulator backend {name!r} is unknown; allowed: {backend_choices()}")
    if kind not in types:
        runs_here = [n for n, e in BACKENDS.items() if kind in e.device_types]
        raise ValueError(
            f"simulator backend {name!r} runs on {' | '.join(types) or 'no declared device'}, not on "
            f"device {device!r}; backends for {kind}: {' | '.join(runs_here) or 'none'}"
        )
    return name


METHODS = ("write_layouts", "move_obstacles", "step", "sense", "synchronize", "overflow_reason")
TENSORS = ("qpos", "qvel", "ctrl", "contact", "moving_contact", "overflow", "ranges")


def _params(fn) -> list[tuple[str, object, object]]:
    """(name, kind, default) of a function's parameters, ``self`` left out."""
    params = list(inspect.signature(fn).parameters.values())
    if params and params[0].name == "self":
        params = params[1:]
    return [(p.name, p.kind, p.default) for p in params]


def protocol_mismatches(cls: type) -> list[str]:
    """How the class ``cls`` departs from ``Simulator``'s methods (missing, or another signature) and
    whether it declares ``DEVICE_TYPES``; empty when it conforms."""
    problems = []
    for name in METHODS:
        mine = inspect.getattr_static(cls, name, None)
        if mine is None:
            problems.append(f"missing method {name}")
            continue
        fn = mine.__func__ if isinstance(mine, (staticmethod, classmethod)) else mine
        want = _params(getattr(Simulator, name))
        got = _params(fn)
        if isinstance(mine, classmethod):
            got = got[1:]
        if got != want:
            problems.append(
                f"{name}{inspect.signature(fn)} differs from Simulator.{name}"
                f"{inspect.signature(getattr(Simulator, name))}"
            )
    if not isinstance(getattr(cls, "DEVICE_TYPES", None), tuple):
        problems.append("no DEVICE_TYPES tuple")
    return problems


def make_sim(name: str, spec: SimSpec) -> Simulator:
    """Build the backend ``name`` (a registered name, ``auto`` or ``module:Class``) from ``spec``."""
    name = resolve_backend(name, spec.device)
    cls = _import(BACKENDS[name].target if name in BACKENDS else name)
    problems = protocol_mismatches(cls)
    sim = None if problems else cls(spec)
    problems += [
        f"no tensor {t} after construction" for t in TENSORS if sim is not None and not hasattr(sim, t)
    ]
    if problems:
        raise TypeError(
            f"simulator backend {name!r} does not implement navexp.sim.base.Simulator: {problems}"
        )
    return sim
