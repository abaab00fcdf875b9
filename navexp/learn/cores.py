"""navexp processes side by side share the machine's cores instead of spin-waiting against each other.

Every navexp process that runs torch or the MuJoCo thread pool (a training: a plain run, a sweep
trial under any launcher, a torchrun rank; an evaluation, a play, a bench: ``shares_cores``) registers
in a per-user directory on this host (``$NAVEXP_CORES_DIR``, else ``<tmp>/navexp-cores-<uid>``) by
holding an exclusive ``flock`` on the file ``<pid>``, once per process however many registrations it
nests (a training's final evaluation, trials run one after another in a sweeper's process). A process
killed with kill -9 drops its lock, so the count of held locks is the number of live navexp
processes. Each takes ``usable cores // processes`` torch threads (at least 1) at its start; a training
re-checks after every PPO iteration, so a training started alone gives up cores when an evaluation or
another training starts, and takes them back when they end. The classic MuJoCo backend's rollout pool
is sized from the share at the start. torch's OpenMP threads spin while they wait for work: two
processes with all cores each ran 20x slower on 2 cores, not 2x.

``NAVEXP_SHARE_CORES=0`` turns this off: every process takes all usable cores, as before (for a
process pinned by its own ``OMP_NUM_THREADS``/``taskset``, or to measure the difference:
``python -m navexp.bench_dist concurrent=1,2,4 share=on,off``,
``python -m navexp.bench_dist beside=evaluate share=on,off``).
"""

from __future__ import annotations

import fcntl
import functools
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import torch

from navexp.learn.distributed import cpu_count_limited

F = TypeVar("F", bound=Callable[..., Any])

_HELD: dict[tuple[int, Path], list] = {}
"""This process's registrations, per (pid, registry directory): [the locked file, how many HostShares hold
it]. Keyed by pid too, so a forked child registers itself rather than counting on its parent's file."""


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def sharing() -> bool:
    """False when ``NAVEXP_SHARE_CORES=0``: trainings take every usable core whatever runs beside them."""
    value = os.environ.get("NAVEXP_SHARE_CORES", "1").strip().lower()
    if value not in ("0", "1", "false", "true", "off", "on", ""):
        raise ValueError(f"NAVEXP_SHARE_CORES={value!r}: expected 1 (share the cores, the default) or 0")
    return value not in ("0", "false", "off")


def registry_dir() -> Path:
    env = os.environ.get("NAVEXP_CORES_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / f"navexp-cores-{os.getuid()}"


class HostShare:
    """This process's registration as a training on this host (a context manager)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.dir = Path(directory) if directory is not None else registry_dir()
        self.enabled = sharing()
        self._file = None
        self.threads: int | None = None
        self.cap: int | None = None
        """At most this many threads (a torchrun rank's share of its machine); None: no cap."""

    def __enter__(self) -> HostShare:
        if not self.enabled:
            return self
        self._path = self.dir / str(os.getpid())
        self._key = (os.getpid(), self.dir)
        held = _HELD.get(self._key)
        if held is None:  # this process's first registration here (a nested one shares its file)
            self.dir.mkdir(parents=True, exist_ok=True)
            f = open(self._path, "w")  # noqa: SIM115 - held while any registration of this process lives
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = _HELD[self._key] = [f, 0]
        held[1] += 1
        self._file = held[0]
        return self

    def __exit__(self, *exc) -> None:
        if self._file is None:
            return
        held = _HELD[self._key]
        held[1] -= 1
        if held[1] == 0:  # the process's last registration here: unregister
            del _HELD[self._key]
            self._path.unlink(missing_ok=True)
            self._file.close()
        self._file = None

    def trainings(self) -> int:
        """Live registered navexp processes (trainings, evaluations, plays, benches) on this host, this one
        included; files of dead ones are removed."""
        live = 0
        for path in self.dir.iterdir():
            if self._file is not None and path == self._path:
                live += 1
                continue
            try:
                with open(path) as f:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # taken: its process is gone
                    path.unlink(missing_ok=True)
            except BlockingIOError:
                live += 1
            except FileNotFoundError:  # removed meanwhile by its owner or another process
                pass
        return max(live, 1)

    def share(self) -> int:
        """Torch threads for this process: usable cores // live trainings, at least 1."""
        if not self.enabled:
            return usable_cores()
        return max(1, usable_cores() // self.trainings())

    def apply(self, quiet: bool = False) -> int:
        """Set torch's threads to the current share (at most ``cap``); say so when it changed."""
        threads = self.share() if self.cap is None else min(self.share(), self.cap)
        if threads != self.threads:
            torch.set_num_threads(threads)
            if not quiet and self.threads is not None:
                print(
                    f"[navexp] {self.trainings()} navexp processes on this host: {threads} torch thread(s)",
                    flush=True,
                )
            self.threads = threads
        return threads

    def on_iteration(self, it: int, success: float) -> None:
        """A NavRunner iteration callback: re-check the share after each iteration (nothing to do with
        sharing off: the threads stay as set at the start)."""
        if self.enabled:
            self.apply()


def shares_cores(fn: F) -> F:
    """Decorate a tool's ``main`` (evaluate, play, bench) so its process takes part in the core sharing:
    registered while ``fn`` runs, torch's threads set to its share and the classic MuJoCo rollout pools
    built meanwhile sized to it (nothing changes with ``NAVEXP_SHARE_CORES=0``)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with HostShare() as host:
            threads = host.apply(quiet=True)
            with cpu_count_limited(threads if host.enabled else None):
                return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
