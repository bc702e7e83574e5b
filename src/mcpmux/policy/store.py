"""The state database: tool pins, remembered approvals, the audit log and the gateway's tokens.

``<data dir>/state.db`` (SQLite) by default, or the one database of every part of mcpmux
(``MCPMUX_DB``, ``--db`` or ``storage.url``: SQLite or PostgreSQL, :mod:`mcpmux.store.database`). The
tables are in :mod:`mcpmux.policy.schema`; Alembic migrates them when the store opens, and adopts a
``state.db`` of an mcpmux from before Alembic with every row (see its first revision).

Unlike the catalog cache these rows matter (a lost pin would let a changed tool through
unnoticed), so nothing is ever discarded: an unreadable file or an unknown schema is an error.
Audit rows are appended behind the caller (:class:`mcpmux.store.sqlite.Appender`): one thread per
store writes them in batches, and every read, write, flush and close waits for them first.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from sqlalchemy import Connection, Engine, PoolProxiedConnection, Table
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError

from mcpmux.config.models import Config
from mcpmux.config.paths import configured_url, data_dir
from mcpmux.store.database import MEMORY, Migrations, memory_lock, open_engine, reading, shown, sqlite_file, writing
from mcpmux.store.sqlite import APPEND_ATTEMPTS, Appender

__all__ = ["LEGACY_IDENTITY", "MIGRATIONS", "STATE_FILE", "UNSCOPED_FACE", "StateStore"]

logger = logging.getLogger(__name__)

STATE_FILE = "state.db"
MIGRATIONS = Migrations(Path(__file__).resolve().parent / "migrations", "mcpmux_state_alembic", "0003")
# Pins from before server identities belong to no identity (claimed by the first server of their
# name); approvals from before scopes belong to no face (listed and revocable, honoured for no one).
LEGACY_IDENTITY = ""
UNSCOPED_FACE = "unscoped"

_Row = tuple[Table, dict[str, Any]]


class StateStore:
    """The state database.

    Args:
        where: a SQLAlchemy URL (``sqlite:///PATH``, ``postgresql+psycopg://...``), a file path, or
            ``":memory:"`` (a private in-memory database, for tests). Default: the one configured
            database (:func:`mcpmux.store.database.configured_url`), else ``<data dir>/state.db``.

    Opening is lazy: the database is reached, and migrated, at the first use.
    """

    def __init__(self, where: Path | str | None = None) -> None:
        self.url = _url(where)
        self.file = sqlite_file(self.url)
        """The SQLite file, ``None`` for another database or an in-memory one."""
        self._engine: Engine | None = None
        self._opening = threading.Lock()
        self._appender: Appender[_Row] = Appender(shown(self.url), self._commit)
        self._inserts: dict[tuple[str, tuple[str, ...]], tuple[str, tuple[str, ...]]] = {}
        self._append_connection: PoolProxiedConnection | None = None

    @classmethod
    def configured(cls, config: Config | None = None, url: str | None = None) -> StateStore:
        """The store of a command: ``url`` (``--db``) when given, else ``MCPMUX_DB``, else the
        config's ``storage.url``, else ``<data dir>/state.db``."""
        return cls(url or configured_url(config.storage.url if config is not None else None))

    @property
    def path(self) -> Path | str:
        """The file (or the URL, shown without its password, when there is none): for messages."""
        return self.file if self.file is not None else shown(self.url)

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.engine.dialect.name

    @property
    def engine(self) -> Engine:
        """The engine, opened (and migrated) at the first use.

        Raises:
            ConfigError: the database cannot be reached, read or migrated.
        """
        if self._engine is None:
            with self._opening:
                if self._engine is None:
                    self._engine = open_engine(self.url, MIGRATIONS, "the state database")
        return self._engine

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Write the queued appends, then let go of the database (a later use opens it again)."""
        self.flush()
        with self._opening:
            self._release_append_connection()
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection for reads (after the queued appends are written)."""
        self.flush()
        with reading(self.engine) as connection:
            yield connection

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A connection inside a write transaction (SQLite: ``BEGIN IMMEDIATE``), committed at the end."""
        self.flush()
        with writing(self.engine) as connection:
            yield connection

    def append(self, table: Table, row: Mapping[str, Any]) -> None:
        """Queue one row for ``table`` and return at once (see the module's docstring)."""
        self._appender.append((table, dict(row)))

    def flush(self) -> None:
        """Wait until every queued append is written (see :meth:`mcpmux.store.sqlite.Appender.flush`)."""
        self._appender.flush()

    def _commit(self, batch: list[_Row]) -> None:
        sqlite = self.engine.dialect.name == "sqlite"
        for attempt in range(1, APPEND_ATTEMPTS + 1):
            try:
                if sqlite:
                    self._commit_sqlite(batch)
                else:
                    with writing(self.engine) as connection:
                        for table, rows in _runs(batch):
                            connection.execute(table.insert(), rows)  # one statement per run of alike rows
                return
            except (SQLAlchemyError, sqlite3.Error) as exc:
                if isinstance(exc, IntegrityError | sqlite3.IntegrityError) and len(batch) > 1:
                    # One bad row must not take the others with it: write them one by one.
                    for one in batch:
                        self._commit([one])
                    return
                busy = isinstance(exc, OperationalError | sqlite3.OperationalError) and _busy(exc)
                if attempt == APPEND_ATTEMPTS or not busy:
                    logger.error("%d rows could not be written to %s and are lost: %s", len(batch), self.path, exc)
                    return
                logger.warning("writing %d rows to %s failed (%s); trying again", len(batch), self.path, exc)
                time.sleep(0.1 * attempt)

    def _commit_sqlite(self, batch: list[_Row]) -> None:
        """Write ``batch`` on the pool's SQLite connection itself, one ``executemany`` per run of alike rows.

        The audit writer's hot path: a one-row commit costs ~26 us this way against ~160 us through a
        SQLAlchemy ``insert()`` (statement compilation, parameter processing, transaction events).
        The statement is SQLAlchemy's own ``INSERT`` for those columns, compiled once; the columns
        appended (floats, integers, text) need no conversion on the way in.
        """
        with memory_lock(self.engine):
            raw = self._append_connection
            if raw is None:  # kept between batches (one writer at a time): no pool checkout per batch
                raw = self._append_connection = self.engine.raw_connection()
            try:
                cursor = raw.cursor()
                try:
                    cursor.execute("BEGIN IMMEDIATE")  # the engine's connections are in autocommit mode
                    try:
                        for table, rows in _runs(batch):
                            sql, names = self._insert_sql(table, tuple(rows[0]))
                            cursor.executemany(sql, [tuple(row[n] for n in names) for row in rows])
                    except BaseException:
                        cursor.execute("ROLLBACK")
                        raise
                    cursor.execute("COMMIT")
                finally:
                    cursor.close()
            except BaseException:
                self._release_append_connection()  # the next batch starts on a fresh one
                raise

    def _release_append_connection(self) -> None:
        raw, self._append_connection = self._append_connection, None
        if raw is not None:
            raw.close()  # back to the pool

    def _insert_sql(self, table: Table, columns: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        """The positional ``INSERT`` of ``columns`` into ``table`` and its parameters' order (compiled once)."""
        key = (table.name, columns)
        found = self._inserts.get(key)
        if found is None:
            compiled = table.insert().compile(dialect=self.engine.dialect, column_keys=list(columns))
            order = tuple(compiled.positiontup or ())
            if not compiled.positional or sorted(order) != sorted(columns):
                raise RuntimeError(f"unexpected INSERT for {table.name}: {compiled}")  # a new SQLAlchemy
            found = self._inserts[key] = (str(compiled), order)
        return found


def _runs(batch: list[_Row]) -> list[tuple[Table, list[dict[str, Any]]]]:
    """The rows of ``batch`` in order, consecutive rows of one table with the same columns together."""
    runs: list[tuple[Table, list[dict[str, Any]]]] = []
    for table, row in batch:
        last = runs[-1] if runs else None
        if last is not None and last[0] is table and last[1][0].keys() == row.keys():
            last[1].append(row)
        else:
            runs.append((table, [row]))
    return runs


def _url(where: Path | str | None) -> str:
    if where is None:
        return configured_url() or f"sqlite:///{data_dir() / STATE_FILE}"
    if isinstance(where, Path):
        return f"sqlite:///{where}"
    if where == ":memory:":
        return MEMORY
    return where if "://" in where else f"sqlite:///{where}"


def _busy(exc: OperationalError | sqlite3.OperationalError) -> bool:
    text = str(exc.orig if isinstance(exc, OperationalError) else exc)
    return "locked" in text or "busy" in text or "could not serialize" in text
