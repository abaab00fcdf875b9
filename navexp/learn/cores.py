"""navexp processes side by side share the machine's cores instead of spin-waiting against each other.

Every navexp process that runs torch or the MuJoCo thread pool (a training: a plain run, a sweep
trial under any launcher, a torchrun rank; an evaluation, a play, a bench: ``shares_cores``) registers
in a per-user directory on this host (``$NAVEXP_CORES_DIR``, else ``<tmp>/navexp-cores-<uid>``) by
holding an exclusive ``flock`` on the file ``<pid>``, which names its role (``training``, or the tool:
``evaluate``, ``play``, ``bench``), once per process however many registrations it nests (a training's
final evaluation, trials run one after another in a sweeper's process). A process killed with kill -9
drops its lock, so the count of held locks is the number of live navexp processes.

Each takes ``usable cores // processes`` torch threads (at least 1), and every classic-MuJoCo rollout
pool of the process is sized to the same share (``navexp.sim.mujoco_backend.set_pool_threads``; a share
of 1 steps on the calling thread). The share follows the host: a training re-checks after every PPO
iteration, an evaluation or a play at most every ``RECHECK_S`` seconds while its episodes run
(``recheck``), so a process started alone gives up cores when another starts and takes them back when
it ends. An evaluation that kept the two threads
and the two pool workers it took alone had two busy threads beside a training's one on 2 cores: the
training kept 0.35x of its solo speed instead of about half (docs/experiments/
2026-12-07-training-beside-evaluation.md). torch's OpenMP threads spin while they wait for work: two
processes with all cores each ran 20x slower on 2 cores, not 2x.

Non-training work yields to trainings: an evaluation, a play or a bench that sees a live training on
the host lowers its own scheduling priority by ``NAVEXP_YIELD_NICE`` (default 10, at most to 19; every
thread of the process, as Linux keeps a niceness per thread), once, and keeps it. The training is the
job; an evaluation beside it is background work, so whenever both want the same core (an evaluation
between two share checks, a pool worker and an interpreter thread both runnable) the scheduler gives
the training the core (about 9:1 at 10 steps of niceness). ``NAVEXP_YIELD_NICE=0`` keeps the priority.
Linux weighs niceness only between threads of one scheduler autogroup (``kernel.sched_autogroup_enabled``,
on by default on desktops: one group per terminal session): a training and an evaluation started from
the same shell, script or job share a group and the yielding holds; started from two terminals they
do not, the cores are shared evenly, and the evaluation's line says so.

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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import torch

from navexp.learn.distributed import cpu_count_limited
from navexp.sim.mujoco_backend import set_pool_threads

F = TypeVar("F", bound=Callable[..., Any])

TRAINING = "training"
"""The role of a training's registration; any other role (a tool's name) yields to trainings."""
RECHECK_S = 1.0
"""``recheck`` re-counts the host's processes at most this often (seconds)."""

_HELD: dict[tuple[int, Path], list] = {}
"""This process's registrations, per (pid, registry directory): [the locked file, how many HostShares hold
it, the file's role]. Keyed by pid too, so a forked child registers itself rather than counting on its
parent's file."""
_ACTIVE: list[HostShare] = []
"""This process's outermost registration while it lives (``recheck`` applies its share)."""
_NEXT_CHECK = [0.0]
"""``time.monotonic()`` before which ``recheck`` does nothing."""


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


def yield_nice() -> int:
    """Steps of niceness a non-training process takes beside a training: ``NAVEXP_YIELD_NICE`` (default 10;
    0: never yield)."""
    value = os.environ.get("NAVEXP_YIELD_NICE", "10").strip() or "10"
    steps = int(value) if value.isdigit() else -1
    if not 0 <= steps <= 19:
        raise ValueError(
            f"NAVEXP_YIELD_NICE={value!r}: expected an integer from 0 (keep the priority) to 19 (default 10)"
        )
    return steps


def lower_priority(steps: int) -> int:
    """Raise the niceness of every thread of this process to the calling thread's + ``steps`` (at most 19;
    threads already nicer keep theirs); return that niceness. Linux keeps a niceness per thread, and the
    pool and BLAS workers started before would otherwise keep theirs."""
    target = min(19, os.getpriority(os.PRIO_PROCESS, 0) + steps)
    tasks = Path("/proc/self/task")
    tids = [int(t.name) for t in tasks.iterdir()] if tasks.is_dir() else [0]  # 0: the whole process
    for tid in tids:
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) < target:
                os.setpriority(os.PRIO_PROCESS, tid, target)
        except (ProcessLookupError, PermissionError):  # ended meanwhile (or not ours to change)
            pass
    return target


def publish(directory: Path, path: Path, role: str):
    """This process's registration file ``path``, locked and naming ``role`` before any other process can
    see it: written and locked as ``<pid>.tmp``, then renamed (the lock stays with the file). Opened and
    locked in place, another process's ``others`` could take the lock in between and remove the file as
    a dead one's. Returns the open file, held while the process is registered."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    f = open(tmp, "w")  # noqa: SIM115 - held while any registration of this process lives
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    f.write(role)
    f.flush()
    os.replace(tmp, path)
    return f


def same_session_group(pid: int) -> bool | None:
    """Whether process ``pid`` is in this process's scheduler autogroup (Linux with
    ``kernel.sched_autogroup_enabled``: niceness only weighs threads of one session against each other);
    None when unknown (no autogroups, or the process is gone)."""
    try:
        return (
            Path(f"/proc/{pid}/autogroup").read_text().split()[0]
            == Path("/proc/self/autogroup").read_text().split()[0]
        )
    except (OSError, IndexError):
        return None


def registry_dir() -> Path:
    env = os.environ.get("NAVEXP_CORES_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / f"navexp-cores-{os.getuid()}"


class HostShare:
    """This process's registration on this host as a training or, with another ``role`` (a tool's name),
    as work that yields to trainings (a context manager)."""

    def __init__(self, directory: Path | None = None, role: str = TRAINING) -> None:
        self.dir = Path(directory) if directory is not None else registry_dir()
        self.enabled = sharing()
        self.role = role
        self.yield_steps = 0 if role == TRAINING else yield_nice()
        self._file = None
        self.threads: int | None = None
        self.cap: int | None = None
        """At most this many threads (a torchrun rank's share of its machine); None: no cap."""
        self.niceness: int | None = None
        """The niceness this process took when it yielded to a training; None: it has not yielded."""
        self.training_pids: list[int] = []
        """The trainings ``others`` found last (their pids)."""

    def __enter__(self) -> HostShare:
        if not self.enabled:
            return self
        self._path = self.dir / str(os.getpid())
        self._key = (os.getpid(), self.dir)
        held = _HELD.get(self._key)
        if held is None:  # this process's first registration here (a nested one shares its file)
            held = _HELD[self._key] = [publish(self.dir, self._path, self.role), 0, self.role]
            _ACTIVE.append(self)
            _NEXT_CHECK[0] = 0.0  # a new registration: the first ``recheck`` applies at once
        if held[2] != TRAINING and held[2] != self.role:  # a training nested in a tool makes it a training
            held[0].seek(0)
            held[0].truncate()
            held[0].write(self.role)
            held[0].flush()
            held[2] = self.role
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
            if self in _ACTIVE:
                _ACTIVE.remove(self)
                set_pool_threads(None)  # pools built later size themselves from os.cpu_count() again
        self._file = None

    def others(self) -> list[str]:
        """The roles of the other live registered navexp processes on this host; files of dead ones are
        removed (a file being published, ``<pid>.tmp``, is not counted yet)."""
        roles, pids = [], []
        for path in self.dir.iterdir():
            if (self._file is not None and path == self._path) or path.suffix == ".tmp":
                continue
            try:
                with open(path) as f:
                    try:
                        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:  # held: its process lives
                        roles.append(f.read().strip() or "unknown")
                        if roles[-1] == TRAINING and path.name.isdigit():
                            pids.append(int(path.name))
                        continue
                    path.unlink(missing_ok=True)  # taken: its process is gone
            except FileNotFoundError:  # removed meanwhile by its owner or another process
                pass
        self.training_pids = pids
        return roles

    def trainings(self) -> int:
        """Live registered navexp processes (trainings, evaluations, plays, benches) on this host, this one
        included; files of dead ones are removed."""
        return max(len(self.others()) + (self._file is not None), 1)

    def share(self, others: list[str] | None = None) -> int:
        """Torch threads for this process: usable cores // live navexp processes, at least 1."""
        if not self.enabled:
            return usable_cores()
        others = self.others() if others is None else others
        return max(1, usable_cores() // (len(others) + 1))

    def apply(self, quiet: bool = False) -> int:
        """Set torch's threads and the MuJoCo pools to the current share (at most ``cap``), say so when it
        changed, and yield to a training beside this process if it is not one."""
        others = self.others() if self.enabled else []
        threads = self.share(others) if self.cap is None else min(self.share(others), self.cap)
        if self.enabled:
            set_pool_threads(threads)
        if threads != self.threads:
            torch.set_num_threads(threads)
            if not quiet and self.threads is not None:
                print(
                    f"[navexp] {len(others) + 1} navexp processes on this host: {threads} torch thread(s)",
                    flush=True,
                )
            self.threads = threads
        if self.yield_steps and self.niceness is None and TRAINING in others:
            self.niceness = lower_priority(self.yield_steps)
            apart = [p for p in self.training_pids if same_session_group(p) is False]
            note = (
                f"; the training (pid {apart[0]}) runs in another terminal session, and Linux weighs "
                f"niceness only within a session (kernel.sched_autogroup_enabled): the cores are shared "
                f"evenly, not 9:1"
                if apart
                else ""
            )
            print(
                f"[navexp] a training runs on this host: this navexp.{self.role} yields to it (niceness "
                f"{self.niceness}; NAVEXP_YIELD_NICE=0 keeps the priority){note}",
                flush=True,
            )
        return threads

    def on_iteration(self, it: int, success: float) -> None:
        """A NavRunner iteration callback: re-check the share after each iteration (nothing to do with
        sharing off: the threads stay as set at the start)."""
        if self.enabled:
            self.apply()


def recheck() -> None:
    """Apply this process's share again (threads, pools, yielding) if ``RECHECK_S`` seconds have passed
    since the last time: for loops outside a training's iterations (an evaluation's steps). Call it from
    the main thread: torch's thread count is the calling thread's."""
    mine = [h for h in _ACTIVE if h._key[0] == os.getpid()]  # not a forked parent's
    if not mine or time.monotonic() < _NEXT_CHECK[0]:
        return
    _NEXT_CHECK[0] = time.monotonic() + RECHECK_S
    mine[0].apply(quiet=True)


def shares_cores(fn: F) -> F:
    """Decorate a tool's ``main`` (evaluate, play, bench) so its process takes part in the core sharing:
    registered under the tool's name while ``fn`` runs, torch's threads and the classic MuJoCo rollout
    pools sized to its share (re-checked by ``recheck``), yielding to trainings (nothing changes with
    ``NAVEXP_SHARE_CORES=0``)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with HostShare(role=Path(fn.__code__.co_filename).stem) as host:  # evaluate, play, bench
            threads = host.apply(quiet=True)
            with cpu_count_limited(threads if host.enabled else None):
                return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
