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
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(path)))
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
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
