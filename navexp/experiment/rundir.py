"""One owner per run directory: a lock file naming the training that writes into it.

``<run>/.navexp.lock`` holds ``{"pid", "host", "started"}`` of the owner and is held with ``flock``
while the run lives. A second training or resume on the same directory fails at once naming the
owner. A lock left behind by a process that died (its pid is gone on this host) is taken over with a
warning; a lock from another host is never taken over (its pid cannot be checked from here).
"""

from __future__ import annotations

import errno
import fcntl
import functools
import json
import os
import shutil
import socket
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from navexp.config.validation import validate_run_cfg
from navexp.learn.checkpoint import check_resume_source, find_checkpoints, load_checkpoint

LOCK_NAME = ".navexp.lock"
RUN_MARKERS = ("run_info.json", "config.yaml")
"""Files that show a directory already holds a run (checkpoints count too)."""


class RunDirBusyError(RuntimeError):
    """The run directory is owned by another live training (or one on another host)."""


class RunDirUnwritableError(RuntimeError):
    """The run directory cannot be made or written (a read-only filesystem, no permission, a file in
    its path)."""


def _unwritable(run_dir: Path, e: OSError) -> RunDirUnwritableError:
    """One line naming the run directory, the OS's reason and the path it refused."""
    where = f" ({e.filename})" if e.filename and str(e.filename) != str(run_dir) else ""
    return RunDirUnwritableError(
        f"run directory {run_dir} cannot be written: {e.strerror or e}{where}; choose a writable "
        "directory (hydra.run.dir=...); nothing was written"
    )


def pid_alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def _describe(owner: dict) -> str:
    return f"pid {owner.get('pid')} on host {owner.get('host')} since {owner.get('started')}"


class RunDirLock:
    """An exclusive, process-lifetime claim on a run directory (use as a context manager)."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_NAME
        self._fd: int | None = None
        self._created = False
        """Whether acquire() made the directory (removed again on release if nothing was written)."""

    def acquire(self) -> RunDirLock:
        """Claim the directory; raise RunDirBusyError naming the owner when another run holds it."""
        self._created = not self.run_dir.exists()
        for _ in range(3):  # the file may be unlinked by its releasing owner between open and flock
            try:  # a read-only filesystem, no permission, a file in the path: one line, nothing written
                self.run_dir.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                raise _unwritable(self.run_dir, e) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                owner = self._read(fd)
                os.close(fd)
                if e.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                    raise
                raise RunDirBusyError(
                    f"run directory {self.run_dir} is in use by another training ({_describe(owner)}); "
                    f"wait for it to end or choose another directory (hydra.run.dir=...)"
                ) from None
            if os.path.exists(self.path) and os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                break
            os.close(fd)  # we locked a file that was unlinked meanwhile: try again on the new one
        else:
            raise RunDirBusyError(f"run directory {self.run_dir}: could not take {self.path}")
        self._take_over(fd)
        return self

    def _take_over(self, fd: int) -> None:
        """Write our identity; warn about (or refuse) a lock left behind by an owner that is gone."""
        previous = self._read(fd)
        host = socket.gethostname()
        if previous:
            if previous.get("host") != host:
                os.close(fd)
                raise RunDirBusyError(
                    f"run directory {self.run_dir} is locked by {_describe(previous)}, another host, "
                    f"whose process cannot be checked from here; if that run is gone, delete {self.path}"
                )
            pid = int(previous.get("pid", -1))
            state = "no longer running" if not pid_alive(pid) else "not holding the lock (pid reused)"
            warnings.warn(
                f"run directory {self.run_dir}: taking over a stale lock of {_describe(previous)} ({state})",
                stacklevel=3,
            )
        owner = {
            "pid": os.getpid(),
            "host": host,
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(owner).encode(), 0)
        os.fsync(fd)
        self._fd = fd

    @staticmethod
    def _read(fd: int) -> dict:
        try:
            raw = os.pread(fd, 4096, 0)
            return json.loads(raw) if raw.strip() else {}
        except (OSError, ValueError):
            return {"pid": "?", "host": "?", "started": "? (unreadable lock file)"}

    def release(self) -> None:
        """Give the directory up: remove the lock file, then drop the flock."""
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(self._fd)  # closing drops the flock
            self._fd = None
        if self._created and self.run_dir.is_dir() and not any(self.run_dir.iterdir()):
            self.run_dir.rmdir()  # a run that failed before writing leaves no empty directory behind

    def __enter__(self) -> RunDirLock:
        return self.acquire() if self._fd is None else self

    def __exit__(self, *exc) -> None:
        self.release()


def check_fresh_run_dir(run_dir: Path) -> None:
    """Refuse to start a new training in a directory that already holds a run (use resume= there)."""
    if not run_dir.is_dir():
        return
    found = [run_dir / m for m in RUN_MARKERS if (run_dir / m).is_file()] + find_checkpoints(run_dir)
    if found:
        names = ", ".join(p.name for p in found[:5]) + (", ..." if len(found) > 5 else "")
        raise FileExistsError(
            f"run directory {run_dir} already holds a run ({names}); continue it with "
            f"resume={run_dir} or choose a new directory (hydra.run.dir=...); nothing was written"
        )


_claimed: list[RunDirLock] = []
"""Run directories claimed inside the running ``releases_run_dirs`` call."""

_held_by_guard: dict[Path, RunDirLock] = {}
"""Run directories the Hydra callback claimed before Hydra wrote ``.hydra/`` (the app adopts them)."""


def claim_run_dir(run_dir: Path, fresh: bool) -> RunDirLock:
    """Lock ``run_dir`` for this process (and, for a new training, refuse one that holds a run).

    A lock the Hydra callback (``RunDirGuard``) already took for this directory is adopted. The claim
    lasts until the enclosing ``@releases_run_dirs`` function returns or raises.
    """
    lock = _held_by_guard.pop(Path(run_dir).resolve(), None)
    if lock is None:
        lock = RunDirLock(run_dir).acquire()
    try:
        if fresh:
            check_fresh_run_dir(run_dir)
    except BaseException:
        lock.release()
        raise
    _claimed.append(lock)
    return lock


def releases_run_dirs(fn):
    """Decorate an entry point so the run directories it claims are released however it ends."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        depth = len(_claimed)
        try:
            return fn(*args, **kwargs)
        finally:
            while len(_claimed) > depth:
                _claimed.pop().release()

    return wrapper


HYDRA_ONLY = {".hydra", LOCK_NAME}
"""What a launch that ended before writing anything of its own leaves: Hydra's copy and its log."""


def remove_if_unused(run_dir: Path, log_name: str) -> bool:
    """Remove ``run_dir`` when it holds nothing but Hydra's ``.hydra/`` and ``<log_name>`` (a launch
    refused after Hydra made the directory: the log holds only the console's lines, the error among
    them, which the user saw); return whether it was removed. Only a directory this launch created."""
    if not run_dir.is_dir():
        return False
    if not {p.name for p in run_dir.iterdir()} <= HYDRA_ONLY | {log_name}:
        return False
    shutil.rmtree(run_dir, ignore_errors=True)
    return True


class RunDirGuard(Callback):
    """Hydra callback: a single run is checked and its directory claimed before Hydra writes its
    ``.hydra/`` copy there. A bad config or a directory that is owned or holds a run stops the launch
    with nothing written; the claim is held until the app adopts it, so a second launch into the same
    directory is refused before it can replace the first one's ``.hydra/``. A launch that fails before
    writing anything of its own leaves no directory behind."""

    def __init__(self) -> None:
        self._created: dict[Path, bool] = {}
        """Run directories this launch's claim created (only those may be removed at its end)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Validate the run config and claim ``hydra.run.dir`` (a resume's is its run's directory).
        Under torchrun only rank 0 owns the run directory; the other ranks' Hydra runs are not checked."""
        if _rank() != 0:
            return
        run_dir = Path(str(config.hydra.run.dir))
        try:
            validate_run_cfg(config)
            if config.get("resume"):  # an averaged policy or another model: refused before Hydra writes
                check_resume_source(load_checkpoint(config.resume), config)
            lock = RunDirLock(run_dir).acquire()  # fails naming a live owner; made dirs are removed again
            try:
                if not config.get("resume"):
                    check_fresh_run_dir(run_dir)
            except BaseException:
                lock.release()
                raise
        except (
            RunDirBusyError,
            RunDirUnwritableError,
            FileExistsError,
            FileNotFoundError,
            ValueError,
            TypeError,
        ) as e:
            # Hydra turns a callback's Exception into a warning and runs on; SystemExit stops it.
            raise SystemExit(f"Error: {e}") from None
        _held_by_guard[run_dir.resolve()] = lock
        self._created[run_dir.resolve()] = lock._created

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Release a claim the app did not adopt; remove a directory this launch made and left unused
        (only while holding its lock, so a launch that claimed it meanwhile keeps it)."""
        if _rank() != 0:
            return
        key = Path(str(config.hydra.run.dir)).resolve()
        lock = _held_by_guard.pop(key, None)
        if config.get("resume") or not self._created.pop(key, False):
            if lock is not None:
                lock.release()
            return
        if lock is None:  # the app adopted and released it: take it again, unless another launch has
            try:
                lock = RunDirLock(key).acquire()
            except RunDirBusyError:
                return
        try:
            remove_if_unused(key, f"{config.hydra.job.name}.log")
        finally:
            lock.release()


def _rank() -> int:
    """This process's torchrun rank (0 outside torchrun)."""
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0
