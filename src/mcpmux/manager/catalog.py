"""The catalog cache: what each server listed last time, so names are known before it starts.

One SQLite file (``<data dir>/catalog.db``) holds one row per server: the fingerprint of the
server's configuration and its lists as JSON. A row is used only while the fingerprint matches;
a changed command, URL or token makes it stale, and a stale row is deleted when met. Several
processes may share the file: WAL journaling, a busy timeout, and writes in ``BEGIN IMMEDIATE``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import mcp_types as types
from pydantic import BaseModel, SecretStr, TypeAdapter

from mcpmux.config.models import ServerConfig
from mcpmux.config.paths import data_dir

__all__ = ["CATALOG_FILE", "SCHEMA_VERSION", "Catalog", "CatalogEntry", "fingerprint"]

logger = logging.getLogger(__name__)

CATALOG_FILE = "catalog.db"
SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 5_000
_FINGERPRINT_DOMAIN = "mcpmux-catalog-v1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS catalog (
    server TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    stored_at REAL NOT NULL,
    tools TEXT NOT NULL,
    resources TEXT NOT NULL,
    resource_templates TEXT NOT NULL,
    prompts TEXT NOT NULL,
    server_info TEXT,
    protocol_version TEXT,
    instructions TEXT
)
"""
_COLUMNS = "stored_at, tools, resources, resource_templates, prompts, server_info, protocol_version, instructions"

_TOOLS = TypeAdapter(list[types.Tool])
_RESOURCES = TypeAdapter(list[types.Resource])
_TEMPLATES = TypeAdapter(list[types.ResourceTemplate])
_PROMPTS = TypeAdapter(list[types.Prompt])


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """What one server listed, with what it said about itself."""

    tools: list[types.Tool] = field(default_factory=list)
    resources: list[types.Resource] = field(default_factory=list)
    resource_templates: list[types.ResourceTemplate] = field(default_factory=list)
    prompts: list[types.Prompt] = field(default_factory=list)
    server_info: types.Implementation | None = None
    protocol_version: str | None = None
    instructions: str | None = None
    stored_at: float = field(default_factory=time.time)


def fingerprint(server: ServerConfig) -> str:
    """SHA-256 (hex) of the server's whole configuration, secret values included.

    A changed token or URL therefore invalidates the cached lists; only this hash is stored.
    """
    data = server.model_dump(mode="python")
    canonical = json.dumps(data, default=_reveal, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{_FINGERPRINT_DOMAIN}\n{canonical}".encode()).hexdigest()


def _reveal(value: object) -> str:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot fingerprint a {type(value).__name__}")


def _dump(models: list[Any]) -> str:
    return json.dumps([_model_json(m) for m in models], separators=(",", ":"), ensure_ascii=False)


def _model_json(model: BaseModel) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Catalog:
    """The catalog cache file.

    Args:
        path: the SQLite file (``":memory:"`` for a private one); ``<data dir>/catalog.db`` by default.

    The connection opens on first use and is shared by threads under a lock; :meth:`close` (or
    leaving the ``with`` block) closes it. An unreadable file is moved aside to ``*.corrupt`` and
    replaced (logged as a warning); other ``sqlite3.Error`` (permissions, disk full) propagate.
    """

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = path if path is not None else data_dir() / CATALOG_FILE
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (a later call opens it again)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def store(self, server: str, fingerprint: str, entry: CatalogEntry) -> None:
        """Replace the row of ``server`` with ``entry`` under ``fingerprint``."""
        row = (
            server,
            fingerprint,
            entry.stored_at,
            _dump(entry.tools),
            _dump(entry.resources),
            _dump(entry.resource_templates),
            _dump(entry.prompts),
            json.dumps(_model_json(entry.server_info)) if entry.server_info is not None else None,
            entry.protocol_version,
            entry.instructions,
        )
        with self._write() as db:
            db.execute(
                f"INSERT OR REPLACE INTO catalog (server, fingerprint, {_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)", row
            )

    def load(self, server: str, fingerprint: str) -> CatalogEntry | None:
        """The entry of ``server`` if it was stored under ``fingerprint``; a stale row is deleted."""
        with self._lock:
            db = self._connect()
            row = db.execute(f"SELECT fingerprint, {_COLUMNS} FROM catalog WHERE server = ?", (server,)).fetchone()
        if row is None:
            return None
        if row[0] != fingerprint:
            with self._write() as db:
                db.execute("DELETE FROM catalog WHERE server = ? AND fingerprint = ?", (server, row[0]))
            return None
        return _entry(row[1:])

    def invalidate(self, server: str | None = None) -> None:
        """Forget ``server``'s entry, or every entry."""
        with self._write() as db:
            if server is None:
                db.execute("DELETE FROM catalog")
            else:
                db.execute("DELETE FROM catalog WHERE server = ?", (server,))

    def servers(self) -> list[str]:
        """The servers with a stored entry (whatever their fingerprint), sorted."""
        with self._lock:
            rows = self._connect().execute("SELECT server FROM catalog ORDER BY server").fetchall()
        return [name for (name,) in rows]

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            db = self._connect()
            # IMMEDIATE takes the write lock at once, so a concurrent writer waits (busy timeout)
            # instead of failing later when a read lock cannot be upgraded.
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = _open(self.path)
        return self._db


def _open(path: Path | str) -> sqlite3.Connection:
    if str(path) == ":memory:":
        return _connect(":memory:")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        return _connect(str(path))
    except sqlite3.DatabaseError as exc:
        if "not a database" not in str(exc) and "malformed" not in str(exc):
            raise
        # Only a cache: keep the broken file aside for inspection and start a new one.
        aside = path.with_name(path.name + ".corrupt")
        logger.warning("catalog %s is unreadable (%s); moved to %s and starting afresh", path, exc, aside)
        path.replace(aside)
        return _connect(str(path))


def _connect(target: str) -> sqlite3.Connection:
    # Autocommit mode: transactions are explicit; check_same_thread off because a lock guards use.
    db = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
    try:
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        _migrate(db)
    except BaseException:
        db.close()
        raise
    return db


def _migrate(db: sqlite3.Connection) -> None:
    db.execute("BEGIN IMMEDIATE")
    try:
        (version,) = db.execute("PRAGMA user_version").fetchone()
        if version != SCHEMA_VERSION:
            # A cache: rows of another layout are dropped, not converted.
            db.execute("DROP TABLE IF EXISTS catalog")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute(_SCHEMA)
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _entry(row: tuple[Any, ...]) -> CatalogEntry:
    stored_at, tools, resources, templates, prompts, server_info, protocol_version, instructions = row
    return CatalogEntry(
        tools=_TOOLS.validate_json(tools),
        resources=_RESOURCES.validate_json(resources),
        resource_templates=_TEMPLATES.validate_json(templates),
        prompts=_PROMPTS.validate_json(prompts),
        server_info=types.Implementation.model_validate_json(server_info) if server_info else None,
        protocol_version=protocol_version,
        instructions=instructions,
        stored_at=stored_at,
    )
