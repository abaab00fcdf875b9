"""What a run's console shows, and its copy in the run directory: every line the console printed also
goes to Hydra's log file of the launch (``train.log``), and third-party warnings stay hidden unless
``verbose=true``."""

from __future__ import annotations

import contextlib
import io
import logging
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO


class _Tee(io.TextIOBase):
    """A text stream that writes to the console stream and to a logging file handler's file."""

    def __init__(self, stream: TextIO, handler: logging.FileHandler) -> None:
        self.stream, self.handler = stream, handler

    def write(self, text: str) -> int:
        n = self.stream.write(text)
        with self.handler.lock:  # the lock Hydra's log records take: lines do not interleave mid-way
            if self.handler.stream is not None:
                self.handler.stream.write(text)
                self.handler.stream.flush()
        return n

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")


def log_file_handler(folder: Path) -> logging.FileHandler | None:
    """The root logger's file handler writing into ``folder`` (Hydra's ``<job>.log``), if any."""
    for h in logging.getLogger().handlers:
        if isinstance(h, logging.FileHandler) and Path(h.baseFilename).parent == Path(folder).resolve():
            return h
    return None


@contextlib.contextmanager
def console_to_log(folder: Path) -> Iterator[None]:
    """Inside the block, stdout and stderr also go to Hydra's log file in ``folder`` (``train.log``:
    the progress lines, the evaluation, errors); no log file (``hydra/job_logging=disabled``): as is."""
    handler = log_file_handler(folder)
    if handler is None:
        yield
        return
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Tee(out, handler), _Tee(err, handler)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


THIRD_PARTY = (FutureWarning, DeprecationWarning, PendingDeprecationWarning)
"""Warning categories libraries raise about their own or their dependencies' future (torch, torchvision,
rsl_rl, wandb, ...): nothing a user of navexp acts on."""


@contextlib.contextmanager
def third_party_warnings(verbose: bool) -> Iterator[None]:
    """Hide THIRD_PARTY warnings inside the block unless ``verbose``."""
    with warnings.catch_warnings():
        if not verbose:
            for category in THIRD_PARTY:
                warnings.simplefilter("ignore", category)
        yield
