"""The 2D LiDAR in one place: beam pattern, miss handling, rangefinder MJCF and a realism model.

Both backends cast the beams of ``beam_angles`` from the robot centre in the LiDAR plane and map
their raw distances with ``clamp_ranges``; the classic MuJoCo backend carries the LiDAR as the
rangefinders of ``rangefinder_sites``/``rangefinder_sensors``, the Warp backend casts the same
angles with ``mjw.rays`` (its small ray kernel stays in ``warp_backend.py`` so that importing this
module never loads Warp). ``LidarRealism`` turns the clean scan into what a real sensor reports;
the env applies it above the backends, so both get the same model from the same generator.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
import torch


def beam_angles(num_beams: int, fov_deg: float) -> torch.Tensor:
    """Beam angles in the body frame [B] (rad): evenly spread, centred on the forward (x) axis.

    A full circle (360 deg) has beam 0 pointing forward and beams every 360/B deg counter-clockwise;
    a narrower fan spans [-fov/2, +fov/2] inclusive.
    """
    fov = math.radians(fov_deg)
    if num_beams == 1:
        return torch.zeros(1)
    if math.isclose(fov_deg, 360.0):
        return torch.arange(num_beams) * (2 * math.pi / num_beams)
    return torch.linspace(-fov / 2, fov / 2, num_beams)


def is_full_circle(fov_deg: float) -> bool:
    """A 360 deg scan wraps around: the last beam's neighbour is beam 0."""
    return math.isclose(fov_deg, 360.0)


def beam_spacing_deg(num_beams: int, fov_deg: float) -> float:
    """Angle between neighbouring beams (deg); 0 for a single beam."""
    if num_beams == 1:
        return 0.0
    return fov_deg / num_beams if is_full_circle(fov_deg) else fov_deg / (num_beams - 1)


def clamp_ranges(
    dist: torch.Tensor | np.ndarray, max_range_m: float, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Raw ray distances -> ranges (m): misses (-1), hits beyond max range and non-finite values read
    ``max_range_m``, so a policy never sees -1 or inf. A numpy array is read without a copy; ``out``
    receives the ranges in place."""
    d = torch.from_numpy(dist) if isinstance(dist, np.ndarray) else dist
    miss = ~((d >= 0) & (d <= max_range_m))  # true for NaN, inf and -1
    if out is None:
        return d.masked_fill(miss, max_range_m)
    return out.copy_(d).masked_fill_(miss, max_range_m)


def rangefinder_sites(angles_rad: Sequence[float]) -> str:
    """MJCF sites on the robot body, one per beam: a rangefinder casts along its site's z axis, here
    the body-frame beam direction in the LiDAR plane (``<body name="robot">`` children)."""
    return "\n".join(
        f'      <site name="beam{i}" zaxis="{math.cos(a)!r} {math.sin(a)!r} 0" size="0.005" group="5"/>'
        for i, a in enumerate(angles_rad)
    )


def rangefinder_sensors(num_beams: int) -> list[str]:
    """MJCF ``<sensor>`` lines, one rangefinder per beam site (reads -1 on a miss; ignores the robot)."""
    return [f'    <rangefinder name="beam{i}" site="beam{i}"/>' for i in range(num_beams)]


@dataclass
class RealismSpec:
    """What the real sensor adds to the clean scan: the realism keys of ``env.lidar``, declared once
    here (the env schema ``navexp.task.env_cfg.LidarCfg`` extends this class with the beam geometry).

    Every option off (``OFF``) leaves the scan untouched; the defaults are today's Gaussian noise only.
    Order of the operations and the choices behind them: ``LidarRealism``.
    """

    range_noise_std_m: float = 0.01
    """Gaussian range noise (m, standard deviation) on the policy's scan (the privileged clean scan
    has none)."""
    dropout_prob: float = 0.0
    """Probability per beam and scan of no return; a dropped beam reads max_range_m (like a miss)."""
    jitter_deg: float = 0.0
    """Beam angle error, uniform in +-jitter_deg per beam and scan (at most the beam spacing);
    realised by interpolating the clean scan towards the neighbouring beam."""
    range_bias_m: float = 0.0
    """Added to every range (m), after range_scale."""
    range_scale: float = 1.0
    """Every range is multiplied by this (dimensionless calibration error)."""
    min_range_m: float = 0.0
    """Readings below this (m) are invalid and read max_range_m (no return); 0: off."""
    resolution_m: float = 0.0
    """Ranges rounded to multiples of this (m); 0: off."""
    latency_steps: int = 0
    """The policy sees the scan of this many control steps before (0: the current one)."""

    @classmethod
    def from_lidar_cfg(cls, lidar) -> RealismSpec:
        """The realism keys of an ``env.lidar`` config, by field name; a key that an older run's stored
        config lacks keeps its default."""
        values = {f.name: getattr(lidar, f.name, f.default) for f in fields(cls)}
        values["latency_steps"] = int(values["latency_steps"])
        return cls(**{k: v if k == "latency_steps" else float(v) for k, v in values.items()})

    def as_dict(self) -> dict[str, float | int]:
        """The settings by name (export metadata)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


OFF = RealismSpec(range_noise_std_m=0.0)
"""No realism at all: the policy's scan is the clean scan."""


class LidarRealism:
    """Clean scan [N, B] -> the scan a real sensor would have reported, fixed-shape, no host sync.

    Order of operations (that of the signal chain: where the beam looked, what the electronics
    measured, what the driver reports, when the policy gets it), each skipped when off:

    1. angular jitter: beam b looks at ``angle_b + u * jitter_deg``, ``u ~ U(-1, 1)``; realised by
       linear interpolation of the clean scan between beam b and its neighbour on that side
       (``r_b + |f| (r_nb - r_b)``, ``f = u * jitter / spacing``), so a reading stays between its
       own and its neighbour's clean range. At an edge between a near and a far surface this reads
       an in-between range, as real "mixed pixel" returns do. A fan (fov < 360) has no neighbour
       beyond its end beams: they interpolate towards themselves.
    2. scale and bias: ``r * range_scale + range_bias_m``.
    3. Gaussian noise: ``+ range_noise_std_m * N(0, 1)``.
    4. quantisation: ``round(r / resolution_m) * resolution_m``.
    5. clip to ``[0, max_range_m]`` (as before this model: the scan never leaves the sensor's range).
    6. minimum range: a reading below ``min_range_m`` is invalid and reads max range.
    7. dropout: each beam independently, with ``dropout_prob``, returns nothing and reads max range.
       A real driver reports no return as inf or NaN (ROS ``LaserScan``), and navexp maps those to
       max range, like a miss in simulation and like ``navexp.deploy`` does on the robot.
    8. latency: the policy gets the scan produced ``latency_steps`` control steps before. A world that
       just reset has no past: its whole buffer is filled with its current scan.

    Random draws come from the env's generator in this order (jitter, noise, dropout), each only when
    its option is on, so with only the Gaussian noise on the draws and the arithmetic are exactly
    those of ``(clean + std * randn).clamp(0, max)``.
    """

    def __init__(
        self,
        spec: RealismSpec,
        num_worlds: int,
        num_beams: int,
        fov_deg: float,
        max_range_m: float,
        generator: torch.Generator,
        device: torch.device | str,
    ) -> None:
        self.spec, self.max_range_m, self.generator = spec, float(max_range_m), generator
        self.device = torch.device(device)
        spacing = beam_spacing_deg(num_beams, fov_deg)
        self._jitter_beams = spec.jitter_deg / spacing if spacing > 0 else 0.0
        """Jitter bound in beam spacings (<= 1: only the next beam on either side is reached)."""
        b = torch.arange(num_beams, device=self.device)
        if is_full_circle(fov_deg):
            self._next, self._prev = (b + 1) % num_beams, (b - 1) % num_beams
        else:
            self._next, self._prev = (b + 1).clamp(max=num_beams - 1), (b - 1).clamp(min=0)
        k = spec.latency_steps
        self._history = torch.full((k + 1, num_worlds, num_beams), self.max_range_m, device=self.device)
        """[k+1, N, B] processed scans, newest first: entry j is j control steps old. Shifted in place
        each step (no host position, the same memory every step: a captured step replays it)."""

    def __call__(
        self, clean: torch.Tensor, restart: torch.Tensor | None = None, advance: bool = True
    ) -> torch.Tensor:
        """[N, B] realistic ranges (m) for the clean scan ``clean`` [N, B] (m).

        ``restart`` [N] bool marks worlds whose episode starts with this scan (their latency buffer is
        filled with it). ``advance``: this scan ends a control step (``NavEnv.step``); a ``reset()``
        between steps passes False, so the other worlds' latency still counts control steps (they
        get the scan they got last). Without any option on, ``clean`` itself is returned."""
        scan = self._measure(clean)
        if self.spec.latency_steps == 0:
            return scan
        return self._delay(scan, restart, advance)

    def _measure(self, clean: torch.Tensor) -> torch.Tensor:
        """Steps 1-7 of the class docstring."""
        p, g = self.spec, self.generator
        scan = clean
        if p.jitter_deg > 0:
            u = torch.rand(clean.shape, generator=g, device=self.device) * 2 - 1
            f = u * self._jitter_beams
            nxt, prv = clean.index_select(1, self._next), clean.index_select(1, self._prev)
            neighbour = torch.where(f >= 0, nxt, prv)
            scan = clean + f.abs() * (neighbour - clean)
        if p.range_scale != 1.0:
            scan = scan * p.range_scale
        if p.range_bias_m != 0.0:
            scan = scan + p.range_bias_m
        noisy = p.range_noise_std_m > 0
        if noisy:
            eps = torch.randn(clean.shape, generator=g, device=self.device)
            scan = scan + p.range_noise_std_m * eps
        if p.resolution_m > 0:
            scan = torch.round(scan / p.resolution_m) * p.resolution_m
        if scan is not clean:
            scan = scan.clamp(0.0, self.max_range_m)
        if p.min_range_m > 0:
            scan = scan.masked_fill(scan < p.min_range_m, self.max_range_m)
        if p.dropout_prob > 0:
            dropped = torch.rand(clean.shape, generator=g, device=self.device) < p.dropout_prob
            scan = scan.masked_fill(dropped, self.max_range_m)
        return scan

    def _delay(self, scan: torch.Tensor, restart: torch.Tensor | None, advance: bool) -> torch.Tensor:
        """Step 8: store ``scan`` as the newest entry, return the one ``latency_steps`` older."""
        h = self._history
        if advance:  # one step older: entry j moves to j + 1, the oldest drops out
            h.copy_(torch.cat((scan.unsqueeze(0), h[:-1])))
        if restart is not None:
            h.copy_(torch.where(restart[None, :, None], scan[None], h))
        return h[-1].clone()
