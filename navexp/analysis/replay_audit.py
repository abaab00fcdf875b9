"""Whether a block of torch code could be captured once and replayed: the same ops on the same memory.

A CUDA graph (``torch.cuda.graph``) records a step's kernels with the addresses and constants they
had at capture; a replay runs exactly those again. So a step is replayable when every run of it issues
the same ATen operations, reads and writes the same long-lived tensors (same storage, offset, shape,
stride and dtype), and passes the same Python constants. What breaks that: a tensor re-bound instead
of written in place (``self.pos = torch.where(...)``: the next step reads another address), a Python
counter passed into an op (``masked_fill_(mask, step)``), a shape that follows the data. On a GPU the
capture itself shows it, on the CPU this does: ``ReplayAudit`` records one run's operations as a
signature, tensors it made during the run named by the operation that made them (a graph gives those
its own memory) and any other tensor by its storage address; two runs must give equal signatures.

    with ReplayAudit() as first:
        env.step(actions)
    with ReplayAudit() as second:
        env.step(other_actions)
    first.differences(second)   # [] when a graph of the first replays the second
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


@dataclass
class ReplayAudit(TorchDispatchMode):
    """Context manager recording each ATen operation with the memory and constants it uses."""

    ops: list[tuple] = field(default_factory=list)
    """One signature per operation: (name, its arguments with tensors as ``_tensor`` describes them)."""
    where: list[str] = field(default_factory=list)
    """For each operation, the innermost navexp source line that issued it."""

    def __post_init__(self) -> None:
        super().__init__()
        self._made: dict[int, int] = {}
        """Storage address -> index of the operation that allocated it during this run."""
        self._held: set[int] = set()
        """Storage addresses first seen as an input: tensors that outlive the run."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat, _ = tree_flatten((args, kwargs))
        signature = tuple(self._describe(a) for a in flat)
        out = func(*args, **kwargs)
        index = len(self.ops)
        self.ops.append((str(func), signature))
        self.where.append(_navexp_line())
        inputs = {_address(a) for a in flat if isinstance(a, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                address = _address(t)
                if address not in inputs:  # fresh memory, maybe where a freed tensor was: made here
                    self._held.discard(address)
                    self._made[address] = index
                elif address not in self._held:  # in place on, or a view of, a tensor made in this run
                    self._made[address] = index
        return out

    def _describe(self, a) -> object:
        if isinstance(a, torch.Generator):  # a capture records its state's offsets, not the object
            return ("generator", str(a.device))
        if not isinstance(a, torch.Tensor):
            plain = isinstance(a, (int, float, bool, str, type(None), torch.dtype, torch.device))
            return a if plain else repr(a)
        address = _address(a)
        meta = (a.storage_offset(), tuple(a.shape), tuple(a.stride()), a.dtype)
        if address in self._made:
            return ("made", self._made[address], *meta)
        self._held.add(address)
        return ("held", address, *meta)

    def differences(self, other: ReplayAudit, most: int = 5) -> list[str]:
        """Up to ``most`` readable differences between two runs' signatures ([] when they replay)."""
        out = []
        if len(self.ops) != len(other.ops):
            out.append(f"{len(self.ops)} operations, then {len(other.ops)}")
        for k, (a, b) in enumerate(zip(self.ops, other.ops, strict=False)):
            if a != b and len(out) < most:
                out.append(f"op {k} {a[0]} at {self.where[k]} / {other.where[k]}: {_first_change(a, b)}")
        return out


def _address(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _first_change(a: tuple, b: tuple) -> str:
    if a[0] != b[0]:
        return f"{a[0]} then {b[0]}"
    for x, y in zip(a[1], b[1], strict=False):
        if x != y:
            return f"{x!r} then {y!r}"
    return f"{len(a[1])} arguments, then {len(b[1])}"


def _navexp_line() -> str:
    """The innermost stack frame inside the navexp package, as ``file:line``."""
    for frame in reversed(traceback.extract_stack(limit=40)):
        if "/navexp/" in frame.filename and "replay_audit" not in frame.filename:
            return f"{frame.filename.rsplit('/navexp/', 1)[1]}:{frame.lineno}"
    return "?"
