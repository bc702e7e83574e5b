"""The state database: tool pins, remembered approvals and the audit log, in one SQLite file.

Unlike the catalog cache these rows matter (a lost pin would let a changed tool through
unnoticed), so the file is never discarded: an unreadable file or an unknown schema is an error.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mcpmux.config.paths import data_dir
from mcpmux.storage import Database

__all__ = ["STATE_FILE", "StateStore"]

STATE_FILE = "state.db"
SCHEMA_VERSION = 2
# Version 1 keyed pins by server name only and kept approvals per project only; rows of version 1
# move to version 2 as "legacy" pins (claimed by the first server of that name to be checked) and
# "unscoped" approvals (listed and revocable, honoured for no one: nobody knows who gave them).
LEGACY_IDENTITY = ""
UNSCOPED_FACE = "unscoped"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pins (
    identity TEXT NOT NULL,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    hash TEXT NOT NULL,
    definition TEXT NOT NULL,
    approved INTEGER NOT NULL,
    pinned_at REAL NOT NULL,
    pending_hash TEXT,
    pending_definition TEXT,
    pending_reason TEXT,
    PRIMARY KEY (identity, server, tool)
);
CREATE TABLE IF NOT EXISTS approvals (
    project TEXT NOT NULL,
    face TEXT NOT NULL,
    caller TEXT NOT NULL,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    granted_at REAL NOT NULL,
    PRIMARY KEY (project, face, caller, server, tool)
);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    face TEXT NOT NULL,
    caller TEXT,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    name TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    args TEXT NOT NULL,
    decision TEXT NOT NULL,
    rule TEXT NOT NULL,
    duration_ms REAL,
    outcome TEXT NOT NULL,
    error TEXT,
    result_bytes INTEGER
);
CREATE INDEX IF NOT EXISTS audit_at ON audit (at);
CREATE INDEX IF NOT EXISTS audit_server_tool ON audit (server, tool)
"""


_PIN_COLUMNS = "server, tool, hash, definition, approved, pinned_at, pending_hash, pending_definition, pending_reason"
_UPGRADE_FROM_1 = f"""
ALTER TABLE pins RENAME TO pins_v1;
ALTER TABLE approvals RENAME TO approvals_v1;
{_SCHEMA};
INSERT INTO pins (identity, {_PIN_COLUMNS}) SELECT '{LEGACY_IDENTITY}', {_PIN_COLUMNS} FROM pins_v1;
INSERT INTO approvals (project, face, caller, server, tool, granted_at)
    SELECT project, '{UNSCOPED_FACE}', '', server, tool, granted_at FROM approvals_v1;
DROP TABLE pins_v1;
DROP TABLE approvals_v1
"""


class StateStore(Database):
    """``<data dir>/state.db`` (or ``path``; ``":memory:"`` for tests)."""

    def __init__(self, path: Path | str | None = None) -> None:
        super().__init__(
            path if path is not None else data_dir() / STATE_FILE, _SCHEMA, SCHEMA_VERSION, disposable=False
        )

    def upgrade(self, db: sqlite3.Connection, version: int) -> bool:
        """Move the rows of a version 1 file to version 2 (see :data:`SCHEMA_VERSION`)."""
        if version != 1:
            return False
        for statement in _UPGRADE_FROM_1.split(";"):
            if statement.strip():
                db.execute(statement)
        return True
