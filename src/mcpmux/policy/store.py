"""The state database: tool pins, remembered approvals and the audit log, in one SQLite file.

Unlike the catalog cache these rows matter (a lost pin would let a changed tool through
unnoticed), so the file is never discarded: an unreadable file or an unknown schema is an error.
"""

from __future__ import annotations

from pathlib import Path

from mcpmux.config.paths import data_dir
from mcpmux.storage import Database

__all__ = ["STATE_FILE", "StateStore"]

STATE_FILE = "state.db"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pins (
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    hash TEXT NOT NULL,
    definition TEXT NOT NULL,
    approved INTEGER NOT NULL,
    pinned_at REAL NOT NULL,
    pending_hash TEXT,
    pending_definition TEXT,
    pending_reason TEXT,
    PRIMARY KEY (server, tool)
);
CREATE TABLE IF NOT EXISTS approvals (
    project TEXT NOT NULL,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    granted_at REAL NOT NULL,
    PRIMARY KEY (project, server, tool)
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


class StateStore(Database):
    """``<data dir>/state.db`` (or ``path``; ``":memory:"`` for tests)."""

    def __init__(self, path: Path | str | None = None) -> None:
        super().__init__(
            path if path is not None else data_dir() / STATE_FILE, _SCHEMA, SCHEMA_VERSION, disposable=False
        )
