"""The catalog cache: what each server listed last time, so names are known before it starts.

One SQLite file (``<data dir>/catalog.db``) holds one row per server: the fingerprint of the
server's configuration and its lists as JSON. A row is used only while the fingerprint matches;
a changed command, URL or token makes it stale, and a stale row is deleted when met. Several
processes may share the file: WAL journaling, a busy timeout, and writes in ``BEGIN IMMEDIATE``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import mcp_types as types
from pydantic import BaseModel, TypeAdapter

from mcpmux.config.effective import fingerprint
from mcpmux.config.paths import data_dir
from mcpmux.store.sqlite import Database

__all__ = ["CATALOG_FILE", "SCHEMA_VERSION", "Catalog", "CatalogEntry", "fingerprint"]

logger = logging.getLogger(__name__)

CATALOG_FILE = "catalog.db"
SCHEMA_VERSION = 1

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


def _dump(models: list[Any]) -> str:
    return json.dumps([_model_json(m) for m in models], separators=(",", ":"), ensure_ascii=False)


def _model_json(model: BaseModel) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Catalog:
    """The catalog cache file.

    Args:
        path: the SQLite file (``":memory:"`` for a private one); ``<data dir>/catalog.db`` by default.

    The connection opens on first use and is shared by threads under a lock; :meth:`close` (or
    leaving the ``with`` block) closes it. Being a cache, an unreadable file is moved aside to
    ``*.corrupt`` and replaced (logged as a warning); other ``sqlite3.Error`` (permissions, disk full)
    propagate.
    """

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = path if path is not None else data_dir() / CATALOG_FILE
        self._db = Database(self.path, _SCHEMA, SCHEMA_VERSION, disposable=True)

    def __enter__(self) -> Catalog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (a later call opens it again)."""
        self._db.close()

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
        with self._db.write() as db:
            db.execute(
                f"INSERT OR REPLACE INTO catalog (server, fingerprint, {_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)", row
            )

    def load(self, server: str, fingerprint: str) -> CatalogEntry | None:
        """The entry of ``server`` if it was stored under ``fingerprint``; a stale row is deleted."""
        with self._db.read() as db:
            row = db.execute(f"SELECT fingerprint, {_COLUMNS} FROM catalog WHERE server = ?", (server,)).fetchone()
        if row is None:
            return None
        if row[0] != fingerprint:
            with self._db.write() as db:
                db.execute("DELETE FROM catalog WHERE server = ? AND fingerprint = ?", (server, row[0]))
            return None
        return _entry(row[1:])

    def invalidate(self, server: str | None = None) -> None:
        """Forget ``server``'s entry, or every entry."""
        with self._db.write() as db:
            if server is None:
                db.execute("DELETE FROM catalog")
            else:
                db.execute("DELETE FROM catalog WHERE server = ?", (server,))

    def servers(self) -> list[str]:
        """The servers with a stored entry (whatever their fingerprint), sorted."""
        with self._db.read() as db:
            rows = db.execute("SELECT server FROM catalog ORDER BY server").fetchall()
        return [name for (name,) in rows]


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
