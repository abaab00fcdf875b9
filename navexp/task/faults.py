"""Fault flags kept on the device: NaN/inf and buffer overflows are recorded per world while the
env steps, and raised (one host sync) every ``env.check_every`` steps and before every PPO update.

Checking on every step would make the host wait for the device on every step. Flags are sticky
until checked, so no fault is lost between checks, and each world remembers the first step it was
flagged. Worlds with a non-finite action are stepped with a zero action until the check raises.
"""

from __future__ import annotations

import torch

SOURCES = ("buffer overflow", "actions", "simulator state", "observations", "rewards")
"""Fault kinds, by bit (1 << index). Overflow comes first: it usually causes the others."""
OVERFLOW, ACTIONS, STATE, OBSERVATIONS, REWARDS = range(len(SOURCES))


class FaultFlags:
    """Per-world fault bits [N] and the env step each world was first flagged at, per fault kind."""

    def __init__(self, num_worlds: int, device: torch.device | str) -> None:
        self.bits = torch.zeros(num_worlds, dtype=torch.int32, device=device)
        self.first_step = torch.full((num_worlds, len(SOURCES)), -1, dtype=torch.long, device=device)
        """[N, S] env step at which world n was first flagged with kind s (-1: not flagged)."""
        self._shifts = torch.arange(len(SOURCES), dtype=torch.int32, device=device)
        self._bit_values = 1 << self._shifts
        """[S] int32: the bit of each fault kind."""
        self.overflow_bits = torch.zeros(num_worlds, dtype=torch.int32, device=device)
        """OR of the simulator's overflow bitmasks since the last check."""

    def flag(self, source: int, bad: torch.Tensor) -> None:
        """Mark the worlds where ``bad`` [N] bool with ``source`` (no host sync)."""
        self.bits |= bad.to(torch.int32) << source

    def flag_overflow(self, overflow: torch.Tensor) -> None:
        """Record the simulator's per-world overflow bitmask [N] (0: none)."""
        self.overflow_bits |= overflow.to(torch.int32)
        self.flag(OVERFLOW, overflow != 0)

    def end_step(self, step: int) -> None:
        """Stamp ``step`` on the (world, kind) pairs flagged for the first time."""
        flagged = ((self.bits.unsqueeze(-1) >> self._shifts) & 1) == 1
        self.first_step.masked_fill_(flagged & (self.first_step < 0), step)

    def record_step(self, bad: torch.Tensor, overflow: torch.Tensor, step: int | torch.Tensor) -> None:
        """One control step's faults at once: ``bad`` [N, S] bool, column s the fault kind s of
        ``SOURCES`` (the overflow column ``overflow != 0``), ``overflow`` [N] int32 the simulator's
        bitmask; flags, overflow bits and first steps as ``flag_overflow``, ``flag`` and ``end_step``
        would leave them, in a fixed handful of tensor ops (no host sync); ``step`` may be a 0-d device
        tensor (the env's count: a captured step then stamps the step it replays)."""
        self.overflow_bits |= overflow
        # bits |= sum_s bad[:, s] << s: the columns are distinct bits, so the sum is their OR.
        self.bits |= (bad * self._bit_values).sum(dim=1, dtype=torch.int32)
        # A kind first flagged this step was not flagged before: bad now, no step stamped yet.
        self.first_step.masked_fill_(bad & (self.first_step < 0), step)

    def any(self) -> torch.Tensor:
        """Device bool: some world is flagged."""
        return self.bits.any()

    def raise_flagged(self, overflow_reason, check_every: int | None) -> None:
        """Raise for the flagged worlds (call when ``any()`` is true), then clear the flags.

        ``overflow_reason(bits) -> str`` names the simulator's buffers behind an overflow bitmask.
        Overflows raise RuntimeError, NaN/inf FloatingPointError, naming the worlds, how many, and
        the first env step it was seen at."""
        bits, first, over = (t.to("cpu", copy=True) for t in (self.bits, self.first_step, self.overflow_bits))
        self.bits.zero_()
        self.first_step.fill_(-1)
        self.overflow_bits.zero_()
        when = f"checked every {check_every} steps" if check_every else "checked on demand"
        lines = []
        for source, what in enumerate(SOURCES):
            hit = ((bits >> source) & 1) == 1
            if not hit.any():
                continue
            worlds = hit.nonzero().flatten().tolist()
            where = (
                f"in worlds {worlds[:10]} ({len(worlds)} worlds), first at env step "
                f"{int(first[hit, source].min())} ({when})"
            )
            if source == OVERFLOW:
                lines.append(f"{overflow_reason(_or_all(over[hit]))} {where}")
            else:
                extra = "; they were stepped with zero actions" if source == ACTIONS else ""
                lines.append(f"NaN/inf in {what} {where}{extra}")
        message = "; ".join(lines)
        if bits.bitwise_and(1 << OVERFLOW).any():
            raise RuntimeError(message)
        raise FloatingPointError(
            f"{message}; stopping rather than training on garbage "
            f"(env.check_finite=false disables this check)"
        )


def _or_all(values: torch.Tensor) -> int:
    """Bitwise OR of integer values."""
    out = 0
    for v in values.tolist():
        out |= int(v)
    return out
