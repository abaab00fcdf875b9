"""Where a batch of layouts gets its random numbers: one generator stream, or a hash of each layout's id.

Both sources hand out ``uniform``/``integers`` tensors whose first dimension is the batch (K rows).

- ``StreamSource`` wraps a ``torch.Generator``: exactly the calls the random sampler made before map
  families existed, so the default config keeps its layouts bit for bit.
- ``HashSource`` is counter-based: the j-th number of row k is ``hash(family, seed_k, j)``, so a
  layout depends on its id (family, seed) alone and is regenerated from it in any batch, on any
  device. Training and evaluation seeds lie in disjoint ranges (``split_seeds``).

The hash is murmur3's 32-bit finaliser (``fmix32``) chained over the three words; every product is
split into 16-bit halves so the int64 arithmetic never overflows (torch gives no wrapping guarantee).
"""

from __future__ import annotations

import math

import torch

SPLIT_BITS = 40
"""Seeds of one split lie in [split * 2**SPLIT_BITS, (split + 1) * 2**SPLIT_BITS)."""
SPLITS = ("train", "eval")
_MASK32 = 0xFFFFFFFF


def _mul32(h: torch.Tensor, c: int) -> torch.Tensor:
    """(h * c) mod 2**32 for h in [0, 2**32) without int64 overflow (16-bit halves of c)."""
    lo, hi = c & 0xFFFF, c >> 16
    return (h * lo + (((h * hi) & 0xFFFF) << 16)) & _MASK32


def fmix32(h: torch.Tensor) -> torch.Tensor:
    """murmur3's finaliser: a bijection of [0, 2**32) that mixes every input bit into every output bit."""
    h = h ^ (h >> 16)
    h = _mul32(h, 0x85EBCA6B)
    h = h ^ (h >> 13)
    h = _mul32(h, 0xC2B2AE35)
    return h ^ (h >> 16)


def hash_words(*words: torch.Tensor) -> torch.Tensor:
    """One 32-bit hash (int64 tensor in [0, 2**32)) of broadcastable int64 words, each < 2**32."""
    h = torch.zeros((), dtype=torch.long, device=words[0].device)
    for w in words:
        h = fmix32((h ^ fmix32((w + 0x9E3779B9) & _MASK32)) & _MASK32)
    return h


def split_seeds(split: str, base: int, start: int, count: int, device) -> torch.Tensor:
    """``count`` consecutive seeds of ``split`` ('train' or 'eval') [count] long: counter values
    ``(base + start + i) mod 2**SPLIT_BITS`` placed in the split's own range, so no training seed is
    ever an evaluation seed, whatever the run seeds."""
    if split not in SPLITS:
        raise ValueError(f"env.maps.split={split!r} is invalid; allowed: {' | '.join(SPLITS)}")
    offset = SPLITS.index(split) << SPLIT_BITS
    counter = (base + start + torch.arange(count, device=device)) % (1 << SPLIT_BITS)
    return offset + counter


def seed_split(seed: torch.Tensor) -> torch.Tensor:
    """Split index of layout seeds (0 train, 1 eval)."""
    return seed >> SPLIT_BITS


def stream_base(run_seed: int) -> int:
    """Where a run's counter starts inside a split (a hash of the run seed, so runs rarely overlap)."""
    s = torch.tensor(run_seed & ((1 << 62) - 1))
    lo, hi = s & _MASK32, s >> 32
    a, b = hash_words(lo, hi), hash_words(hi, lo, torch.tensor(1))
    return int(((a << 8) ^ b) % (1 << SPLIT_BITS))


class StreamSource:
    """Random numbers from one torch.Generator stream (the calls the random sampler always made)."""

    def __init__(self, generator: torch.Generator, device) -> None:
        self.generator, self.device = generator, device

    def uniform(self, shape: tuple[int, ...], lo: float, hi: float) -> torch.Tensor:
        """Uniform in [lo, hi), float32."""
        return lo + (hi - lo) * torch.rand(shape, generator=self.generator, device=self.device)

    def integers(self, lo: int, hi: int, shape: tuple[int, ...]) -> torch.Tensor:
        """Uniform integers in [lo, hi] (inclusive), long."""
        return torch.randint(lo, hi + 1, shape, generator=self.generator, device=self.device)


class HashSource:
    """Random numbers of layout ids: row k's j-th number is ``hash(family, seed_k, j)``.

    A host-side counter numbers the draws of a row (every call takes the next block), so the same
    sequence of calls on any batch containing an id gives that id the same numbers.
    """

    def __init__(self, family: int, seeds: torch.Tensor) -> None:
        self.seeds, self.device = seeds, seeds.device
        self._fam = torch.tensor(family, device=self.device)
        self._lo, self._hi = (seeds & _MASK32).view(-1, 1), (seeds >> 32).view(-1, 1)
        self._next = 0

    def _words(self, shape: tuple[int, ...]) -> torch.Tensor:
        assert shape[0] == self.seeds.shape[0], "the first dimension is the batch of layout ids"
        per_row = math.prod(shape[1:])
        j = torch.arange(self._next, self._next + per_row, device=self.device).view(1, -1)
        self._next += per_row
        return hash_words(self._fam, self._hi, self._lo, j).view(shape)

    def uniform(self, shape: tuple[int, ...], lo: float, hi: float) -> torch.Tensor:
        """Uniform in [lo, hi), float32 (24 random bits)."""
        u = (self._words(shape) >> 8).float() / float(1 << 24)
        return lo + (hi - lo) * u

    def integers(self, lo: int, hi: int, shape: tuple[int, ...]) -> torch.Tensor:
        """Uniform integers in [lo, hi] (inclusive), long."""
        return lo + self._words(shape) % (hi - lo + 1)
