"""SQL databases (SQLAlchemy 2 Core): opened by URL, migrated by Alembic, the same on SQLite and PostgreSQL.

mcpmux keeps the rows that matter (the source registry; tool pins, remembered approvals, the audit
log and the gateway's tokens) in SQL. By default each part is a SQLite file in the data dir; one
URL (``--db``, ``MCPMUX_DB`` or ``storage.url`` in the config) puts every part in one database
instead, for example ``postgresql+psycopg://mcpmux@db.internal/mcpmux`` for replicas that share it.

Each part has its own Alembic migrations and version table, so the parts (and other applications)
can share a database. SQLite files run in WAL mode with a busy timeout, and every transaction
begins ``IMMEDIATE`` so a concurrent writer waits instead of failing when it cannot upgrade a read
lock; ``:memory:`` databases are one connection shared by the threads of the process.
"""

from __future__ import annotations

import threading
import weakref
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Insert, Table, create_engine, event, inspect, make_url, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import StaticPool

from mcpmux.errors import ConfigError, ConfigProblem
from mcpmux.store.sqlite import private_file

__all__ = [
    "EVENTS_CHANNEL",
    "MEMORY",
    "MigrationRefused",
    "Migrations",
    "conninfo",
    "insert_or_ignore",
    "memory_lock",
    "notify",
    "open_engine",
    "reading",
    "shown",
    "sqlite_file",
    "upsert",
    "writing",
]

MEMORY = "sqlite://"
"""The URL of a private in-memory SQLite database (tests, ``StateStore(":memory:")``)."""
BUSY_TIMEOUT_S = 5.0
READING = "mcpmux_reading"
EVENTS_CHANNEL = "mcpmux_events"
"""The PostgreSQL channel on which the processes sharing a database tell each other what changed."""


class MigrationRefused(ValueError):
    """Alembic would not bring the database to the newest revision (an unknown schema, a gap)."""


class Migrations:
    """One part's Alembic scripts (``script_location``), the version table it keeps them in, and its
    newest revision (``head``; a test checks it against the scripts)."""

    def __init__(self, location: Path, version_table: str, head: str) -> None:
        self.location, self.version_table, self.head = location, version_table, head

    def upgrade(self, engine: Engine) -> None:
        """Bring the part's tables to the newest revision (idempotent, one transaction).

        A database already at :attr:`head` is told by one query, without loading Alembic (which
        costs a one-shot command about 0.1 s).
        """
        if self._current(engine) == self.head:
            return
        from alembic import command
        from alembic.config import Config as AlembicConfig
        from alembic.util import CommandError

        config = AlembicConfig()
        config.set_main_option("script_location", str(self.location))
        with engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                # Processes opening a new database at once would each create the tables: one at a time
                # (SQLite's BEGIN IMMEDIATE already serialises them). Released when the transaction ends.
                key = zlib.crc32(self.version_table.encode())
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
            config.attributes["connection"] = connection
            config.attributes["version_table"] = self.version_table
            try:
                command.upgrade(config, "head")
            except CommandError as exc:
                raise MigrationRefused(str(exc)) from exc

    def _current(self, engine: Engine) -> str | None:
        with reading(engine) as connection:
            if not inspect(connection).has_table(self.version_table):
                return None
            found = connection.execute(text(f'SELECT version_num FROM "{self.version_table}"')).scalars().all()
        return found[0] if len(found) == 1 else None


def sqlite_file(url: str) -> Path | None:
    """The file of a ``sqlite:///PATH`` URL; ``None`` for another database or an in-memory one."""
    if not url.startswith("sqlite:///"):
        return None
    path = url.removeprefix("sqlite:///").split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def open_engine(url: str, migrations: Migrations, what: str) -> Engine:
    """An engine for ``url``, the tables of ``migrations`` brought to their newest revision.

    ``postgresql://`` means psycopg 3 (``postgresql+psycopg://``); ``sqlite://`` (no path) is a
    private in-memory database.

    Raises:
        ConfigError: ``url`` is not a usable database URL, or the database cannot be reached or
            migrated (``what`` names the part in the message).
    """
    chosen = "postgresql+psycopg://" + url.removeprefix("postgresql://") if url.startswith("postgresql://") else url
    try:
        engine = _sqlite_engine(chosen) if chosen.startswith("sqlite:") else create_engine(chosen, pool_pre_ping=True)
        migrations.upgrade(engine)
    except (SQLAlchemyError, ImportError, ValueError, OSError) as exc:  # MigrationRefused is a ValueError
        raise ConfigError(ConfigProblem(shown(chosen), "", f"cannot open {what}: {exc}")) from exc
    return engine


def _sqlite_engine(url: str) -> Engine:
    file = sqlite_file(url)
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        private_file(file)
        engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S, "check_same_thread": False})
    else:
        # One connection for every thread, or each would see its own empty database.
        engine = create_engine(
            url if url != MEMORY else "sqlite://", connect_args={"check_same_thread": False}, poolclass=StaticPool
        )
        _memory_locks[engine] = threading.RLock()
    event.listen(engine, "connect", _sqlite_connected)
    event.listen(engine, "begin", _sqlite_begin)
    return engine


_memory_locks: weakref.WeakKeyDictionary[Engine, threading.RLock] = weakref.WeakKeyDictionary()


@contextmanager
def memory_lock(engine: Engine) -> Iterator[None]:
    """Held around each use of an in-memory SQLite engine (its one connection serves every thread)."""
    lock = _memory_locks.get(engine)
    if lock is None:
        yield
        return
    with lock:
        yield


def _sqlite_connected(dbapi_connection: Any, _record: Any) -> None:
    # pysqlite's own transaction handling would begin DEFERRED and commit behind DDL: turn it off
    # and begin each transaction ourselves (the "begin" event).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA foreign_keys = ON")
        _wal(cursor)
        cursor.execute("PRAGMA synchronous = NORMAL")
    finally:
        cursor.close()


def _wal(cursor: Any) -> None:
    # The switch needs an exclusive lock, and SQLite reports SQLITE_BUSY at once instead of calling
    # the busy handler: retry within the busy timeout (storage.enable_wal does the same).
    import sqlite3
    import time

    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _sqlite_begin(connection: Connection) -> None:
    reading = connection.get_execution_options().get(READING, False)
    connection.exec_driver_sql("BEGIN" if reading else "BEGIN IMMEDIATE")


@contextmanager
def reading(engine: Engine) -> Iterator[Connection]:
    """A connection for reads: on SQLite its transactions take no write lock (``BEGIN`` DEFERRED)."""
    with memory_lock(engine), engine.connect() as connection:
        connection.execution_options(**{READING: True})
        yield connection


@contextmanager
def writing(engine: Engine) -> Iterator[Connection]:
    """A connection in a write transaction (SQLite: ``BEGIN IMMEDIATE``), committed when the block ends."""
    with memory_lock(engine), engine.begin() as connection:
        yield connection


def insert_or_ignore(connection: Connection, table: Table) -> Insert:
    """``INSERT`` into ``table`` that does nothing when the row's key exists (SQLite or PostgreSQL).

    Whether it inserted: add ``.returning(a column)`` and look for a row (drivers disagree on the
    row count of an insert).
    """
    statement: Insert = _dialect_insert(connection, table).on_conflict_do_nothing()
    return statement


def upsert(connection: Connection, table: Table, values: dict[str, Any]) -> Insert:
    """``INSERT`` of ``values`` into ``table`` that replaces the other columns when the key exists."""
    keys = [column.name for column in table.primary_key.columns]
    statement = _dialect_insert(connection, table).values(values)
    changed = {name: statement.excluded[name] for name in values if name not in keys}
    replacing: Insert = statement.on_conflict_do_update(index_elements=keys, set_=changed)
    return replacing


def _dialect_insert(connection: Connection, table: Table) -> Any:
    name = connection.dialect.name
    if name == "sqlite":
        return sqlite.insert(table)
    if name == "postgresql":
        return postgresql.insert(table)
    raise ConfigError(ConfigProblem(name, "", "mcpmux stores its rows in SQLite or PostgreSQL only"))


def shown(url: str) -> str:
    """``url`` without its password."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        credentials, _, host = rest.rpartition("@")
        user = credentials.split(":", 1)[0]
        return f"{scheme}{sep}{user}:***@{host}" if ":" in credentials else url
    return url


def notify(connection: Connection, topic: str, detail: str = "") -> None:
    """Tell every process listening on this database that ``topic`` changed.

    Sent inside the connection's transaction, so it reaches the listeners (``LISTEN`` on
    :data:`EVENTS_CHANNEL`, :class:`mcpmux.serve.cluster.Cluster`) when (and only if) the
    change commits. On SQLite it does nothing: its processes share one machine and find changes
    their own way (a marker file, a re-read).
    """
    if connection.dialect.name == "postgresql":
        payload = f"{topic}:{detail}" if detail else topic
        parameters = {"channel": EVENTS_CHANNEL, "payload": payload}
        connection.execute(text("SELECT pg_notify(:channel, :payload)"), parameters)


def conninfo(url: str) -> str:
    """The libpq connection string of a SQLAlchemy PostgreSQL URL (``postgresql+psycopg://...``)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
