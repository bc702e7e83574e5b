"""SQLite caches, and the appender every store writes its audit-like rows through.

The embedded caches of mcpmux (the catalog, the content store) are files in WAL mode with a busy
timeout, opened lazily, shared by threads under a lock, with explicit ``BEGIN IMMEDIATE`` write
transactions so a concurrent writer waits instead of failing when a read lock cannot be upgraded.
(The rows that matter, pins, approvals, audit and tokens, are in SQL: :mod:`mcpmux.store.database`.)

Appends are written behind the caller by one thread per store (:class:`Appender`, which
:meth:`Database.append` and the state store's ``append`` use): a row is queued and the call
returns; the thread, woken only when the queue goes from empty to non-empty, lets rows gather for
:data:`BATCH_LINGER_S` and commits them in one transaction. A caller on an event loop never waits
for the disk (an audit insert took ~120 us of wall time per gateway call, most of it in SQLite with
the GIL released). Nothing is lost on the way out: every read, write, flush and close first waits
for the queued rows, and so does the interpreter's exit; only a process killed outright can lose
the rows of its last moments.

Every database file is its owner's alone (:func:`private_file`): created ``0600`` whatever the
directory's mode or the umask, and narrowed to it when found open to others; SQLite gives its
``-wal`` and ``-shm`` files the database file's mode.
"""

from __future__ import annotations

import atexit
import logging
import os
import sqlite3
import stat
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

__all__ = ["BUSY_TIMEOUT_MS", "Appender", "Database", "enable_wal", "private_file"]

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 5000
APPEND_ATTEMPTS = 3
WRITER_IDLE_S = 2.0
BATCH_LINGER_S = 0.02
"""How long the writer lets rows gather behind the first one before it commits them (unless flushed)."""
FLUSH_TIMEOUT_S = 30.0
Row = TypeVar("Row")
_open_appenders: weakref.WeakSet[Appender[Any]] = weakref.WeakSet()


class Appender(Generic[Row]):
    """Rows written behind the caller by one thread (see the module's docstring).

    Args:
        name: what the rows go to (the thread's name and log messages).
        commit: writes one batch; it handles retries and bad rows itself (an exception loses the batch,
            which is logged).
    """

    def __init__(self, name: str, commit: Callable[[list[Row]], None]) -> None:
        self.name, self._commit = name, commit
        self._queued: list[Row] = []
        self._queue = threading.Condition()
        self._writing = False
        self._flushers = 0
        self._writer: threading.Thread | None = None

    def append(self, row: Row) -> None:
        """Queue ``row`` for the writer thread and return at once."""
        with self._queue:
            was_empty = not self._queued
            self._queued.append(row)
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_queued, name=f"append {self.name}", daemon=True)
                self._writer.start()
                _open_appenders.add(self)
            elif was_empty:
                # The writer waits only on an empty queue; rows added behind others go in its next batch.
                self._queue.notify_all()

    def flush(self) -> None:
        """Wait until every queued row is written (or given up on, which is logged).

        The commit bounds each attempt; past :data:`FLUSH_TIMEOUT_S` the caller goes on without the
        rows still queued (they are written later) and says so.
        """
        deadline = time.monotonic() + FLUSH_TIMEOUT_S
        with self._queue:
            if not (self._queued or self._writing):
                return
            self._flushers += 1
            self._queue.notify_all()  # a lingering writer commits now
            try:
                while self._queued or self._writing:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        message = "%s is busy: queued rows are not written yet after %g s; going on"
                        logger.warning(message, self.name, FLUSH_TIMEOUT_S)
                        return
                    self._queue.wait(left)
            finally:
                self._flushers -= 1

    def _write_queued(self) -> None:
        # Runs while there is work; after WRITER_IDLE_S without any the thread ends (append starts another).
        while True:
            with self._queue:
                if not self._queued:
                    self._queue.wait(WRITER_IDLE_S)
                if not self._queued:
                    self._writer = None
                    return
                if not self._flushers:
                    # Rows of a burst of calls gather behind the first: one wake and one commit for all.
                    self._queue.wait(BATCH_LINGER_S)
                batch, self._queued, self._writing = self._queued, [], True
            try:
                self._commit(batch)
            except Exception:
                logger.exception("%d rows could not be written to %s and are lost", len(batch), self.name)
            finally:
                with self._queue:
                    self._writing = False
                    self._queue.notify_all()


class Database:
    """One SQLite file with a versioned schema.

    Args:
        path: the file, or ``":memory:"``.
        schema: the ``CREATE TABLE IF NOT EXISTS ...`` statements of the current version.
        version: the schema version (``PRAGMA user_version``).
        disposable: a cache: an unreadable file is moved aside and a file of another version is
            emptied. Otherwise both are errors, because the rows matter.
    """

    def __init__(self, path: Path | str, schema: str, version: int, *, disposable: bool) -> None:
        self.path = path
        self._schema, self._version, self._disposable = schema, version, disposable
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._appender: Appender[tuple[str, tuple[object, ...]]] = Appender(str(path), self._commit)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Write the queued appends, then close the connection (a later use opens it again)."""
        self.flush()
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """The connection, for reads, under the lock (after the queued appends are written)."""
        self.flush()
        with self._lock:
            yield self._connect()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """The connection inside an immediate write transaction, under the lock."""
        self.flush()
        with self._lock:
            db = self._connect()
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def append(self, sql: str, parameters: tuple[object, ...]) -> None:
        """Queue one insert for the writer thread and return at once (see the module's docstring)."""
        self._appender.append((sql, parameters))

    def flush(self) -> None:
        """Wait until every queued append is written (see :meth:`Appender.flush`)."""
        self._appender.flush()

    def _commit(self, batch: list[tuple[str, tuple[object, ...]]]) -> None:
        for attempt in range(1, APPEND_ATTEMPTS + 1):
            try:
                with self._lock:
                    db = self._connect()
                    db.execute("BEGIN IMMEDIATE")
                    try:
                        for sql, parameters in batch:
                            db.execute(sql, parameters)
                    except BaseException:
                        db.execute("ROLLBACK")
                        raise
                    db.execute("COMMIT")
                return
            except sqlite3.Error as exc:
                busy = isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))
                if not busy and len(batch) > 1:
                    # One bad row must not take the others with it: write them one by one.
                    for row in batch:
                        self._commit([row])
                    return
                if attempt == APPEND_ATTEMPTS or not busy:
                    logger.error("%d rows could not be written to %s and are lost: %s", len(batch), self.path, exc)
                    return
                logger.warning("writing %d rows to %s failed (%s); trying again", len(batch), self.path, exc)
                time.sleep(0.1 * attempt)

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = self._open()
        return self._db

    def _open(self) -> sqlite3.Connection:
        if str(self.path) == ":memory:":
            return self._connect_to(":memory:")
        path = Path(self.path)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        private_file(path)
        try:
            return self._connect_to(str(path))
        except sqlite3.DatabaseError as exc:
            unreadable = "not a database" in str(exc) or "malformed" in str(exc)
            if not (unreadable and self._disposable):
                raise
            # Only a cache: keep the broken file aside for inspection and start a new one.
            aside = path.with_name(path.name + ".corrupt")
            logger.warning("%s is unreadable (%s); moved to %s and starting afresh", path, exc, aside)
            path.replace(aside)
            return self._connect_to(str(path))

    def _connect_to(self, target: str) -> sqlite3.Connection:
        # Autocommit mode: transactions are explicit; check_same_thread off because a lock guards use.
        db = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            enable_wal(db)
            db.execute("PRAGMA synchronous = NORMAL")
            self._migrate(db)
        except BaseException:
            db.close()
            raise
        return db

    def _migrate(self, db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")
        try:
            (version,) = db.execute("PRAGMA user_version").fetchone()
            if version not in (0, self._version) and not self._disposable and self.upgrade(db, version):
                version = self._version
            if version not in (0, self._version):
                if not self._disposable:
                    raise sqlite3.DatabaseError(
                        f"{self.path} has schema version {version}; this mcpmux knows version {self._version}"
                    )
                for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                    db.execute(f'DROP TABLE IF EXISTS "{table}"')
            db.execute(f"PRAGMA user_version = {self._version}")
            # Statement by statement: executescript() would commit the open transaction first.
            for statement in self._schema.split(";"):
                if statement.strip():
                    db.execute(statement)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def upgrade(self, db: sqlite3.Connection, version: int) -> bool:
        """Bring a file of schema ``version`` up to this one inside the open transaction; ``False`` if unknown.

        The default knows no older version; a database whose rows matter overrides it.
        """
        return False


_warned_dirs: set[Path] = set()


def private_file(path: Path) -> None:
    """Make the database file ``path`` readable by its owner alone, before SQLite opens it.

    Created ``0600`` when missing; an existing file open to group or others is narrowed to ``0600``
    (said once, as a warning). A directory that group or others may read is warned about once per
    process: the files in it are private, their names and any other file are not. What cannot be
    done here (a file of another user, a read-only file system) is left to SQLite to report.
    """
    try:
        # Non-blocking: a FIFO planted at the path must not hang the open (it is no regular file: left alone).
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
    except OSError:
        return  # SQLite's own open says what is wrong, with its path
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode) and mode & 0o077:
            try:
                os.fchmod(fd, 0o600)
            except OSError as exc:
                logger.warning(
                    "%s is open to others (mode %03o) and could not be narrowed: %s", path, mode & 0o777, exc
                )
            else:
                logger.warning("%s was open to others (mode %03o): now 0600", path, stat.S_IMODE(mode))
    finally:
        os.close(fd)
    directory = path.parent.resolve()
    if directory in _warned_dirs:
        return
    _warned_dirs.add(directory)
    try:
        directory_mode = stat.S_IMODE(os.stat(directory).st_mode)
    except OSError:
        return
    if directory_mode & 0o066:
        logger.warning(
            "the data directory %s is open to group or others (mode %03o): its databases are private, "
            "the names of its files are not; `chmod 700 %s` closes it",
            directory, directory_mode, directory,
        )  # fmt: skip


def enable_wal(db: sqlite3.Connection, timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
    """Switch ``db`` to WAL mode, waiting up to ``timeout_ms`` for other connections to let go."""
    # Switching to WAL needs an exclusive lock, and SQLite reports SQLITE_BUSY at once instead of
    # calling the busy handler when another connection holds the file: retry within the timeout.
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


@atexit.register
def _flush_at_exit() -> None:
    for appender in list(_open_appenders):
        appender.flush()
