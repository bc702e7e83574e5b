"""Bearer tokens of the HTTP gateway, stored hashed in the state database.

A token is shown once, when created (``mcpmux token create NAME``); the database keeps only
its SHA-256, so a leaked ``state.db`` does not leak credentials. The table is created on first
use (``CREATE TABLE IF NOT EXISTS``) without touching the store's schema version.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass

from mcpmux.errors import ConfigError, ConfigProblem
from mcpmux.policy import StateStore

__all__ = ["TOKEN_PREFIX", "TokenInfo", "TokenStore", "hash_token"]

TOKEN_PREFIX = "mcpmux_"
TOKEN_BYTES = 32
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS gateway_tokens (
    name TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL
)
"""


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A token as listed: its name and when it was made (never the token itself)."""

    name: str
    created_at: float


def hash_token(token: str) -> str:
    """The SHA-256 (hex) under which ``token`` is stored."""
    return hashlib.sha256(token.encode()).hexdigest()


class TokenStore:
    """The gateway's tokens in ``store`` (the state database)."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self._ready = False

    def _ensure(self) -> None:
        if not self._ready:
            with self.store.write() as db:
                db.execute(_SCHEMA)
            self._ready = True

    def create(self, name: str) -> str:
        """Make a token called ``name`` and return it (the only time it is visible).

        Raises:
            ConfigError: the name is malformed or already taken.
        """
        if not _NAME.fullmatch(name):
            raise ConfigError([ConfigProblem("token", "name", f"{name!r} must match {_NAME.pattern}")])
        self._ensure()
        token = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
        with self.store.write() as db:
            if db.execute("SELECT 1 FROM gateway_tokens WHERE name = ?", (name,)).fetchone():
                raise ConfigError([ConfigProblem("token", "name", f"a token called {name!r} exists; revoke it first")])
            db.execute("INSERT INTO gateway_tokens VALUES (?, ?, ?)", (name, hash_token(token), time.time()))
        return token

    def list(self) -> list[TokenInfo]:
        """Every token, by name."""
        self._ensure()
        with self.store.read() as db:
            rows = db.execute("SELECT name, created_at FROM gateway_tokens ORDER BY name").fetchall()
        return [TokenInfo(name, created_at) for name, created_at in rows]

    def revoke(self, name: str) -> bool:
        """Delete the token ``name``; return whether it existed."""
        self._ensure()
        with self.store.write() as db:
            return db.execute("DELETE FROM gateway_tokens WHERE name = ?", (name,)).rowcount > 0

    def verify(self, token: str) -> str | None:
        """The name of ``token``, or ``None`` if it is unknown or revoked."""
        self._ensure()
        digest = hash_token(token)
        with self.store.read() as db:
            row = db.execute("SELECT name, hash FROM gateway_tokens WHERE hash = ?", (digest,)).fetchone()
        if row is None or not hmac.compare_digest(row[1], digest):
            return None
        return str(row[0])
