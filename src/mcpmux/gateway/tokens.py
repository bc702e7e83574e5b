"""Bearer tokens of the HTTP gateway, stored hashed in the state database.

A token is shown once, when created (``mcpmux token create NAME``); the database keeps only
its SHA-256, so a leaked ``state.db`` does not leak credentials. The table is created on first
use (``CREATE TABLE IF NOT EXISTS``) without touching the store's schema version; a table made
before tokens could approve gains the ``can_approve`` column (0: no token may approve).

A token made with ``--can-approve`` may answer the guard's approval questions for its own calls
(:data:`APPROVE_SCOPE` in its access token); any other network caller is refused instead of asked.
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

__all__ = ["APPROVE_SCOPE", "TOKEN_PREFIX", "TokenInfo", "TokenStore", "hash_token"]

TOKEN_PREFIX = "mcpmux_"
APPROVE_SCOPE = "mcpmux:approve"
TOKEN_BYTES = 32
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS gateway_tokens (
    name TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL,
    can_approve INTEGER NOT NULL DEFAULT 0
)
"""


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A token as listed: its name and when it was made (never the token itself)."""

    name: str
    created_at: float
    can_approve: bool = False

    @property
    def scopes(self) -> list[str]:
        """The scopes of the token's access (``mcpmux:approve`` when it may approve)."""
        return [APPROVE_SCOPE] if self.can_approve else []


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
                columns = {row[1] for row in db.execute("PRAGMA table_info(gateway_tokens)")}
                if "can_approve" not in columns:
                    db.execute("ALTER TABLE gateway_tokens ADD COLUMN can_approve INTEGER NOT NULL DEFAULT 0")
            self._ready = True

    def create(self, name: str, *, can_approve: bool = False) -> str:
        """Make a token called ``name`` and return it (the only time it is visible).

        ``can_approve``: its caller may answer approval questions (for its own calls only).

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
            db.execute(
                "INSERT INTO gateway_tokens (name, hash, created_at, can_approve) VALUES (?, ?, ?, ?)",
                (name, hash_token(token), time.time(), int(can_approve)),
            )
        return token

    def list(self) -> list[TokenInfo]:
        """Every token, by name."""
        self._ensure()
        with self.store.read() as db:
            rows = db.execute("SELECT name, created_at, can_approve FROM gateway_tokens ORDER BY name").fetchall()
        return [TokenInfo(name, created_at, bool(can_approve)) for name, created_at, can_approve in rows]

    def revoke(self, name: str) -> bool:
        """Delete the token ``name``; return whether it existed."""
        self._ensure()
        with self.store.write() as db:
            return db.execute("DELETE FROM gateway_tokens WHERE name = ?", (name,)).rowcount > 0

    def verify(self, token: str) -> str | None:
        """The name of ``token``, or ``None`` if it is unknown or revoked."""
        info = self.check(token)
        return info.name if info is not None else None

    def check(self, token: str) -> TokenInfo | None:
        """What ``token`` is (name, may it approve), or ``None`` if it is unknown or revoked."""
        self._ensure()
        digest = hash_token(token)
        with self.store.read() as db:
            row = db.execute(
                "SELECT name, hash, created_at, can_approve FROM gateway_tokens WHERE hash = ?", (digest,)
            ).fetchone()
        if row is None or not hmac.compare_digest(row[1], digest):
            return None
        return TokenInfo(str(row[0]), row[2], bool(row[3]))
