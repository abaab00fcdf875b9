"""Data-parallel training across processes (``torchrun --nproc_per_node=N -m navexp.train``).

torchrun starts N copies of the app and sets ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK`` and
``LOCAL_WORLD_SIZE``. Each rank simulates its own ``env.num_envs`` worlds on its own device
(``cuda:<LOCAL_RANK>``, or the CPU), draws layouts and noise from ``seed + RANK``, and rsl_rl's PPO
all-reduces gradients, normalizer statistics and the adaptive learning rate, so every rank holds the
same policy. The process group uses NCCL on GPUs and Gloo on CPUs (rsl_rl 5.5.1 only knows NCCL).
Rank 0 picks the run directory and is the only rank that writes to it.

This module holds what happens before and around the runner: reading torchrun's variables, checking
the device before anything is allocated, thread shares on a CPU, the process group, the collectives
the app needs (one run directory, per-rank records, a stop request every rank agrees on), and the
Hydra overrides that keep ranks other than 0 from creating run directories of their own.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

BACKENDS = {"cuda": "nccl", "cpu": "gloo"}


@dataclass(frozen=True)
class DistContext:
    """Where this process stands in a torchrun job (a single process is world size 1, rank 0)."""

    world_size: int = 1
    rank: int = 0
    """Global rank: seeds are ``seed + rank``; rank 0 writes the run directory."""
    local_rank: int = 0
    """Rank on this machine: the GPU index on CUDA."""
    local_world_size: int = 1
    device: str = "cpu"
    backend: str | None = None
    """``nccl`` (CUDA) or ``gloo`` (CPU) when distributed, else None."""
    threads: int | None = None
    """CPU threads of this rank (torch intra-op and the MuJoCo rollout pool); None: not limited."""

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is invalid; allowed: an integer") from None


def torchrun_ranks() -> tuple[int, int, int, int]:
    """``(WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE)`` as torchrun sets them (1, 0, 0, 1 without)."""
    world = _env_int("WORLD_SIZE", 1)
    rank, local = _env_int("RANK", 0), _env_int("LOCAL_RANK", 0)
    local_world = _env_int("LOCAL_WORLD_SIZE", world)
    if world < 1 or not 0 <= rank < world or not 0 <= local < local_world:
        raise ValueError(
            f"torchrun variables WORLD_SIZE={world}, RANK={rank}, LOCAL_RANK={local}, "
            f"LOCAL_WORLD_SIZE={local_world} are inconsistent; allowed: 0 <= RANK < WORLD_SIZE and "
            f"0 <= LOCAL_RANK < LOCAL_WORLD_SIZE"
        )
    return world, rank, local, local_world


def rank_device(requested: str, local_rank: int, local_world_size: int, cuda_count: int) -> str:
    """The device of one rank for ``env.device=requested``; raise before anything is allocated.

    ``cpu`` -> ``cpu``; ``auto`` -> ``cuda:<local_rank>`` with CUDA, else ``cpu``; ``cuda`` ->
    ``cuda:<local_rank>``; ``cuda:<k>`` must name the rank's own GPU. Fewer GPUs on this machine than
    ranks on it is an error, never a silent fall-back to sharing or to the CPU.
    """
    if requested == "cpu":
        return "cpu"
    if requested == "auto" and cuda_count == 0:
        return "cpu"
    if requested not in ("auto", "cuda") and not requested.startswith("cuda:"):
        raise ValueError(
            f"env.device={requested!r} is invalid; allowed: auto | cpu | cuda | cuda:<LOCAL_RANK>"
        )
    if requested.startswith("cuda:") and requested != f"cuda:{local_rank}":
        raise ValueError(
            f"env.device={requested!r} does not match this process (LOCAL_RANK={local_rank} of "
            f"{local_world_size} under torchrun): each rank runs on cuda:<LOCAL_RANK>; use env.device=auto "
            f"or env.device=cuda (or env.device=cpu)"
        )
    if cuda_count < local_world_size:
        raise ValueError(
            f"env.device={requested!r}: torchrun starts {local_world_size} processes on this machine but "
            f"it has {cuda_count} CUDA device(s); use --nproc_per_node<={cuda_count} or env.device=cpu"
        )
    return f"cuda:{local_rank}"


def thread_share(local_world_size: int) -> int:
    """CPU threads per rank: this process's usable cores divided among the ranks on the machine."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores // max(1, local_world_size))


def setup(requested_device: str) -> DistContext:
    """Read torchrun's variables; with WORLD_SIZE > 1 check the device, set this rank's thread share
    and start the process group (NCCL on CUDA, Gloo on the CPU). A single process gets a context of
    world size 1 and nothing else happens."""
    world, rank, local, local_world = torchrun_ranks()
    if world == 1:
        return DistContext()
    cuda_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    device = rank_device(requested_device, local, local_world, cuda_count)
    backend = BACKENDS["cuda" if device.startswith("cuda") else "cpu"]
    threads = thread_share(local_world)
    torch.set_num_threads(threads)
    if device.startswith("cuda"):
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, rank=rank, world_size=world)
    elif dist.get_backend() != backend:
        raise ValueError(
            f"a {dist.get_backend()} process group is already running, "
            f"but env.device={device!r} needs {backend}"
        )
    return DistContext(world, rank, local, local_world, device, backend, threads)


def shutdown() -> None:
    """Leave the process group (a no-op without one)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def broadcast(obj: Any, ctx: DistContext) -> Any:
    """Rank 0's ``obj`` on every rank (picklable objects; ``obj`` itself without distribution)."""
    if not ctx.enabled:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather(obj: Any, ctx: DistContext) -> list[Any]:
    """``[obj of rank 0, obj of rank 1, ...]`` on every rank (``[obj]`` without distribution)."""
    if not ctx.enabled:
        return [obj]
    out: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, obj)
    return out


def tensor_digest(tensors: list[torch.Tensor]) -> str:
    """SHA-256 (first 16 hex digits) of the tensors' bytes: equal digests mean bitwise-equal values."""
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


@contextlib.contextmanager
def cpu_count_limited(threads: int | None) -> Iterator[None]:
    """Make ``os.cpu_count()`` return this rank's share while the simulator is built.

    The classic-MuJoCo backend sizes its rollout thread pool from ``os.cpu_count()``; N ranks on one
    machine would otherwise start N pools of all cores each and spin against each other.
    """
    if threads is None:
        yield
        return
    original = os.cpu_count
    os.cpu_count = lambda: threads  # type: ignore[assignment]
    try:
        yield
    finally:
        os.cpu_count = original  # type: ignore[assignment]


class StopRequest:
    """Ctrl-C / SIGTERM under torchrun: every rank finishes the iteration, then all stop together.

    A signal only sets a flag; after each iteration ``check`` all-reduces the flags (one int) and
    raises KeyboardInterrupt on every rank when any rank was signalled. No rank leaves in the middle
    of a collective, so no other rank waits for a peer that is gone, and rank 0 saves the checkpoint
    of the finished iteration.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, ctx: DistContext) -> None:
        self.ctx = ctx
        self.signalled: int | None = None
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: object) -> None:
        self.signalled = signum

    def __enter__(self) -> StopRequest:
        self._old = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)

    def check(self, it: int, _success: float = float("nan")) -> None:
        """Raise KeyboardInterrupt on every rank when any rank was signalled (a collective: all call it)."""
        flag = torch.tensor([0 if self.signalled is None else 1], device=self.ctx.device)
        if self.ctx.enabled:
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if int(flag.item()):
            raise KeyboardInterrupt(f"stop requested (signal on some rank) after iteration {it}")


class TimeBudgetReached(Exception):
    """``ppo.max_minutes`` of training have passed: stop after this iteration and evaluate."""


class TimeBudget:
    """An iteration callback: raise TimeBudgetReached on every rank once ``minutes`` have passed since
    it was made (rank 0's clock decides under torchrun, so all ranks stop after the same iteration)."""

    def __init__(self, minutes: float, ctx: DistContext) -> None:
        self.minutes, self.ctx = float(minutes), ctx
        self.start = time.monotonic()

    def __call__(self, it: int, _success: float = float("nan")) -> None:
        over = time.monotonic() - self.start >= 60.0 * self.minutes
        if self.ctx.enabled:
            flag = torch.tensor([int(over)], device=self.ctx.device)
            dist.broadcast(flag, src=0)
            over = bool(flag.item())
        if over:
            raise TimeBudgetReached(f"ppo.max_minutes={self.minutes:g} reached after iteration {it}")


def worker_hydra_overrides(argv: list[str]) -> list[str]:
    """Hydra arguments for this process: ranks other than 0 get no run directory of their own.

    Hydra would give every rank a directory named by its own start time; rank 0's is the run's, and
    the others receive it from rank 0 after the process group starts. Hydra callbacks (which act on
    the run directory) run on rank 0 only.
    """
    world, rank = _env_int("WORLD_SIZE", 1), _env_int("RANK", 0)
    if world <= 1 or rank == 0:
        return argv
    return [
        *argv,
        "hydra.run.dir=.",
        "hydra.output_subdir=null",
        "hydra.callbacks={}",  # run-directory callbacks belong to rank 0's directory
        "hydra/job_logging=none",
        "hydra/hydra_logging=none",
    ]
