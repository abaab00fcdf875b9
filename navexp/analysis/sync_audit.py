"""Count host synchronisations and torch operations in a block of code, on any device.

On a GPU a host sync (reading a value, finding indices, copying to the CPU) stalls the Python thread
until the device has caught up, so a step that syncs cannot queue work ahead. On the CPU nothing
stalls, which is why the count has to be taken from the calls themselves: a
``TorchDispatchMode`` sees every ATen operation (and flags the ones whose result depends on device
data, such as ``nonzero`` or ``_local_scalar_dense`` behind ``item()``/``bool()``/``int()``), and the
Python-level ``Tensor.cpu/numpy/tolist`` are wrapped for the duration.

    with SyncAudit() as audit:
        env.step(actions)
    audit.syncs        # {'aten.nonzero': 2, 'Tensor.tolist': 1, ...}
    audit.num_ops      # every ATen operation dispatched
"""

from __future__ import annotations

from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_SYNCING_OPS = {
    "aten._local_scalar_dense",  # item(), bool(), int(), float()
    "aten.is_nonzero",
    "aten.nonzero",
    "aten.nonzero_static",
    "aten.masked_select",
    "aten.equal",
    "aten.allclose",
    "aten.unique_consecutive",
    "aten._unique",
    "aten._unique2",
    "aten.unique_dim",
    "aten.repeat_interleave",
}
"""ATen operations whose output size or value the host must wait for."""

_PY_METHODS = ("cpu", "numpy", "tolist")


def _to_device(name: str, args, kwargs) -> bool:
    """Whether a copy op writes to a non-CPU device."""
    if name == "aten.copy_":
        return args[0].device.type != "cpu"
    device = kwargs.get("device")
    return device is not None and torch.device(device).type != "cpu"


def _is_bool_index(indices) -> bool:
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices if i is not None)


class SyncAudit(TorchDispatchMode):
    """Context manager counting host syncs (by name) and all ATen operations."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs: Counter[str] = Counter()
        self.ops: Counter[str] = Counter()
        self._saved: dict[str, object] = {}

    @property
    def num_syncs(self) -> int:
        return sum(self.syncs.values())

    @property
    def num_ops(self) -> int:
        return sum(self.ops.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func.overloadpacket)
        self.ops[name] += 1
        if name in _SYNCING_OPS:
            self.syncs[name] += 1
        elif name in ("aten.index", "aten.index_put", "aten.index_put_") and _is_bool_index(args[1]):
            self.syncs[f"{name} (bool mask)"] += 1
        elif name in ("aten._to_copy", "aten.copy_"):
            if name == "aten.copy_":
                src, dst_cpu = args[1], args[0].device.type == "cpu"
            else:
                src, dst_cpu = args[0], kwargs.get("device") == torch.device("cpu")
            if dst_cpu and src.device.type != "cpu":
                self.syncs[f"{name} (to host)"] += 1
            elif not dst_cpu and src.device.type == "cpu" and _to_device(name, args, kwargs):
                # A blocking copy from pageable host memory waits for the stream on CUDA.
                self.syncs[f"{name} (from host)"] += 1
        return func(*args, **kwargs)

    def __enter__(self):
        for method in _PY_METHODS:
            original = getattr(torch.Tensor, method)
            self._saved[method] = original

            def counted(tensor, *a, _original=original, _name=method, **k):
                self.syncs[f"Tensor.{_name}"] += 1
                return _original(tensor, *a, **k)

            setattr(torch.Tensor, method, counted)
        return super().__enter__()

    def __exit__(self, *exc):
        for method, original in self._saved.items():
            setattr(torch.Tensor, method, original)
        self._saved.clear()
        return super().__exit__(*exc)
