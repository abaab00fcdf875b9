"""The device-side pool the env's resets take layouts from: every map family, mixed by weight.

The random family alone from one generator stream (the default config) draws exactly the layouts
navexp drew before map families existed.
"""

from __future__ import annotations

import warnings

import torch

from navexp.sim.layout import Layout, LayoutRows
from navexp.task.maps.families import REGISTRY, MapSpec, family_index, generate
from navexp.task.maps.random_family import LayoutSpec
from navexp.task.maps.random_source import HashSource, StreamSource, split_seeds, stream_base


class LayoutSamplingError(ValueError, RuntimeError):
    """The config's map settings yield too few valid layouts: a ValueError (bad input, named by its
    keys), and a RuntimeError as the pool raised before."""


class LayoutPool:
    """Layouts sampled in large batches on the device and handed out without host syncs.

    ``take(mask)`` gives the next pool entry to every world where ``mask`` is set, in world order,
    with index arithmetic on the device (a cumulative sum over the mask, a cursor tensor), so a reset
    of any number of worlds costs a fixed number of tensor operations and never waits for the device.

    The host learns how many layouts are left only when it syncs anyway, at the env's fault checks:
    ``low()`` is a device flag read there, true when fewer than ``reserve`` layouts remain (the env
    sets ``reserve`` to the most resets possible until its next check, worlds x check period), and
    ``refill()`` then draws a new batch of ``2 * reserve`` (at least ``min_size``). So no layout is
    handed out twice. Deterministic: the same generator state and the same take masks give the same
    layouts.

    Families: each family with weight w gets ``round(w * batch)`` valid layouts of the batch (largest
    remainders), drawn family by family, then shuffled together. With ``maps.rng='hashed'`` layout
    ``(family, seed)`` comes from the hash of its id, seeds counting up from a point set by the
    generator's seed inside the split's own range (navexp.task.maps.random_source), so evaluation never
    sees a training layout.
    """

    chunk = 32768
    """Layouts sampled per call (bounds the candidate tensors' memory)."""

    def __init__(
        self,
        spec: LayoutSpec,
        reserve: int,
        generator: torch.Generator,
        device,
        min_size: int = 256,
        maps: MapSpec | None = None,
    ) -> None:
        self.spec, self.generator, self.device = spec, generator, device
        self.maps = maps or MapSpec()
        self.reserve, self.min_size = int(reserve), int(min_size)
        self.generation = 0
        """Counts the pool's re-allocations (a refill into the same memory does not): a captured step
        (navexp.task.step_graph) that takes from older memory is stale."""
        self.clear()

    def clear(self) -> None:
        """Drop the remaining layouts (after re-seeding the generator); hashed seeds count from anew."""
        self._pool: Layout | None = None
        self._checked: set[str] = set()
        self._next_seed = 0

    def take(self, mask: torch.Tensor) -> Layout:
        """Layouts for all N worlds [N]: row w is the next fresh layout where ``mask[w]``, otherwise an
        arbitrary valid layout (callers write only the masked rows)."""
        rows = self.take_rows(mask)
        return self.rows.unpack(rows)

    def take_rows(self, mask: torch.Tensor) -> torch.Tensor:
        """``take`` as packed rows [N, rows.width] (``rows.unpack`` reads them): one gather of the
        packed pool, whatever the layout's fields (the env's reset path)."""
        if self._pool is None:
            self.refill()
        upto = mask.cumsum(0)  # the masked worlds up to and including w
        slot = (upto + (self._cursor - 1)).remainder(self._num_valid)
        self._cursor += upto[-1]
        return self._pool_rows[slot]

    def low(self) -> torch.Tensor:
        """Device bool: fewer than ``reserve`` unused layouts are left (or none drawn yet)."""
        if self._pool is None:
            return torch.ones((), dtype=torch.bool, device=self.device)
        return self._num_valid - self._cursor < self.reserve

    def refill(self) -> None:
        """Draw a new batch (the unused rest of the old one is dropped); waits for the device."""
        target = max(self.min_size, 2 * self.reserve)
        families = self.maps.active_families
        quotas = _quotas(target, [w for _, w in families])
        parts = [
            self._draw(name, quota, keep_all=len(families) == 1)
            for (name, _), quota in zip(families, quotas, strict=True)
            if quota > 0
        ]
        pool = parts[0] if len(parts) == 1 else Layout.cat(parts)
        if len(parts) > 1:  # mix the families in the order worlds take them
            pool = pool.index(torch.randperm(pool.num_worlds, generator=self.generator, device=self.device))
        self._pool = pool
        old_format = getattr(getattr(self, "rows", None), "format", None)
        self.rows = LayoutRows(pool)
        """The packing of the pool's layouts (the same for every refill of the same slot counts)."""
        packed = self.rows.pack(pool)
        old = getattr(self, "_pool_rows", None)
        fits = old is not None and old.dtype == packed.dtype and old.shape[1:] == packed.shape[1:]
        fits = fits and old_format == self.rows.format  # the same fields at the same offsets
        if fits and len(old) >= len(packed):
            # Into the same memory: a captured step (navexp.task.step_graph) keeps taking from it.
            old[: len(packed)].copy_(packed)
            self._num_valid.fill_(pool.num_worlds)
            self._cursor.zero_()
            return
        self._pool_rows = packed
        self._num_valid = torch.tensor(pool.num_worlds, device=self.device)
        self._cursor = torch.zeros((), dtype=torch.long, device=self.device)
        self.generation += 1

    def _source(self, family: str, k: int):
        if self.maps.cfg.rng == "stream":
            return StreamSource(self.generator, self.device)
        base = stream_base(self.generator.initial_seed())
        seeds = split_seeds(self.maps.cfg.split, base, self._next_seed, k, self.device)
        self._next_seed += k
        return HashSource(family_index(family), seeds)

    def _draw(self, family: str, quota: int, keep_all: bool) -> Layout:
        """At least ``quota`` valid layouts of ``family`` (exactly ``quota`` unless ``keep_all``), in
        sampling order. Batches of ``quota`` are drawn until enough are valid; raises when a batch yields
        none, or when the yield stays below 1/8."""
        parts: list[Layout] = []
        num_valid, drawn = 0, 0
        while num_valid < quota:
            for start in range(0, quota, self.chunk):
                k = min(self.chunk, quota - start)
                src = self._source(family, k)
                lay, valid = generate(self.maps, self.spec, family, k, src)
                if isinstance(src, HashSource):
                    lay.seed = src.seeds
                parts.append(lay.index(valid))  # a sync: allowed in the refill
                drawn += k
            num_valid = sum(p.num_worlds for p in parts)
            if num_valid == 0 or (num_valid < quota and drawn >= 8 * quota):
                self._fail(family, num_valid, drawn)
        if family not in self._checked:
            self._checked.add(family)
            if num_valid < 0.5 * drawn:
                path = " and a free path" if self.maps.check_path or self.maps.keep_fields else ""
                hint = REGISTRY[family].hint
                keys = hint(self.maps.cfg, self.spec) if hint else "lower obstacle counts or sizes"
                warnings.warn(
                    f"only {num_valid / drawn:.1%} of sampled '{family}' layouts have a collision-free "
                    f"start and goal{path}; sampling slows down. To change: {keys}, or "
                    f"min_start_goal_dist_m.",
                    stacklevel=3,
                )
        pool = parts[0] if len(parts) == 1 else Layout.cat(parts)
        if keep_all or pool.num_worlds == quota:
            return pool
        return pool.index(torch.arange(quota, device=self.device))

    def _fail(self, family: str, num_valid: int, drawn: int) -> None:
        s = self.spec
        path = " with a free path" if self.maps.check_path or self.maps.keep_fields else ""
        hint = REGISTRY[family].hint
        keys = hint(self.maps.cfg, s) if hint else "lower obstacles.*_count or obstacle sizes"
        raise LayoutSamplingError(
            f"env config: layout sampling (map family '{family}') found no collision-free start/goal"
            f"{path} in enough layouts (only {num_valid} of {drawn}) after {s.rounds} rounds each; {keys}, "
            f"or lower spawn_clearance_m ({s.spawn_clearance_m}) or min_start_goal_dist_m "
            f"({s.min_start_goal_dist_m})"
        )


def _quotas(total: int, weights: list[float]) -> list[int]:
    """Split ``total`` by normalised ``weights`` into integers summing to ``total`` (largest remainders)."""
    raw = [total * w / sum(weights) for w in weights]
    out = [int(r) for r in raw]
    by_remainder = sorted(range(len(raw)), key=lambda i: raw[i] - out[i], reverse=True)
    for i in by_remainder[: total - sum(out)]:
        out[i] += 1
    return out
