"""Episode statistics kept on the device: sums of finished episodes' values and rolling windows.

A step must not wait for the device, so nothing here selects the finished worlds by index (that
needs their count on the host). Sums are masked reductions, and a rolling window places each
finished episode by a cumulative sum over the done mask. The host reads the results once per
training iteration (``pop``, ``DeviceRing.values``).
"""

from __future__ import annotations

import torch

from navexp.task.state import REASONS, SUCCESS


class DeviceRing:
    """The last ``size`` values pushed, stored on the device.

    ``push(values, mask)`` appends ``values[w]`` for every world where ``mask[w]``, in world order;
    when more than ``size`` arrive at once only the last ``size`` are kept. Slot ``size`` is a
    scratch slot that receives the writes of unmasked worlds, so every push is one fixed-shape write.
    """

    def __init__(self, size: int, device: torch.device | str, dtype: torch.dtype = torch.float32) -> None:
        self.size = int(size)
        self.buf = torch.zeros(self.size + 1, dtype=dtype, device=device)
        self.count = torch.zeros((), dtype=torch.long, device=device)
        """Values pushed so far (a device scalar)."""

    def push(self, values: torch.Tensor, mask: torch.Tensor) -> None:
        """Append the masked values [N] (no host sync)."""
        upto = mask.cumsum(0)  # [N] masked worlds up to and including w: w's place among them, from 1
        total = upto[-1]
        keep = mask & (upto > total - self.size)
        slot = torch.where(keep, (upto + (self.count - 1)).remainder(self.size), self.size)
        self.buf.index_put_((slot,), values.to(self.buf.dtype))
        self.count += total

    def values(self) -> torch.Tensor:
        """The stored values (at most ``size``, in no particular order); reads the count once."""
        return self.buf[: min(int(self.count), self.size)]


class EpisodeStats:
    """Sums over the episodes that finished since the last ``pop``, for the ``Episode_Reward/``,
    ``Episode_Termination/`` and ``Metrics/`` tags, and the rolling success window."""

    def __init__(self, reward_terms: list[str], window: int, device: torch.device | str) -> None:
        self.reward_terms = list(reward_terms)
        self._sums = torch.zeros(len(self.reward_terms) + 1, device=device)
        """[T + 1] weighted reward sums per term, then the summed duration (s), of the episodes ended."""
        self._reasons = torch.zeros(len(REASONS), device=device)
        self.outcomes = DeviceRing(window, device)
        """1.0 (success) or 0.0 of the last ``window`` finished episodes."""

    def record(
        self, done: torch.Tensor, reward_sums: torch.Tensor, reason: torch.Tensor, length_s: torch.Tensor
    ) -> None:
        """Add the episodes ending where ``done`` [N]: weighted reward sums per term [N, T], end
        reason [N] (index into REASONS), duration [N] (s)."""
        d = done.float()
        # One masked sum over [reward sums per term, duration] (columns T and T+1 of _sums).
        # Multiply-and-reduce: a [N] @ [N, T] product goes to BLAS gemv, which is orders of magnitude
        # slower for these shapes on some CPU builds.
        self._sums += (d.unsqueeze(-1) * torch.cat((reward_sums, length_s.unsqueeze(-1)), dim=1)).sum(dim=0)
        self._reasons.index_add_(0, reason, d)  # every finished episode has a reason: their sum counts them
        self.outcomes.push(reason == SUCCESS, done)

    def pop(self) -> dict[str, torch.Tensor]:
        """Means over the episodes finished since the last call ({} if none), then start afresh."""
        count = float(self._reasons.sum())
        out: dict[str, torch.Tensor] = {}
        if count > 0:
            means = self._sums / count
            for name, total in zip(self.reward_terms, means[:-1], strict=True):
                out[f"Episode_Reward/{name}"] = total
            fractions = self._reasons / count
            for code, name in enumerate(REASONS):
                if code:
                    out[f"Episode_Termination/{name}"] = fractions[code]
            out["Metrics/success_rate"] = fractions[SUCCESS]
            out["Metrics/episode_length_s"] = means[-1]
        for acc in (self._sums, self._reasons):
            acc.zero_()
        return out

    def recent_success_rate(self) -> float:
        """Success fraction of the last ``window`` finished episodes (nan before the first)."""
        v = self.outcomes.values()
        return float(v.mean()) if v.numel() else float("nan")
