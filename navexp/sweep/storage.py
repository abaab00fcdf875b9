"""Where a study lives: SQLite, PostgreSQL (psycopg 3) or a journal file, opened from one string.

``sweep.storage`` (or ``hydra.sweeper.storage``) takes:

- ``sqlite:///<path>.db``: the default; workers on one machine;
- ``postgresql://user@host:port/db``: workers on many machines; navexp asks SQLAlchemy for the psycopg 3
  driver (``postgresql+psycopg://``) unless the URL names a driver (``pip install -e ".[postgres]"``);
- ``journal:<path>`` (``journal:///abs/path.log`` or ``journal:outputs/studies/x.log``): optuna's
  append-only journal file, for workers sharing a filesystem without a database server.

This is also the one module that reads an optuna private attribute (``Trial._trial_id``: the storage
id of a trial, which optuna's public API does not expose); tests/test_sweeper_plugin.py checks it, so an
optuna release that moves it fails in CI.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import optuna
from optuna.storages import BaseStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend, JournalStorage
from sqlalchemy.exc import DatabaseError, IntegrityError, ProgrammingError

log = logging.getLogger(__name__)

JOURNAL = "journal:"


def journal_path(url: str) -> Path | None:
    """The file of a ``journal:<path>`` storage (None for any other URL)."""
    if not url.startswith(JOURNAL):
        return None
    rest = url[len(JOURNAL) :]
    return Path(rest[2:] if rest.startswith("//") else rest)


def storage_file(url: str) -> Path | None:
    """The file a sqlite or journal storage lives in, as one absolute path, or None (PostgreSQL, an
    in-memory database). Every spelling of one file gives the same path (``sqlite:///q.db``,
    ``sqlite:///q.db?timeout=30``, ``sqlite:///./q.db``, its absolute form), so the admission lock and the
    report folder, named after it, are one for all of them."""
    journal = journal_path(url)
    if journal is not None:
        return journal.resolve() if str(journal) else None
    if not url.startswith("sqlite:///"):
        return None
    file = url[len("sqlite:///") :].split("?", 1)[0]
    return None if file in ("", ":memory:") else Path(file).resolve()


def sqlalchemy_url(url: str) -> str:
    """``postgresql://`` -> ``postgresql+psycopg://`` (psycopg 3); other URLs unchanged."""
    for plain in ("postgresql://", "postgres://"):
        if url.startswith(plain):
            return "postgresql+psycopg://" + url[len(plain) :]
    return url


def describe(url: str) -> str:
    """A storage URL without its password, for messages and logs."""
    if "://" in url and "@" in url.split("://", 1)[1].split("/", 1)[0]:
        scheme, rest = url.split("://", 1)
        userinfo, host = rest.split("@", 1)
        return f"{scheme}://{userinfo.split(':', 1)[0]}@{host}"
    return url


def open_storage(url: str) -> BaseStorage:
    """The optuna storage behind ``url``, its tables or file created if missing.

    Workers starting together on an empty database race to create its tables; a loser retries. A
    storage that cannot be reached raises ConnectionError naming the URL (no SQLAlchemy traceback).
    """
    path = journal_path(url)
    if path is not None:
        if not str(path):
            raise ValueError(
                f"sweep.storage={url!r}: a journal storage needs a file, e.g. journal:outputs/x.log"
            )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return JournalStorage(JournalFileBackend(str(path)))
        except OSError as e:  # a read-only folder, a path under a file
            raise ValueError(f"sweep.storage={url!r}: cannot create {path}: {e.strerror or e}") from None
    file = storage_file(url)
    if file is not None:
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            why = e.strerror or e
            raise ValueError(f"sweep.storage={url!r}: cannot create {file.parent}: {why}") from None
    elif not url.startswith(("sqlite", "postgres", "mysql")):
        raise ValueError(
            f"sweep.storage={url!r} is not a storage navexp opens; allowed: sqlite:///<file>.db, "
            f"postgresql://user@host:port/db, journal:<file>"
        )
    for attempt in range(5):
        try:
            return RDBStorage(sqlalchemy_url(url))
        except ImportError as e:
            raise ImportError(
                f"sweep.storage={describe(url)!r} needs a database driver that is not installed ({e}); "
                f"for PostgreSQL: pip install -e '.[postgres]' (psycopg 3)"
            ) from e
        except DatabaseError as e:
            first = str(e.orig if getattr(e, "orig", None) is not None else e).strip().splitlines()[0]
            # The table race: PostgreSQL's IntegrityError/ProgrammingError (pg_type "studies" already
            # exists), SQLite's OperationalError (table alembic_version already exists).
            race = isinstance(e, (IntegrityError, ProgrammingError)) or "already exists" in first
            if race and attempt < 4:
                log.info(f"storage tables being created by another worker ({first}); retrying")
                time.sleep(1.0 + attempt)
                continue
            if isinstance(e, (IntegrityError, ProgrammingError)):
                raise
            # unreachable server, wrong password, not a database file
            raise ConnectionError(f"sweep.storage={describe(url)!r} cannot be opened: {first}") from None
    raise AssertionError("unreachable")


def trial_id(trial: optuna.trial.BaseTrial | optuna.trial.FrozenTrial) -> int:
    """The storage id of a trial (optuna keeps it private; every storage method takes it)."""
    return int(trial._trial_id)


def study_names(storage: BaseStorage) -> list[str]:
    return [s.study_name for s in optuna.get_all_study_summaries(storage)]
